//! The emulated path of --topology veth: plumb's own delay line (two TUN
//! devices, one thread of the client's process) where the kernel has no
//! netem, and netem where it has. Delay, loss and link rate are checked
//! against what the kernel and the test see themselves: ping between the
//! namespaces, TCP's retransmissions, the interfaces' counters.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Root and `ip` for the --topology veth namespaces, then the host to this
/// test alone while the guard lives; None after the skip.
fn veth_alone() -> Option<std::sync::MutexGuard<'static, ()>> {
    (!skip_unless_veth()).then(measuring_alone)
}

/// A run over the veth topology with plumb's delay line; its record.
fn path_run(name: &str, args: &[&str]) -> Value {
    let journal = test_journal(name);
    let out = plumb()
        .env("PLUMB_JOURNAL", &*journal)
        .args(["run"])
        .args(args)
        .args(["--topology", "veth", "--emulator", "plumb", "--json"])
        .args(["--no-store"])
        .args(["--iterations", "1", "--warmup", "500ms"])
        .output()
        .unwrap();
    assert_ok_for(&out, &format!("plumb run {args:?}"));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["path"]["emulator"], "plumb", "{}", rec["path"]);
    assert_eq!(rec["spec"]["topology"]["veth"]["emulator"], "plumb");
    rec
}

/// An interface of an end, as the record has it.
fn interface<'a>(end: &'a Value, name: &str) -> &'a Value {
    items(&end["interfaces"])
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {}", end["interfaces"]))
}

#[test]
fn a_delay_of_5ms_each_way_is_a_10ms_round_trip_for_rr_and_for_ping() {
    if skip_unless_veth() || !require_tool("ping", "iputils-ping") {
        return;
    }
    let _alone = measuring_alone();
    let journal = test_journal("delay");
    let child = spawn_one_iteration(
        &journal,
        &[
            "rr",
            "--topology",
            "veth",
            "--emulator",
            "plumb",
            "--delay",
            "5ms",
            "--duration",
            "4s",
            "--warmup",
            "500ms",
        ],
    );
    let pid = child.id();
    let ns = &veth_namespaces_up(pid)[0];
    std::thread::sleep(Duration::from_millis(300));
    // The test's own round trips, during the run, through the same path.
    assert!(ns.ends_with("-client"), "{ns}");
    let ping = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-n", "-c", "30", "-i", "0.1"])
        .arg("198.18.0.2")
        .output()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    // Each reply's "time=10.2 ms": their median, as rr's p50 is one (an
    // average would take in the host's rare scheduling stalls).
    let text = String::from_utf8_lossy(&ping.stdout);
    let mut rtts: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split_once("time=")?.1.split(' ').next()?.parse().ok())
        .collect();
    assert!(rtts.len() >= 25, "ping said {text}");
    rtts.sort_by(f64::total_cmp);
    let median = rtts[rtts.len() / 2];
    eprintln!("ping's median round trip {median} ms");
    assert!(
        (10.0..10.5).contains(&median),
        "ping's median round trip {median} ms of {rtts:?}"
    );
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p50 = f(&rec["iterations"][0]["client"]["latency"]["p50_us"]);
    eprintln!("rr's p50 {p50} us");
    assert!(
        (10_000.0..10_500.0).contains(&p50),
        "5 ms each way: p50 {p50} us"
    );
    assert!(
        veth_namespaces(pid).is_empty(),
        "the run left its namespaces"
    );
}

#[test]
fn a_loss_of_1_percent_drops_a_binomial_share_that_tcp_retransmits() {
    let Some(_alone) = veth_alone() else {
        return;
    };
    let rec = path_run("loss", &["stream", "--loss", "1%", "--duration", "2s"]);
    let to_server = &rec["path"]["to_server"];
    let (lost, passed) = (u(&to_server["lost"]), u(&to_server["packets"]));
    let n = (lost + passed + u(&to_server["queue_drops"]) + u(&to_server["refused"])) as f64;
    let sd = (n * 0.01 * 0.99).sqrt();
    assert!(n > 10_000.0, "{to_server}");
    assert!(
        (lost as f64 - 0.01 * n).abs() < 5.0 * sd,
        "{lost} of {n} packets lost, 1 % asked"
    );
    // The sender's kernel retransmitted about what the path lost in the
    // window: 1 % of the segments its interface sent.
    let client = &rec["iterations"][0]["client"];
    let sent = u(&interface(client, "plumb-c")["tx_packets"]) as f64;
    let retrans = counter(client, "Tcp.RetransSegs");
    assert!(
        (0.5 * 0.01 * sent..2.0 * 0.01 * sent + 20.0).contains(&retrans),
        "{retrans} segments retransmitted of {sent} sent"
    );
}

