use super::task::parse_status;
use plumb_spec::CpuList;
use std::io;

pub fn clock_ticks_per_sec() -> u64 {
    rustix::param::clock_ticks_per_second()
}

pub fn online_cpus() -> io::Result<CpuList> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")?
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

/// CLOCK_MONOTONIC in ns: one clock for every process of one boot of the
/// kernel (see [`boot_id`]), in any namespace.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// This boot of the kernel: the same in every process and namespace on
/// it, so two ends with the same one read one CLOCK_MONOTONIC (a time
/// namespace, which no plumb end makes, would offset it).
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string()).filter(|id| !id.is_empty())
}

/// The node name of the UTS namespace this process is in.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Resident set size of process `pid` (None: this process); 0 for kernel
/// threads, which have no VmRSS.
pub fn rss_bytes(pid: Option<u32>) -> io::Result<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_string(),
    };
    let status = parse_status(&std::fs::read_to_string(path)?);
    Ok(status.vm_rss_kb.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_host_facts() {
        assert!(clock_ticks_per_sec() > 0);
        assert!(!online_cpus().unwrap().is_empty());
        let release = kernel_release();
        assert_eq!(
            release,
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap()
                .trim()
        );
        assert!(!hostname().is_empty());
        assert!(rss_bytes(None).unwrap() > 0);
        assert!(rss_bytes(Some(std::process::id())).unwrap() > 0);
    }
}
