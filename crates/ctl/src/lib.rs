//! The control protocol (length-prefixed, versioned JSON frames) and both of
//! its sides: `server` is what `plumb serve` runs, driving the engine in the
//! server role; `client` is the session the run orchestrator drives.
#![deny(unsafe_code)]

pub mod auth;
pub mod client;
pub mod frame;
pub mod limits;
pub mod liveness;
pub mod message;
pub mod order;
pub mod server;

pub use client::{CtlError, Ready, Session};
pub use frame::{
    decode_frame, read_frame, read_frame_until, write_frame, FrameError, MAX_FRAME,
    MAX_RESULT_FRAME,
};
pub use limits::{Cidr, Limits};
pub use message::{Frame, Message, PROTOCOL_VERSION};
pub use order::Order;
pub use server::{serve, KnobGuard, LogFormat, ServeConfig, ServeError, ServerKnobs, DEFAULT_PORT};
