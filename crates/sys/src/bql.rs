//! Byte queue limits of the NICs' transmit queues
//! (`/sys/class/net/DEV/queues/tx-N/byte_queue_limits`): the bytes a
//! driver has handed its device and not yet seen completed (`inflight`)
//! against the limit the kernel tunes (`limit`). A driver that keeps no
//! byte queue limits leaves `inflight` at 0.

use std::path::Path;

/// One transmit queue's reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxQueue {
    pub interface: String,
    /// N of `tx-N`.
    pub queue: u32,
    pub inflight: u64,
    pub limit: u64,
}

/// The transmit queues with byte queue limits of the devices under
/// `root` (`/sys/class/net` in [`read`]) that are backed by a device of
/// their own (a `device` link: a NIC, a paravirtual one included, not a
/// veth, a bridge or lo) and named in `names`; sorted by interface and
/// queue.
pub fn read_in(root: &Path, names: &[String]) -> Vec<TxQueue> {
    let mut out = Vec::new();
    for name in names {
        let dev = root.join(name);
        if !dev.join("device").exists() {
            continue;
        }
        let Ok(queues) = std::fs::read_dir(dev.join("queues")) else {
            continue;
        };
        for q in queues.flatten() {
            let file = q.file_name().to_string_lossy().into_owned();
            let Some(queue) = file.strip_prefix("tx-").and_then(|n| n.parse().ok()) else {
                continue;
            };
            let bql = q.path().join("byte_queue_limits");
            let number = |f: &str| -> Option<u64> {
                std::fs::read_to_string(bql.join(f))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            };
            if let (Some(inflight), Some(limit)) = (number("inflight"), number("limit")) {
                out.push(TxQueue {
                    interface: name.clone(),
                    queue,
                    inflight,
                    limit,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.interface, a.queue).cmp(&(&b.interface, b.queue)));
    out
}

/// [`read_in`] `/sys/class/net`, for the devices `names` (those of the
/// calling thread's network namespace: sysfs shows the namespace it was
/// mounted in, which may be another).
pub fn read(names: &[String]) -> Vec<TxQueue> {
    read_in(Path::new("/sys/class/net"), names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device with a `device` link and two transmit queues, a virtual
    /// one beside it, and a receive queue that is no transmit queue.
    #[test]
    fn only_the_transmit_queues_of_devices_of_their_own_are_read() {
        let root = std::env::temp_dir().join(format!("plumb-bql-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let queue = |dev: &str, q: &str, inflight: &str, limit: &str| {
            let d = root
                .join(dev)
                .join("queues")
                .join(q)
                .join("byte_queue_limits");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("inflight"), inflight).unwrap();
            std::fs::write(d.join("limit"), limit).unwrap();
        };
        queue("eth0", "tx-1", "0\n", "3028\n");
        queue("eth0", "tx-0", "1514\n", "6032\n");
        std::fs::create_dir_all(root.join("eth0").join("queues").join("rx-0")).unwrap();
        std::fs::create_dir_all(root.join("eth0").join("device")).unwrap();
        queue("veth0", "tx-0", "0\n", "0\n");
        let names = ["eth0".to_string(), "veth0".to_string(), "gone".to_string()];
        let read = read_in(&root, &names);
        let _ = std::fs::remove_dir_all(&root);
        let got: Vec<(&str, u32, u64, u64)> = read
            .iter()
            .map(|q| (q.interface.as_str(), q.queue, q.inflight, q.limit))
            .collect();
        assert_eq!(got, [("eth0", 0, 1514, 6032), ("eth0", 1, 0, 3028)]);
    }
}
