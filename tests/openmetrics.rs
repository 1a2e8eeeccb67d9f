//! `plumb export --format openmetrics` read back by a real OpenMetrics
//! parser, Python's prometheus_client, and checked against the stored runs.

mod common;
use common::*;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

/// Parses stdin as OpenMetrics and prints the families as JSON.
const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
print(json.dumps([
    {"name": f.name, "type": f.type, "unit": f.unit,
     "samples": [{"labels": s.labels, "value": s.value} for s in f.samples]}
    for f in text_string_to_metric_families(sys.stdin.read())
]))
"#;

/// A Python that has prometheus_client. Debian's package installs it for
/// /usr/bin/python3 only, which need not be the python3 first on PATH (a
/// pyenv build, say), so that one is tried first.
fn python() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import prometheus_client"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn parse(py: &str, text: &str) -> Value {
    let mut child = Command::new(py)
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_ok_for(&out, &format!("the OpenMetrics parser, on:\n{text}\n"));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The samples of family `name`, which must be a gauge with `unit`.
fn samples<'a>(families: &'a Value, name: &str, unit: &str) -> Vec<&'a Value> {
    let f = items(families)
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no family {name} in {families}"));
    assert_eq!(f["type"], "gauge", "{f}");
    assert_eq!(f["unit"], unit, "{f}");
    items(&f["samples"]).collect()
}

/// The mean of `field` of the complete iterations of `rec`.
fn mean(rec: &Value, field: &str) -> f64 {
    let v: Vec<f64> = items(&rec["iterations"])
        .filter(|i| i["complete"] == true)
        .map(|i| f(&i["derived"][field]))
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[track_caller]
fn assert_close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-6 * want.abs(),
        "{got} is not {want}"
    );
}

#[test]
fn the_export_parses_as_openmetrics_and_carries_the_latest_runs() {
    let Some(py) = python() else {
        skip("no python3 with prometheus_client (apt-get install python3-prometheus-client; tests/setup.sh installs it)");
        return;
    };
    let db = TempDb::new("openmetrics");
    let short = ["--duration", "1s", "--warmup", "0", "--iterations", "2"];
    for (workload, label) in [("stream", "a"), ("rr", "b")] {
        let args = [
            &["run", workload, "--label", label, "--db", db.path()],
            &short[..],
        ]
        .concat();
        assert_ok(&run(&args));
    }
    let out = run(&["export", "--format", "openmetrics", "--db", db.path()]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with("\n# EOF\n"), "{text}");
    let families = parse(py, &text);

    let stream = record_of(&["show", "1", "--json", "--db", db.path()]);
    let rr = record_of(&["show", "2", "--json", "--db", db.path()]);
    let tput = samples(
        &families,
        "plumb_throughput_bits_per_second",
        "bits_per_second",
    );
    let tps = samples(
        &families,
        "plumb_transactions_per_second",
        "transactions_per_second",
    );
    assert_eq!((tput.len(), tps.len()), (1, 1), "{text}");
    for (sample, rec, label, workload) in
        [(tput[0], &stream, "a", "stream"), (tps[0], &rr, "b", "rr")]
    {
        let l = &sample["labels"];
        assert_eq!(l["label"], label, "{sample}");
        assert_eq!(l["workload"], workload, "{sample}");
        assert_eq!(l["point"], rec["spec_key"], "{sample}");
        assert_eq!(
            l["host"], rec["iterations"][0]["client"]["hostname"],
            "{sample}"
        );
        assert_eq!(
            l["server_host"], rec["iterations"][0]["server"]["hostname"],
            "{sample}"
        );
        assert!(
            l["summary"].as_str().unwrap().starts_with(workload),
            "{sample}"
        );
    }
    assert_close(f(&tput[0]["value"]), mean(&stream, "throughput_bps"));
    assert_close(f(&tps[0]["value"]), mean(&rr, "tps"));

    for (name, unit) in [
        ("plumb_cpu_seconds_per_gigabyte", "seconds_per_gigabyte"),
        (
            "plumb_cpu_seconds_per_transaction",
            "seconds_per_transaction",
        ),
    ] {
        let ends: Vec<&Value> = samples(&families, name, unit)
            .iter()
            .map(|s| &s["labels"]["end"])
            .collect();
        assert_eq!(ends, ["client", "server"], "{name}: {text}");
    }
    let iterations = samples(&families, "plumb_run_iterations", "");
    assert!(iterations.iter().all(|s| f(&s["value"]) == 2.0), "{text}");
    for s in samples(&families, "plumb_run_timestamp_seconds", "seconds") {
        let age = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            - f(&s["value"]);
        assert!((0.0..600.0).contains(&age), "started {age} s ago: {text}");
    }
}
