//! Counting the kernel's tracepoints with perf_event_open(2): one counting
//! event per online CPU, every process on it, read as a sum. A tracepoint
//! is named `system:event` (`tcp:tcp_retransmit_skb`) and found by the id
//! tracefs gives it; where tracefs is not mounted, it is mounted on a
//! directory of plumb's own for as long as the ids take to read, and the
//! host is left as it was found.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

const PERF_TYPE_TRACEPOINT: u32 = 2;

/// Where tracefs is usually found.
const MOUNTED: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The id of each tracepoint in `names`, or why it has none here (the
/// kernel lacks it, tracefs cannot be read).
pub fn ids(names: &[&str]) -> Vec<Result<u64, String>> {
    let read = |root: &Path| -> Vec<Result<u64, String>> {
        names.iter().map(|n| id_in(root, n)).collect()
    };
    if let Some(root) = MOUNTED
        .iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir())
    {
        return read(root);
    }
    match Mounted::new() {
        Ok(m) => read(&m.0),
        Err(e) => names
            .iter()
            .map(|_| Err(format!("tracefs is not mounted and cannot be: {e}")))
            .collect(),
    }
}

fn id_in(root: &Path, name: &str) -> Result<u64, String> {
    let (system, event) = name
        .split_once(':')
        .ok_or_else(|| format!("'{name}' is not system:event"))?;
    let file = root.join("events").join(system).join(event).join("id");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("this kernel has no {name} ({}: {e})", file.display()))?;
    text.trim()
        .parse()
        .map_err(|_| format!("{}: '{}' is not an id", file.display(), text.trim()))
}

/// tracefs mounted on a directory of this process's own, unmounted and
/// removed when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn new() -> io::Result<Mounted> {
        // One directory per mount: `plumb serve` sessions start ends at once.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("plumb-tracefs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
        let (source, kind) = (c("nodev"), c("tracefs"));
        let target = c(&dir.to_string_lossy());
        // SAFETY: NUL-terminated strings alive for the call; no data.
        let r = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                kind.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        Ok(Mounted(dir))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Ok(target) = std::ffi::CString::new(self.0.to_string_lossy().as_bytes()) {
            // SAFETY: a NUL-terminated path alive for the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// One tracepoint counted on every CPU given.
pub struct Counter {
    cpus: Vec<File>,
}

impl Counter {
    /// Starts counting tracepoint `id` on each of `cpus`, every process.
    pub fn open(id: u64, cpus: &[u32]) -> io::Result<Counter> {
        let attr = crate::perf::Attr::counting(PERF_TYPE_TRACEPOINT, id);
        let cpus = cpus
            .iter()
            .map(|&cpu| crate::perf::open_on_cpu(&attr, cpu).map(File::from))
            .collect::<io::Result<Vec<File>>>()?;
        Ok(Counter { cpus })
    }

    /// The events counted so far on all its CPUs.
    pub fn read(&self) -> io::Result<u64> {
        let mut total = 0u64;
        for mut f in &self.cpus {
            let mut b = [0u8; 8];
            f.read_exact(&mut b)?;
            total = total.wrapping_add(u64::from_ne_bytes(b));
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_without_its_system_is_refused_and_a_missing_one_named() {
        let root = std::env::temp_dir().join(format!("plumb-trace-test-{}", std::process::id()));
        let dir = root.join("events/tcp/tcp_retransmit_skb");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("id"), "1234\n").unwrap();
        assert_eq!(id_in(&root, "tcp:tcp_retransmit_skb"), Ok(1234));
        assert!(id_in(&root, "tcp_retransmit_skb")
            .unwrap_err()
            .contains("system:event"));
        let e = id_in(&root, "skb:kfree_skb").unwrap_err();
        assert!(e.contains("this kernel has no skb:kfree_skb"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
