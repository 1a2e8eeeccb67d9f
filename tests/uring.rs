//! The io_uring engine (`--io uring`): strace shows that the flows' data
//! moves through the ring and not by system calls, SEND_ZC's copies are
//! the kernel's own report, both engines move what the kernel counts on lo
//! at like rates, a sweep compares them, and a kernel without io_uring is
//! named before any traffic.

mod common;
use common::*;
use serde_json::Value;
use std::collections::HashMap;

/// What strace saw of a run: the calls that move a TCP socket's data, per
/// call name, on the data flows (every TCP socket but the control
/// connection's), the reads of their error queues (MSG_ZEROCOPY's
/// notifications, no data), and the io_uring_enter calls.
#[derive(Debug, Default)]
struct Calls {
    data: HashMap<String, u64>,
    errqueue: u64,
    enters: u64,
}

impl Calls {
    fn data_calls(&self) -> u64 {
        self.data.values().sum()
    }
}

const DATA_CALLS: &str = "write,writev,sendto,sendmsg,read,readv,recvfrom,recvmsg,sendfile,splice";

/// `plumb run WORKLOAD --json ARGS` (and its embedded server, a child)
/// under `strace -f -yy`: its record and the calls on the data flows.
fn traced(workload: &str, args: &[&str]) -> (Value, Calls) {
    let calls = format!("connect,io_uring_enter,{DATA_CALLS}");
    let run = ["run", workload, "--json", "--no-store", "--iterations", "1"];
    let window = ["--duration", "1s", "--warmup", "200ms"];
    let (out, text) = straced(&calls, true, &[&run[..], &window, args].concat());
    let rec = record_from(&[workload], out);
    let mut calls = Calls::default();
    for call in traced_calls(&text) {
        if call.name == "io_uring_enter" {
            calls.enters += u64::from(!call.resumed);
        } else if call.on_data_flow
            // Counted where the call ends, whose line has its flags: a
            // call another thread cut in two ends on its resumed half.
            && (call.resumed || !call.rest.ends_with("<unfinished ...>"))
            && DATA_CALLS.split(',').any(|c| c == call.name)
        {
            if call.rest.contains("MSG_ERRQUEUE") {
                calls.errqueue += 1;
            } else {
                *calls.data.entry(call.name).or_default() += 1;
            }
        }
    }
    (rec, calls)
}

#[test]
fn every_flows_data_goes_through_the_ring_and_not_through_system_calls() {
    let _alone = measuring_alone();
    if !require_tool("strace", "strace") || !ring_here() {
        return;
    }
    let flows = 4;
    let cases: [(&str, &[&str]); 9] = [
        ("stream", &["--flows", "4"]),
        ("stream", &["--flows", "4", "--zerocopy", "uring"]),
        ("stream", &["--flows", "4", "--zerocopy", "msg"]),
        ("stream", &["--flows", "4", "--zerocopy", "sendfile"]),
        ("stream", &["--flows", "4", "--zerocopy", "splice"]),
        ("rr", &["--flows", "4"]),
        ("crr", &["--flows", "4"]),
        ("udp-stream", &["--flows", "4"]),
        ("udp-rr", &["--flows", "4"]),
    ];
    for (workload, args) in cases {
        let what = format!("{workload} {args:?}");
        // uring's own zero-copy send is the ring's; the others run on both.
        let (epoll, by_calls) = traced(
            workload,
            &args
                .iter()
                .copied()
                .filter(|a| !args.contains(&"uring") || (*a != "--zerocopy" && *a != "uring"))
                .collect::<Vec<_>>(),
        );
        let (ring, on_ring) = traced(workload, &[args, &["--io", "uring"]].concat());
        let work = |rec: &Value| {
            let it = &rec["iterations"][0];
            match workload {
                "stream" => u(&it["transfer"]["sent_bytes"]) / (128 << 10),
                "udp-stream" => u(&it["client"]["udp"]["packets_sent"]),
                _ => u(&it["client"]["transactions"]),
            }
        };
        let (w_epoll, w_ring) = (work(&epoll), work(&ring));
        // Under strace the epoll engine's many calls slow it tenfold.
        assert!(w_epoll > 20 && w_ring > 100, "{what}: {w_epoll} {w_ring}");
        // The check can see data calls: epoll makes at least one per
        // message or transaction of the window (the whole run has more).
        assert!(
            by_calls.data_calls() >= w_epoll,
            "{what}: epoll made {by_calls:?} for {w_epoll}"
        );
        // On the ring a flow's socket sees at most its set-up (the cookie
        // each flow carries when it opens), whatever the window moved; a
        // udp-stream receiver also reads what its socket holds as it hands
        // its counts over at the window's edges, a small part of the
        // datagrams.
        let edges = if workload == "udp-stream" {
            w_ring / 20
        } else {
            0
        };
        assert!(
            on_ring.data_calls() <= 2 * flows + edges,
            "{what}: the ring engine still made {on_ring:?} for {w_ring}"
        );
        assert!(on_ring.enters > 0, "{what}: no io_uring_enter: {on_ring:?}");
        // MSG_ZEROCOPY's notifications are read beside the ring, and only
        // there.
        let notified = args.contains(&"msg");
        assert_eq!(on_ring.errqueue > 0, notified, "{what}: {on_ring:?}");
        assert_eq!(by_calls.errqueue > 0, notified, "{what}: {by_calls:?}");
    }
}

