//! What a client's spec goes through on a server (JSON, validation, the
//! spec key) and the parsers of the values users type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plumb_spec::{parse_duration, parse_rate, parse_size, parse_writes, CpuList, Field, Spec};

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = serde_json::from_slice::<Spec>(data) {
        if spec.validate().is_ok() {
            let _ = spec.key();
            let _ = spec.setup_flows();
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_size(text);
    let _ = parse_rate(text);
    let _ = parse_duration(text);
    let _ = parse_writes(Field::ReqWrites, text, 1 << 20);
    if let Ok(cpus) = text.parse::<CpuList>() {
        // What is shown parses back to the same list.
        assert_eq!(cpus.to_string().parse::<CpuList>().ok(), Some(cpus));
    }
});
