//! The frame decoder as a server runs it: a length header, then the body,
//! from a peer that may lie about both.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plumb_ctl::{read_frame, FrameError, MAX_FRAME};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    // Several frames back to back, as a connection carries them.
    for _ in 0..8 {
        match read_frame(&mut rest, MAX_FRAME) {
            Ok(_) => {}
            Err(FrameError::TooLarge(len, max)) => assert!(len > max),
            Err(_) => break,
        }
    }
});
