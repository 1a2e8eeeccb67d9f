//! The qdiscs probe: each end's root queueing disciplines over the window,
//! read over rtnetlink, checked against the rate the shaper was set to and
//! the bytes the interface counted; and the bottleneck on a router between
//! the ends (`--qdisc`), against the wait its depth makes.

mod common;
use common::*;
use serde_json::Value;

/// A 20 Mbit/s token bucket with a 30 KB queue on the server's side of a
/// veth pair, the server sending CUBIC: the server's end records the
/// shaper sending at its rate, holding packets back within its queue, and
/// sending the bytes its interface counted; the client's side, the
/// kernel's noqueue, records none.
#[test]
fn a_shaper_on_the_path_is_read_at_its_rate_with_what_it_held_and_dropped() {
    if skip_unless_veth() || !require_tool("tc", "iproute2") {
        return;
    }
    let _alone = measuring_alone();
    let rate_bps = 20e6;
    let shaper = "qdisc:plumb-s=tbf rate 20mbit burst 16k limit 30k";
    let out = plumb()
        .args(["run", "stream", "--topology", "veth", "--direction", "recv"])
        .args([
            "--server-knob",
            shaper,
            "--cc",
            "cubic",
            "--json",
            "--no-store",
        ])
        .args(["--iterations", "1", "--duration", "3s", "--warmup", "500ms"])
        .output()
        .unwrap();
    assert_ok(&out);
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errs = schema_errors(&schema(), &rec);
    assert!(errs.is_empty(), "schema: {errs:?}");
    let it = &rec["iterations"][0];
    let (c, s) = (&it["client"], &it["server"]);
    let client_qdiscs = c["qdiscs"].as_array().into_iter().flatten();
    assert!(
        client_qdiscs.clone().all(|q| q["interface"] != "plumb-c"),
        "the client's noqueue counts nothing: {}",
        c["qdiscs"]
    );
    let q: Vec<&Value> = items(&s["qdiscs"])
        .filter(|q| q["interface"] == "plumb-s")
        .collect();
    assert_eq!(q.len(), 1, "{}", s["qdiscs"]);
    let q = q[0];
    assert_eq!(q["kind"], "tbf", "{q}");
    let sent_bps = f(&q["bytes"]) * 8.0 / f(&s["window_s"]);
    assert!(
        (sent_bps / rate_bps - 1.0).abs() < 0.1,
        "the shaper sent {sent_bps} bit/s, set to {rate_bps}: {q}"
    );
    assert!(u(&q["overlimits"]) > 0, "{q}");
    // On the sender's own egress, TCP small queues keeps the queue from
    // overflowing more often than not: drops are counted, not required.
    assert!(q["drops"].is_u64(), "{q}");
    assert!(u(&q["backlog_bytes"]) <= 30 * 1024, "{q}");
    // What the qdisc sent is what the interface put on the wire, read over
    // the same window from /proc/net/dev (a segment's headers counted
    // once by each).
    let iface = items(&s["interfaces"])
        .find(|i| i["name"] == "plumb-s")
        .unwrap_or_else(|| panic!("{}", s["interfaces"]));
    let wire = f(&iface["tx_bytes"]);
    assert!(
        (f(&q["bytes"]) / wire - 1.0).abs() < 0.05,
        "qdisc {} bytes, interface {wire}",
        q["bytes"]
    );
}

