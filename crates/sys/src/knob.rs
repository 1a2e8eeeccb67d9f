//! Raw reads and writes of the host settings plumb changes as knobs:
//! /proc/sys and /sys files, and the `ip`, `tc` and `ethtool` commands for
//! what has no file. Each takes the network namespace to act in (None: this
//! process's); inside one, files are reached through `ip netns exec`, which
//! mounts that namespace's /sys, so /sys/class/net shows its interfaces.
//!
//! Output parsers are pure functions of the commands' text, tested on
//! captured text.

use std::io;
use std::process::{Command, Stdio};

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// An interface name the kernel could have: no path separators, at most 15
/// bytes.
pub fn check_iface(name: &str) -> io::Result<()> {
    if name.is_empty()
        || name.len() > 15
        || name.contains(['/', '\0', ' ', ':', '@'])
        || name == "."
        || name == ".."
    {
        return Err(invalid(format!("'{name}' is not an interface name")));
    }
    Ok(())
}

/// `net.core.rmem_max` → `/proc/sys/net/core/rmem_max`.
pub fn sysctl_path(name: &str) -> io::Result<String> {
    let ok = !name.is_empty()
        && name
            .split(['.', '/'])
            .all(|p| !p.is_empty() && p != ".." && p.chars().all(|c| c.is_ascii_graphic()));
    if !ok {
        return Err(invalid(format!("'{name}' is not a sysctl name")));
    }
    Ok(format!("/proc/sys/{}", name.replace('.', "/")))
}

/// A sysctl that holds one number, as this thread's network namespace has
/// it.
pub fn sysctl_number(name: &str) -> io::Result<u64> {
    std::fs::read_to_string(sysctl_path(name)?)?
        .trim()
        .parse()
        .map_err(|e| invalid(format!("{name}: {e}")))
}

/// Runs `program args` in `netns` and returns its stdout; a failure carries
/// the command's first line of stderr.
pub fn command(netns: Option<&str>, program: &str, args: &[&str]) -> io::Result<String> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, program]);
            c
        }
        None => Command::new(program),
    };
    cmd.args(args).stdin(Stdio::null());
    let out = cmd.output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot run {program}: {e} (is it installed?)"),
        )
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(io::Error::other(format!(
            "{program} {} failed: {}",
            args.join(" "),
            if line.is_empty() {
                out.status.to_string()
            } else {
                line.trim().to_string()
            }
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The text of a /proc or /sys file, trailing newline removed.
pub fn read_file(netns: Option<&str>, path: &str) -> io::Result<String> {
    let read = || {
        std::fs::read_to_string(path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
    };
    let text = match netns {
        None => read()?,
        Some(ns) if per_opener(path) => in_netns(ns, read)?,
        Some(_) => command(netns, "cat", &[path])?,
    };
    Ok(text.trim_end_matches('\n').to_string())
}

/// Writes `value` to a /proc or /sys file in one write(2), as the kernel's
/// handlers want.
pub fn write_file(netns: Option<&str>, path: &str, value: &str) -> io::Result<()> {
    let write = || {
        std::fs::write(path, value).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
    };
    match netns {
        None => write(),
        Some(ns) if per_opener(path) => in_netns(ns, write),
        Some(_) => command(
            netns,
            "sh",
            &["-c", "printf '%s' \"$1\" > \"$2\"", "sh", value, path],
        )
        .map(|_| ()),
    }
}

/// Whether a file answers for the network namespace of whoever opens it,
/// as /proc/sys/net does: then a thread that entered the namespace reads
/// and writes it, with no shell or `cat` (a guest has neither). /sys shows
/// the namespace it was mounted in, which `ip netns exec` mounts afresh.
fn per_opener(path: &str) -> bool {
    path.starts_with("/proc/sys/net/")
}

/// `f` on a thread of its own inside `netns`.
fn in_netns<T: Send>(netns: &str, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let _inside = enter_netns(netns)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other(format!("{netns}: the thread panicked"))))
    })
}

