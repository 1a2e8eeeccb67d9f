//! Captures the host a run is made on as an [`Environment`]: the kernel, the
//! CPUs, memory, every network sysctl, and the settings of the interfaces the
//! run's traffic crosses, read from /proc and /sys (and `ethtool`/`tc` when
//! they are installed).
//!
//! Every fact is best effort: one that cannot be read is absent, and nothing
//! here fails or panics. Facts are chosen to be stable on an idle host, so
//! that the diff of two captures shows only what was really changed; the few
//! files that change by themselves, or hold secrets, are left out (see
//! [`skip_sysctl`]).

use plumb_samples::Environment;
use std::collections::BTreeSet;
use std::fs;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The most facts one capture records; network sysctls, captured last, are
/// the ones cut off on a host that would give more.
pub const MAX_FACTS: usize = 5000;

/// Per-interface files of /sys/class/net/NAME, by fact name.
const IF_FILES: [(&str, &str); 12] = [
    ("mtu", "mtu"),
    ("txqueuelen", "tx_queue_len"),
    ("operstate", "operstate"),
    ("speed", "speed"),
    ("gso_max_size", "gso_max_size"),
    ("gso_max_segs", "gso_max_segs"),
    ("gro_max_size", "gro_max_size"),
    ("tso_max_size", "tso_max_size"),
    ("tso_max_segs", "tso_max_segs"),
    ("gso_ipv4_max_size", "gso_ipv4_max_size"),
    ("gro_ipv4_max_size", "gro_ipv4_max_size"),
    ("numa_node", "device/numa_node"),
];

/// The environment of this host, with the settings of `interfaces` (names
/// that are not plain interface names, or not on this host, are ignored).
pub fn capture(interfaces: &[&str]) -> Environment {
    capture_capped(interfaces, MAX_FACTS)
}

/// The environment of this end of a test: this host (or namespace) with
/// the interfaces that reach the other end's address `peer`.
pub fn capture_toward(peer: IpAddr) -> Environment {
    let names = interfaces_for(peer);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    capture(&names)
}

fn capture_capped(interfaces: &[&str], cap: usize) -> Environment {
    let interfaces: BTreeSet<&str> = interfaces
        .iter()
        .copied()
        .filter(|n| valid_ifname(n))
        .collect();
    let mut f = Facts {
        env: Environment::default(),
        cap,
    };
    plumb_facts(&mut f);
    kernel_facts(&mut f);
    cpu_facts(&mut f);
    mem_facts(&mut f);
    let ethtool = find_on_path("ethtool");
    let tc = find_on_path("tc");
    for name in &interfaces {
        interface_facts(&mut f, name, ethtool.as_deref(), tc.as_deref());
    }
    walk_sysctl(
        &mut f,
        Path::new("/proc/sys/net"),
        &mut vec!["net".to_string()],
        &interfaces,
    );
    f.env
}

/// The interfaces that carry traffic to `addr` from this host: "lo" for a
/// loopback (or unspecified) address; else those that hold the address, per
/// `ip -o addr`; else the one `ip route get` routes it through. Empty when
/// `ip` is not installed or says nothing.
pub fn interfaces_for(addr: IpAddr) -> Vec<String> {
    let addr = addr.to_canonical();
    if addr.is_loopback() || addr.is_unspecified() {
        return vec!["lo".to_string()];
    }
    let Some(ip) = find_on_path("ip") else {
        return Vec::new();
    };
    let owners = run_quietly(&ip, &["-o", "addr"])
        .map(|out| parse_addr_owners(&out, addr))
        .unwrap_or_default();
    if !owners.is_empty() {
        return owners;
    }
    run_quietly(&ip, &["route", "get", &addr.to_string()])
        .and_then(|out| parse_route_dev(&out))
        .into_iter()
        .collect()
}

/// The facts so far, refusing more once `cap` are held.
struct Facts {
    env: Environment,
    cap: usize,
}

impl Facts {
    fn full(&self) -> bool {
        self.env.facts.len() >= self.cap
    }

    fn put(&mut self, key: impl Into<String>, value: impl Into<String>) {
        if !self.full() {
            self.env.set(key, value);
        }
    }

    /// The facts under `prefix` could not be read, for `reason`.
    fn unknown(&mut self, prefix: &str, reason: &str) {
        if !self.full() {
            self.env.set_unknown(prefix, reason);
        }
    }

