//! Runs of parts: several workloads in one run, one server session serving
//! them all, each part's figures its own, checked against what lo and the
//! kernel's sockets say.

mod common;
use common::*;
use serde_json::Value;

/// The part named `name` of an iteration.
fn part<'a>(it: &'a Value, name: &str) -> &'a Value {
    items(&it["parts"])
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no part {name} in {}", it["parts"]))
}

#[test]
fn each_part_counts_its_own_flows_from_its_start_and_lo_carried_them_all() {
    let _alone = measuring_alone();
    let args = [
        "run",
        "rr",
        "--duration",
        "3s",
        "--warmup",
        "500ms",
        "--part",
        "load=stream:flows=2:direction=both:start=1s",
        "--part",
        "dgrams=udp-stream:msg_size=1K:pacing_rate=none",
        "--json",
    ];
    let (lo_before, _) = lo_rx();
    let rec = record_of(&args);
    let (lo_after, _) = lo_rx();
    let errors = schema_errors(&schema(), &rec);
    assert!(errors.is_empty(), "{errors:#?}");

    let spec = &rec["spec"];
    assert_eq!(items(&spec["parts"]).count(), 2, "{spec}");
    assert_eq!(spec["parts"][0]["start_ms"], 1000);
    let it = &rec["iterations"][0];
    assert_eq!(it["complete"], true);

    // The main part: rr with its latency, and the host's figures, taken
    // once, with it.
    assert!(u(&it["client"]["transactions"]) > 0);
    assert!(it["client"]["latency"]["p99_us"].is_number());
    assert!(!items(&it["client"]["cpus"]).as_slice().is_empty());
    assert_eq!(items(&it["client"]["flows"]).count(), 1);

    // The load part: its own 2 flows each way, measured from its start,
    // a second into the 3 s window.
    let load = part(it, "load");
    assert_eq!(f(&load["start_s"]), 1.0);
    let w = f(&load["window_s"]);
    assert!((1.7..2.6).contains(&w), "load's window {w} s");
    for end in ["client", "server"] {
        let e = &load[end];
        assert_eq!(items(&e["flows"]).count(), 2, "{end}");
        assert_eq!(items(&e["tcp_info"]).count(), 2, "{end}");
        assert!(
            u(&e["bytes_sent"]) > 0 && u(&e["bytes_received"]) > 0,
            "{end}"
        );
        // The host's and the process's are the main part's.
        assert!(e["cpus"].as_array().is_none_or(|c| c.is_empty()), "{end}");
    }
    // A receiver counts about what its peer sent: its window closes a
    // little after the sender's, as the server hears of the close, so it
    // may count what was sent in that moment, but never another part's.
    for (rx, tx) in [("server", "client"), ("client", "server")] {
        let (got, sent) = (u(&load[rx]["bytes_received"]), u(&load[tx]["bytes_sent"]));
        assert!(
            got as f64 <= sent as f64 * 1.1 && got as f64 >= sent as f64 * 0.5,
            "{rx} received {got} bytes of the {sent} {tx} sent"
        );
    }
    assert!(f(&load["derived"]["throughput_bps"]) > 0.0);

    // The datagram part, from the start: the server received what it did
    // of what the client sent.
    let d = part(it, "dgrams");
    assert_eq!(f(&d["start_s"]), 0.0);
    let (c, s) = (&d["client"]["udp"], &d["server"]["udp"]);
    assert!(u(&s["packets_received"]) > 0, "{d}");
    assert!(u(&s["packets_received"]) <= u(&c["packets_sent"]), "{d}");

    // lo carried every byte each part counted, and more (headers, the
    // warm-up, the control session): a part that counted another's flows
    // would count past it.
    let counted: u64 = [
        &it["client"],
        &load["client"],
        &load["server"],
        &d["server"],
    ]
    .iter()
    .map(|e| u(&e["bytes_received"]))
    .sum::<u64>()
        + u(&it["server"]["bytes_received"]);
    let lo = lo_after - lo_before;
    assert!(
        counted <= lo,
        "the parts counted {counted} bytes, lo carried {lo}"
    );
    assert!(
        counted > lo / 4,
        "the parts counted {counted} bytes of lo's {lo}"
    );
}

