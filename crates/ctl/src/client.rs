//! The client side of a control session. A reader thread turns incoming frames
//! into a channel, so that every wait has a deadline and a vanished server is
//! noticed at once.

use crate::frame::{read_frame, write_frame, FrameError, MAX_RESULT_FRAME};
use crate::message::{software, Frame, Message, PROTOCOL_VERSION};
use plumb_engine::plain_io;
use plumb_samples::EndResult;
use plumb_spec::Spec;
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

/// Where the server wants the data flows.
#[derive(Debug, Clone)]
pub struct Ready {
    pub data_port: u16,
    pub cookie: String,
    pub threads: u32,
}

pub struct Session {
    ctrl: TcpStream,
    rx: Receiver<Result<Frame, FrameError>>,
    pub peer: SocketAddr,
    pub server_software: String,
}

const HANDSHAKE: Duration = Duration::from_secs(10);

impl Session {
    /// Connects and exchanges hello/welcome.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Session, CtlError> {
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
        let reader = ctrl
            .try_clone()
            .map_err(|e| CtlError::Protocol(plain_io(&e)))?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("plumb-ctl".into())
            .spawn(move || loop {
                let f = read_frame(&reader, MAX_RESULT_FRAME);
                let end = f.is_err();
                if tx.send(f).is_err() || end {
                    break;
                }
            })
            .map_err(|e| CtlError::Protocol(e.to_string()))?;
        let mut s = Session {
            ctrl,
            rx,
            peer: addr,
            server_software: String::new(),
        };
        s.send(Message::Hello {
            software: software(),
        })?;
        match s.expect("welcome", HANDSHAKE)? {
            Message::Welcome { software, auth, .. } => {
                if auth {
                    return Err(CtlError::Protocol(
                        "the server requires authentication, which this client does not support"
                            .into(),
                    ));
                }
                s.server_software = software;
            }
            m => return Err(unexpected("welcome", &m)),
        }
        Ok(s)
    }

    fn send(&mut self, m: Message) -> Result<(), CtlError> {
        write_frame(&self.ctrl, &Frame::new(m)).map_err(|e| CtlError::Lost(e.to_string()))
    }

    fn expect(&mut self, what: &'static str, timeout: Duration) -> Result<Message, CtlError> {
        match self.rx.recv_timeout(timeout) {
            Ok(Ok(f)) => {
                if f.version != PROTOCOL_VERSION {
                    return Err(CtlError::Protocol(format!(
                        "server speaks protocol version {}, this client {}",
                        f.version, PROTOCOL_VERSION
                    )));
                }
                match f.message {
                    Message::Error { code, message } => Err(CtlError::Server { code, message }),
                    m => Ok(m),
                }
            }
            Ok(Err(FrameError::Closed)) | Err(RecvTimeoutError::Disconnected) => {
                Err(CtlError::Lost("the control connection closed".into()))
            }
            Ok(Err(e)) => Err(CtlError::Lost(e.to_string())),
            Err(RecvTimeoutError::Timeout) => Err(CtlError::Timeout(what)),
        }
    }

    /// Sends the spec; the server answers with where to connect the flows.
    pub fn setup(&mut self, spec: &Spec) -> Result<Ready, CtlError> {
        self.send(Message::Setup {
            spec: Box::new(spec.clone()),
        })?;
        match self.expect("ready", HANDSHAKE)? {
            Message::Ready {
                data_port,
                cookie,
                threads,
            } => Ok(Ready {
                data_port,
                cookie,
                threads,
            }),
            m => Err(unexpected("ready", &m)),
        }
    }

    /// Tells the server every flow is connected; returns once its workers run.
    /// The server may still be accepting many flows, so the wait scales.
    pub fn start(&mut self, flows: u32) -> Result<(), CtlError> {
        self.send(Message::Start)?;
        let wait = HANDSHAKE + Duration::from_millis(flows as u64);
        match self.expect("started", wait)? {
            Message::Started => Ok(()),
            m => Err(unexpected("started", &m)),
        }
    }

    pub fn mark(&mut self) -> Result<(), CtlError> {
        self.send(Message::Mark)
    }

    pub fn stop(&mut self) -> Result<(), CtlError> {
        self.send(Message::Stop)
    }

    pub fn results(&mut self, timeout: Duration) -> Result<EndResult, CtlError> {
        match self.expect("results", timeout)? {
            Message::Results { end } => Ok(*end),
            m => Err(unexpected("results", &m)),
        }
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

fn unexpected(wanted: &str, got: &Message) -> CtlError {
    CtlError::Protocol(format!("expected {wanted}, got {}", got.name()))
}
