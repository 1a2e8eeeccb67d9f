//! The latest run of each test point as OpenMetrics text, for Prometheus'
//! node_exporter textfile collector or a pushgateway.
//!
//! Every family is a gauge: a run's figures are a measurement, not a count
//! that grows. Samples carry no timestamps (neither the textfile collector
//! nor the pushgateway accepts them); when the run started is a gauge of
//! its own, `plumb_run_timestamp_seconds`. The interval of the mean is one
//! gauge, its half-width relative to the mean, rather than low and high
//! bounds that would each need a family.

use plumb_samples::{EndResult, Iteration, RunRecord};
use plumb_spec::Workload;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

/// A family: name, unit (empty for none), help.
type Family = (&'static str, &'static str, &'static str);

/// One end of an iteration.
type End = fn(&Iteration) -> &EndResult;

const THROUGHPUT: Family = (
    "plumb_throughput_bits_per_second",
    "bits_per_second",
    "Mean goodput of the run's complete iterations as the receiver counted it (stream, udp-stream).",
);
const TPS: Family = (
    "plumb_transactions_per_second",
    "transactions_per_second",
    "Mean transactions per second of the run's complete iterations (rr, crr, udp-rr).",
);
const HALF_WIDTH: Family = (
    "plumb_confidence_half_width_ratio",
    "ratio",
    "Half-width of the confidence interval of the mean throughput or transaction rate, relative to the mean; absent below 2 complete iterations.",
);
const CPU_PER_GB: Family = (
    "plumb_cpu_seconds_per_gigabyte",
    "seconds_per_gigabyte",
    "User and system CPU seconds of each end's plumb process per 10^9 bytes received, over the complete iterations.",
);
const CPU_PER_TX: Family = (
    "plumb_cpu_seconds_per_transaction",
    "seconds_per_transaction",
    "User and system CPU seconds of each end's plumb process per transaction the client completed, over the complete iterations.",
);
const RETRANS_PER_GB: Family = (
    "plumb_retransmits_per_gigabyte",
    "",
    "TCP retransmissions of the sending ends per 10^9 bytes received, over the complete iterations (stream).",
);
const STARTED: Family = (
    "plumb_run_timestamp_seconds",
    "seconds",
    "When the run started, in seconds since the Unix epoch.",
);
const ITERATIONS: Family = (
    "plumb_run_iterations",
    "",
    "Complete iterations the run's figures are over.",
);
const ORDER: [Family; 8] = [
    THROUGHPUT,
    TPS,
    HALF_WIDTH,
    CPU_PER_GB,
    CPU_PER_TX,
    RETRANS_PER_GB,
    STARTED,
    ITERATIONS,
];

/// The document for `runs`, given newest first: of each test point (spec key
/// and label) only the first, its latest run, is written.
pub fn openmetrics(runs: &[&RunRecord]) -> String {
    let mut seen = HashSet::new();
    let mut samples: BTreeMap<&str, String> = BTreeMap::new();
    let mut add = |f: Family, labels: &str, v: Option<f64>| {
        // OpenMetrics spells infinities +Inf; a run has none to report.
        if let Some(v) = v.filter(|v| v.is_finite()) {
            let _ = writeln!(samples.entry(f.0).or_default(), "{}{{{labels}}} {v}", f.0);
        }
    };
    for rec in runs {
        if !seen.insert((&rec.spec_key, &rec.label)) {
            continue;
        }
        let its: Vec<&Iteration> = rec.iterations.iter().filter(|i| i.complete).collect();
        let host = |end: End| {
            rec.iterations
                .iter()
                .map(|i| end(i).hostname.as_str())
                .find(|h| !h.is_empty())
                .unwrap_or("")
        };
        let labels = format!(
            "label=\"{}\",workload=\"{}\",point=\"{}\",summary=\"{}\",host=\"{}\",server_host=\"{}\"",
            escape(&rec.label),
            rec.spec.workload,
            escape(&rec.spec_key),
            escape(&rec.spec.summary()),
            escape(host(|i| &i.client)),
            escape(host(|i| &i.server)),
        );
        let values = rec.metric_values();
        let mean = (!values.is_empty()).then(|| plumb_stats::mean(&values));
        let tx = rec.spec.is_transactional();
        add(if tx { TPS } else { THROUGHPUT }, &labels, mean);
        let half_width = rec.confidence.as_ref().and_then(|c| c.relative_half_width);
        add(HALF_WIDTH, &labels, half_width);

        let gb = its
            .iter()
            .map(|i| i.transfer.received_bytes as f64)
            .sum::<f64>()
            / 1e9;
        let work = if tx {
            its.iter().map(|i| i.client.transactions as f64).sum()
        } else {
            gb
        };
        let ends: [(&str, End); 2] = [("client", |i| &i.client), ("server", |i| &i.server)];
        for (name, end) in ends {
            // A lost end's counts are missing, not zero.
            if work <= 0.0 || its.iter().any(|i| end(i).lost) {
                continue;
            }
            let cpu: f64 = its.iter().map(|i| end(i).process.total_s()).sum();
            let family = if tx { CPU_PER_TX } else { CPU_PER_GB };
            add(
                family,
                &format!("{labels},end=\"{name}\""),
                Some(cpu / work),
            );
        }
        if rec.spec.workload == Workload::Stream && gb > 0.0 {
            let retransmits: u64 = its.iter().map(|i| i.derived.retransmits).sum();
            add(RETRANS_PER_GB, &labels, Some(retransmits as f64 / gb));
        }
        add(STARTED, &labels, unix_seconds(&rec.started_at));
        add(ITERATIONS, &labels, Some(its.len() as f64));
    }
    let mut out = String::new();
    for (name, unit, help) in ORDER {
        let Some(lines) = samples.get(name) else {
            continue;
        };
        let _ = writeln!(out, "# TYPE {name} gauge");
        if !unit.is_empty() {
            let _ = writeln!(out, "# UNIT {name} {unit}");
        }
        let _ = writeln!(out, "# HELP {name} {help}");
        out.push_str(lines);
    }
    out + "# EOF\n"
}

/// A label value as OpenMetrics quotes it.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Seconds since the Unix epoch of an RFC 3339 time such as
/// `2026-01-02T03:04:05.5Z` or `...+02:00` (what records hold); None for
/// anything else. Days from the civil date as in Howard Hinnant's
/// `days_from_civil`, which saves this crate a date library.
fn unix_seconds(t: &str) -> Option<f64> {
    let (date, rest) = t.split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (clock, zone) = rest.split_at(rest.find(['Z', 'z', '+', '-'])?);
    let mut c = clock.splitn(3, ':');
    let (h, min): (i64, i64) = (c.next()?.parse().ok()?, c.next()?.parse().ok()?);
    let s: f64 = c.next()?.parse().ok()?;
    let offset = match zone {
        "Z" | "z" => 0,
        _ => {
            let (oh, om) = zone[1..].split_once(':')?;
            let east = oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60;
            if zone.starts_with('-') {
                -east
            } else {
                east
            }
        }
    };
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some((days * 86_400 + h * 3_600 + min * 60 - offset) as f64 + s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A record of `workload` under `label` made of `metrics`, one complete
    /// iteration each, on hosts `a` and `b`.
    fn record(workload: &str, label: &str, started_at: &str, metrics: &[f64]) -> RunRecord {
        let iteration = |(i, m): (usize, &f64)| {
            let end = |role: &str, host: &str| {
                let mut e = serde_json::to_value(EndResult::empty(
                    if role == "client" {
                        plumb_samples::Role::Client
                    } else {
                        plumb_samples::Role::Server
                    },
                    1,
                ))
                .unwrap();
                e["hostname"] = json!(host);
                e["transactions"] = json!(1000);
                e["process"] = json!({"pid": 1, "user_s": 0.25, "system_s": 0.25,
                    "voluntary_csw": 0, "involuntary_csw": 0, "rss_bytes": 0, "threads": []});
                e
            };
            let tps = (workload != "stream").then_some(*m);
            json!({
                "index": i, "complete": true, "warmup_s": 0.0, "window_s": 1.0,
                "transfer": {"sent_bytes": 2_000_000_000u64, "received_bytes": 2_000_000_000u64,
                    "difference_bytes": 0, "in_flight_start_bytes": 0, "in_flight_end_bytes": 0},
                "derived": {"throughput_bps": m, "interval_min_bps": m, "interval_max_bps": m,
                    "client_cpu_s_per_gb": 0.0, "server_cpu_s_per_gb": 0.0, "host_cpu_s_per_gb": 0.0,
                    "host_busy_s": 0.0, "host_softirq_s": 0.0, "softirq_shares": [],
                    "retransmits": 3, "tps": tps},
                "client": end("client", "a"),
                "server": end("server", "b"),
            })
        };
        let spec = plumb_spec::build::defaults(workload).unwrap();
        let spec_key = spec.key();
        let mut rec = json!({
            "schema": "plumb.run/1", "plumb_version": "0.1.0", "started_at": started_at,
            "label": label, "spec": spec, "spec_key": spec_key, "complete": true,
            "iterations": metrics.iter().enumerate().map(iteration).collect::<Vec<_>>(),
        });
        if metrics.len() > 1 {
            rec["confidence"] = json!({"metric": "throughput_bps", "level": 0.95,
                "target": 0.025, "min_iterations": 2, "max_iterations": 10, "mean": 0.0,
                "half_width": 0.0, "relative_half_width": 0.01, "reached": true});
        }
        serde_json::from_value(rec).unwrap()
    }

    fn lines<'a>(doc: &'a str, prefix: &str) -> Vec<&'a str> {
        doc.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        let rec = record("stream", "say \"hi\"\\\n", "2026-01-01T00:00:00Z", &[1e9]);
        let doc = openmetrics(&[&rec]);
        assert!(doc.contains("label=\"say \\\"hi\\\"\\\\\\n\""), "{doc}");
    }

    #[test]
    fn each_family_has_its_metadata_once_and_the_document_ends_with_eof() {
        let runs = [
            record("stream", "x", "2026-01-01T00:00:00Z", &[1e9, 3e9]),
            record("stream", "y", "2026-01-01T00:00:00Z", &[5e9]),
            record("rr", "x", "2026-01-01T00:00:00Z", &[5e4, 7e4]),
        ];
        let doc = openmetrics(&runs.iter().collect::<Vec<_>>());
        assert!(doc.ends_with("\n# EOF\n"), "{doc}");
        assert!(!doc.contains("\n\n"), "{doc}");
        for (name, unit, _) in ORDER {
            assert_eq!(
                lines(&doc, &format!("# TYPE {name} gauge")).len(),
                1,
                "{doc}"
            );
            assert_eq!(lines(&doc, &format!("# HELP {name} ")).len(), 1, "{doc}");
            let units = lines(&doc, &format!("# UNIT {name} "));
            assert_eq!(units.len(), usize::from(!unit.is_empty()), "{doc}");
            assert!(name.ends_with(&format!("_{unit}")) || unit.is_empty());
            // A family's samples follow its metadata, all together.
            let at: Vec<usize> = doc
                .lines()
                .enumerate()
                .filter(|(_, l)| l.starts_with(&format!("{name}{{")))
                .map(|(i, _)| i)
                .collect();
            assert!(at.windows(2).all(|w| w[1] == w[0] + 1), "{name}: {doc}");
        }
        let x = lines(
            &doc,
            "plumb_throughput_bits_per_second{label=\"x\",workload=\"stream\"",
        );
        assert_eq!(x.len(), 1, "{doc}");
        assert!(x[0].ends_with(" 2000000000"), "mean of 1e9 and 3e9: {doc}");
        assert_eq!(lines(&doc, "plumb_confidence_half_width_ratio{").len(), 2);
        assert!(doc.contains("host=\"a\",server_host=\"b\""), "{doc}");
        // 0.5 CPU s per iteration over 2 GB received, per end.
        let cpu = lines(&doc, "plumb_cpu_seconds_per_gigabyte{");
        assert_eq!(cpu.len(), 4, "{doc}");
        assert!(cpu.iter().all(|l| l.ends_with(" 0.25")), "{doc}");
        assert!(cpu[0].contains(",end=\"client\"} ") && cpu[1].contains(",end=\"server\"} "));
        let tx = lines(&doc, "plumb_cpu_seconds_per_transaction{");
        assert!(tx.iter().all(|l| l.ends_with(" 0.0005")), "{doc}");
        assert!(doc.contains("workload=\"rr\""), "{doc}");
        assert_eq!(lines(&doc, "plumb_transactions_per_second{").len(), 1);
        assert!(lines(&doc, "plumb_transactions_per_second{")[0].ends_with(" 60000"));
        assert_eq!(lines(&doc, "plumb_retransmits_per_gigabyte{").len(), 2);
        assert!(doc.contains("plumb_run_timestamp_seconds{") && doc.contains("} 1767225600\n"));
    }

    #[test]
    fn only_the_latest_run_of_a_point_is_kept() {
        let newer = record("stream", "x", "2026-02-01T00:00:00Z", &[4e9]);
        let older = record("stream", "x", "2026-01-01T00:00:00Z", &[1e9]);
        let doc = openmetrics(&[&newer, &older]);
        let samples = lines(&doc, "plumb_throughput_bits_per_second{");
        assert_eq!(samples.len(), 1, "{doc}");
        assert!(samples[0].ends_with(" 4000000000"), "{doc}");
        assert_eq!(lines(&doc, "plumb_run_iterations{").len(), 1, "{doc}");
    }

    #[test]
    fn no_runs_is_an_empty_document() {
        assert_eq!(openmetrics(&[]), "# EOF\n");
    }

    #[test]
    fn rfc3339_times_become_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(unix_seconds("2026-01-01T00:00:00Z"), Some(1_767_225_600.0));
        assert_eq!(
            unix_seconds("2024-02-29T12:00:00.5Z"),
            Some(1_709_208_000.5)
        );
        assert_eq!(
            unix_seconds("2000-03-01T01:00:00+01:00"),
            Some(951_868_800.0)
        );
        assert_eq!(
            unix_seconds("1999-12-31T19:00:00-05:00"),
            Some(946_684_800.0)
        );
        assert_eq!(unix_seconds("yesterday"), None);
    }
}
