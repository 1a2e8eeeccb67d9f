//! Each end's flows' TCP state sampled over the window: what `ss` sees of
//! the same flow on a delayed path, bounded for many flows, and its
//! counters kept from the window's opening.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

fn median(mut xs: Vec<f64>) -> f64 {
    assert!(!xs.is_empty());
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// A list of numbers in the record.
fn nums(v: &Value) -> Vec<f64> {
    items(v).map(f).collect()
}

/// One socket's `rtt:` (ms) and `cwnd:` and `bytes_acked:` of `ss -tin`.
fn ss_flows(ns: &str) -> Vec<(f64, f64, u64)> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-tin", "state", "established"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |line: &str, key: &str| -> Option<String> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key).map(str::to_string))
    };
    text.lines()
        .filter_map(|l| {
            let rtt: f64 = field(l, "rtt:")?.split('/').next()?.parse().ok()?;
            let cwnd: f64 = field(l, "cwnd:")?.parse().ok()?;
            let acked: u64 = field(l, "bytes_acked:")?.parse().ok()?;
            Some((rtt, cwnd, acked))
        })
        .collect()
}

/// The sampled state every 100 ms, and with --tcp-probe the state at
/// every ACK, against `ss -tin` polled by the test.
#[test]
fn sampled_cwnd_and_srtt_agree_with_ss_on_a_delayed_path() {
    if skip_unless_veth() || !require_tool("ss", "iproute2") {
        return;
    }
    let _alone = measuring_alone();
    // Paced below what the path carries, so that the window and the RTT
    // hold still enough for two readers to agree.
    let journal = test_journal("tcp-ss");
    let child = spawn_one_iteration(
        &journal,
        &[
            "stream",
            "--topology",
            "veth",
            "--delay",
            "5ms",
            "--pacing-rate",
            "100M",
            "--duration",
            "4s",
            "--warmup",
            "1s",
            "--tcp-probe",
        ],
    );
    let pid = child.id();
    let client_ns = veth_namespaces_up(pid).swap_remove(0);
    // The data flow is the socket that moves bytes; its readings from a
    // second after it first moved (the warm-up) until it is gone.
    let mut polls: Vec<(Instant, f64, f64)> = Vec::new();
    let mut first_moved = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let flows = ss_flows(&client_ns);
        let Some(&(rtt, cwnd, _)) = flows.iter().filter(|f| f.2 > 1 << 20).max_by_key(|f| f.2)
        else {
            if first_moved.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let now = Instant::now();
        first_moved.get_or_insert(now);
        polls.push((now, rtt, cwnd));
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    let start = first_moved.expect("ss never saw the data flow") + Duration::from_millis(1200);
    let seen: Vec<&(Instant, f64, f64)> = polls.iter().filter(|p| p.0 >= start).collect();
    assert!(seen.len() >= 15, "{} polls of ss in the window", seen.len());
    let ss_rtt_ms = median(seen.iter().map(|p| p.1).collect());
    let ss_cwnd = median(seen.iter().map(|p| p.2).collect());

    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let series = &rec["iterations"][0]["client"]["tcp_series"];
    assert_eq!(u(&series["period_ms"]), 100);
    let n = items(&series["t_ms"]).count();
    assert!(n >= 35, "{n} samples over a 4 s window");
    let flow = &series["sampled"][0];
    let srtt_ms = median(nums(&flow["srtt_us"])) / 1000.0;
    let cwnd = median(nums(&flow["cwnd"]));
    eprintln!("srtt {srtt_ms} ms against {ss_rtt_ms}, cwnd {cwnd} against {ss_cwnd}");
    assert!(
        srtt_ms >= 9.0 && (srtt_ms - ss_rtt_ms).abs() <= 0.2 * ss_rtt_ms + 1.0,
        "srtt: sampled {srtt_ms} ms, ss {ss_rtt_ms} ms"
    );
    assert!(
        (cwnd - ss_cwnd).abs() <= 0.25 * ss_cwnd + 2.0,
        "cwnd: sampled {cwnd}, ss {ss_cwnd}"
    );
    // The peer's window and this end's are there where the kernel has them.
    assert!(flow.get("snd_wnd").is_some() || !kernel_at_least(5, 4));
    assert!(flow.get("rcv_wnd").is_some() || !kernel_at_least(6, 7));

    // Every ACK: as many as the segments sent allow (one ACK to one or
    // more of them), each read, and their medians those ss saw.
    let client = &rec["iterations"][0]["client"];
    let acks = &client["acks"];
    let (counted, read) = (u(&acks["counted"]), u(&acks["read"]));
    let segments = u(&client["bytes_sent"]) / 1448;
    assert!(
        counted >= segments / 64 && counted <= segments + segments / 10,
        "{counted} ACKs for {segments} segments sent: {acks}"
    );
    assert!(read * 100 >= counted * 99, "{acks}");
    let srtt_ms = nums(&acks["srtt_us"])[1] / 1000.0;
    let cwnd = nums(&acks["cwnd"])[1];
    eprintln!("at each ACK: srtt {srtt_ms} ms, cwnd {cwnd}");
    assert!(
        (srtt_ms - ss_rtt_ms).abs() <= 0.2 * ss_rtt_ms + 1.0,
        "srtt at each ACK {srtt_ms} ms, ss {ss_rtt_ms} ms: {acks}"
    );
    assert!(
        (cwnd - ss_cwnd).abs() <= 0.25 * ss_cwnd + 2.0,
        "cwnd at each ACK {cwnd}, ss {ss_cwnd}: {acks}"
    );
    assert!(acks["sampler_cpu_s"].as_f64().unwrap() < 1.0, "{acks}");
}

#[test]
fn tcp_probe_on_a_udp_test_is_refused_naming_the_flag() {
    let out = plumb()
        .args(["run", "udp-stream", "--tcp-probe"])
        .args(ONE_SHORT)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--tcp-probe"), "{err}");
    assert!(err.contains("UDP"), "{err}");
}

/// Whether this host's kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

#[test]
fn many_flows_are_sampled_64_one_by_one_and_all_in_the_sums() {
    let rec = plumb_json(&[
        "run",
        "stream",
        "--flows",
        "80",
        "--duration",
        "1s",
        "--warmup",
        "300ms",
        "--iterations",
        "1",
        "--no-store",
        "--json",
    ]);
    for end in ["client", "server"] {
        let series = &rec["iterations"][0][end]["tcp_series"];
        assert_eq!(u(&series["flows"]), 80, "{end}");
        let sampled: Vec<u64> = items(&series["sampled"]).map(|s| u(&s["flow"])).collect();
        let spread: Vec<u64> = (0..64).map(|i| i * 80 / 64).collect();
        assert_eq!(sampled, spread, "{end}");
        let n = items(&series["t_ms"]).count();
        for s in items(&series["sampled"]) {
            assert_eq!(items(&s["cwnd"]).count(), n);
        }
        // The sums hold every flow, so more than the sampled ones alone.
        let all_cwnd = nums(&series["all"]["cwnd"]);
        for (k, total) in all_cwnd.iter().enumerate() {
            let sampled: f64 = items(&series["sampled"]).map(|s| f(&s["cwnd"][k])).sum();
            assert!(*total > sampled, "{end} sample {k}: {total} <= {sampled}");
        }
        // The record's size, as docs/json.md states it: about 90 bytes a
        // flow sample at most.
        let bytes = series.to_string().len();
        assert!(bytes < 64 * n * 160, "{end}: {bytes} bytes for {n} samples");
    }
}

#[test]
fn counters_are_kept_from_the_windows_opening_and_agree_with_its_edges() {
    // One flow held back by a small receive buffer for part of its time.
    let rec = plumb_json(&[
        "run",
        "stream",
        "--rcvbuf",
        "8K",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--iterations",
        "1",
        "--no-store",
        "--json",
    ]);
    let client = &rec["iterations"][0]["client"];
    let series = &client["tcp_series"];
    let all = &series["all"];
    for key in ["retrans", "busy_us", "rwnd_limited_us", "sndbuf_limited_us"] {
        assert_eq!(f(&all[key][0]), 0.0, "{key} at the opening");
        let v = nums(&all[key]);
        assert!(v.windows(2).all(|w| w[1] >= w[0]), "{key} never falls");
    }
    let last = |key: &str| *nums(&all[key]).last().unwrap() / 1e6;
    let limited = &client["limited"];
    let busy = f(&limited["busy_s"]);
    let window = f(&client["window_s"]);
    assert!(
        busy <= window + 0.05,
        "busy {busy} s in a {window} s window"
    );
    assert!(
        (last("busy_us") - busy).abs() <= 0.05 * busy + 0.03,
        "busy: sampled {} s, at the edges {busy} s",
        last("busy_us")
    );
    assert!(
        (last("rwnd_limited_us") - f(&limited["rwnd_limited_s"])).abs() <= 0.05 * busy + 0.03,
        "rwnd-limited: sampled {} s, at the edges {}",
        last("rwnd_limited_us"),
        limited["rwnd_limited_s"]
    );
    // The series opens a moment after the edges' reading and closes a
    // moment after theirs: a retransmit may fall in either gap (CI saw 46
    // sampled against 47 at the edges), so the two agree within a few.
    let (sampled, edges) = (
        *nums(&all["retrans"]).last().unwrap(),
        f(&client["window_retransmits"]),
    );
    assert!((sampled - edges).abs() <= 3.0, "{sampled} {edges}");
}

/// A plumb command's JSON on stdout, once it succeeded.
fn plumb_json(args: &[&str]) -> Value {
    let out = plumb().args(args).output().unwrap();
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn probes_turned_off_by_name_are_left_out_and_a_wrong_name_is_refused() {
    let out = plumb()
        .env("PLUMB_PROBES_OFF", "tcp_series,tcp_seris")
        .args(["run", "stream", "--duration", "1s", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"tcp_seris\"") && err.lines().count() == 1,
        "{err}"
    );
    let rec: Value = serde_json::from_slice(
        &plumb()
            .env("PLUMB_PROBES_OFF", "tcp_series")
            .args(["run", "stream", "--duration", "1s", "--warmup", "0"])
            .args(["--iterations", "1", "--no-store", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let client = &rec["iterations"][0]["client"];
    assert!(client.get("tcp_series").is_none());
    assert!(
        client.get("limited").is_some(),
        "the other probes still read"
    );
}

#[test]
fn a_runs_page_draws_its_flows_tcp_over_the_window_and_chromium_lays_it_out() {
    let db = TempDb::new("tcp-page");
    let out = plumb()
        .args(["run", "stream", "--flows", "3", "--duration", "2s"])
        .args(["--warmup", "300ms", "--iterations", "1", "--db", db.path()])
        .output()
        .unwrap();
    assert_ok(&out);
    // --per-flow only shapes the page.
    let out = plumb()
        .args(["show", "1", "--per-flow", "--db", db.path()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--html"));
    let Some(dom) = drawn(&["show", "1", "--db", db.path()], "--html") else {
        return;
    };
    // The sender's throughput, cwnd, srtt, the peer's window and what is
    // in flight; the receiver's throughput and its own window; the bars.
    assert_eq!(dom.matches("<svg").count(), 8, "{dom}");
    assert_mentions(
        &dom,
        &[
            "client: congestion window",
            "congestion window (segments)",
            "client: smoothed RTT",
            "the peer's advertised window",
            "server: its own advertised window",
            "mean over all 3 flows",
            "lowest to highest of all 3 flows",
            "seconds into the window",
            "Sender limited by",
        ],
    );
    // The flows' spread as a band, not a line a flow.
    assert!(dom.contains("class=\"band\""), "{dom}");
    assert!(!dom.contains("class=\"flow\""), "{dom}");
    let rec: Value = serde_json::from_slice(
        &plumb()
            .args(["show", "1", "--json", "--db", db.path()])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let it = &rec["iterations"][0];
    let window_s = f(&it["window_s"]);
    // Time is numbered in seconds from the opening, never past the close.
    let ticks: Vec<f64> = dom
        .split("class=\"t x\">")
        .skip(1)
        .map(|t| t[..t.find('<').unwrap()].parse().unwrap())
        .collect();
    assert!(ticks.len() >= 7 * 4, "{ticks:?}");
    assert!(
        ticks.iter().all(|&t| (0.0..=window_s).contains(&t)),
        "{ticks:?}"
    );
    // The mean's line has a point per sample inside the window.
    let inside = items(&it["client"]["tcp_series"]["t_ms"])
        .filter(|t| f(t) / 1000.0 <= window_s + 1e-9)
        .count();
    let cwnd = &dom[dom.find("client: congestion window").unwrap()..];
    let mean = &cwnd[cwnd.find("class=\"mean\" d=\"").unwrap() + 16..];
    let mean = &mean[..mean.find('"').unwrap()];
    assert_eq!(mean.matches(',').count(), inside, "{mean}");
    // On request, each flow as its own line, named.
    let Some(dom) = drawn(&["show", "1", "--per-flow", "--db", db.path()], "--html") else {
        return;
    };
    assert_mentions(&dom, &["<title>flow 2</title>", "each of its 3 flows"]);
    assert!(!dom.contains("class=\"band\""), "{dom}");
}

/// A comparison's page draws each side's median iteration in the same
/// plots, and Chromium lays it out.
#[test]
fn a_comparisons_page_overlays_both_sides_and_chromium_lays_it_out() {
    let db = TempDb::new("tcp-compare-page");
    for label in ["before", "after"] {
        let out = plumb()
            .args(["run", "stream", "--flows", "2", "--duration", "1s"])
            .args(["--warmup", "300ms", "--iterations", "2", "--label", label])
            .args(["--db", db.path()])
            .output()
            .unwrap();
        assert_ok(&out);
    }
    let Some(dom) = drawn(&["compare", "before", "after", "--db", db.path()], "--html") else {
        return;
    };
    // One point: the sender's five plots, the receiver's two, the bars.
    assert_eq!(dom.matches("<svg").count(), 8, "{dom}");
    assert_mentions(
        &dom,
        &[
            "stream send 2 flows",
            "A = before, B = after",
            "=&gt; ",
            "A client throughput",
            "B client throughput",
            "A mean over all 2 flows",
            "B mean over all 2 flows",
            "A lowest to highest of all 2 flows",
            "B lowest to highest of all 2 flows",
            // The limited-by bars, a row a side.
            ">A client<",
            ">B client<",
        ],
    );
}