    /// The file's text, whitespace collapsed, when it can be read.
    fn put_file(&mut self, key: impl Into<String>, path: impl AsRef<Path>) {
        if let Some(v) = read(path.as_ref()) {
            self.put(key, v);
        }
    }
}

/// A file's text with each run of whitespace made one space, trimmed.
fn read(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    Some(collapse(&String::from_utf8_lossy(&bytes)))
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A name that can only mean one entry of /sys/class/net.
fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name.contains(|c: char| c == '/' || c == '\0' || c.is_whitespace())
}

/// Entries of a directory, sorted by name (names that are not UTF-8 left out).
fn sorted_entries(dir: &Path) -> Vec<(String, fs::DirEntry)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(String, fs::DirEntry)> = rd
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e)))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Names this binary's build in every environment captured from now on,
/// and in every end's figures (see [`plumb_sys::set_build`]).
pub fn set_build(build: &'static str) {
    plumb_sys::set_build(build);
}

fn plumb_facts(f: &mut Facts) {
    f.put("plumb.version", env!("CARGO_PKG_VERSION"));
    let build = plumb_sys::build().unwrap_or(if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    });
    f.put("plumb.build", build);
    f.put(
        "plumb.target",
        format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
    );
}

fn kernel_facts(f: &mut Facts) {
    f.put_file("kernel.release", "/proc/sys/kernel/osrelease");
    f.put_file("kernel.version", "/proc/sys/kernel/version");
    f.put_file("kernel.cmdline", "/proc/cmdline");
    f.put_file("kernel.hostname", "/proc/sys/kernel/hostname");
    // What decides a kernel comparison beside the release: the mitigations
    // in force, the clock, transparent huge pages, the configuration the
    // kernel was built with, and the modules loaded.
    for (name, e) in sorted_entries(Path::new("/sys/devices/system/cpu/vulnerabilities")) {
        f.put_file(format!("cpu.vulnerability.{name}"), e.path());
    }
    f.put_file(
        "kernel.clocksource",
        "/sys/devices/system/clocksource/clocksource0/current_clocksource",
    );
    for knob in ["enabled", "defrag"] {
        if let Some(v) = read(&Path::new("/sys/kernel/mm/transparent_hugepage").join(knob)) {
            f.put(format!("mm.thp.{knob}"), selected(&v));
        }
    }
    let release = read(Path::new("/proc/sys/kernel/osrelease")).unwrap_or_default();
    let boot = PathBuf::from(format!("/boot/config-{release}"));
    match [boot.as_path(), Path::new("/proc/config.gz")]
        .into_iter()
        .find_map(|p| Some((p, fs::read(p).ok()?)))
    {
        Some((path, bytes)) => {
            use sha2::Digest;
            let hash = hex(&sha2::Sha256::digest(&bytes)[..8]);
            f.put(
                "kernel.config_sha256",
                format!("{hash} ({})", path.display()),
            );
        }
        None => f.unknown(
            "kernel.config_sha256",
            &format!("neither {} nor /proc/config.gz can be read", boot.display()),
        ),
    }
    match fs::read_to_string("/proc/modules") {
        Ok(text) => {
            for name in loaded_modules(&text) {
                f.put(format!("kernel.module.{name}"), "loaded");
            }
        }
        // No /proc/modules: a kernel built without module support.
        Err(_) => f.put("kernel.modules", "not supported"),
    }
}

/// The choice a sysfs knob marks in brackets ("always [madvise] never" is
/// madvise), or the text as it is.
fn selected(v: &str) -> String {
    v.split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .map_or_else(|| v.to_string(), |(choice, _)| choice.to_string())
}