#[test]
fn a_lone_rr_flow_on_the_ring_enters_the_kernel_once_per_message() {
    // A send's completion leaves an rr flow nothing to do until the answer
    // comes, so the loop waits for both in one io_uring_enter: one call per
    // message at each end, where taking the send's completion alone would
    // make it two.
    let _alone = measuring_alone();
    if !require_tool("strace", "strace") || !ring_here() {
        return;
    }
    let (rec, calls) = traced("rr", &["--io", "uring"]);
    let tx = u(&rec["iterations"][0]["client"]["transactions"]);
    assert!(tx > 100, "{tx} transactions");
    // Both ends over the whole run, whose warm-up and set-up add to the
    // window's transactions: about 2.4 calls per transaction of the
    // window, and about 5 with a call for each send's completion.
    let per_tx = calls.enters as f64 / tx as f64;
    assert!(
        (2.0..3.5).contains(&per_tx),
        "{} io_uring_enter for {tx} transactions: {per_tx:.2} each",
        calls.enters
    );
}

/// The end of `rec` that sent.
fn client(rec: &Value) -> &Value {
    &rec["iterations"][0]["client"]
}

#[test]
fn send_zc_reports_the_copies_the_kernel_made_as_msg_zerocopy_does() {
    let _alone = measuring_alone();
    if !ring_here() {
        return;
    }
    let args = ["--msg-size", "64K", "--duration", "1s"];
    let ring = stream_json(&[&args[..], &["--io", "uring", "--zerocopy", "uring"]].concat());
    let msg = stream_json(&[&args[..], &["--zerocopy", "msg"]].concat());
    assert_eq!(ring["spec"]["zerocopy"], "uring");
    assert_eq!(ring["spec"]["io"], "uring");
    for (rec, mode) in [(&ring, "uring"), (&msg, "msg")] {
        let c = client(rec);
        let z = &c["zerocopy"];
        let (sends, done, copied) = (u(&z["sends"]), u(&z["completions"]), u(&z["copied"]));
        assert!(sends > 100, "{mode}: {z}");
        assert_eq!(u(&z["outstanding"]), 0, "{mode}: {z}");
        assert_eq!(done, sends, "{mode}: every send completed: {z}");
        // Loopback copies at delivery and the kernel says so, through the
        // error queue for MSG_ZEROCOPY and the notification for SEND_ZC;
        // only what a reset freed unsent at the end may say otherwise.
        let running = done - u(&z["at_close"]);
        let copied_running = copied - u(&z["copied_at_close"]);
        assert!(copied_running * 100 >= running * 99, "{mode}: {z}");
        let warnings = c["warnings"].to_string();
        assert!(
            warnings.contains(&format!("zerocopy {mode}: the kernel copied")),
            "{mode}: {warnings}"
        );
        // Each completion is one message: sends times the message size is
        // what the sender counted over the run, at least the window's.
        let sent = u(&rec["iterations"][0]["transfer"]["sent_bytes"]);
        assert!(
            sends * (64 << 10) >= sent,
            "{mode}: {sends} sends, {sent} bytes"
        );
    }
    assert!(client(&ring)["warnings"]
        .to_string()
        .contains("IORING_OP_SEND_ZC"));
}

