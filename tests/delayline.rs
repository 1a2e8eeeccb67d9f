//! The emulated path of --topology veth: plumb's own delay line (two TUN
//! devices, one thread of the client's process) where the kernel has no
//! netem, and netem where it has. Delay, loss and link rate are checked
//! against what the kernel and the test see themselves: ping between the
//! namespaces, TCP's retransmissions, the interfaces' counters.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn journal(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("plumb-journal-path-{name}-{}", std::process::id()))
}

/// The namespaces a run of pid `pid` made.
fn namespaces_of(pid: u32) -> Vec<String> {
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

fn skip_unless_root() -> bool {
    !require_root("build the --topology veth namespaces") || !require_tool("ip", "iproute2")
}

/// A run over the veth topology with plumb's delay line; its record.
fn path_run(name: &str, args: &[&str]) -> Value {
    let out = plumb()
        .env("PLUMB_JOURNAL", journal(name))
        .args(["run"])
        .args(args)
        .args([
            "--topology",
            "veth",
            "--emulator",
            "plumb",
            "--json",
            "--no-store",
        ])
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
    if skip_unless_root() || !require_tool("ping", "iputils-ping") {
        return;
    }
    let _alone = measuring_alone();
    let child = plumb()
        .env("PLUMB_JOURNAL", journal("delay"))
        .args(["run", "rr", "--topology", "veth", "--emulator", "plumb"])
        .args(["--delay", "5ms", "--duration", "4s", "--warmup", "500ms"])
        .args(["--iterations", "1", "--json", "--no-store"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    while namespaces_of(pid).len() < 2 {
        assert!(Instant::now() < deadline, "the namespaces never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    // The test's own round trips, during the run, through the same path.
    let ns = &namespaces_of(pid)[0];
    assert!(ns.ends_with("-client"), "{ns}");
    let ping = Command::new("ip")
        .args([
            "netns", "exec", ns, "ping", "-n", "-q", "-c", "20", "-i", "0.1",
        ])
        .arg("198.18.0.2")
        .output()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&ping.stdout);
    // rtt min/avg/max/mdev = 10.1/10.2/10.4/0.1 ms
    let avg: f64 = text
        .lines()
        .find_map(|l| l.split_once(" = ")?.1.split('/').nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("ping said {text}"));
    eprintln!("ping's average round trip {avg} ms");
    assert!(
        (10.0..10.5).contains(&avg),
        "ping's average round trip {avg} ms"
    );
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p50 = f(&rec["iterations"][0]["client"]["latency"]["p50_us"]);
    eprintln!("rr's p50 {p50} us");
    assert!(
        (10_000.0..10_500.0).contains(&p50),
        "5 ms each way: p50 {p50} us"
    );
    assert!(namespaces_of(pid).is_empty(), "the run left its namespaces");
}

#[test]
fn a_loss_of_1_percent_drops_a_binomial_share_that_tcp_retransmits() {
    if skip_unless_root() {
        return;
    }
    let _alone = measuring_alone();
    let rec = path_run("loss", &["stream", "--loss", "1%", "--duration", "2s"]);
    let to_server = &rec["path"]["to_server"];
    let (lost, passed) = (u(&to_server["lost"]), u(&to_server["packets"]));
    let n = (lost + passed + u(&to_server["queue_drops"])) as f64;
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
    if skip_unless_root() {
        return;
    }
    let _alone = measuring_alone();
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
    if skip_unless_root() {
        return;
    }
    let _alone = measuring_alone();
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
    if skip_unless_root() {
        return;
    }
    let netem = ok(Command::new("unshare")
        .args(["-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem"])
        .stderr(Stdio::null()));
    eprintln!("this kernel {} netem", if netem { "has" } else { "has no" });
    let run = |extra: &[&str]| {
        plumb()
            .env("PLUMB_JOURNAL", journal("choice"))
            .args([
                "run",
                "rr",
                "--topology",
                "veth",
                "--delay",
                "1ms",
                "--json",
            ])
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

/// A long stream through plumb's delay line, started; its pid once its
/// namespaces are up and traffic flows.
fn long_run(j: &std::path::Path) -> std::process::Child {
    let child = plumb()
        .env("PLUMB_JOURNAL", j)
        .args(["run", "stream", "--topology", "veth", "--emulator", "plumb"])
        .args(["--delay", "1ms", "--duration", "60s", "--no-store"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while namespaces_of(child.id()).len() < 2 {
        assert!(Instant::now() < deadline, "the namespaces never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(800));
    child
}

/// Whether the client's TUN device of run `pid` exists.
fn has_tun(pid: u32) -> bool {
    ok(Command::new("ip").args([
        "-n",
        &format!("plumb-{pid}-client"),
        "link",
        "show",
        "plumb-c",
    ]))
}

#[test]
fn a_run_stopped_with_ctrl_c_leaves_no_namespace_device_or_thread() {
    if skip_unless_root() {
        return;
    }
    let _alone = measuring_alone();
    let mut child = long_run(&journal("int"));
    let pid = child.id();
    assert!(has_tun(pid), "the client's TUN device while running");
    assert!(ok(Command::new("kill").args(["-INT", &pid.to_string()])));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
}

#[test]
fn a_killed_run_takes_its_tun_devices_with_it_and_the_next_start_its_namespaces() {
    if skip_unless_root() {
        return;
    }
    let _alone = measuring_alone();
    let j = journal("kill");
    let mut child = long_run(&j);
    let pid = child.id();
    let client_ns = format!("plumb-{pid}-client");
    assert!(has_tun(pid), "the client's TUN device while running");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!has_tun(pid), "the TUN device went with the process");
    let db = TempDb::new("path-kill");
    let out = plumb()
        .env("PLUMB_JOURNAL", &j)
        .args(["list", "--db", db.path()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("removed network namespace {client_ns}")),
        "{err}"
    );
    assert!(namespaces_of(pid).is_empty());
    let _ = std::fs::remove_file(&j);
}
