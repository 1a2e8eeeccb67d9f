//! --topology veth: client and server in two namespaces joined by a veth
//! pair, removed after the run, after a kill (at the next start) and by
//! `plumb topology down`.

mod common;
use common::{items, ok, plumb, require_root, require_tool, TempDb, ONE_SHORT};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn journal(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("plumb-journal-topo-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn namespaces_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("plumb-{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

fn skip_unless_root() -> bool {
    !require_root("build the --topology veth namespaces") || !require_tool("ip", "iproute2")
}

fn veth_run(j: &std::path::Path, args: &[&str]) -> (u32, std::process::Output) {
    let child = plumb()
        .env("PLUMB_JOURNAL", j)
        .args(["run"])
        .args(args)
        .args(["--topology", "veth", "--json"])
        .args(ONE_SHORT)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (pid, child.wait_with_output().unwrap())
}

#[test]
fn stream_and_rr_over_veth_in_both_families_leave_nothing_behind() {
    if skip_unless_root() {
        return;
    }
    let j = journal("run");
    for (workload, family) in [("stream", "-4"), ("rr", "-6")] {
        let (pid, out) = veth_run(&j, &[workload, family, "--mtu", "1500"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{workload} {family}: {err}");
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rec["spec"]["topology"]["veth"]["mtu"], 1500);
        let schema: Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/schemas/run.v1.schema.json"
            ))
            .unwrap(),
        )
        .unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        let errs: Vec<String> = v.iter_errors(&rec).map(|e| e.to_string()).collect();
        assert!(errs.is_empty(), "schema: {errs:?}");
        let it = &rec["iterations"][0];
        let metric = it["derived"]["tps"]
            .as_f64()
            .or(it["derived"]["throughput_bps"].as_f64())
            .unwrap_or(0.0);
        assert!(metric > 0.0, "{workload}: nothing moved: {}", it["derived"]);
        if workload == "stream" {
            // An MTU of 1500 gives the flows an MSS of 1448 (timestamps on).
            let mss = &items(&it["client"]["socket_options"])
                .find(|o| o["name"] == "mss")
                .unwrap()["granted"];
            assert_eq!(mss, "1448");
        }
        assert!(
            namespaces_of(pid).is_empty(),
            "left {:?}",
            namespaces_of(pid)
        );
    }
    assert_eq!(std::fs::read_to_string(&j).unwrap_or_default().trim(), "");
    let _ = std::fs::remove_file(&j);
}

#[test]
fn the_topology_is_part_of_the_spec_key() {
    if skip_unless_root() {
        return;
    }
    let j = journal("key");
    let (_, veth) = veth_run(&j, &["rr"]);
    assert!(veth.status.success());
    let out = plumb()
        .args(["run", "rr", "--json"])
        .args(ONE_SHORT)
        .output()
        .unwrap();
    let a: Value = serde_json::from_slice(&veth.stdout).unwrap();
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(a["spec_key"], b["spec_key"]);
    assert!(
        b["spec"].get("topology").is_none(),
        "loopback specs keep their keys"
    );
    let _ = std::fs::remove_file(&j);
}

#[test]
fn a_killed_veth_run_is_cleaned_up_at_the_next_start() {
    if skip_unless_root() {
        return;
    }
    let j = journal("kill");
    let db = TempDb::new("topo-kill");
    let mut child = plumb()
        .env("PLUMB_JOURNAL", &j)
        .args([
            "run",
            "stream",
            "--topology",
            "veth",
            "--duration",
            "60s",
            "--no-store",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while namespaces_of(pid).len() < 2 {
        assert!(Instant::now() < deadline, "namespaces never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(namespaces_of(pid).len(), 2, "the killed run left them");
    let out = plumb()
        .env("PLUMB_JOURNAL", &j)
        .args(["list", "--db", db.path()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("removed network namespace plumb-{pid}-client")),
        "{err}"
    );
    assert!(namespaces_of(pid).is_empty());
    let _ = std::fs::remove_file(&j);
}

#[test]
fn topology_down_removes_leftovers_of_dead_processes_only() {
    if skip_unless_root() {
        return;
    }
    // Above the largest pid_max, so no process can own it.
    let dead = "plumb-4194399-server";
    assert!(ok(Command::new("ip").args(["netns", "add", dead])));
    let out = plumb().args(["topology", "down"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.contains(&format!("removed network namespace {dead}")),
        "{text}"
    );
    assert!(!std::path::Path::new("/run/netns").join(dead).exists());
    // This test process's own name looks like a live run's: kept.
    let live = format!("plumb-{}-client", std::process::id());
    assert!(ok(Command::new("ip").args(["netns", "add", &live])));
    let out = plumb().args(["topology", "down"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&live));
    assert!(std::path::Path::new("/run/netns").join(&live).exists());
    let _ = Command::new("ip").args(["netns", "del", &live]).status();
}

#[test]
fn a_delay_lengthens_the_round_trip_whatever_emulates_it() {
    if skip_unless_root() {
        return;
    }
    let j = journal("delay");
    let (pid, out) = veth_run(&j, &["rr", "--delay", "5ms"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p50 = rec["iterations"][0]["client"]["latency"]["p50_us"]
        .as_f64()
        .unwrap();
    assert!(p50 >= 10_000.0, "5 ms each way, p50 {p50} us");
    let emulator = &rec["path"]["emulator"];
    assert!(
        emulator == "netem" || emulator == "plumb",
        "{}",
        rec["path"]
    );
    assert!(namespaces_of(pid).is_empty());
    let _ = std::fs::remove_file(&j);
}

#[test]
fn veth_options_need_the_veth_topology() {
    let out = plumb()
        .args(["run", "stream", "--mtu", "1500", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--mtu") && err.contains("--topology veth"),
        "{err}"
    );
    let out = plumb()
        .args([
            "run",
            "rr",
            "--topology",
            "veth",
            "--server",
            "127.0.0.1",
            "--no-store",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
