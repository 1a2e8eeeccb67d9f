//! The rtnetlink reply parsers, on bytes a kernel of another version (or a
//! broken one) might send.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = plumb_sys::qdisc::parse(data);
    let _ = plumb_sys::host::parse_link_limits(data);
});