#[test]
fn both_engines_move_what_lo_counts_and_count_it_alike() {
    let _alone = measuring_alone();
    if !ring_here() {
        return;
    }
    // Per (workload, engine): the rate, and the bytes lo carried per unit of
    // work the run counted (a byte read for stream, a transaction for rr
    // and crr).
    let mut rates: HashMap<(&str, &str), Vec<f64>> = HashMap::new();
    let mut lo_per_unit: HashMap<(&str, &str), Vec<f64>> = HashMap::new();
    for _round in 0..3 {
        for workload in ["stream", "rr", "crr"] {
            for io in ["epoll", "uring"] {
                let before = lo_rx().0;
                // Reads of 32K on both engines: with the default 128K the
                // ring's lone flow streams at about 0.7 of epoll's here
                // (BENCHMARKS' readsize section).
                let read = if workload == "stream" {
                    &["--read-size", "32K"][..]
                } else {
                    &[]
                };
                let rec = workload_json(
                    workload,
                    &[&["--io", io, "--duration", "1s"], read].concat(),
                );
                let lo = lo_rx().0 - before;
                let what = format!("{workload} {io}");
                assert_eq!(rec["spec"]["io"].as_str().unwrap_or("epoll"), io, "{what}");
                let it = &rec["iterations"][0];
                let received =
                    u(&it["client"]["bytes_received"]) + u(&it["server"]["bytes_received"]);
                // Every byte either end read crossed lo, with its headers.
                assert!(
                    received > 0 && lo >= received,
                    "{what}: lo {lo}, read {received}"
                );
                let (rate, units) = if workload == "stream" {
                    (f(&it["derived"]["throughput_bps"]), received)
                } else {
                    let (c, s) = (
                        u(&it["client"]["transactions"]),
                        u(&it["server"]["transactions"]),
                    );
                    // The same transactions, up to what the gap between the
                    // ends' windows (each edge told over the control
                    // connection) holds: 1 % on a quiet host, 1.2 % and
                    // once 2.9 % (crr on the ring, 2217 against 2282) under
                    // CI on a host whose hypervisor stole time; 5 %, at
                    // least 2. A transaction counted twice or never at one
                    // end shows as far more.
                    assert!(
                        c.abs_diff(s) <= (c / 20).max(2),
                        "{what}: client {c}, server {s}"
                    );
                    (c as f64, c)
                };
                rates.entry((workload, io)).or_default().push(rate);
                lo_per_unit
                    .entry((workload, io))
                    .or_default()
                    .push(lo as f64 / units as f64);
            }
        }
    }
    let median = |m: &HashMap<(&str, &str), Vec<f64>>, key| {
        let mut v: Vec<f64> = m[&key].clone();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    for workload in ["stream", "rr", "crr"] {
        // An engine that lost or double-counted work shows in what lo
        // carried per unit it counted, whatever the speed: a factor of
        // two. Short of that: crr's segments per transaction agree to a
        // tenth; rr's to three tenths, since whether a 1-byte exchange's
        // ACKs ride on data or go alone follows the timing (one engine's
        // three runs spread from 128 to 159 bytes a transaction on a
        // loaded host); the headers per byte of a stream to a fifth, for
        // segment sizes.
        let per_unit =
            median(&lo_per_unit, (workload, "uring")) / median(&lo_per_unit, (workload, "epoll"));
        let within = match workload {
            "stream" => 0.2,
            "rr" => 0.3,
            _ => 0.1,
        };
        assert!(
            (1.0 - within..1.0 / (1.0 - within)).contains(&per_unit),
            "{workload}: lo per unit, uring/epoll {per_unit:.3} ({lo_per_unit:?})"
        );
        // Speed is the benchmarks' business; on two vCPUs shared with the
        // rest of the suite one-second runs swing by half, so this only
        // catches an engine that stalls.
        let ratio = median(&rates, (workload, "uring")) / median(&rates, (workload, "epoll"));
        assert!(
            (0.35..2.85).contains(&ratio),
            "{workload}: uring/epoll {ratio:.2} ({rates:?})"
        );
    }
}

#[test]
fn a_sweep_sets_the_two_engines_side_by_side() {
    let _alone = measuring_alone();
    if !ring_here() {
        return;
    }
    let file = ExperimentFile::new(
        "uring-sweep",
        &format!(
            "{}[[variant]]\nname = \"epoll\"\n[[variant]]\nname = \"uring\"\nset = {{ io = \"uring\" }}\n",
            quick_rr("uring-sweep", "iterations = 2\norder = \"interleaved\"")
        ),
    );
    let db = TempDb::new("uring-sweep");
    let out = plumb()
        .args(["sweep", file.path(), "--db", db.path()])
        .output()
        .unwrap();
    assert_says(
        &out,
        &[
            "variant=epoll: ",
            "variant=uring: ",
            "A = epoll   B = uring",
        ],
    );
    let list = plumb().args(["list", "--db", db.path()]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert_eq!(list.matches("io uring").count(), 1, "{list}");
}

/// A read size the ring once refused (under 512 bytes, over 1M) sizes its
/// receive buffers as asked: the stream runs, and what the receiver counts
/// crossed lo.
#[test]
fn the_ring_receives_into_buffers_of_the_read_size_asked() {
    let _alone = measuring_alone();
    if !ring_here() {
        return;
    }
    for (read, bytes) in [("100", 100), ("4M", 4 << 20)] {
        let before = lo_rx().0;
        let rec = workload_json(
            "stream",
            &[
                "--io",
                "uring",
                "--msg-size",
                "4M",
                "--read-size",
                read,
                "--duration",
                "1s",
            ],
        );
        let lo = lo_rx().0 - before;
        assert_eq!(rec["spec"]["read_size"], bytes);
        let it = &rec["iterations"][0];
        let received = u(&it["server"]["bytes_received"]);
        assert!(
            received > 0 && lo >= received,
            "{read}: lo {lo}, read {received}"
        );
    }
}

#[test]
fn what_the_ring_does_not_run_is_refused_by_flag() {
    for (args, needle) in [
        (
            &["run", "stream", "--io", "epoll", "--zerocopy", "uring"][..],
            "--zerocopy: uring sends through the io_uring engine",
        ),
        (&["run", "stream", "--io", "epol"][..], "--io"),
    ] {
        assert_refused_in_one_line(args, needle);
    }
    // TCP_ZEROCOPY_RECEIVE runs on the ring too: over lo it is refused as
    // on epoll, for the device, not for the engine.
    let out = run(&["run", "stream", "--io", "uring", "--rx", "zerocopy"]);
    assert_exit(
        &out,
        2,
        &[
            "--rx: cannot use zerocopy here",
            "TCP_ZEROCOPY_RECEIVE",
            "over lo",
        ],
    );
}

/// `plumb doctor`'s io_uring finding: its status, and its value up to the
/// first ';' or '('.
fn doctor_uring() -> (String, String) {
    let out = plumb()
        .args(["doctor", "--json", "--sample", "100ms"])
        .output()
        .unwrap();
    assert_ok(&out);
    let audit: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = items(&audit["findings"])
        .find(|f| f["check"] == "io_uring")
        .unwrap_or_else(|| panic!("no io_uring finding in {audit}"));
    let value = f["value"].as_str().unwrap();
    let head = value.split([';', '(']).next().unwrap().trim();
    (f["status"].as_str().unwrap().to_string(), head.to_string())
}

/// Puts kernel.io_uring_disabled back as it was, also when the test fails.
struct Disabled(String);

impl Drop for Disabled {
    fn drop(&mut self) {
        std::fs::write("/proc/sys/kernel/io_uring_disabled", &self.0).unwrap();
    }
}

/// `--io auto`, the default, runs a stream of several flows with its ends
/// pinned apart on the ring, and one flow pinned apart or an unpinned
/// stream on epoll where the host has fewer than 4 CPUs, as strace sees
/// the data move; `--io epoll` forces epoll whatever the rule says. The
/// record states the engine and that the rule chose it, and the summary
/// names the rule's row.
#[test]
fn the_default_engine_is_the_rules_and_a_flag_still_forces_one() {
    let _alone = measuring_alone();
    if online_cpus() < 2 {
        skip("needs 2 CPUs to pin the ends apart");
        return;
    }
    let pinned = ["--client-cpus", "0", "--server-cpus", "1", "--flows", "2"];
    let (rec, calls) = traced("stream", &pinned);
    assert_eq!(rec["spec"]["io"], "uring", "{}", rec["spec"]);
    assert_eq!(rec["spec"]["io_auto"], true);
    // At most the flows' set-up (a cookie each) by system calls.
    assert!(calls.enters > 0 && calls.data_calls() <= 4, "{calls:?}");
    let one = traced("stream", &pinned[..4]);
    for (rec, calls) in [traced("stream", &[]), one] {
        assert_eq!(rec["spec"]["io_auto"], true);
        if online_cpus() >= 4 {
            assert_eq!(rec["spec"]["io"], "uring", "{}", rec["spec"]);
            assert!(calls.enters > 0, "{calls:?}");
            continue;
        }
        assert!(rec["spec"].get("io").is_none(), "{}", rec["spec"]);
        assert_eq!(calls.enters, 0, "{calls:?}");
        assert!(calls.data_calls() > 0, "{calls:?}");
    }
    let (rec, calls) = traced("stream", &[&pinned[..], &["--io", "epoll"]].concat());
    assert!(rec["spec"].get("io").is_none(), "{}", rec["spec"]);
    assert!(rec["spec"].get("io_auto").is_none(), "{}", rec["spec"]);
    assert_eq!(calls.enters, 0, "{calls:?}");
    // The engine chosen is the one an asked run has: one test point.
    let (asked, _) = traced("stream", &[&pinned[..], &["--io", "uring"]].concat());
    let key = |r: &Value| r["spec_key"].as_str().unwrap().to_string();
    let (auto, _) = traced("stream", &pinned);
    assert_eq!(key(&asked), key(&auto));
    let out = plumb()
        .args(["run", "stream", "--no-store", "--iterations", "1"])
        .args(["--duration", "300ms", "--warmup", "100ms"])
        .args(pinned)
        .output()
        .unwrap();
    assert_ok(&out);
    assert_mentions(
        &String::from_utf8_lossy(&out.stdout),
        &["engine uring, as --io auto chooses for a stream of several flows with its ends"],
    );
}

#[test]
fn a_host_without_io_uring_is_named_before_any_traffic() {
    let knob = "/proc/sys/kernel/io_uring_disabled";
    let Ok(before) = std::fs::read_to_string(knob) else {
        skip("this kernel has no kernel.io_uring_disabled (Linux 6.6)");
        return;
    };
    if !require_root("set kernel.io_uring_disabled") {
        return;
    }
    let _alone = measuring_alone();
    let restore = Disabled(before.clone());
    std::fs::write(knob, "2").unwrap();
    let lo = lo_rx().0;
    assert_refused_in_one_line(
        &["run", "stream", "--io", "uring"],
        "--io: cannot use uring: io_uring is disabled on this host (kernel.io_uring_disabled = 2)",
    );
    // Refused before the server started: the stream would have put
    // gigabytes on lo.
    assert!(lo_rx().0 - lo < 1 << 20);
    // An epoll run does not need io_uring, and where the rule would
    // choose the ring (the ends pinned apart) the default takes epoll and
    // says why.
    workload_json("rr", &["--duration", "200ms"]);
    if online_cpus() >= 2 {
        let out = plumb()
            .args(["run", "stream", "--no-store", "--iterations", "1"])
            .args(["--duration", "300ms", "--warmup", "100ms", "--json"])
            .args(["--client-cpus", "0", "--server-cpus", "1", "--flows", "2"])
            .output()
            .unwrap();
        assert_ok(&out);
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(rec["spec"].get("io").is_none(), "{}", rec["spec"]);
        assert_eq!(rec["spec"]["io_auto"], true);
    }
    assert_eq!(
        doctor_uring(),
        (
            "info".to_string(),
            "io_uring is disabled on this host".to_string()
        )
    );
    drop(restore);
    assert_eq!(std::fs::read_to_string(knob).unwrap(), before);
    if before.trim() == "0" {
        assert_eq!(doctor_uring().0, "ok");
    }
}
