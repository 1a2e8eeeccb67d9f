//! The client side of a control session. A reader thread turns incoming frames
//! into a channel, so that every wait has a deadline and a vanished server is
//! noticed at once.

use crate::auth;
use crate::frame::{frames_from, write_frame, FrameError, MAX_RESULT_FRAME};
use crate::message::{software, Frame, Message, Ready};
use crate::order::{Order, IN_ORDER};
use plumb_samples::{EndResult, Environment, Observe};
use plumb_spec::Spec;
use plumb_sys::plain_io;
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("cannot connect to {addr}: {error}{hint}")]
    Connect {
        addr: SocketAddr,
        error: String,
        hint: &'static str,
    },
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("server lost: {0}")]
    Lost(String),
    #[error("timed out waiting for the server's {0}")]
    Timeout(&'static str),
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server refused or failed; its message is shown as it is.
    #[error("server: {message}")]
    Server { code: String, message: String },
}

/// What the server's end sent as the window closed.
pub struct ServerResults {
    pub end: EndResult,
    pub env: Option<Environment>,
    /// Its figures of each part, in the spec's order.
    pub parts: Vec<EndResult>,
}

pub struct Session {
    ctrl: TcpStream,
    /// Every frame either way steps it.
    order: Order,
    rx: Receiver<Result<Frame, FrameError>>,
    pub peer: SocketAddr,
    pub server_software: String,
}

const HANDSHAKE: Duration = Duration::from_secs(10);

