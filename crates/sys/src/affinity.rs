//! CPU affinity of the calling thread.

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use std::io;

/// Restricts the calling thread (not the whole process) to `cpu`.
pub fn pin_current_thread(cpu: u32) -> io::Result<()> {
    let index = usize::try_from(cpu)
        .ok()
        .filter(|&i| i < CpuSet::MAX_CPU)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "CPU {cpu} is beyond the {} a CPU set holds",
                    CpuSet::MAX_CPU
                ),
            )
        })?;
    let mut set = CpuSet::new();
    set.set(index);
    // None is the calling thread: the kernel takes pid 0 as "me" per thread.
    Ok(sched_setaffinity(None, &set)?)
}

/// Restricts the calling thread to the CPUs of `cpus`.
pub fn pin_current_thread_to(cpus: &[u32]) -> io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        match usize::try_from(cpu).ok().filter(|&i| i < CpuSet::MAX_CPU) {
            Some(i) => set.set(i),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "CPU {cpu} is beyond the {} a CPU set holds",
                        CpuSet::MAX_CPU
                    ),
                ))
            }
        }
    }
    Ok(sched_setaffinity(None, &set)?)
}

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU)
        .filter(|&i| set.is_set(i))
        .filter_map(|i| u32::try_from(i).ok())
        .collect())
}

/// Refuses CPUs this machine does not have or this process may not use;
/// `flag` is the user's option and `whose` the end that would run there.
pub fn check_cpus(cpus: &plumb_spec::CpuList, flag: &str, whose: &str) -> Result<(), String> {
    let online = crate::proc::online_cpus()
        .map_err(|e| format!("{flag}: cannot read the online CPUs: {e}"))?;
    let allowed = allowed_cpus().unwrap_or_default();
    for &c in cpus.cpus() {
        if !online.contains(c) {
            return Err(format!(
                "{flag}: CPU {c} does not exist on {whose} (online: {online})"
            ));
        }
        if !allowed.is_empty() && !allowed.contains(&c) {
            return Err(format!(
                "{flag}: CPU {c} is not available to plumb on {whose} (allowed: {})",
                plumb_spec::CpuList::new(allowed.clone())
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_a_thread_shows_in_its_status() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        // CPU 0 where the test may use it; containers can exclude it.
        let cpu = if allowed.contains(&0) { 0 } else { allowed[0] };
        let (status, now_allowed) = std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            (crate::proc::parse_status(&status), allowed_cpus().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(status.cpus_allowed_list, cpu.to_string());
        assert_eq!(now_allowed, vec![cpu]);
        // Only the spawned thread was pinned.
        assert_eq!(allowed_cpus().unwrap(), allowed);
    }

    #[test]
    fn out_of_range_cpu_is_rejected() {
        let e = pin_current_thread(u32::MAX).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
