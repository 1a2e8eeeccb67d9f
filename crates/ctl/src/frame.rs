//! Framing of the control connection: a u32 big-endian length, then that many
//! bytes of JSON. The length is checked against a bound before anything is
//! allocated, so a hostile length field costs nothing.

use crate::message::Frame;
use std::io::{self, Read, Write};

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
    #[error("malformed message: {0}")]
    Invalid(String),
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
            _ => FrameError::Io(plumb_engine::plain_io(&e)),
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

pub fn read_frame(mut r: impl Read, max: usize) -> Result<Frame, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(FrameError::TooLarge(len, max));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| FrameError::Invalid(e.to_string()))
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
        let unknown = br#"{"version":1,"type":"launch_missiles"}"#;
        let mut buf = (unknown.len() as u32).to_be_bytes().to_vec();
        buf.extend_from_slice(unknown);
        assert!(matches!(
            read_frame(&buf[..], MAX_FRAME),
            Err(FrameError::Invalid(_))
        ));
    }
}
