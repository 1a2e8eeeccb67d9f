//! Connect-request-response-close over real loopback sockets: the close
//! modes as the kernel counts them, and the two ways a machine runs out
//! (descriptors, local ports) reported by name.

mod common;
use common::*;
use std::process::Command;

#[test]
fn rst_close_resets_every_connection_and_leaves_no_time_wait() {
    let _alone = measuring_alone();
    for io in engines() {
        rst_close_on(io);
    }
}

fn rst_close_on(io: &str) {
    let rec = workload_json("crr", &["--flows", "4", "--duration", "1s", "--io", io]);
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

/// An open loop (`--rate`) opens a connection for each transaction its
/// schedule plans, in a flow whose last exchange is over, and times it
/// from its planned time, connect included: as many as planned, as the
/// namespace's kernel counts the opens.
#[test]
fn an_open_loop_opens_connections_at_its_rate() {
    let _alone = measuring_alone();
    let Some(ns) = Netns::new("crrol") else {
        return;
    };
    for io in engines() {
        let before = snmp_in(&ns, "Tcp", "ActiveOpens");
        let out = ns
            .plumb()
            .args(["run", "crr", "--json", "--no-store", "--iterations", "1"])
            .args(["--flows", "4", "--rate", "500", "--io", io])
            .args(["--duration", "2s", "--warmup", "500ms"])
            .output()
            .unwrap();
        assert_ok(&out);
        let opened = (snmp_in(&ns, "Tcp", "ActiveOpens") - before) as f64;
        let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rec["spec"]["rr"]["rate"], 500, "{io}");
        let c = &rec["iterations"][0]["client"];
        let window = f(&c["window_s"]);
        let tx = u(&c["transactions"]) as f64;
        let seen = format!("{io}: {tx} in {window} s, {opened} opened");
        assert!(
            (tx - 500.0 * window).abs() <= 0.02 * 500.0 * window + 2.0,
            "{seen}"
        );
        // The warm-up's and the window's, and the control connection's.
        let planned = 500.0 * (window + 0.5);
        assert!((opened - planned).abs() <= 0.05 * planned + 10.0, "{seen}");
        assert_eq!(u(&c["latency"]["count"]) as f64, tx, "{seen}");
        // An open loop keeps its seconds' latencies for the stretches of a
        // run of parts.
        assert!(
            items(&c["intervals"]).all(|s| !s["buckets"].as_array().unwrap().is_empty()),
            "{seen}"
        );
    }
}

#[test]
fn fin_close_leaves_time_wait_behind() {
    let _alone = measuring_alone();
    for io in engines() {
        let rec = workload_json(
            "crr",
            &[
                "--flows",
                "4",
                "--duration",
                "1s",
                "--close",
                "fin",
                "--io",
                io,
            ],
        );
        let c = &rec["iterations"][0]["client"];
        let tx = transactions_without_resets(c, io);
        assert!(
            counter(c, "TcpExt.TW") >= 0.9 * tx,
            "{io}: {}",
            c["counters"]
        );
    }
}

/// The transactions of client end `c` (of the run `what` names): more
/// than 100, and reset by the client for fewer than a tenth of them.
fn transactions_without_resets(c: &serde_json::Value, what: &str) -> f64 {
    let tx = u(&c["transactions"]) as f64;
    assert!(tx > 100.0, "{what}: {tx} transactions");
    assert!(
        counter(c, "Tcp.OutRsts") < 0.1 * tx,
        "{what}: {}",
        c["counters"]
    );
    tx
}

/// The (local, remote) ports of the TIME_WAIT sockets in `ns`, as its
/// /proc/net/tcp lists them.
fn time_waits(ns: &Netns) -> Vec<(u16, u16)> {
    let out = ns.exec("cat").arg("/proc/net/tcp").output().unwrap();
    let port = |addr: &str| u16::from_str_radix(addr.split(':').nth(1).unwrap(), 16).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f[3] == "06")
        .map(|f| (port(f[1]), port(f[2])))
        .collect()
}

