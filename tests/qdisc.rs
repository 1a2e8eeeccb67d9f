//! The qdiscs probe: each end's root queueing disciplines over the window,
//! read over rtnetlink, checked against the rate the shaper was set to and
//! the bytes the interface counted.

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