/// The receive queues of an interface (rx-0, rx-1, ...), in number order.
pub fn rx_queues(netns: Option<&str>, iface: &str) -> io::Result<Vec<String>> {
    check_iface(iface)?;
    let dir = format!("/sys/class/net/{iface}/queues");
    let names: Vec<String> = match netns {
        None => std::fs::read_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{dir}: {e}")))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Some(_) => command(netns, "ls", &[&dir])?
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    };
    let mut rx: Vec<(u32, String)> = names
        .into_iter()
        .filter_map(|n| Some((n.strip_prefix("rx-")?.parse().ok()?, n)))
        .collect();
    rx.sort();
    Ok(rx.into_iter().map(|(_, n)| n).collect())
}

/// A CPU mask as /sys prints it ("00000000,0000000f"), as a number; masks of
/// more than 128 CPUs are refused.
pub fn parse_mask(text: &str) -> Option<u128> {
    let hex: String = text.trim().chars().filter(|c| *c != ',').collect();
    let hex = hex.trim_start_matches("0x");
    if hex.is_empty() {
        return None;
    }
    let digits = hex.trim_start_matches('0');
    if digits.len() > 32 {
        return None;
    }
    if digits.is_empty() {
        return hex.chars().all(|c| c == '0').then_some(0);
    }
    u128::from_str_radix(digits, 16).ok()
}

/// One feature line of `ethtool -k`: its state and whether it is fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    pub on: bool,
    pub fixed: bool,
}

/// The long name ethtool prints for the short names `ethtool -K` takes.
pub fn feature_long_name(short: &str) -> Option<&'static str> {
    Some(match short {
        "rx" => "rx-checksumming",
        "tx" => "tx-checksumming",
        "sg" => "scatter-gather",
        "tso" => "tcp-segmentation-offload",
        "gso" => "generic-segmentation-offload",
        "gro" => "generic-receive-offload",
        "lro" => "large-receive-offload",
        "rx-gro-hw" => "rx-gro-hw",
        "rx-gro-list" => "rx-gro-list",
        "rx-udp-gro-forwarding" => "rx-udp-gro-forwarding",
        _ => return None,
    })
}

/// The state of feature `long` in `ethtool -k` output.
pub fn parse_feature(text: &str, long: &str) -> Option<Feature> {
    text.lines().find_map(|l| {
        let (name, rest) = l.trim().split_once(':')?;
        if name != long {
            return None;
        }
        let mut words = rest.split_whitespace();
        let on = match words.next()? {
            "on" => true,
            "off" => false,
            _ => return None,
        };
        Some(Feature {
            on,
            fixed: rest.contains("[fixed]"),
        })
    })
}

pub fn read_feature(netns: Option<&str>, iface: &str, short: &str) -> io::Result<Feature> {
    check_iface(iface)?;
    let long = feature_long_name(short).ok_or_else(|| {
        invalid(format!(
            "'{short}' is not an offload plumb knows; use rx, tx, sg, tso, gso, gro, lro, \
             rx-gro-hw, rx-gro-list or rx-udp-gro-forwarding"
        ))
    })?;
    let text = command(netns, "ethtool", &["-k", iface])?;
    parse_feature(&text, long).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{iface} has no offload '{short}' ({long})"),
        )
    })
}

pub fn write_feature(netns: Option<&str>, iface: &str, short: &str, on: bool) -> io::Result<()> {
    check_iface(iface)?;
    command(
        netns,
        "ethtool",
        &["-K", iface, short, if on { "on" } else { "off" }],
    )
    .map(|_| ())
}

/// The value after `key` in `ip -d link show` output (mtu, gso_max_size,
/// gro_max_size, ...).
pub fn parse_link_value(text: &str, key: &str) -> Option<u64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == key)
        .and_then(|w| w[1].parse().ok())
}

/// `ip -d link show dev IFACE` in `netns`.
pub fn link_details(netns: Option<&str>, iface: &str) -> io::Result<String> {
    check_iface(iface)?;
    command(netns, "ip", &["-d", "link", "show", "dev", iface])
}

