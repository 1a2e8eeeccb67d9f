//! The /proc parsers, on text a kernel of another version (or a container
//! runtime's fake /proc) might show.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plumb_sys::proc::{
    kconfig_enabled, parse_interrupts, parse_net_dev, parse_sched_migrations, parse_schedstat,
    parse_snmp, parse_sockstat, parse_softirqs, parse_softnet, parse_stat, parse_status,
    parse_task_stat,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_stat(text);
    let _ = parse_softirqs(text);
    let _ = parse_snmp(text);
    let _ = parse_sockstat(text);
    let _ = parse_task_stat(text);
    let _ = parse_status(text);
    let _ = parse_schedstat(text);
    let _ = parse_sched_migrations(text);
    let _ = parse_softnet(text);
    let _ = parse_net_dev(text);
    if let Ok(t) = parse_interrupts(text) {
        let _ = t.named_since(&Default::default());
    }
    let _ = kconfig_enabled(text, "CONFIG_IRQ_TIME_ACCOUNTING");
});
