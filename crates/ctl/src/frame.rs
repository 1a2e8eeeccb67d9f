//! Framing of the control connection: a u32 big-endian length, then that many
//! bytes of JSON. The length is checked against a bound before anything is
//! allocated, so a hostile length field costs nothing.

use crate::message::{Frame, PROTOCOL_VERSION};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// The largest frame a server accepts from a client.
pub const MAX_FRAME: usize = 1 << 20;
/// The largest frame a client accepts from a server: results of runs with
/// tens of thousands of flows carry per-flow figures.
pub const MAX_RESULT_FRAME: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("timed out waiting for the peer")]
    Timeout,
    #[error("frame of {0} bytes is over the limit of {1} bytes")]
    TooLarge(usize, usize),
    #[error("the peer did not answer as a plumb server: it sent \"{0}\"")]
    NotPlumb(String),
    #[error("malformed message: {0}")]
    Invalid(String),
    #[error("protocol version {0} is not spoken here (this side speaks {PROTOCOL_VERSION})")]
    Version(u64),
    #[error("{0}")]
    Io(String),
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => FrameError::Closed,
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => FrameError::Timeout,
            _ => FrameError::Io(plumb_sys::plain_io(&e)),
        }
    }
}

pub fn write_frame(mut w: impl Write, frame: &Frame) -> Result<(), FrameError> {
    let body = serde_json::to_vec(frame).map_err(|e| FrameError::Invalid(e.to_string()))?;
    if body.len() > MAX_RESULT_FRAME {
        return Err(FrameError::TooLarge(body.len(), MAX_RESULT_FRAME));
    }
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)?;
    w.flush()?;
    Ok(())
}

/// Reads frames of up to `max` bytes from `stream` on a thread of its own,
/// into the returned channel, until the first error (which is sent too) or
/// until the receiver is gone. A side that must notice a silent peer waits
/// on the channel with a timeout instead of on the socket.
pub fn frames_from(
    stream: TcpStream,
    max: usize,
) -> io::Result<std::sync::mpsc::Receiver<Result<Frame, FrameError>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("plumb-ctl".into())
        .spawn(move || loop {
            let f = read_frame(&stream, max);
            let end = f.is_err();
            if tx.send(f).is_err() || end {
                break;
            }
        })?;
    Ok(rx)
}

pub fn read_frame(mut r: impl Read, max: usize) -> Result<Frame, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let announced = u32::from_be_bytes(len) as usize;
    if announced > max {
        // A length of four printable bytes is over any limit (at least
        // 0x09090909): a peer speaking a text protocol, whose words say more
        // than the length they make.
        if len.iter().all(|&b| printable(b)) {
            let mut more = [0u8; 60];
            let n = r.read(&mut more).unwrap_or(0);
            let mut said = len.to_vec();
            said.extend_from_slice(&more[..n]);
            return Err(FrameError::NotPlumb(shown(&said)));
        }
        return Err(FrameError::TooLarge(announced, max));
    }
    let len = announced;
    // Read in steps rather than allocating `len` at once: a peer that
    // announces 1 MiB and sends 10 bytes costs 10 bytes.
    let mut body = Vec::with_capacity(len.min(64 * 1024));
    (&mut r).take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(FrameError::Closed);
    }
    decode_frame(&body)
}

fn printable(b: u8) -> bool {
    b.is_ascii_graphic() || b" \t\r\n".contains(&b)
}

/// Bytes as a reader can see them: text as it is, up to the first
/// unprintable byte, with line ends and quotes escaped.
fn shown(bytes: &[u8]) -> String {
    let text: Vec<u8> = bytes
        .iter()
        .copied()
        .take_while(|&b| printable(b))
        .collect();
    String::from_utf8_lossy(&text).escape_default().to_string()
}