/// Whether the details of a link say it is one end of a veth pair.
pub fn is_veth(details: &str) -> bool {
    details
        .lines()
        .any(|l| l.split_whitespace().next() == Some("veth"))
}

/// `ip link set dev IFACE KEY VALUE` (mtu, gso_max_size, gro_max_size).
pub fn set_link_value(netns: Option<&str>, iface: &str, key: &str, value: u64) -> io::Result<()> {
    check_iface(iface)?;
    command(
        netns,
        "ip",
        &["link", "set", "dev", iface, key, &value.to_string()],
    )
    .map(|_| ())
}

/// The root qdisc of an interface as `tc qdisc show` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootQdisc {
    pub kind: String,
    /// "0:" is the kernel's default qdisc, which `tc qdisc del` brings back.
    pub handle: String,
    /// The parameters as printed, after "refcnt N".
    pub params: String,
}

impl RootQdisc {
    pub fn is_default(&self) -> bool {
        self.handle == "0:"
    }
}

pub fn parse_root_qdisc(text: &str) -> Option<RootQdisc> {
    let line = text
        .lines()
        .find(|l| l.starts_with("qdisc ") && l.split_whitespace().any(|w| w == "root"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let kind = words.get(1)?.to_string();
    let handle = words.get(2)?.to_string();
    let mut at = words.iter().position(|w| *w == "root")? + 1;
    if words.get(at) == Some(&"refcnt") {
        at += 2;
    }
    Some(RootQdisc {
        kind,
        handle,
        params: words.get(at..).unwrap_or(&[]).join(" "),
    })
}

pub fn read_root_qdisc(netns: Option<&str>, iface: &str) -> io::Result<RootQdisc> {
    check_iface(iface)?;
    let text = command(netns, "tc", &["qdisc", "show", "dev", iface, "root"])?;
    // A link that is down has the noop qdisc, which tc does not print.
    if text.trim().is_empty() {
        return Ok(RootQdisc {
            kind: "noop".into(),
            handle: "0:".into(),
            params: String::new(),
        });
    }
    parse_root_qdisc(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("tc shows no root qdisc on {iface}"),
        )
    })
}

/// `tc qdisc replace dev IFACE root KIND PARAMS...`.
pub fn replace_root_qdisc(netns: Option<&str>, iface: &str, spec: &[&str]) -> io::Result<()> {
    check_iface(iface)?;
    let mut args = vec!["qdisc", "replace", "dev", iface, "root"];
    args.extend_from_slice(spec);
    command(netns, "tc", &args).map(|_| ())
}

/// Brings the kernel's default root qdisc back.
pub fn delete_root_qdisc(netns: Option<&str>, iface: &str) -> io::Result<()> {
    check_iface(iface)?;
    command(netns, "tc", &["qdisc", "del", "dev", iface, "root"]).map(|_| ())
}

/// Whether a network namespace of this name exists (in /run/netns).
pub fn netns_exists(name: &str) -> bool {
    !name.contains('/') && std::path::Path::new("/run/netns").join(name).exists()
}

/// Takes an exclusive advisory lock on `file`, held until it is closed, so
/// two plumb processes do not rewrite the journal at once.
pub fn lock_exclusive(file: &std::fs::File) -> io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive).map_err(io::Error::from)
}

/// The calling thread inside a named network namespace until this is
/// dropped, when it goes back to the one it was in. Threads it starts
/// meanwhile are born in the namespace, and so are the sockets it opens.
pub struct InNetns {
    home: std::fs::File,
}

pub fn enter_netns(name: &str) -> io::Result<InNetns> {
    if name.contains('/') || name.is_empty() {
        return Err(invalid(format!("'{name}' is not a namespace name")));
    }
    let home = std::fs::File::open("/proc/thread-self/ns/net")?;
    let target = std::fs::File::open(format!("/run/netns/{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name}: {e}")))?;
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&target),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )?;
    Ok(InNetns { home })
}