#[test]
fn the_time_wait_is_left_on_the_end_that_closed_first() {
    // It counts both ends' transactions against each other: beside the
    // file's other measuring tests the window edges drift apart (74 of
    // 5802 once in CI, past the bound). Alone, on a loaded 2-CPU machine,
    // each end's edge still lands a few ms from the other's: 114 of 10573
    // (1.1 % of a 500 ms window, 5 ms) once in CI, so 2 % is the bound.
    let _alone = measuring_alone();
    // One flow takes the epoll engine's blocking path, more its
    // multiplexed one; the ring has one path.
    let mut runs = vec![
        ("fin", "epoll", "1"),
        ("server-fin", "epoll", "1"),
        ("server-fin", "epoll", "3"),
    ];
    if ring_here() {
        runs.extend([("fin", "uring", "2"), ("server-fin", "uring", "2")]);
    }
    for (close, io, flows) in runs {
        // A namespace of its own for each, so that its TIME_WAITs are the run's.
        let Some(ns) = Netns::new("crrtw") else {
            return;
        };
        // Room for every connection's port: a SYN from a port the server
        // holds in TIME_WAIT would end that TIME_WAIT early. connect()
        // takes the ports about in turn, two apart, so some 30000
        // connections come back to ports the server still holds: a run of
        // 1.2 s made about that many on a fast machine and kept only 85 %
        // of its TIME_WAITs, so the run is short.
        ns.sysctl("net.ipv4.ip_local_port_range", "1024 65000");
        let out = ns
            .exec(env!("CARGO_BIN_EXE_plumb"))
            .args(["run", "crr", "--json", "--no-store", "--iterations", "1"])
            .args(["--flows", flows, "--duration", "500ms", "--warmup", "100ms"])
            .args(["--close", close, "--io", io])
            .output()
            .unwrap();
        let rec = record_from(&["run", "crr", "--close", close, "--io", io], out);
        assert_eq!(rec["spec"]["rr"]["close"], close);
        let it = &rec["iterations"][0];
        let (c, s) = (&it["client"], &it["server"]);
        let tx = transactions_without_resets(c, &format!("{close} {io} {flows}"));
        assert!(
            (tx - u(&s["transactions"]) as f64).abs() <= 8.0 + 0.02 * tx,
            "{close} {io} {flows}: client {tx}, server {}",
            s["transactions"]
        );
        // Every connection of the run (the window's and more) left one
        // TIME_WAIT, on the end that sent the first FIN: with `fin` the
        // client's, whose peer is the server's port, with `server-fin` the
        // server's, on that port. (The control connection leaves one too.)
        let tw = time_waits(&ns);
        let (server_side, client_side): (Vec<u16>, Vec<u16>) = tw
            .iter()
            .map(|&(local, remote)| {
                if close == "fin" {
                    (remote, local)
                } else {
                    (local, remote)
                }
            })
            .unzip();
        let mut by_port = std::collections::BTreeMap::<u16, usize>::new();
        for p in &server_side {
            *by_port.entry(*p).or_default() += 1;
        }
        let (&port, &n) = by_port.iter().max_by_key(|(_, n)| **n).expect("TIME_WAITs");
        assert!(
            n as f64 >= 0.9 * tx,
            "{close} {io} {flows}: {n} TIME_WAIT for {tx}: {by_port:?}"
        );
        let ports: std::collections::BTreeSet<u16> = server_side
            .iter()
            .zip(&client_side)
            .filter(|(s, _)| **s == port)
            .map(|(_, c)| *c)
            .collect();
        assert!(
            ports.len() as f64 >= 0.9 * n as f64,
            "{close} {io} {flows}: {} client ports for {n}",
            ports.len()
        );
    }
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
    for io in engines() {
        out_of_local_ports_on(io);
    }
}

fn out_of_local_ports_on(io: &str) {
    let Some(ns) = Netns::new("crr") else {
        return;
    };
    // Ten local ports and no reuse of TIME_WAIT ones: FIN closes use them up.
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40009");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "0");
    let out = ns
        .exec(env!("CARGO_BIN_EXE_plumb"))
        .args(["run", "crr", "--no-store", "--iterations", "1"])
        .args(["--close", "fin", "--duration", "1s"])
        .args(["--warmup", "100ms", "--io", io])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("out of local ports"), "{io}: {text}");
}