impl Session {
    /// Connects and exchanges hello/welcome, with no key.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Session, CtlError> {
        Session::connect_with_key(addr, timeout, None)
    }

    /// Connects, exchanges hello/welcome and, when the server asks for it,
    /// proves this client holds `key` and checks that the server does too.
    pub fn connect_with_key(
        addr: SocketAddr,
        timeout: Duration,
        key: Option<&[u8]>,
    ) -> Result<Session, CtlError> {
        let ctrl = TcpStream::connect_timeout(&addr, timeout).map_err(|e| CtlError::Connect {
            addr,
            hint: if e.kind() == std::io::ErrorKind::ConnectionRefused {
                " (is `plumb serve` running there?)"
            } else {
                ""
            },
            error: plain_io(&e),
        })?;
        let _ = ctrl.set_nodelay(true);
        crate::liveness::watch_peer(&ctrl);
        let reader = ctrl
            .try_clone()
            .map_err(|e| CtlError::Protocol(plain_io(&e)))?;
        let rx =
            frames_from(reader, MAX_RESULT_FRAME).map_err(|e| CtlError::Protocol(e.to_string()))?;
        let mut s = Session {
            ctrl,
            order: Order::new(),
            rx,
            peer: addr,
            server_software: String::new(),
        };
        let client_nonce = plumb_sys::Cookie::random()
            .map_err(|e| CtlError::Protocol(plain_io(&e)))?
            .to_hex();
        s.send(Message::Hello {
            software: software(),
            nonce: client_nonce.clone(),
        })?;
        let Message::Welcome {
            software,
            auth: wants_auth,
            nonce: server_nonce,
        } = s.expect(HANDSHAKE)?
        else {
            unreachable!("{IN_ORDER}")
        };
        s.server_software = software;
        match (wants_auth, key) {
            (false, None) => {}
            (true, None) => {
                return Err(CtlError::Auth(
                    "the server requires a pre-shared key; give it with --psk-file".into(),
                ))
            }
            // A server without the key could be anyone's.
            (false, Some(_)) => {
                return Err(CtlError::Auth(
                    "the server does not ask for the key, so it cannot prove it is the server                      that holds it; give it --psk-file too"
                        .into(),
                ))
            }
            (true, Some(key)) => {
                s.send(Message::Auth {
                    proof: auth::proof(key, auth::CLIENT_LABEL, &server_nonce, &client_nonce),
                })?;
                match s.expect(HANDSHAKE) {
                    Ok(Message::AuthOk { proof }) => {
                        if !auth::verify(
                            key,
                            auth::SERVER_LABEL,
                            &server_nonce,
                            &client_nonce,
                            &proof,
                        ) {
                            return Err(CtlError::Auth(
                                "the server's proof is wrong: it does not hold this key".into(),
                            ));
                        }
                    }
                    Ok(_) => unreachable!("{IN_ORDER}"),
                    Err(CtlError::Server { code, .. }) if code == "auth" => {
                        return Err(CtlError::Auth(
                            "the server refused the key (is it the same file on both hosts?)"
                                .into(),
                        ))
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(s)
    }

    fn send(&mut self, m: Message) -> Result<(), CtlError> {
        self.order.take(&m).map_err(CtlError::Protocol)?;
        write_frame(&self.ctrl, &Frame::new(m)).map_err(|e| CtlError::Lost(e.to_string()))
    }

    /// The next message from the server, which must be the one the order
    /// says is due.
    fn expect(&mut self, timeout: Duration) -> Result<Message, CtlError> {
        let what = self.order.due();
        match self.rx.recv_timeout(timeout) {
            Ok(Ok(f)) => match f.message {
                Message::Error { code, message } => Err(CtlError::Server { code, message }),
                m => {
                    self.order.take(&m).map_err(CtlError::Protocol)?;
                    Ok(m)
                }
            },
            Ok(Err(FrameError::Closed)) | Err(RecvTimeoutError::Disconnected) => {
                Err(CtlError::Lost("the control connection closed".into()))
            }
            Ok(Err(e @ (FrameError::Version(_) | FrameError::Invalid(_)))) => {
                Err(CtlError::Protocol(format!("from the server: {e}")))
            }
            Ok(Err(e)) => Err(CtlError::Lost(e.to_string())),
            Err(RecvTimeoutError::Timeout) => Err(CtlError::Timeout(what)),
        }
    }

    /// Sends the spec; the server answers with where to connect the flows.
    /// Sends the spec, with the knobs the server is to set on its host for
    /// the session (it refuses them unless it allows knobs and the session
    /// is authenticated).
    /// With `observe`, the server's end reads more over the window (its
    /// host's profile, its flows' ACKs) and returns it with its figures.
    pub fn setup(
        &mut self,
        spec: &Spec,
        knobs: &[String],
        observe: Observe,
    ) -> Result<Ready, CtlError> {
        self.send(Message::Setup {
            spec: Box::new(spec.clone()),
            knobs: knobs.to_vec(),
            observe,
        })?;
        let Message::Ready(ready) = self.expect(HANDSHAKE)? else {
            unreachable!("{IN_ORDER}")
        };
        if ready.part_ports.len() != spec.parts.len() {
            return Err(CtlError::Protocol(format!(
                "the server ({}) gave {} ports for the run's {} parts: it serves no runs of \
                 parts; run a plumb that does on it",
                self.server_software,
                ready.part_ports.len(),
                spec.parts.len()
            )));
        }
        Ok(ready)
    }

    /// Tells the server every flow is connected; returns once its workers run.
    /// The server may still be accepting many flows, so the wait scales.
    pub fn start(&mut self, flows: u32) -> Result<(), CtlError> {
        self.send(Message::Start)?;
        let wait = HANDSHAKE + Duration::from_millis(flows as u64);
        self.expect(wait).map(|_| ())
    }

    pub fn mark(&mut self) -> Result<(), CtlError> {
        self.send(Message::Mark)
    }

    pub fn stop(&mut self) -> Result<(), CtlError> {
        self.send(Message::Stop)
    }

    /// The server end's result, its environment when it sent one, and its
    /// figures of each part of a run of parts.
    pub fn results(&mut self, timeout: Duration) -> Result<ServerResults, CtlError> {
        let Message::Results { end, env, parts } = self.expect(timeout)? else {
            unreachable!("{IN_ORDER}")
        };
        Ok(ServerResults {
            end: *end,
            env: env.map(|e| *e),
            parts,
        })
    }

    /// True when the server has said something unasked (an error) or gone.
    pub fn poll_trouble(&mut self) -> Option<CtlError> {
        match self.rx.try_recv() {
            Ok(Ok(Frame {
                message: Message::Error { code, message },
                ..
            })) => Some(CtlError::Server { code, message }),
            Ok(Ok(f)) => Some(unexpected("nothing", &f.message)),
            Ok(Err(e)) => Some(CtlError::Lost(e.to_string())),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => {
                Some(CtlError::Lost("the control connection closed".into()))
            }
        }
    }
}

impl Drop for Session {
    /// Shuts the connection down, not just this handle: the reader thread's
    /// clone would otherwise keep it open and the server waiting.
    fn drop(&mut self) {
        let _ = self.ctrl.shutdown(std::net::Shutdown::Both);
    }
}

fn unexpected(wanted: &str, got: &Message) -> CtlError {
    CtlError::Protocol(format!("expected {wanted}, got {}", got.name()))
}
