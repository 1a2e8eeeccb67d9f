//! The control protocol (length-prefixed, versioned JSON frames) and both of
//! its sides: `server` is what `plumb serve` runs, driving the engine in the
//! server role; `client` is the session the run orchestrator drives.
#![deny(unsafe_code)]

pub mod client;
pub mod frame;
pub mod message;
pub mod server;

pub use client::{CtlError, Ready, Session};
pub use frame::{read_frame, write_frame, FrameError, MAX_FRAME, MAX_RESULT_FRAME};
pub use message::{Frame, Message, PROTOCOL_VERSION};
pub use server::{serve, ServeConfig, ServeError, DEFAULT_PORT};