/// A 20 Mbit/s bottleneck on a router between the ends, a pfifo under
/// HTB, one CUBIC stream filling it: a transaction beside the stream waits
/// behind the queue, so its latency is the queue's length over the link
/// rate, deep queue against shallow. Checked against what the run does
/// not compute: the router's qdisc read with `tc` and a ping from the
/// client's namespace while the run goes on.
#[test]
fn a_routers_fifo_delays_a_transaction_by_its_depth_over_the_link_rate() {
    if skip_unless_router() {
        return;
    }
    let _alone = measuring_alone();
    let rate_bps = 20e6;
    let mut p50 = Vec::new();
    for (queue, deep) in [("200K", true), ("25K", false)] {
        let queue_bytes = f64::from(if deep { 200 * 1024 } else { 25 * 1024 });
        // pfifo's limit is the queue in packets of the MTU, each 1514
        // bytes as the qdisc counts it.
        let limit_bytes = (queue_bytes / 1500.0).floor() * 1514.0;
        let expected_ms = limit_bytes * 8.0 / rate_bps * 1000.0;
        let journal = test_journal(&format!("router-{queue}"));
        let child = spawn_one_iteration(
            &journal,
            &[
                "rr",
                "--topology",
                "veth",
                "--qdisc",
                "pfifo",
                "--link-rate",
                "20M",
                "--queue",
                queue,
                "--cc",
                "cubic",
                "--part",
                "load=stream:cc=cubic",
                "--duration",
                "4s",
                "--warmup",
                "1s",
            ],
        );
        let pid = child.id();
        let namespaces = until_router(pid);
        let (client_ns, router_ns) = (&namespaces[0], &namespaces[1]);
        // Once the stream has filled the queue (tc's own reading), however
        // long the set-up took, ping waits behind it.
        let held = until_backlog(router_ns, "plumb-rs", 0.5 * limit_bytes);
        let ping = ping_from(client_ns, 8);
        // plumb's own control messages pass in a class of their own (CS6),
        // not in the test's queue.
        let classes = std::process::Command::new("tc")
            .args(["-s", "-n", router_ns, "class", "show", "dev", "plumb-rs"])
            .output()
            .unwrap();
        let classes = String::from_utf8_lossy(&classes.stdout).into_owned();
        let control_pkts: u64 = classes
            .split("class htb 1:2 ")
            .nth(1)
            .and_then(|c| c.split(" bytes ").nth(1)?.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no control class: {classes}"));
        assert!(control_pkts > 0, "{classes}");
        let out = child.wait_with_output().unwrap();
        assert_ok(&out);
        assert!(
            veth_namespaces(pid).is_empty(),
            "the run removes its router: {:?}",
            veth_namespaces(pid)
        );
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
        let errs = schema_errors(&schema(), &rec);
        assert!(errs.is_empty(), "schema: {errs:?}");
        let it = &rec["iterations"][0];
        let lat = &it["client"]["latency"];
        let (median_ms, p90_ms, p99_ms) = (
            f(&lat["p50_us"]) / 1e3,
            f(&lat["p90_us"]) / 1e3,
            f(&lat["p99_us"]) / 1e3,
        );
        // A full FIFO drops at its tail, pings too (a 17-packet one lost
        // 3 of 8 once).
        assert!(ping.len() >= 3, "{ping:?}");
        let ping_ms = ping.iter().sum::<f64>() / ping.len() as f64;
        let queues: Vec<&Value> = items(&it["client"]["path_queues"]).collect();
        assert_eq!(queues.len(), 2, "{}", it["client"]["path_queues"]);
        let to_server = queues.iter().find(|q| q["toward"] == "to_server").unwrap();
        let to_client = queues.iter().find(|q| q["toward"] == "to_client").unwrap();
        let peak = f(&to_server["peak_backlog_bytes"]);
        let seen = format!(
            "queue {queue}: expected {expected_ms:.1} ms; rr p50 {median_ms:.1} p90 \
             {p90_ms:.1} p99 {p99_ms:.1} ms; ping {ping_ms:.1} ms; tc held {held} B; path \
             {to_server}"
        );
        eprintln!("{seen}");
        // The stream keeps the queue full but for CUBIC's back-off after
        // each tail drop; a packet never waits longer than the full queue.
        assert!(
            peak >= 0.8 * limit_bytes && peak <= limit_bytes + 1514.0,
            "{seen}"
        );
        assert!(
            u(&to_server["drops"]) > 0,
            "a full FIFO drops at its tail: {seen}"
        );
        assert_eq!(to_server["kind"], "htb", "{seen}");
        assert!(
            f(&to_client["peak_backlog_bytes"]) < 0.2 * limit_bytes,
            "the answers' way is idle: {seen}"
        );
        // The slowest wait the full queue; a request the full FIFO drops
        // waits out TCP's retransmission timeout (221 ms at the p99 seen
        // through 25 KiB), so the bound above is on the p90.
        assert!(
            p99_ms >= 0.8 * expected_ms && p90_ms <= 1.3 * expected_ms + 5.0,
            "{seen}"
        );
        assert!(median_ms <= 1.3 * expected_ms + 5.0, "{seen}");
        // ping waits behind the same queue as the transactions.
        assert!(
            ping_ms >= 0.4 * expected_ms && ping_ms <= 1.3 * expected_ms + 5.0,
            "{seen}"
        );
        p50.push(median_ms);
    }
    // 8 times the queue: at least 4 times the wait at the median.
    assert!(
        p50[0] >= 4.0 * p50[1],
        "deep {} ms, shallow {} ms",
        p50[0],
        p50[1]
    );
}