/// Decodes one frame's body. The version is looked at first, so that a peer
/// of another version hears that rather than about a field it misnamed.
pub fn decode_frame(body: &[u8]) -> Result<Frame, FrameError> {
    #[derive(serde::Deserialize)]
    struct Head {
        version: Option<u64>,
    }
    let head: Head =
        serde_json::from_slice(body).map_err(|e| FrameError::Invalid(e.to_string()))?;
    match head.version {
        Some(v) if v == PROTOCOL_VERSION as u64 => {}
        Some(v) => return Err(FrameError::Version(v)),
        None => return Err(FrameError::Invalid("the frame has no version".into())),
    }
    serde_json::from_slice(body).map_err(|e| FrameError::Invalid(e.to_string()))
}

/// Reads from a socket with a deadline for the whole frame rather than for
/// each read: a peer that trickles one byte a second still runs out of time.
pub struct Deadline<'a> {
    pub stream: &'a TcpStream,
    pub until: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// [`read_frame`] that gives up at `until`.
pub fn read_frame_until(
    stream: &TcpStream,
    max: usize,
    until: Instant,
) -> Result<Frame, FrameError> {
    read_frame(Deadline { stream, until }, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Frame, Message};

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &Frame::new(Message::Mark)).unwrap();
        let f = read_frame(&buf[..], MAX_FRAME).unwrap();
        assert!(matches!(f.message, Message::Mark));
    }

    #[test]
    fn huge_length_is_refused_before_allocating() {
        let buf = [0xffu8, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&buf[..], MAX_FRAME),
            Err(FrameError::TooLarge(_, _))
        ));
    }

    #[test]
    fn a_peer_speaking_text_is_named_with_what_it_said() {
        let reply = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        let e = read_frame(&reply[..], MAX_RESULT_FRAME).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the peer did not answer as a plumb server: it sent \
             \"HTTP/1.1 400 Bad Request\\r\\nContent-Length: 0\\r\\n\\r\\n\""
        );
        // Binary bytes stop the quote.
        let e = read_frame(&b"SSH-2.0\x00\x01"[..], MAX_FRAME).unwrap_err();
        assert!(e.to_string().ends_with("it sent \"SSH-2.0\""), "{e}");
    }

    #[test]
    fn other_versions_are_named() {
        let body = br#"{"version":7,"type":"hello","software":"x"}"#;
        let mut buf = (body.len() as u32).to_be_bytes().to_vec();
        buf.extend_from_slice(body);
        assert!(matches!(
            read_frame(&buf[..], MAX_FRAME),
            Err(FrameError::Version(7))
        ));
        assert!(matches!(
            decode_frame(br#"{"type":"mark"}"#),
            Err(FrameError::Invalid(_))
        ));
        assert!(matches!(
            decode_frame(b"[1,2]"),
            Err(FrameError::Invalid(_))
        ));
    }

    #[test]
    fn slow_peer_runs_out_of_time() {
        use std::net::{TcpListener, TcpStream};
        use std::time::Duration;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let t = std::thread::spawn(move || {
            for b in 20u32.to_be_bytes().iter().chain(b"{\"version\":1,") {
                if c.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let start = Instant::now();
        let r = read_frame_until(&s, MAX_FRAME, start + Duration::from_millis(500));
        assert!(matches!(r, Err(FrameError::Timeout)), "{r:?}");
        assert!(start.elapsed() < Duration::from_secs(3));
        drop(s);
        t.join().unwrap();
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        let mut buf = 5u32.to_be_bytes().to_vec();
        buf.extend_from_slice(b"hello");
        assert!(matches!(
            read_frame(&buf[..], MAX_FRAME),
            Err(FrameError::Invalid(_))
        ));
        let mut buf = 50u32.to_be_bytes().to_vec();
        buf.extend_from_slice(b"{\"ty");
        assert!(matches!(
            read_frame(&buf[..], MAX_FRAME),
            Err(FrameError::Closed)
        ));
        let unknown = br#"{"version":2,"type":"launch_missiles"}"#;
        let mut buf = (unknown.len() as u32).to_be_bytes().to_vec();
        buf.extend_from_slice(unknown);
        assert!(matches!(
            read_frame(&buf[..], MAX_FRAME),
            Err(FrameError::Invalid(_))
        ));
    }
}
