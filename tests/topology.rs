//! --topology veth: client and server in two namespaces joined by a veth
//! pair, removed after the run, after a kill (at the next start) and by
//! `plumb topology down`.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};

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
    if skip_unless_veth() {
        return;
    }
    let j = test_journal("run");
    for (workload, family) in [("stream", "-4"), ("rr", "-6")] {
        let (pid, out) = veth_run(&j, &[workload, family, "--mtu", "1500"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{workload} {family}: {err}");
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rec["spec"]["topology"]["veth"]["mtu"], 1500);
        let errs = schema_errors(&schema(), &rec);
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
            veth_namespaces(pid).is_empty(),
            "left {:?}",
            veth_namespaces(pid)
        );
    }
    assert_eq!(j.text().trim(), "");
}

#[test]
fn the_topology_is_part_of_the_spec_key() {
    if skip_unless_veth() {
        return;
    }
    let j = test_journal("key");
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
}

#[test]
fn a_killed_veth_run_is_cleaned_up_at_the_next_start() {
    if skip_unless_veth() {
        return;
    }
    let j = test_journal("topo-kill");
    let child = started_veth_run(&j, &["stream"]);
    let pid = kill_leaving_namespaces(child);
    next_start_removes(&j, pid);
}

#[test]
fn topology_down_removes_leftovers_of_dead_processes_only() {
    if skip_unless_veth() {
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
    if skip_unless_veth() {
        return;
    }
    let j = test_journal("delay");
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
    assert!(veth_namespaces(pid).is_empty());
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
        .args(["run", "rr", "--topology", "veth"])
        .args(["--server", "127.0.0.1", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `KNOB@client` acts in the client's own namespace, which starts from the
/// kernel's defaults (ECN accepted, never asked for): with
/// net.ipv4.tcp_ecn=1 there the client's data leaves ECN-capable, as the
/// server's kernel counts it arriving (IpExt.InECT0Pkts), and without it
/// none does; this host's own setting is never touched. Without a veth
/// topology `@client` names nothing and is refused by name.
#[test]
fn a_client_knob_acts_in_the_clients_namespace_only() {
    if skip_unless_veth() {
        return;
    }
    let host = || std::fs::read_to_string("/proc/sys/net/ipv4/tcp_ecn").unwrap();
    let before = host();
    let j = test_journal("client-knob");
    let ect = |args: &[&str]| -> u64 {
        let (_, out) = veth_run(&j, &[&["stream"][..], args].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        let server = &rec["iterations"][0]["server"];
        assert!(u(&server["counters"]["Tcp.InSegs"]) > 0, "{server}");
        server["counters"]["IpExt.InECT0Pkts"].as_u64().unwrap_or(0)
    };
    let asked = ect(&["--knob", "sysctl:net.ipv4.tcp_ecn@client=1"]);
    assert_eq!(host(), before, "the host's own tcp_ecn changed");
    let not = ect(&[]);
    assert!(asked > 100, "{asked} ECT(0) packets with ECN asked for");
    assert_eq!(not, 0, "ECT(0) packets without the client knob");
    assert_eq!(j.text().trim(), "");
    let out = plumb()
        .args(["run", "rr", "--knob", "sysctl:net.ipv4.tcp_ecn@client=1"])
        .args(ONE_SHORT)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--knob") && err.contains("@client") && err.contains("--topology veth"),
        "{err}"
    );
    assert_eq!(host(), before);
}