#[test]
fn a_part_that_stops_moves_nothing_after_its_stop_and_no_end_calls_it_a_failure() {
    let _alone = measuring_alone();
    let args = [
        "run",
        "rr",
        "--duration",
        "4s",
        "--warmup",
        "1s",
        "--part",
        "bulk=stream:flows=2:start=1s:stop=2s",
        "--part",
        "ping=udp-rr:stop=1s",
        "--part",
        "conn=crr:stop=2s",
        "--json",
    ];
    let (lo_before, _) = lo_rx();
    let rec = record_of(&args);
    let (lo_after, _) = lo_rx();
    let it = &rec["iterations"][0];
    let bulk = part(it, "bulk");
    let w = f(&bulk["window_s"]);
    assert!((0.8..1.5).contains(&w), "bulk's window {w} s");
    // Each end halts after its peer has closed the part's window (the
    // server a second after its client): no flow fails, no request waits
    // in vain, no connection is refused.
    for p in items(&it["parts"]) {
        for end in ["client", "server"] {
            assert!(
                p[end]["warnings"].as_array().is_none_or(|w| w.is_empty()),
                "{} {end}: {}",
                p["name"],
                p[end]["warnings"]
            );
        }
    }
    let ping = &part(it, "ping")["client"];
    assert!(u(&ping["transactions"]) > 0);
    assert_eq!(u(&ping["udp"]["timeouts"]), 0, "{ping}");
    assert!(u(&part(it, "conn")["client"]["transactions"]) > 0);
    assert_eq!(rec["spec"]["parts"][0]["stop_ms"], 2000);
    // lo carried the parts' figures and little else: the bulk stream
    // still going for the two seconds after its stop would have tripled it.
    let moved: u64 = items(&it["parts"])
        .map(|p| u(&p["server"]["bytes_received"]))
        .sum();
    let lo = lo_after - lo_before;
    assert!(moved > 0 && moved <= lo, "the parts {moved} bytes, lo {lo}");
    assert!(
        (lo as f64) < moved as f64 * 1.6 + 64e6,
        "lo carried {lo} bytes for the parts' {moved}: traffic went on after a stop"
    );
    assert!(u(&it["client"]["transactions"]) > 0);
}

