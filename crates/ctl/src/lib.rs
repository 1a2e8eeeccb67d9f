//! The control protocol (length-prefixed, versioned JSON frames): frames,
//! messages, their order, authentication, limits and the liveness of the
//! peer, and the client's session over them. No engine runs here: the test
//! ends that both sides drive (the client's and `plumb serve`'s) are the
//! run crate's.
#![deny(unsafe_code)]

pub mod auth;
pub mod client;
pub mod frame;
pub mod limits;
pub mod liveness;
pub mod message;
pub mod order;

/// The control port `plumb serve` listens on when none is given.
pub const DEFAULT_PORT: u16 = 12867;

pub use client::{CtlError, ServerResults, Session};
pub use frame::{
    decode_frame, read_frame, read_frame_until, write_frame, FrameError, MAX_FRAME,
    MAX_RESULT_FRAME,
};
pub use limits::{Cidr, Limits};
pub use message::{Frame, Message, Ready, PROTOCOL_VERSION};
pub use order::Order;
