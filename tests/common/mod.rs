//! Helpers for the end-to-end tests: run the real binary, read its JSON,
//! look at processes in /proc.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary, with its result database in a file of this test process so
/// no test writes to the user's.
pub fn plumb() -> Command {
    as_test(Command::new(env!("CARGO_BIN_EXE_plumb")))
}

/// `c`, a command that runs plumb, with the test's database and without
/// the register of measuring runs.
fn as_test(mut c: Command) -> Command {
    c.env(
        "PLUMB_DB",
        std::env::temp_dir().join(format!("plumb-test-{}.db", std::process::id())),
    );
    // Tests run plumb beside itself on purpose; the test of the register of
    // measuring runs points it at a directory of its own.
    c.env("PLUMB_ACTIVITY_DIR", "off");
    c
}

/// Runs plumb to completion. `plumb run` gets `--iterations 1` unless the
/// test asks for a count (most tests look at one iteration's behaviour), and
/// `--no-store` unless it names a `--db`.
pub fn run(args: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    if args.first() == Some(&"run") && !args.contains(&"--iterations") && args.len() >= 2 {
        all.splice(2..2, ["--iterations", "1"]);
    }
    if args.first() == Some(&"run")
        && !args.contains(&"--db")
        && !args.contains(&"--no-store")
        && args.len() >= 2
    {
        all.splice(2..2, ["--no-store"]);
    }
    plumb().args(&all).output().expect("plumb runs")
}

/// One unstored 1 s iteration without a warm-up: enough to see a run go
/// through its set-up and clean-up.
pub const ONE_SHORT: [&str; 7] = [
    "--duration",
    "1s",
    "--warmup",
    "0",
    "--iterations",
    "1",
    "--no-store",
];

/// A 1 s window after 200 ms of warm-up: long enough for a kernel's
/// counters, read by the test, to show a stream's mode.
pub const ONE_SECOND: [&str; 4] = ["--duration", "1s", "--warmup", "200ms"];

/// Fails the test, showing `text`, unless it holds every one of `needles`.
#[track_caller]
pub fn assert_mentions(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
}

/// Asserts that the command succeeded and that what it wrote to stdout
/// mentions each of `needles`; that text.
#[track_caller]
pub fn assert_says(out: &Output, needles: &[&str]) -> String {
    assert_ok(out);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_mentions(&text, needles);
    text
}

/// Asserts that the command exited with `code` and that what it wrote to
/// stderr mentions each of `needles`; that text.
#[track_caller]
pub fn assert_exit(out: &Output, code: i32, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_mentions(&err, needles);
    err
}

/// `plumb run ARGS --iterations 1 --db DB`: one iteration stored in `db`
/// (under the label ARGS give, if any), which must succeed.
pub fn store_one_iteration(db: &TempDb, args: &[&str]) {
    let out = plumb()
        .arg("run")
        .args(args)
        .args(["--iterations", "1", "--db", db.path()])
        .output()
        .unwrap();
    assert_ok(&out);
}

/// One stored 300 ms iteration of `workload` under `label`.
pub fn store_short(db: &TempDb, workload: &str, label: &str) {
    let short = ["--duration", "300ms", "--warmup", "100ms"];
    store_one_iteration(db, &[&[workload][..], &short, &["--label", label]].concat());
}