#[test]
fn a_link_rate_caps_a_stream_at_that_rate() {
    let Some(_alone) = veth_alone() else {
        return;
    };
    let rate = 50e6;
    let rec = path_run(
        "rate",
        &[
            "stream",
            "--link-rate",
            "50M",
            "--duration",
            "3s",
            "--path-cpus",
            "0",
        ],
    );
    assert_eq!(rec["spec"]["topology"]["veth"]["path_cpus"], "0");
    let it = &rec["iterations"][0];
    let client = &it["client"];
    // IP bytes the client's device handed the path in the window.
    let wire = u(&interface(client, "plumb-c")["tx_bytes"]) as f64 * 8.0 / f(&it["window_s"]);
    assert!(
        (0.95 * rate..1.05 * rate).contains(&wire),
        "{wire} bit/s on the wire, 50 Mbit/s asked"
    );
    let goodput = f(&it["derived"]["throughput_bps"]);
    assert!(goodput < rate, "{goodput}");
    // The delay line's thread is the path's, not the client's.
    assert!(client["path_cpu_s"].as_f64().is_some(), "{client}");
    assert!(
        items(&client["process"]["threads"]).all(|t| t["name"] != "plumb-path"),
        "{}",
        client["process"]["threads"]
    );
}

#[test]
fn one_flow_moves_no_more_than_its_window_per_round_trip() {
    let Some(_alone) = veth_alone() else {
        return;
    };
    let rec = path_run(
        "bdp",
        &[
            "stream",
            "--delay",
            "10ms",
            "--rcvbuf",
            "64K",
            "--cc",
            "cubic",
            "--duration",
            "3s",
        ],
    );
    let it = &rec["iterations"][0];
    let granted: f64 = items(&it["server"]["socket_options"])
        .find(|o| o["name"] == "rcvbuf")
        .and_then(|o| o["granted"].as_str()?.parse().ok())
        .expect("the server's rcvbuf read back");
    // The receive window is at most the buffer the kernel granted (it
    // doubles what was asked and keeps part for overhead).
    let most = granted * 8.0 / 0.020;
    let bps = f(&it["derived"]["throughput_bps"]);
    assert!(bps > 0.0);
    assert!(
        bps <= most,
        "{bps} bit/s through a {granted} B window over 20 ms (at most {most})"
    );
}

#[test]
fn netem_is_chosen_where_the_kernel_has_it_and_the_delay_line_where_not() {
    if skip_unless_veth() {
        return;
    }
    let netem = ok(Command::new("unshare")
        .args(["-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem"])
        .stderr(Stdio::null()));
    eprintln!("this kernel {} netem", if netem { "has" } else { "has no" });
    let journal = test_journal("choice");
    let run = |extra: &[&str]| {
        plumb()
            .env("PLUMB_JOURNAL", &*journal)
            .args(["run", "rr", "--topology", "veth", "--delay", "1ms"])
            .args(["--json"])
            .args(ONE_SHORT)
            .args(extra)
            .output()
            .unwrap()
    };
    let chosen = run(&[]);
    assert_ok(&chosen);
    let rec: Value = serde_json::from_slice(&chosen.stdout).unwrap();
    let want = if netem { "netem" } else { "plumb" };
    assert_eq!(rec["path"]["emulator"], want);
    assert_eq!(rec["spec"]["topology"]["veth"]["emulator"], want);
    let asked = run(&["--emulator", "netem"]);
    if netem {
        assert_ok(&asked);
    } else {
        assert_eq!(asked.status.code(), Some(2));
        let err = String::from_utf8_lossy(&asked.stderr);
        assert!(err.contains("netem") && err.contains("--delay"), "{err}");
    }
}

/// A long stream through plumb's delay line, started.
fn long_run(j: &std::path::Path) -> std::process::Child {
    started_veth_run(j, &["stream", "--emulator", "plumb", "--delay", "1ms"])
}

/// Whether the client's TUN device of run `pid` exists. Looked for in the
/// namespace's list of devices: `ip link show DEV` says on stderr that a
/// device is missing, and here a missing one is an answer, not an error.
fn has_tun(pid: u32) -> bool {
    let ns = format!("plumb-{pid}-client");
    Command::new("ip")
        .args(["-n", &ns, "-o", "link", "show"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.split(": ").nth(1) == Some("plumb-c"))
        })
}

#[test]
fn a_run_stopped_with_ctrl_c_leaves_no_namespace_device_or_thread() {
    let Some(_alone) = veth_alone() else {
        return;
    };
    let journal = test_journal("int");
    let mut child = long_run(&journal);
    let pid = child.id();
    assert!(has_tun(pid), "the client's TUN device while running");
    assert!(ok(Command::new("kill").args(["-INT", &pid.to_string()])));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        veth_namespaces(pid).is_empty(),
        "{:?}",
        veth_namespaces(pid)
    );
}