#[test]
fn the_summary_names_each_part_and_a_comparison_pairs_them_by_name() {
    let _alone = measuring_alone();
    let db = TempDb::new("parts");
    let parts = ["--part", "bulk=stream:flows=1", "--part", "ping=udp-rr"];
    for label in ["before", "after"] {
        let out = plumb()
            .args(["run", "rr", "--duration", "1s", "--warmup", "200ms"])
            .args(parts)
            .args(["--iterations", "2", "--label", label, "--db", db.path()])
            .output()
            .unwrap();
        let text = assert_says(
            &out,
            &[
                "\n  + part bulk: stream",
                "part ping: udp-rr",
                "from the run's start",
                "datagrams   requests",
            ],
        );
        assert_fits_80(&text);
    }
    // The store keeps each part's figures.
    let out = run(&["export", "--db", db.path()]);
    assert_ok(&out);
    let export: Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in items(&export["runs"]) {
        for it in items(&r["record"]["iterations"]) {
            let names: Vec<&Value> = items(&it["parts"]).map(|p| &p["name"]).collect();
            assert_eq!(names, ["bulk", "ping"]);
            assert!(u(&part(it, "bulk")["server"]["bytes_received"]) > 0);
        }
    }
    let out = compare(&db, "before", "after", "json");
    assert_ok(&out);
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summaries: Vec<&str> = items(&c["points"])
        .map(|p| p["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries.len(), 3, "{summaries:?}");
    assert!(
        summaries.iter().any(|s| s.starts_with("part bulk: stream")),
        "{summaries:?}"
    );
    assert!(
        summaries.iter().any(|s| s.starts_with("part ping: udp-rr")),
        "{summaries:?}"
    );
    let keys: Vec<&str> = items(&c["points"])
        .map(|p| p["spec_key"].as_str().unwrap())
        .collect();
    let run_key = keys
        .iter()
        .find(|k| !k.contains('/'))
        .expect("the run's own point");
    assert!(
        keys.contains(&format!("{run_key}/bulk").as_str()),
        "{keys:?}"
    );
    // The history of a part, run after run: each run's mean is that of the
    // part's own transactions over its iterations' windows.
    let key = format!("{run_key}/ping");
    let args = ["history", "--spec-key", &key, "--format", "json"];
    let out = run(&[&args[..], &["--db", db.path()]].concat());
    assert_ok(&out);
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        h["summary"]
            .as_str()
            .unwrap()
            .starts_with("part ping: udp-rr"),
        "{h}"
    );
    let exported: Vec<&Value> = items(&export["runs"]).collect();
    assert_eq!(items(&h["runs"]).count(), exported.len(), "{h}");
    for (point, r) in items(&h["runs"]).zip(exported) {
        let tps: Vec<f64> = items(&r["record"]["iterations"])
            .map(|it| {
                let c = &part(it, "ping")["client"];
                u(&c["transactions"]) as f64 / c["window_s"].as_f64().unwrap()
            })
            .collect();
        let mean = tps.iter().sum::<f64>() / tps.len() as f64;
        let got = point["mean"].as_f64().unwrap();
        assert!((got - mean).abs() <= 1e-6 * mean, "{got} against {mean}");
    }
    // A part the runs do not have is named, with those they have.
    let bad = format!("{run_key}/pong");
    let out = run(&["history", "--spec-key", &bad, "--db", db.path()]);
    assert_exit(&out, 2, &["--spec-key", "no part pong", "bulk, ping"]);
}

#[test]
fn a_bad_part_is_refused_in_one_line_naming_what_is_wrong() {
    for (part, says) in [
        ("load", "--part: 'load' does not start with NAME=WORKLOAD"),
        ("load=stream:duration=1s", "duration is the run's"),
        (
            "load=stream:start=20s",
            "not a whole second inside the 10s window",
        ),
        ("main=stream", "'main' names the run's own workload"),
        ("a=udp-rr:cc=bbr", "a TCP option"),
    ] {
        assert_refused_in_one_line(&["run", "rr", "--part", part], says);
    }
    assert_refused_in_one_line(
        &["run", "rr", "--part", "a=stream", "--part", "a=crr"],
        "part 'a' is named twice",
    );
}

/// On a terminal each part's seconds show beside the main part's, named,
/// on the run's time axis: none before the part's start.
#[test]
fn a_parts_seconds_show_on_a_terminal_from_its_start() {
    let Some(mut script) = on_a_terminal(&[
        "run",
        "rr",
        "--part",
        "load=stream:start=2s",
        "--duration",
        "4s",
        "--warmup",
        "300ms",
        "--iterations",
        "1",
        "--no-store",
    ]) else {
        return;
    };
    let _alone = measuring_alone();
    let out = script.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let second = |l: &str| -> f64 { l.split_whitespace().next().unwrap().parse().unwrap() };
    let main: Vec<f64> = (text.lines())
        .filter(|l| l.contains(" tx/s   p99 "))
        .map(second)
        .collect();
    let part: Vec<f64> = (text.lines())
        .filter(|l| l.contains("part load  client   sent "))
        .map(second)
        .collect();
    assert!(main.len() >= 3, "{text}");
    // The part started on the window's second second: its first ends at 3.
    assert!((1..=2).contains(&part.len()), "{text}");
    assert!(part.iter().all(|&t| t >= 2.9), "{part:?}\n{text}");
}
