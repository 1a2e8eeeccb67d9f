//! Connect-request-response-close over real loopback sockets: both close
//! modes as the kernel counts them, and the two ways a machine runs out
//! (descriptors, local ports) reported by name.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;

fn crr_json(args: &[&str]) -> Value {
    let mut all = vec!["run", "crr", "--json", "--warmup", "200ms"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(
        out.status.success(),
        "plumb {all:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// The kernel counters are host-wide: tests reading them take turns.
fn measuring_alone() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn counter(end: &Value, key: &str) -> f64 {
    end["counters"][key].as_f64().unwrap_or(0.0)
}

#[test]
fn rst_close_resets_every_connection_and_leaves_no_time_wait() {
    let _alone = measuring_alone();
    let rec = crr_json(&["--flows", "4", "--duration", "1s"]);
    assert_eq!(rec["spec"]["workload"], "crr");
    assert_eq!(rec["spec"]["rr"]["close"], "rst");
    let it = &rec["iterations"][0];
    let (c, s) = (&it["client"], &it["server"]);
    let tx = u(&c["transactions"]) as f64;
    assert!(tx > 100.0, "{tx} transactions");
    // Both ends count within their own window; the windows open and close
    // a little apart, so the counts may differ by the rate times that skew.
    let skew = (f(&c["window_s"]) - f(&s["window_s"])).abs() + 0.01;
    let allowed = 8.0 + f(&it["derived"]["tps"]) * skew;
    assert!(
        (tx - u(&s["transactions"]) as f64).abs() <= allowed,
        "client {tx} vs server {} (allowed {allowed})",
        s["transactions"]
    );
    assert!(
        // A connection opened just before the window may finish inside it.
        counter(c, "Tcp.ActiveOpens") >= tx - allowed,
        "a connection per transaction: {}",
        c["counters"]
    );
    assert!(counter(c, "Tcp.OutRsts") >= 0.9 * tx, "{}", c["counters"]);
    assert!(counter(c, "TcpExt.TW") < 0.1 * tx, "{}", c["counters"]);
    let timed = u(&c["latency"]["count"]) as f64;
    assert!((timed - tx).abs() <= allowed, "timed {timed} of {tx}");
    assert!(f(&it["derived"]["client_cpu_s_per_tx"]) > 0.0);
}

#[test]
fn fin_close_leaves_time_wait_behind() {
    let _alone = measuring_alone();
    let rec = crr_json(&["--flows", "4", "--duration", "1s", "--close", "fin"]);
    let c = &rec["iterations"][0]["client"];
    let tx = u(&c["transactions"]) as f64;
    assert!(tx > 100.0, "{tx} transactions");
    assert!(counter(c, "TcpExt.TW") >= 0.9 * tx, "{}", c["counters"]);
    assert!(counter(c, "Tcp.OutRsts") < 0.1 * tx, "{}", c["counters"]);
}

#[test]
fn too_few_descriptors_is_said_before_anything_runs() {
    let out = Command::new("bash")
        .args([
            "-c",
            "ulimit -n 100 && exec \"$0\" run crr --no-store --iterations 1 --flows 500",
        ])
        .arg(env!("CARGO_BIN_EXE_plumb"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--flows") && err.contains("file descriptors"),
        "{err}"
    );
    assert!(err.contains("at most"), "says how many fit: {err}");
}

#[test]
fn running_out_of_local_ports_is_named() {
    if !plumb_is_root() {
        eprintln!("skipped: needs root to create a network namespace");
        return;
    }
    let ns = format!("plumb-crr-{}", std::process::id());
    let ip = |args: &[&str]| {
        Command::new("ip")
            .args(args)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !ip(&["netns", "add", &ns]) {
        eprintln!("skipped: cannot create a network namespace here");
        return;
    }
    struct Drop_(String);
    impl Drop for Drop_ {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _cleanup = Drop_(ns.clone());
    assert!(ip(&["-n", &ns, "link", "set", "lo", "up"]));
    // Ten local ports and no reuse of TIME_WAIT ones: FIN closes use them up.
    for (k, v) in [
        ("net.ipv4.ip_local_port_range", "40000 40009"),
        ("net.ipv4.tcp_tw_reuse", "0"),
    ] {
        assert!(Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-q",
                "-w",
                &format!("{k}={v}")
            ])
            .status()
            .unwrap()
            .success());
    }
    let out = Command::new("ip")
        .args(["netns", "exec", &ns, env!("CARGO_BIN_EXE_plumb")])
        .args([
            "run",
            "crr",
            "--no-store",
            "--iterations",
            "1",
            "--close",
            "fin",
            "--duration",
            "1s",
            "--warmup",
            "100ms",
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("out of local ports"), "{text}");
}

fn plumb_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
