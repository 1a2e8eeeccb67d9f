//! Standard output that a closed reader cannot crash: `plumb list | head`
//! closes the pipe early, and std's print! would panic on EPIPE (Rust
//! ignores SIGPIPE). The first failed write marks stdout closed and every
//! later write is dropped, so a listing ends quietly and a sweep keeps
//! measuring and storing with no one reading its table.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `bytes` to stdout unless it was found closed.
pub fn bytes(bytes: &[u8]) {
    if CLOSED.load(Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if out.write_all(bytes).and_then(|()| out.flush()).is_err() {
        CLOSED.store(true, Relaxed);
    }
}

/// Writes formatted text to stdout unless it was found closed.
pub fn fmt(args: std::fmt::Arguments) {
    if CLOSED.load(Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if out.write_fmt(args).is_err() {
        CLOSED.store(true, Relaxed);
    }
}

/// Whether a write to stdout failed: nobody is reading any more.
pub fn closed() -> bool {
    CLOSED.load(Relaxed)
}

/// println! that ends quietly on a closed stdout.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out::fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// print! that ends quietly on a closed stdout.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::fmt(format_args!($($arg)*))
    };
}