#[test]
fn a_killed_run_takes_its_tun_devices_with_it_and_the_next_start_its_namespaces() {
    let Some(_alone) = veth_alone() else {
        return;
    };
    let j = test_journal("path-kill");
    let child = long_run(&j);
    assert!(has_tun(child.id()), "the client's TUN device while running");
    let pid = kill_leaving_namespaces(child);
    // The device goes with its descriptor, so with the process.
    assert!(!has_tun(pid), "the TUN device went with the process");
    next_start_removes(&j, pid);
}

#[test]
fn a_window_of_too_few_round_trips_for_its_path_says_so() {
    let Some(_alone) = veth_alone() else {
        return;
    };
    // 20 ms each way: a 1 s window holds at most 25 round trips.
    let rec = path_run("short", &["rr", "--delay", "20ms", "--duration", "1s"]);
    let it = &rec["iterations"][0];
    let rtts = f(&it["derived"]["window_rtts"]);
    // At most 25 in a window of 1 s (a little more: its edges are late).
    assert!(
        (5.0..=27.0).contains(&rtts),
        "{rtts} round trips in 1 s at 40 ms"
    );
    let warned = items(&it["client"]["warnings"]).any(|w| {
        w.as_str()
            .is_some_and(|w| w.contains("round trips, fewer than 50"))
    });
    assert!(warned, "{}", it["client"]["warnings"]);
    // Loopback's round trips are microseconds: no such warning there.
    let near = stream_json(&["--duration", "1s", "--warmup", "300ms"]);
    let it = &near["iterations"][0];
    assert!(
        f(&it["derived"]["window_rtts"]) > 1000.0,
        "{}",
        it["derived"]
    );
    assert!(
        !it["client"]["warnings"].to_string().contains("round trips"),
        "{}",
        it["client"]["warnings"]
    );
}

/// The delay line's own queue behind its link rate is sampled each way as
/// a router's qdisc would be (`path_queues`, kind `delay line`), through a
/// load run's download: the queue toward the client fills to near its
/// limit and drops at its tail; what it says it released toward the client
/// is what the client's device received (the kernel's counters of
/// `plumb-c`); and the probes wait as long as the bytes it held take to
/// leave at the link rate.
#[test]
fn the_delay_lines_queue_is_sampled_as_a_routers_qdisc_would_be() {
    let Some(_alone) = veth_alone() else {
        return;
    };
    const QUEUE: f64 = 100.0 * 1024.0;
    const RATE_BPS: f64 = 20e6;
    let rec = path_run(
        "queue",
        &[
            "load",
            "--phase",
            "2s",
            "--link-rate",
            "20M",
            "--queue",
            "100K",
            "--cc",
            "cubic",
        ],
    );
    let it = &rec["iterations"][0];
    let client = &it["client"];
    let queues: Vec<&Value> = items(&client["path_queues"]).collect();
    let ways: Vec<(&str, &str, &str)> = queues
        .iter()
        .map(|q| {
            (
                q["toward"].as_str().unwrap(),
                q["interface"].as_str().unwrap(),
                q["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ways,
        [
            ("to_server", "plumb-s", "delay line"),
            ("to_client", "plumb-c", "delay line")
        ]
    );
    let down = queues[1];
    let seen = format!("{down}");
    let series: Vec<f64> = items(&down["backlog_series"]).map(f).collect();
    let window = f(&client["window_s"]);
    assert_eq!(u(&down["period_ms"]), 100);
    assert!(
        (series.len() as f64 - window * 10.0).abs() <= 3.0,
        "{} samples over {window} s: {seen}",
        series.len()
    );
    let peak = f(&down["peak_backlog_bytes"]);
    assert!((0.5 * QUEUE..=QUEUE).contains(&peak), "{seen}");
    assert!(
        u(&down["drops"]) > 0,
        "a full FIFO drops at its tail: {seen}"
    );
    // What the line released toward the client, the client's device took
    // in, within the window's edges.
    let released = f(&down["packets"]);
    let received = u(&interface(client, "plumb-c")["rx_packets"]) as f64;
    assert!(
        (released - received).abs() <= 0.02 * received + 50.0,
        "released {released}, the device received {received}: {seen}"
    );
    // The download's second second (3 s to 4 s into the window): the run
    // probe waits behind what the queue held, at the link rate.
    let held: Vec<f64> = series[30..40].to_vec();
    let drain_ms = held.iter().sum::<f64>() / held.len() as f64 * 8.0 / RATE_BPS * 1000.0;
    let probe_ms = median_ms(&buckets_between(client, 3.0, 4.0));
    assert!(
        probe_ms >= 0.6 * drain_ms && probe_ms <= 1.6 * drain_ms + 3.0,
        "probes {probe_ms} ms behind a queue that takes {drain_ms} ms: {seen}"
    );
}
