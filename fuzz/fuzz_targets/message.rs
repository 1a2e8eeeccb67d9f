//! The message parser on a frame's body: whatever it accepts must encode
//! again and decode to the same thing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plumb_ctl::{decode_frame, read_frame, write_frame, MAX_RESULT_FRAME};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = decode_frame(data) else {
        return;
    };
    let mut wire = Vec::new();
    write_frame(&mut wire, &frame).expect("a decoded frame encodes");
    let back = read_frame(&wire[..], MAX_RESULT_FRAME).expect("an encoded frame decodes");
    assert_eq!(
        serde_json::to_value(&frame).unwrap(),
        serde_json::to_value(&back).unwrap()
    );
});
