//! Parsers of the /proc and /sys files plumb samples, each a pure function of
//! the file's text (so they can be tested and fuzzed on captured text), and
//! readers that apply them to the running kernel's files.

mod host;
mod interrupts;
mod kconfig;
mod netdev;
mod snmp;
mod sockstat;
mod softirqs;
mod softnet;
mod stat;
mod task;

pub use host::{
    boot_id, clock_ticks_per_sec, hostname, kernel_release, monotonic_ns, online_cpus, rss_bytes,
};
pub use interrupts::{
    irqs_of, net_device, parse_interrupts, read_interrupts, Interrupts, IrqLine, NamedLine,
    NetDevice,
};
pub use kconfig::{irq_time_accounting, kconfig_enabled};
pub use netdev::{parse_net_dev, read_net_dev, NetDevRow};
pub use snmp::{parse_snmp, read_net_counters};
pub use sockstat::{parse_sockstat, read_sockstat};
pub use softirqs::{parse_softirqs, read_softirqs, SoftirqRow};
pub use softnet::{parse_softnet, read_softnet};
pub use stat::{parse_stat, read_stat, StatCpu};
pub use task::{
    parse_sched_migrations, parse_schedstat, parse_status, parse_task_stat, read_tasks,
    read_this_thread, Schedstat, StatusFields, TaskSnapshot, TaskStat,
};

use crate::ParseError;

/// Parses one numeric field, naming it in the error.
fn num<T: std::str::FromStr>(
    file: &'static str,
    line: usize,
    what: &str,
    text: &str,
) -> Result<T, ParseError> {
    text.parse()
        .map_err(|_| ParseError::new(file, line, format!("{what}: '{text}' is not a number")))
}