/// The module names of /proc/modules, sorted.
fn loaded_modules(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    v.sort_unstable();
    v
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn cpu_facts(f: &mut Facts) {
    if let Some(model) = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| cpuinfo_model(&t))
    {
        f.put("cpu.model", model);
    }
    if let Some(online) = read(Path::new("/sys/devices/system/cpu/online")) {
        if let Ok(list) = online.parse::<plumb_spec::CpuList>() {
            f.put("cpu.count", list.len().to_string());
        }
        f.put("cpu.online", online);
    }
    let control = read(Path::new("/sys/devices/system/cpu/smt/control"));
    let active = read(Path::new("/sys/devices/system/cpu/smt/active"));
    match control.as_deref() {
        Some("notsupported" | "notimplemented") => f.put("cpu.smt", "unsupported"),
        _ => {
            if let Some(active) = active {
                f.put("cpu.smt", active);
            }
        }
    }
    let node_dir = Path::new("/sys/devices/system/node");
    if node_dir.is_dir() {
        let nodes = sorted_entries(node_dir)
            .iter()
            .filter(|(n, _)| numbered(n, "node").is_some())
            .count();
        f.put("cpu.numa_nodes", nodes.to_string());
    }
    let mut governors = BTreeSet::new();
    let mut max_khz: Option<u64> = None;
    for (name, e) in sorted_entries(Path::new("/sys/devices/system/cpu")) {
        if numbered(&name, "cpu").is_none() {
            continue;
        }
        let freq = e.path().join("cpufreq");
        if let Some(g) = read(&freq.join("scaling_governor")) {
            if !g.is_empty() {
                governors.insert(g);
            }
        }
        if let Some(khz) = read(&freq.join("cpuinfo_max_freq")).and_then(|s| s.parse().ok()) {
            max_khz = max_khz.max(Some(khz));
        }
    }
    if !governors.is_empty() {
        f.put(
            "cpu.governor",
            governors.into_iter().collect::<Vec<_>>().join(","),
        );
    }
    if let Some(khz) = max_khz {
        f.put("cpu.max_mhz", (khz / 1000).to_string());
    }
}

/// The number in "cpu12" (prefix "cpu"), if the rest is all digits.
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// The first "model name" of /proc/cpuinfo.
fn cpuinfo_model(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| collapse(v))
    })
}

/// The first number of a /proc/meminfo field ("MemTotal:  16384 kB" → 16384).
fn meminfo_field(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k != field {
            return None;
        }
        v.split_whitespace().next()?.parse().ok()
    })
}

fn mem_facts(f: &mut Facts) {
    let Ok(text) = fs::read_to_string("/proc/meminfo") else {
        return;
    };
    if let Some(kib) = meminfo_field(&text, "MemTotal") {
        f.put("mem.total_kib", kib.to_string());
    }
    if let Some(n) = meminfo_field(&text, "HugePages_Total") {
        f.put("mem.hugepages_total", n.to_string());
    }
}

fn interface_facts(f: &mut Facts, name: &str, ethtool: Option<&Path>, tc: Option<&Path>) {
    let base = Path::new("/sys/class/net").join(name);
    if !base.is_dir() {
        return;
    }
    let key = |k: &str| format!("if.{name}.{k}");
    for (fact, file) in IF_FILES {
        f.put_file(key(fact), base.join(file));
    }
    // This kernel may show the segmentation limits only over rtnetlink.
    if let Ok(limits) = plumb_sys::host::link_limits(name) {
        for (fact, value) in limits {
            if !f.env.facts.contains_key(&key(fact)) {
                f.put(key(fact), value.to_string());
            }
        }
    }
    let device = base.join("device");
    if let Some(driver) = link_basename(&device.join("driver")) {
        f.put(key("driver"), driver);
    }
    for (q, e) in sorted_entries(&base.join("queues")) {
        let files: &[&str] = if q.starts_with("rx-") {
            &["rps_cpus", "rps_flow_cnt"]
        } else if q.starts_with("tx-") {
            &["xps_cpus"]
        } else {
            &[]
        };
        for file in files {
            f.put_file(key(&format!("{q}.{file}")), e.path().join(file));
        }
    }
    // A virtio NIC's interrupts belong to the PCI function above it.
    let mut msi = device.join("msi_irqs");
    if !msi.is_dir() && link_basename(&device.join("subsystem")).as_deref() == Some("virtio") {
        msi = device.join("../msi_irqs");
    }
    let mut irqs: Vec<u32> = sorted_entries(&msi)
        .iter()
        .filter_map(|(n, _)| n.parse().ok())
        .collect();
    irqs.sort_unstable();
    for irq in irqs {
        f.put_file(
            key(&format!("irq.{irq}.affinity")),
            format!("/proc/irq/{irq}/smp_affinity_list"),
        );
    }
    match ethtool.map(|e| run_quietly(e, &["-k", name])) {
        Some(Some(out)) => {
            for (feature, state) in parse_ethtool_features(&out) {
                f.put(key(&format!("offload.{feature}")), state);
            }
        }
        Some(None) => f.unknown(&key("offload"), "ethtool -k failed"),
        None => f.unknown(&key("offload"), "ethtool not installed"),
    }
    match tc.map(|t| run_quietly(t, &["qdisc", "show", "dev", name])) {
        Some(Some(out)) => {
            let qdisc = parse_qdiscs(&out);
            if !qdisc.is_empty() {
                f.put(key("qdisc"), qdisc);
            }
        }
        Some(None) => f.unknown(&key("qdisc"), "tc qdisc show failed"),
        None => f.unknown(&key("qdisc"), "tc not installed"),
    }
}