impl Drop for InNetns {
    fn drop(&mut self) {
        let _ = rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&self.home),
            Some(rustix::thread::LinkNameSpaceType::Network),
        );
    }
}

/// The name under /run/netns of the network namespace this thread is in,
/// when it is a named one other than the host's (that of pid 1): what a
/// knob set from inside it must be journalled with, so that a restore
/// made from any namespace acts in this one.
pub fn own_netns_name() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let own = id(std::path::Path::new("/proc/thread-self/ns/net"))?;
    if id(std::path::Path::new("/proc/1/ns/net")) == Some(own) {
        return None;
    }
    std::fs::read_dir("/run/netns")
        .ok()?
        .filter_map(Result::ok)
        .find(|e| id(&e.path()) == Some(own))
        .and_then(|e| e.file_name().into_string().ok())
}

/// The start time of a process in clock ticks since boot (field 22 of
/// /proc/PID/stat), which tells a live process from a later one that got
/// the same pid.
pub fn process_start(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ethtool_features() {
        let text = "Features for lo:\nrx-checksumming: on [fixed]\n\
                    generic-receive-offload: on\ntcp-segmentation-offload: off\n\
                    \ttx-tcp-segmentation: off [fixed]\n";
        assert_eq!(
            parse_feature(text, "generic-receive-offload"),
            Some(Feature {
                on: true,
                fixed: false
            })
        );
        assert_eq!(
            parse_feature(text, "rx-checksumming"),
            Some(Feature {
                on: true,
                fixed: true
            })
        );
        assert!(!parse_feature(text, "tcp-segmentation-offload").unwrap().on);
        assert_eq!(parse_feature(text, "large-receive-offload"), None);
    }

    #[test]
    fn parses_root_qdiscs() {
        let q = parse_root_qdisc("qdisc noqueue 0: root refcnt 2 \n").unwrap();
        assert_eq!((q.kind.as_str(), q.is_default()), ("noqueue", true));
        let q = parse_root_qdisc(
            "qdisc fq 8001: root refcnt 2 limit 10000p flow_limit 100p maxrate 1Gbit\n",
        )
        .unwrap();
        assert_eq!(q.kind, "fq");
        assert!(!q.is_default());
        assert!(q.params.starts_with("limit 10000p"));
        let q =
            parse_root_qdisc("qdisc netem 8002: root refcnt 2 limit 1000 delay 10ms\n").unwrap();
        assert_eq!(q.params, "limit 1000 delay 10ms");
        assert_eq!(parse_root_qdisc(""), None);
    }

    #[test]
    fn parses_masks_links_and_names() {
        assert_eq!(parse_mask("00000000,0000000f"), Some(15));
        assert_eq!(parse_mask("0"), Some(0));
        assert_eq!(parse_mask("3"), Some(3));
        assert_eq!(parse_mask("xyz"), None);
        let link = "1: lo: <LOOPBACK,UP> mtu 65536 qdisc noqueue\n    link/loopback 00:00\n    \
                    promiscuity 0 gso_max_size 65536 gso_max_segs 65535 gro_max_size 65536\n";
        assert_eq!(parse_link_value(link, "gro_max_size"), Some(65536));
        assert_eq!(parse_link_value(link, "mtu"), Some(65536));
        assert_eq!(parse_link_value(link, "tso_max_size"), None);
        assert!(!is_veth(link));
        assert!(is_veth(
            "5: v@if4: <UP> mtu 1500\n    link/ether x\n    veth addrgenmode eui64\n"
        ));
        assert_eq!(
            sysctl_path("net.core.rmem_max").unwrap(),
            "/proc/sys/net/core/rmem_max"
        );
        assert!(sysctl_path("net..x").is_err());
        assert!(sysctl_path("../etc").is_err());
        assert!(check_iface("lo").is_ok());
        assert!(check_iface("../x").is_err());
        assert!(check_iface("a-very-long-interface").is_err());
    }

    #[test]
    fn own_process_has_a_start_time() {
        assert!(process_start(std::process::id()).is_some());
        assert_eq!(process_start(u32::MAX), None);
    }
}
