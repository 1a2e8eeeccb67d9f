//! The one place in plumb that talks to the kernel below the level of std:
//! raw socket options and ioctls (TCP_INFO, SO_MAX_PACING_RATE,
//! TCP_CONGESTION, SIOCOUTQ/SIOCINQ, SIOCETHTOOL, TUN devices), CPU affinity,
//! a thread's interrupting timer, getrusage, rlimits,
//! parent-death signals, and the parsers and readers of the /proc and /sys
//! files plumb measures with (stat, softirqs, net/snmp, net/netstat,
//! task/*/stat and status).
//!
//! This is the only crate of the workspace allowed `unsafe`; every other
//! crate gets safe functions from here. Prefer rustix and socket2 where they
//! already wrap a call safely; raw libc only where they do not.
#![deny(unsafe_op_in_unsafe_fn)]
// Machine-checks the rule that every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

pub mod affinity;
pub mod bql;
pub mod cookie;
pub mod elf;
mod error;
pub mod ethtool;
pub mod guest;
pub mod host;
pub mod interrupt;
pub mod knob;
pub mod ksyms;
mod netlink;
pub mod perf;
pub mod proc;
pub mod process;
pub mod qdisc;
pub mod sock;
pub mod trace;
pub mod tun;
pub mod uring;

pub use cookie::Cookie;
pub use error::{plain_io, ParseError};

/// The build of the running plumb, as `plumb --version` gives it. The
/// binary's build script knows it; the binary sets it once at start, and
/// every end records it with its figures.
static BUILD: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Names this process's build, once, at start.
pub fn set_build(build: &'static str) {
    let _ = BUILD.set(build);
}

/// This process's build, when the binary named it.
pub fn build() -> Option<&'static str> {
    BUILD.get().copied()
}