/// The last part of where a symlink points.
fn link_basename(link: &Path) -> Option<String> {
    let target = fs::read_link(link).ok()?;
    Some(target.file_name()?.to_str()?.to_string())
}

/// "feature: on [fixed]" lines of `ethtool -k` as (feature, "on"/"off").
fn parse_ethtool_features(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            // The first word: drops "[fixed]", "[requested on]".
            let v = v.split_whitespace().next()?;
            if k.is_empty() || k.contains(char::is_whitespace) {
                return None; // "Features for eth0:"
            }
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// `tc qdisc show` lines joined by "; ", without the changing "refcnt N".
fn parse_qdiscs(out: &str) -> String {
    out.lines()
        .filter_map(|l| {
            let mut words = Vec::new();
            let mut it = l.split_whitespace();
            while let Some(w) = it.next() {
                if w == "refcnt" {
                    it.next();
                } else {
                    words.push(w);
                }
            }
            (!words.is_empty()).then(|| words.join(" "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Network sysctls left out of a capture, by path under /proc/sys
/// (`rel[0]` is "net"): counters that change by themselves, and secrets.
fn skip_sysctl(rel: &[String]) -> bool {
    let last = rel.last().map(String::as_str).unwrap_or("");
    let path = rel.join("/");
    // nf_conntrack_count and friends: counters, not settings.
    (rel.get(1).map(String::as_str) == Some("netfilter") && last.ends_with("_count"))
        // Random per boot (filled when the first multi-queue driver loads).
        || path == "net/core/netdev_rss_key"
        // Secrets (root-only, random per namespace or set by the admin).
        || path == "net/ipv4/tcp_fastopen_key"
        || last == "stable_secret"
}

/// Under net/ipv{4,6}/{conf,neigh}, only "all", "default" and the
/// interfaces of the run: one set per interface would swamp the map on a
/// host with many.
fn skip_sysctl_dir(rel: &[String], interfaces: &BTreeSet<&str>) -> bool {
    let [_, family, table, name] = rel else {
        return false;
    };
    matches!(family.as_str(), "ipv4" | "ipv6")
        && matches!(table.as_str(), "conf" | "neigh")
        && name != "all"
        && name != "default"
        && !interfaces.contains(name.as_str())
}

/// Every readable file under `dir` as "sysctl." + its path, dotted.
fn walk_sysctl(f: &mut Facts, dir: &Path, rel: &mut Vec<String>, interfaces: &BTreeSet<&str>) {
    for (name, e) in sorted_entries(dir) {
        if f.full() {
            return;
        }
        let Ok(kind) = e.file_type() else { continue };
        rel.push(name);
        if kind.is_dir() {
            if !skip_sysctl_dir(rel, interfaces) {
                walk_sysctl(f, &e.path(), rel, interfaces);
            }
        } else if kind.is_file() && !skip_sysctl(rel) {
            // Write-only files (route/flush) have no read bit.
            let readable = e
                .metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o444 != 0);
            if readable {
                f.put_file(format!("sysctl.{}", rel.join(".")), e.path());
            }
        }
        rel.pop();
    }
}

/// The executable `name` in a directory of $PATH.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// A command's stdout when it succeeds; no stdin, stderr dropped.
fn run_quietly(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The interfaces that hold `addr` in `ip -o addr` output, e.g.
/// "4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\ ...".
fn parse_addr_owners(out: &str, addr: IpAddr) -> Vec<String> {
    let mut owners: Vec<String> = Vec::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [_, name, family, cidr, ..] = w[..] else {
            continue;
        };
        if family != "inet" && family != "inet6" {
            continue;
        }
        let ip = cidr
            .split('/')
            .next()
            .and_then(|a| a.parse::<IpAddr>().ok());
        let name = name.split('@').next().unwrap_or(name).trim_end_matches(':');
        if ip == Some(addr) && !owners.iter().any(|o| o == name) {
            owners.push(name.to_string());
        }
    }
    owners
}

/// The "dev NAME" of `ip route get` output.
fn parse_route_dev(out: &str) -> Option<String> {
    let mut w = out.split_whitespace();
    w.find(|t| *t == "dev")?;
    w.next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn file(path: &str) -> String {
        collapse(&fs::read_to_string(path).unwrap())
    }

    #[test]
    fn two_captures_of_an_idle_host_agree() {
        let a = capture(&["lo"]);
        let b = capture(&["lo"]);
        println!("captured {} facts, hash {}", a.facts.len(), a.hash());
        assert!(a.facts.len() <= MAX_FACTS);
        let d = a.diff(&b);
        assert!(d.is_empty(), "facts that changed by themselves: {d:?}");
        assert_eq!(a.hash(), b.hash());
    }

    #[test]
    fn kernel_and_sysctl_facts_match_their_files() {
        let env = capture(&[]);
        assert_eq!(
            env.get("kernel.release"),
            Some(file("/proc/sys/kernel/osrelease").as_str())
        );
        assert_eq!(
            env.get("sysctl.net.ipv4.tcp_congestion_control"),
            Some(file("/proc/sys/net/ipv4/tcp_congestion_control").as_str())
        );
        // Collapsed whitespace: "4096\t131072\t6291456" → "4096 131072 6291456".
        let rmem = env.get("sysctl.net.ipv4.tcp_rmem").unwrap();
        assert_eq!(rmem.split(' ').count(), 3, "{rmem}");
        assert_eq!(env.get("plumb.version"), Some(env!("CARGO_PKG_VERSION")));
        assert!(env.get("cpu.count").unwrap().parse::<u32>().unwrap() >= 1);
        assert!(env.get("mem.total_kib").is_some());
        // Only all/default (and named interfaces) under conf and neigh.
        assert!(env.get("sysctl.net.ipv4.conf.all.forwarding").is_some());
        assert!(!env
            .facts
            .keys()
            .any(|k| k.starts_with("sysctl.net.ipv4.conf.lo.")));
        assert!(!env.facts.keys().any(|k| k.starts_with("if.")));
        // Volatile, secret and write-only files are left out.
        for k in [
            "sysctl.net.netfilter.nf_conntrack_count",
            "sysctl.net.core.netdev_rss_key",
            "sysctl.net.ipv4.tcp_fastopen_key",
            "sysctl.net.ipv4.route.flush",
        ] {
            assert_eq!(env.get(k), None, "{k}");
        }
    }

    #[test]
    fn kernel_comparisons_are_decided_by_facts_read_from_their_files() {
        let env = capture(&[]);
        for (name, e) in sorted_entries(Path::new("/sys/devices/system/cpu/vulnerabilities")) {
            let want = read(&e.path()).unwrap();
            assert_eq!(
                env.get(&format!("cpu.vulnerability.{name}")),
                Some(want.as_str())
            );
        }
        let clock = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
        if Path::new(clock).exists() {
            assert_eq!(env.get("kernel.clocksource"), Some(file(clock).as_str()));
        }
        if let Some(thp) = read(Path::new("/sys/kernel/mm/transparent_hugepage/enabled")) {
            let chosen = env.get("mm.thp.enabled").unwrap();
            assert!(thp.contains(&format!("[{chosen}]")), "{thp} vs {chosen}");
        }
        // Every module /proc/modules lists, by name; a kernel built without
        // modules has no such file, and says so.
        match fs::read_to_string("/proc/modules") {
            Ok(modules) => {
                for m in modules.lines().filter_map(|l| l.split_whitespace().next()) {
                    assert_eq!(
                        env.get(&format!("kernel.module.{m}")),
                        Some("loaded"),
                        "{m}"
                    );
                }
            }
            Err(_) => assert_eq!(env.get("kernel.modules"), Some("not supported")),
        }
        assert!(
            env.get("kernel.config_sha256").is_some()
                || env.unknown_reason("kernel.config_sha256").is_some(),
            "the kernel's configuration is hashed or said to be unreadable"
        );
        assert_eq!(selected("always [madvise] never"), "madvise");
        assert_eq!(selected("tsc"), "tsc");
        assert_eq!(
            loaded_modules("veth 40960 0 - Live 0x0\nbridge 1 0 - Live 0x0\n"),
            vec!["bridge", "veth"]
        );
    }

    #[test]
    fn loopback_interface_facts() {
        let env = capture(&["lo", "no-such-if0", "../etc"]);
        assert_eq!(
            env.get("if.lo.mtu"),
            Some(file("/sys/class/net/lo/mtu").as_str())
        );
        assert!(env.get("if.lo.gso_max_size").is_some());
        assert!(env.get("sysctl.net.ipv4.conf.lo.rp_filter").is_some());
        assert!(!env.facts.keys().any(|k| k.starts_with("if.no-such-if0.")));
        assert!(!env.facts.keys().any(|k| k.starts_with("if..")));
    }

    #[test]
    fn diff_names_exactly_the_changed_sysctl() {
        let a = capture(&["lo"]);
        let mut b = a.clone();
        let key = "sysctl.net.ipv4.tcp_congestion_control";
        let old = a.get(key).unwrap().to_string();
        b.set(key, format!("{old}-changed"));
        let d = a.diff(&b);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].key, key);
        assert_eq!(d[0].a.as_deref(), Some(old.as_str()));
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn the_cap_bounds_the_facts_and_keeps_the_first_groups() {
        let env = capture_capped(&["lo"], 20);
        assert_eq!(env.facts.len(), 20);
        assert!(env.get("plumb.version").is_some());
        assert!(env.get("kernel.release").is_some());
    }

    #[test]
    fn parsers_of_captured_text() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R)  Xeon(R) CPU @ 2.20GHz\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            cpuinfo_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        let meminfo = "MemTotal:       16318412 kB\nMemFree:  1 kB\nHugePages_Total:       4\n";
        assert_eq!(meminfo_field(meminfo, "MemTotal"), Some(16318412));
        assert_eq!(meminfo_field(meminfo, "HugePages_Total"), Some(4));
        assert_eq!(meminfo_field(meminfo, "Mem"), None);

        let ethtool = "Features for eth0:\nrx-checksumming: on\ntx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\ngeneric-segmentation-offload: on\nrx-gro-hw: off [requested on]\n";
        let features = parse_ethtool_features(ethtool);
        let get = |k: &str| {
            features
                .iter()
                .find(|(f, _)| f == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(features.len(), 5);
        assert_eq!(get("tx-checksum-ipv4"), Some("off"));
        assert_eq!(get("generic-segmentation-offload"), Some("on"));
        assert_eq!(get("rx-gro-hw"), Some("off"));

        let tc = "qdisc mq 0: root \nqdisc fq_codel 0: parent :1 limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 \nqdisc noqueue 0: root refcnt 2 \n";
        assert_eq!(
            parse_qdiscs(tc),
            "qdisc mq 0: root; qdisc fq_codel 0: parent :1 limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64; qdisc noqueue 0: root"
        );

        let ip = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n\
                  4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever\n\
                  4: eth0    inet6 fd00::2/64 scope global nodad \\       valid_lft forever\n\
                  5: veth0@if6    inet 10.9.0.1 peer 10.9.0.2/32 scope global veth0\\ valid_lft forever\n";
        let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
        assert_eq!(parse_addr_owners(ip, v4), ["eth0"]);
        let v6: IpAddr = "fd00::2".parse().unwrap();
        assert_eq!(parse_addr_owners(ip, v6), ["eth0"]);
        let peer = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1));
        assert_eq!(parse_addr_owners(ip, peer), ["veth0"]);
        assert!(parse_addr_owners(ip, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9))).is_empty());
        assert_eq!(
            parse_route_dev("8.8.8.8 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \n    cache \n")
                .as_deref(),
            Some("eth0")
        );
        assert_eq!(parse_route_dev("unreachable"), None);
    }

    #[test]
    fn loopback_addresses_map_to_lo() {
        assert_eq!(interfaces_for(IpAddr::V4(Ipv4Addr::LOCALHOST)), ["lo"]);
        assert_eq!(interfaces_for(IpAddr::V6(Ipv6Addr::LOCALHOST)), ["lo"]);
        let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(interfaces_for(mapped), ["lo"]);
    }
}