/// A one-iteration `plumb run stream ARGS`, not stored, going on in the
/// background; its stdout and stderr are piped.
pub fn stream_in_background(args: &[&str]) -> std::process::Child {
    plumb()
        .args(["run", "stream", "--no-store", "--iterations", "1"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs plumb (through [`run`]), which must refuse: exit 2 with a single
/// line on stderr that holds `needle`.
#[track_caller]
pub fn assert_refused_in_one_line(args: &[&str], needle: &str) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

/// `plumb compare A B --format FORMAT` over the runs in `db`.
pub fn compare(db: &TempDb, a: &str, b: &str, format: &str) -> Output {
    run(&["compare", a, b, "--db", db.path(), "--format", format])
}

/// A database file unique to this test, removed with its WAL files on drop.
#[path = "../../crates/store/tests/shared/tempdb.rs"]
mod tempdb;
pub use tempdb::TempDb;

/// An experiment file of this test process in the temporary directory,
/// removed on drop.
pub struct ExperimentFile(pub std::path::PathBuf);

impl ExperimentFile {
    /// `plumb-NAME-PID.toml`, holding `toml`.
    pub fn new(name: &str, toml: &str) -> ExperimentFile {
        let p = std::env::temp_dir().join(format!("plumb-{name}-{}.toml", std::process::id()));
        std::fs::write(&p, toml).unwrap();
        ExperimentFile(p)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for ExperimentFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The head of an experiment file of quick rr points: its name, `top`
/// (iterations, order) and a base of 300 ms windows after 100 ms warm-ups;
/// the matrix and the variants follow.
pub fn quick_rr(name: &str, top: &str) -> String {
    format!(
        "name = \"{name}\"\n{top}\n[base]\nworkload = \"rr\"\nduration = \"300ms\"\nwarmup = \"100ms\"\n"
    )
}

/// Two variants of an experiment file, the second with Nagle off.
pub const PLAIN_AND_NODELAY: &str = "[[variant]]
name = \"plain\"
[[variant]]
name = \"nodelay\"
set = { nodelay = true }
";

/// `plumb run stream ARGS --json`, which must succeed; returns the record.
pub fn stream_json(args: &[&str]) -> Value {
    record_of(&[&["run", "stream", "--json"], args].concat())
}

/// `plumb ARGS` (through [`run`]), which must succeed; returns its JSON.
pub fn record_of(all: &[&str]) -> Value {
    record_from(all, run(all))
}

/// The record in `out`, what `all` printed; fails the test with plumb's
/// stderr unless it succeeded.
pub fn record_from(all: &[&str], out: Output) -> Value {
    assert!(
        out.status.success(),
        "plumb {all:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// Fails the test with plumb's stderr unless the command succeeded.
#[track_caller]
pub fn assert_ok(out: &Output) {
    assert_ok_for(out, "plumb");
}

/// Fails the test, naming `what` ran, with its stderr unless it succeeded.
#[track_caller]
pub fn assert_ok_for(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The elements of a JSON array, which `v` must be.
#[track_caller]
pub fn items(v: &Value) -> std::slice::Iter<'_, Value> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
}

/// The elements of a JSON array the record leaves out where it is empty:
/// none where `v` is absent.
#[track_caller]
pub fn kept_items(v: &Value) -> std::slice::Iter<'_, Value> {
    match v {
        Value::Null => [].iter(),
        v => items(v),
    }
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

/// PIDs of the processes whose parent is `ppid`.
pub fn children(ppid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(ppid) && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// (thread name, Cpus_allowed_list) of every thread of `pid`.
pub fn thread_affinity(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in dir.flatten() {
        let p = t.path();
        let name = std::fs::read_to_string(p.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("")
            .trim()
            .to_string();
        out.push((name, allowed));
    }
    out
}

pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// `plumb run WORKLOAD --json --warmup 200ms ARGS`, which must succeed;
/// returns the record.
pub fn workload_json(workload: &str, args: &[&str]) -> Value {
    record_of(&[&["run", workload, "--json", "--warmup", "200ms"], args].concat())
}

/// The kernel counters are host-wide, and a rate judged against another is
/// only steady with the CPUs to itself: tests of one file that read the
/// counters, judge a rate, or make traffic beside those that do, take turns.
pub fn measuring_alone() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// `skip`: a test whose precondition is missing says so and returns (fails
/// under CI); counted by `tests/setup.sh`.
#[path = "../../crates/store/tests/shared/precondition.rs"]
mod precondition;
pub use precondition::skip;

/// True when the test runs as root; otherwise records the skip (or fails
/// under CI) and the caller returns.
pub fn require_root(for_what: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(&format!("needs root to {for_what}"));
    false
}

/// True when `tool` is an executable file in a directory of PATH, which is
/// where `Command::new(tool)` looks.
pub fn have_tool(tool: &str) -> bool {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| std::path::Path::new(d).join(tool))
        .any(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// True when `tool` is on PATH; otherwise records the skip naming the
/// Debian package that has it (or fails under CI).
pub fn require_tool(tool: &str, package: &str) -> bool {
    if have_tool(tool) {
        return true;
    }
    skip(&format!(
        "`{tool}` is not on PATH (apt-get install {package}; tests/setup.sh installs it)"
    ));
    false
}

/// A network namespace of this test process with its loopback up, deleted
/// (with everything in it) on drop. None where the test cannot have one,
/// after `skip` said why (under CI that fails the test instead).
pub struct Netns(pub String);

impl Netns {
    pub fn new(tag: &str) -> Option<Netns> {
        if !require_root("create a network namespace") || !require_tool("ip", "iproute2") {
            return None;
        }
        let name = format!("plumb-{tag}-{}", std::process::id());
        let out = Command::new("ip").args(["netns", "add", &name]).output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                skip(&format!(
                    "cannot create a network namespace: ip netns add: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                return None;
            }
            Err(e) => {
                skip(&format!("cannot create a network namespace: ip: {e}"));
                return None;
            }
        }
        let ns = Netns(name);
        assert!(ok(
            Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"])
        ));
        Some(ns)
    }

    /// A command that runs `program` inside the namespace.
    pub fn exec(&self, program: &str) -> Command {
        in_ns(&self.0, program)
    }

    /// [`plumb`] inside the namespace.
    pub fn plumb(&self) -> Command {
        as_test(self.exec(env!("CARGO_BIN_EXE_plumb")))
    }

    pub fn sysctl(&self, key: &str, value: &str) {
        assert!(
            ok(self
                .exec("sysctl")
                .args(["-q", "-w", &format!("{key}={value}")])),
            "sysctl {key}={value} in {}",
            self.0
        );
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `program` run in the network namespace named `ns`.
pub fn in_ns(ns: &str, program: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, program]);
    c
}

/// Drops every `nth` packet of `proto` (tcp, udp) that arrives in the
/// namespace named `ns` before any socket sees it, as if lost on the wire:
/// false, after `skip` said why, where no iptables here takes the rule.
pub fn drop_every(ns: &str, proto: &str, nth: u32) -> bool {
    let Some(iptables) = iptables() else {
        skip("no iptables to drop packets with (apt-get install iptables)");
        return false;
    };
    let nth = nth.to_string();
    let rule = [
        "INPUT",
        "-p",
        proto,
        "-m",
        "statistic",
        "--mode",
        "nth",
        "--every",
        &nth,
        "--packet",
        "0",
        "-j",
        "DROP",
    ];
    if !ok(in_ns(ns, iptables).arg("-A").args(rule)) {
        skip(&format!(
            "this kernel's packet filter does not take the rule ({iptables} -A {})",
            rule.join(" ")
        ));
        return false;
    }
    true
}

/// The iptables here that works, legacy first.
fn iptables() -> Option<&'static str> {
    ["iptables-legacy", "iptables"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Packets the rules of [`drop_every`] in `ns` have dropped so far, as
/// the packet filter counts them.
pub fn dropped_by_filter(ns: &str) -> u64 {
    filter_drops(ns).unwrap_or_else(|| panic!("no packet filter counters in {ns}"))
}

/// The same, or None where the namespace is gone (a run's, at its end).
pub fn filter_drops(ns: &str) -> Option<u64> {
    let out = in_ns(ns, iptables().expect("drop_every found one"))
        .args(["-L", "INPUT", "-v", "-x", "-n"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.split_whitespace().nth(2) == Some("DROP"))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum(),
    )
}

/// A counter of `/proc/net/snmp` (`group` Tcp, Udp, Ip...) as seen from
/// inside `ns`: the kernel's own count of what happened there.
pub fn snmp_in(ns: &Netns, group: &str, key: &str) -> u64 {
    let out = ns.exec("cat").arg("/proc/net/snmp").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let prefix = format!("{group}:");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let i = rows[0]
        .iter()
        .position(|k| *k == key)
        .unwrap_or_else(|| panic!("no {group} {key} in /proc/net/snmp"));
    rows[1][i].parse().unwrap()
}

/// Two namespaces the test creates, `client` at 198.18.NET.1 and `server`
/// at 198.18.NET.2 (/30), joined by a veth pair whose ends are named
/// uniquely on the host (`client_dev`, `server_dev`).
pub struct NetnsPair {
    pub client: Netns,
    pub server: Netns,
    pub client_dev: String,
    pub server_dev: String,
    pub net: u8,
}

impl NetnsPair {
    pub fn new(tag: &str, net: u8) -> Option<NetnsPair> {
        let client = Netns::new(&format!("{tag}c"))?;
        let server = Netns::new(&format!("{tag}s"))?;
        // Names unique on the host as well, whatever netns they start in:
        // pid and a count of this process's pairs (15 characters at most).
        static PAIRS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = PAIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10;
        let pid = std::process::id();
        let (vc, vs) = (format!("plumb-{pid}{n}c"), format!("plumb-{pid}{n}s"));
        assert!(
            ok(Command::new("ip").args([
                "link", "add", &vc, "netns", &client.0, "type", "veth", "peer", "name", &vs,
                "netns", &server.0,
            ])),
            "create the veth pair"
        );
        for (ns, dev, host) in [(&client, &vc, 1), (&server, &vs, 2)] {
            let addr = format!("198.18.{net}.{host}/30");
            assert!(ok(
                Command::new("ip").args(["-n", &ns.0, "addr", "add", &addr, "dev", dev])
            ));
            assert!(ok(
                Command::new("ip").args(["-n", &ns.0, "link", "set", dev, "up"])
            ));
        }
        Some(NetnsPair {
            client,
            server,
            client_dev: vc,
            server_dev: vs,
            net,
        })
    }

    /// The server namespace's address.
    pub fn server_ip(&self) -> String {
        format!("198.18.{}.2", self.net)
    }
}

impl NetnsPair {
    /// `plumb serve` in the server's namespace on a port of its choosing,
    /// with `extra` flags, its knobs journalled in `journal`; the address it
    /// listens on. Its stderr goes where `stderr` says.
    pub fn serve(
        &self,
        journal: &std::path::Path,
        extra: &[&str],
        stderr: Stdio,
    ) -> (Started, String) {
        let mut child = self
            .server
            .exec(env!("CARGO_BIN_EXE_plumb"))
            .env("PLUMB_JOURNAL", journal)
            .args(["serve", "--listen", &format!("{}:0", self.server_ip())])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let addr = listening_addr(&mut child);
        (Started(child), addr)
    }
}

/// A child of the test, ended by its PID on drop.
pub struct Started(pub std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Fails the test unless every line of `text` fits in 80 columns.
#[track_caller]
pub fn assert_fits_80(text: &str) {
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "over 80 columns: {line:?}");
    }
}

pub fn ok(cmd: &mut Command) -> bool {
    cmd.status().is_ok_and(|s| s.success())
}

/// A host counter's change over one end's window (0 when it did not move).
pub fn counter(end: &Value, key: &str) -> f64 {
    end["counters"][key].as_f64().unwrap_or(0.0)
}

/// The address a `plumb serve` child says it listens on: its first line on
/// stdout (the child's stdout must be piped; it is taken).
pub fn listening_addr(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("plumb serve: listening on ")
        .unwrap_or_else(|| panic!("plumb serve said {line:?}"))
        .to_string()
}

/// A `plumb serve` of the test's on a loopback port: its address, and the
/// server, ended when dropped.
pub fn serve_on_loopback() -> (String, Started) {
    let mut child = plumb()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = listening_addr(&mut child);
    (addr, Started(child))
}

/// A shell spinning on a CPU (any, or the CPUs of `cpus` through taskset),
/// started here and ended by its PID on drop.
pub struct Spinner(pub std::process::Child);

impl Spinner {
    pub fn start(cpus: Option<&str>) -> Spinner {
        let spin = ["sh", "-c", "while :; do :; done"];
        let mut cmd = match cpus {
            Some(c) => {
                let mut t = Command::new("taskset");
                t.args(["-c", c]).args(spin);
                t
            }
            None => {
                let mut t = Command::new(spin[0]);
                t.args(&spin[1..]);
                t
            }
        };
        Spinner(
            cmd.stdout(std::process::Stdio::null())
                .spawn()
                .expect("a shell to spin"),
        )
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The namespaces of the run of pid `pid` once its router is up too
/// (`--qdisc`): client, router, server. Waits at most 20 s.
pub fn until_router(pid: u32) -> Vec<String> {
    let asked = std::time::Instant::now();
    loop {
        let ns = veth_namespaces(pid);
        if ns.len() == 3 {
            assert!(ns[1].ends_with("-router"), "{ns:?}");
            return ns;
        }
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(20),
            "no router: {ns:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `count` pings 0.2 s apart from namespace `ns` to the server's end
/// (198.18.0.2): each reply's round trip in ms (a lost one has none).
pub fn ping_from(ns: &str, count: u32) -> Vec<f64> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-n", "-c", &count.to_string()])
        .args(["-i", "0.2", "198.18.0.2"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once("time=")?.1.split(' ').next()?.parse().ok())
        .collect()
}

/// The bytes the root qdisc of `dev` in namespace `ns` holds, as `tc -s`
/// prints it (`backlog 123456b 80p`); None where tc shows none.
pub fn tc_backlog(ns: &str, dev: &str) -> Option<f64> {
    let out = Command::new("tc")
        .args(["-s", "-n", ns, "qdisc", "show", "dev", dev])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "backlog")
        .nth(1)
        .and_then(|b| b.strip_suffix('b')?.parse().ok())
}

/// Waits (at most 30 s) until the root qdisc of `dev` in `ns` holds at
/// least `bytes`: a run's load has filled the bottleneck, however long its
/// set-up took. What it holds then.
pub fn until_backlog(ns: &str, dev: &str, bytes: f64) -> f64 {
    let asked = std::time::Instant::now();
    loop {
        let held = tc_backlog(ns, dev).unwrap_or(0.0);
        if held >= bytes {
            return held;
        }
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(30),
            "{dev} in {ns} never held {bytes} bytes (last {held})"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The namespaces `--topology veth` made for the run of pid `pid`, sorted
/// (client first).
pub fn veth_namespaces(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("plumb-{pid}-")))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Skipped (failed under CI) without root or `ip`.
pub fn skip_unless_veth() -> bool {
    !require_root("build the --topology veth namespaces") || !require_tool("ip", "iproute2")
}

/// Skipped (failed under CI) without what a run through a router
/// (`--qdisc`) and its independent readings need: root, ip, tc, ping and
/// ethtool.
pub fn skip_unless_router() -> bool {
    skip_unless_veth()
        || !require_tool("tc", "iproute2")
        || !require_tool("ping", "iputils-ping")
        || !require_tool("ethtool", "ethtool")
}

/// A knob journal of this test process named after `name`, not there yet,
/// and removed when the test is done with it. It is no `AsRef<OsStr>`, so
/// it cannot be handed to `Command::env` and dropped before the run: hand
/// it over as `&*journal`, kept for as long as the run.
pub struct TestJournal(std::path::PathBuf);

impl TestJournal {
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap_or_default()
    }
}

impl std::ops::Deref for TestJournal {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TestJournal {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn test_journal(name: &str) -> TestJournal {
    let p = std::env::temp_dir().join(format!("plumb-journal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    TestJournal(p)
}

/// A long veth run (`plumb run` with `args`), started once its two
/// namespaces are up and its traffic has flowed a moment.
pub fn started_veth_run(journal: &std::path::Path, args: &[&str]) -> std::process::Child {
    let child = plumb()
        .env("PLUMB_JOURNAL", journal)
        .args(["run"])
        .args(args)
        .args(["--topology", "veth", "--duration", "60s", "--no-store"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    veth_namespaces_up(child.id());
    std::thread::sleep(std::time::Duration::from_millis(800));
    child
}

/// The two namespaces of veth run `pid` (the client's first), once both
/// are up.
pub fn veth_namespaces_up(pid: u32) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let ns = veth_namespaces(pid);
        if ns.len() >= 2 {
            return ns;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the namespaces never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `plumb ARGS` given a terminal by script(1), which copies to its stdout
/// what plumb writes there; None (after `skip`) without script.
pub fn on_a_terminal(args: &[&str]) -> Option<Command> {
    if !require_tool("script", "bsdutils") {
        return None;
    }
    let line = [env!("CARGO_BIN_EXE_plumb")]
        .iter()
        .chain(args)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let mut script = Command::new("script");
    script.args(["-qfec", &line, "/dev/null"]);
    for (k, v) in plumb().get_envs() {
        if let Some(v) = v {
            script.env(k, v);
        }
    }
    Some(script)
}

/// `plumb run ARGS` of one iteration, unstored, its record on stdout and
/// its knobs in `journal`, started.
pub fn spawn_one_iteration(journal: &std::path::Path, args: &[&str]) -> std::process::Child {
    plumb()
        .env("PLUMB_JOURNAL", journal)
        .arg("run")
        .args(args)
        .args(["--iterations", "1", "--json", "--no-store"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Kills the run with SIGKILL: its namespaces stay. Its pid.
pub fn kill_leaving_namespaces(mut child: std::process::Child) -> u32 {
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(veth_namespaces(pid).len(), 2, "the killed run left them");
    pid
}

/// The next start of plumb (any command, with the same journal) removes
/// the namespaces of the killed run `pid` and says so.
pub fn next_start_removes(journal: &std::path::Path, pid: u32) {
    let db = TempDb::new(&format!("restart-{pid}"));
    let out = plumb()
        .env("PLUMB_JOURNAL", journal)
        .args(["list", "--db", db.path()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("removed network namespace plumb-{pid}-client")),
        "{err}"
    );
    assert!(veth_namespaces(pid).is_empty());
    let _ = std::fs::remove_file(journal);
}

/// The DOM of the page `plumb ARGS FLAG PAGE` writes, once the command
/// succeeded, laid out as [`laid_out`] does it.
pub fn drawn(args: &[&str], flag: &str) -> Option<String> {
    static PAGES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PAGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let page = std::env::temp_dir().join(format!("plumb-page-{}-{n}.html", std::process::id()));
    let out = plumb().args(args).arg(flag).arg(&page).output().unwrap();
    assert_ok(&out);
    laid_out(&page)
}

/// The page at `page` as headless Chromium lays it out (its DOM), after
/// checking it holds no script and Chromium said nothing on its console;
/// the file is removed. None, after `skip` said why, without Chromium.
pub fn laid_out(page: &std::path::Path) -> Option<String> {
    let html = std::fs::read_to_string(page).unwrap();
    assert!(!html.contains("<script"), "a script in the page");
    let Some(browser) = chromium() else {
        let _ = std::fs::remove_file(page);
        skip("chromium is not installed (apt-get install chromium; tests/setup.sh installs it)");
        return None;
    };
    let (dom, console) = render(browser, page);
    let _ = std::fs::remove_file(page);
    assert!(console.is_empty(), "console messages: {console:?}");
    Some(dom)
}

/// Debian's Chromium, where it is installed.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// Opens `page` headless and returns the DOM after its scripts ran and
/// what the page wrote to the console (Chromium logs each message as a
/// CONSOLE line).
pub fn render(browser: &str, page: &std::path::Path) -> (String, Vec<String>) {
    // A profile per call: a second Chromium on a profile in use hands its
    // page to the first and exits with nothing, as tests in parallel would.
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = std::env::temp_dir().join(format!("plumb-chromium-{}-{n}", std::process::id()));
    let mut child = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1000,3000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("chromium starts");
    // Read both pipes while waiting, or a large DOM fills the pipe and
    // Chromium never exits.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish in 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (dom, err) = (o.join().unwrap(), e.join().unwrap());
    let _ = std::fs::remove_dir_all(&profile);
    let console = err
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(str::to_string)
        .collect();
    (dom, console)
}

/// The run record's JSON Schema, versioned in the repository.
pub fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/run.v1.schema.json"
    ))
    .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).expect("the schema itself is valid")
}

/// What in `doc` breaks the schema, one line each, with where.
pub fn schema_errors(v: &jsonschema::Validator, doc: &serde_json::Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// lo's received bytes and packets, from /proc/net/dev read here.
pub fn lo_rx() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/net/dev").unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("lo:"))
        .expect("lo in /proc/net/dev");
    let v: Vec<u64> = line
        .split_once(':')
        .unwrap()
        .1
        .split_ascii_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1])
}

/// Whether this kernel runs the ring engine: plumb's own answer, which
/// names what is missing (a failure under CI, whose kernel has io_uring).
/// Asked under [`measuring_alone`], which the test that disables io_uring
/// holds.
pub fn ring_here() -> bool {
    let out = run(&[
        "run",
        "rr",
        "--io",
        "uring",
        "--duration",
        "50ms",
        "--warmup",
        "0",
    ]);
    if out.status.success() {
        return true;
    }
    skip(&format!(
        "this kernel does not run the io_uring engine: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    ));
    false
}

/// The engines this kernel runs: epoll, and the ring where
/// [`ring_here`].
pub fn engines() -> Vec<&'static str> {
    let mut io = vec!["epoll"];
    if ring_here() {
        io.push("uring");
    }
    io
}

/// One line of a log of `straced` with sockets decoded: a system call, or
/// half of one that another thread's cut in two ("<unfinished ...>" as it
/// starts, "<... NAME resumed>" as it ends).
#[derive(Debug)]
pub struct Traced<'a> {
    pub name: String,
    /// The line ends a call cut in two.
    pub resumed: bool,
    /// What follows the name: the arguments and the result, or the part
    /// of them the line has.
    pub rest: &'a str,
    /// Whether its descriptor is a connected TCP socket of a data flow:
    /// every one but the control connection's, the first the client
    /// connects (the data flows go to another port), and every UDP socket. The end of a call
    /// cut in two has it from its start.
    pub on_data_flow: bool,
}

/// The lines of a log of `straced` made with `decode_sockets`, which
/// traced `connect` among its calls.
pub fn traced_calls(text: &str) -> Vec<Traced<'_>> {
    let control = text
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once("connect(")?;
            let (_, port) = rest.split_once("htons(")?;
            port.split(')').next().map(|p| format!(":{p}"))
        })
        .expect("the client connects its control connection");
    // Per thread, whether the call it left unfinished is on a data flow.
    let mut unfinished = std::collections::HashMap::new();
    text.lines()
        .map(|line| {
            let (pid, call) = line.split_once(' ').unwrap_or(("", ""));
            let call = call.trim_start();
            let resumed = call.starts_with("<... ");
            let call = call.strip_prefix("<... ").unwrap_or(call);
            let name: String = call
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let rest = &call[name.len()..];
            let on_data_flow = if resumed {
                unfinished.remove(pid).unwrap_or(false)
            } else {
                // The descriptor as -yy decodes it: TCP:[src->dst] once
                // connected; every UDP socket is a flow's or a server's.
                let sock = rest
                    .split_once("TCP:[")
                    .map(|(_, r)| r.split(']').next().unwrap_or(""));
                let data = sock.is_some_and(|s| s.contains("->") && !s.contains(&control))
                    || rest.contains("UDP:[")
                    || rest.contains("UDPv6:[");
                if rest.ends_with("<unfinished ...>") {
                    unfinished.insert(pid, data);
                }
                data
            };
            Traced {
                name,
                resumed,
                rest,
                on_data_flow,
            }
        })
        .collect()
}

/// `plumb ARGS` (with its embedded server, a child) under `strace -f`,
/// tracing the system calls `calls` (a comma-separated list), with sockets
/// decoded (`-yy`: "TCP:[src->dst]", "UDP:[...]") when `decode_sockets`:
/// plumb's output and strace's log.
pub fn straced(calls: &str, decode_sockets: bool, args: &[&str]) -> (Output, String) {
    static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = std::env::temp_dir().join(format!("plumb-strace-{}-{n}.log", std::process::id()));
    let out = Command::new("strace")
        .args(["-f", "-qq"])
        .args(decode_sockets.then_some("-yy"))
        .args(["-e", "signal=none", "-e", &format!("trace={calls}"), "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_plumb"))
        .env("PLUMB_ACTIVITY_DIR", "off")
        .args(args)
        .output()
        .expect("strace runs");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (out, text)
}

/// The median of `[value_ns, count]` buckets, in ms.
pub fn median_ms(buckets: &[(u64, u64)]) -> f64 {
    let mut b = buckets.to_vec();
    b.sort();
    let n: u64 = b.iter().map(|x| x.1).sum();
    assert!(n > 0, "no probe timed");
    let mut seen = 0;
    for (v, c) in b {
        seen += c;
        if 2 * seen >= n {
            return v as f64 / 1e6;
        }
    }
    unreachable!()
}

/// An end's latency buckets of the seconds whose middle falls between
/// `from_s` and `to_s` after the window opened.
pub fn buckets_between(end: &Value, from_s: f64, to_s: f64) -> Vec<(u64, u64)> {
    kept_between(end, "buckets", from_s, to_s)
}

/// The buckets an end's intervals keep under `key` (`buckets`, or a way's
/// `to_server_buckets` or `to_client_buckets`), of the intervals whose
/// middle is between `from_s` and `to_s` into its window.
pub fn kept_between(end: &Value, key: &str, from_s: f64, to_s: f64) -> Vec<(u64, u64)> {
    items(&end["intervals"])
        .filter(|s| {
            let mid = f(&s["t_s"]) - f(&s["dt_s"]) / 2.0;
            from_s <= mid && mid < to_s
        })
        .flat_map(|s| kept_items(&s[key]).map(|b| (u(&b[0]), u(&b[1]))))
        .collect()
}

/// The kernel packages tests/setup.sh fetched, oldest first: at least one
/// 6.1 and one 6.12. None (after `skip`) where there are none, or no QEMU.
pub fn kernels() -> Option<Vec<PathBuf>> {
    if !require_tool("qemu-system-x86_64", "qemu-system-x86") {
        return None;
    }
    let dir = std::env::var("PLUMB_TEST_KERNELS")
        .unwrap_or_else(|_| "/var/cache/plumb-test-kernels".to_string());
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("linux-image-6.") && n.ends_with(".deb")
        })
        .collect();
    found.sort_by_key(|p| version_of(p));
    let series = |s: &str| found.iter().any(|p| release_of(p).starts_with(s));
    if !series("6.1.") || !series("6.12.") {
        skip(&format!(
            "no 6.1 and 6.12 kernel packages in {dir} (tests/setup.sh fetches them as root)"
        ));
        return None;
    }
    Some(found)
}

/// The package's version as numbers (`6.12.117-1~deb12u1` as 6 12 117 1 12 1),
/// which orders Debian's kernel packages as dpkg would.
pub fn version_of(deb: &Path) -> Vec<u64> {
    let name = deb.file_name().unwrap().to_string_lossy().to_string();
    let version = name.split('_').nth(1).unwrap_or("");
    version
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The release a package installs, from its name:
/// linux-image-RELEASE_VERSION_amd64.deb.
pub fn release_of(deb: &Path) -> String {
    let name = deb.file_name().unwrap().to_string_lossy().to_string();
    name.split('_')
        .next()
        .unwrap()
        .trim_start_matches("linux-image-")
        .to_string()
}

/// The kernels of one series ("6.1."), oldest first as `kernels` are.
pub fn series(kernels: &[PathBuf], series: &str) -> Vec<PathBuf> {
    (kernels.iter())
        .filter(|p| release_of(p).starts_with(series))
        .cloned()
        .collect()
}

/// The newest kernel of one series.
pub fn newest(kernels: &[PathBuf], of: &str) -> PathBuf {
    series(kernels, of).pop().unwrap()
}
