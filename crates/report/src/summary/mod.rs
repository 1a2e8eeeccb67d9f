//! The terminal summary of one run, as `plumb run` prints it: the headline
//! and its interval, each iteration, and what the probes saw at each end,
//! kept within 80 columns.

use crate::table::{Align, Table};
use plumb_samples::units::{
    format_half_width, format_micros as micros, format_seconds as secs, format_share as pct,
    format_tx_rate, sig3,
};
use plumb_samples::{
    format_bits_per_sec, format_bytes, EndResult, Iteration, OptionStatus, RunRecord, SoftnetCounts,
};
use std::collections::BTreeMap;
use std::fmt::Write;

mod host;
mod kernel;
mod traffic;

use host::*;
pub use kernel::irq_time_note;
use kernel::*;
use traffic::*;

/// The headline metric of a record in its unit.
fn metric_text(rec: &RunRecord, v: f64) -> String {
    rec.metric().format(v)
}

/// The human summary of a run, as `plumb run` prints it.
pub fn run_summary(rec: &RunRecord) -> String {
    let mut o = String::new();
    let spec = &rec.spec;
    let _ = writeln!(o, "plumb {}  {}", rec.plumb_version, spec.own_summary());
    // A run of parts names each after the run's own workload.
    for p in &spec.parts {
        for line in wrap(&format!("  + {}", p.summary()), 80, "    ") {
            let _ = writeln!(o, "{line}");
        }
    }
    let _ = writeln!(o, "label {}  spec key {}", rec.label, rec.spec_key);
    if let Some(line) = engine_line(rec) {
        for line in wrap(&line, 80, "  ") {
            let _ = writeln!(o, "{line}");
        }
    }
    if let Some(vm) = &rec.vm {
        let _ = writeln!(
            o,
            "kernel {} from {} (sha256 {}), booted in {:.1} s by {}",
            vm.release,
            vm.image,
            vm.image_sha256.get(..12).unwrap_or(&vm.image_sha256),
            vm.boot_s,
            vm.qemu
                .strip_prefix("QEMU emulator version ")
                .map_or(vm.qemu.clone(), |v| format!("QEMU {v}"))
        );
        for note in rec.emulation_notes() {
            for line in wrap(&note, 80, "  ") {
                let _ = writeln!(o, "{line}");
            }
        }
    }
    if rec.iterations.len() > 1 {
        iterations_table(&mut o, rec);
    }
    if let Some(it) = median_iteration(rec) {
        if rec.iterations.len() > 1 {
            let _ = writeln!(o, "\nmedian iteration: #{}", it.index + 1);
        }
        iteration(&mut o, it, spec);
    }
    if let Some(it) = median_iteration(rec) {
        parts(&mut o, rec, it);
        under_load(&mut o, spec, it);
    }
    path(&mut o, rec, median_iteration(rec));
    if let Some(hint) = delayed_ack_hint(rec) {
        let _ = writeln!(o);
        for line in wrap(&format!("diagnosis: {hint}"), 80, "           ") {
            let _ = writeln!(o, "{line}");
        }
    }
    if let Some(c) = &rec.confidence {
        if let Some(line) = c.shortfall(rec.iterations.iter().filter(|i| i.complete).count()) {
            let _ = writeln!(o, "\n{line}");
        }
    }
    o
}

/// The engine `--io auto` chose, and the row of its rule that chose it,
/// for the CPUs the client's host had; None where the engine was asked.
fn engine_line(rec: &RunRecord) -> Option<String> {
    let spec = &rec.spec;
    if !spec.io_auto {
        return None;
    }
    let cpus = rec.iterations.first().map_or(1, |it| it.client.online_cpus) as usize;
    let row = plumb_spec::auto::row(spec, cpus);
    Some(if row.io == spec.io {
        format!("engine {}, as --io auto chooses for {}", spec.io, row.fits)
    } else {
        format!(
            "engine {}: --io auto chooses {} for {}, which this kernel's ring cannot run",
            spec.io, row.io, row.fits
        )
    })
}

/// What emulated the path, and what plumb's delay line did: its CPU over
/// the shown iteration's window (counted to neither end) and its packets
/// over the run; then the bottleneck's queue each way, where a router
/// holds it.
fn path(o: &mut String, rec: &RunRecord, it: Option<&Iteration>) {
    if let Some(p) = &rec.path {
        emulator(o, p, it);
    }
    if let Some(it) = it {
        kernel::router(o, &rec.spec, it);
    }
}

fn emulator(o: &mut String, p: &plumb_samples::PathResult, it: Option<&Iteration>) {
    if p.emulator != "plumb" {
        let _ = writeln!(
            o,
            "\npath        {} on each end of the veth pair",
            p.emulator
        );
        return;
    }
    let seed = p
        .seed
        .map(|s| format!(", loss seed {s}"))
        .unwrap_or_default();
    let _ = writeln!(o, "\npath        plumb's delay line{seed}");
    if let Some((cpu, window)) = it.and_then(|i| Some((i.client.path_cpu_s?, i.window_s))) {
        let _ = writeln!(
            o,
            "            CPU {} in the window ({}), counted to neither end",
            secs(cpu),
            pct(cpu / window.max(f64::EPSILON))
        );
    }
    for (way, c) in [("to server", &p.to_server), ("to client", &p.to_client)] {
        if let Some(c) = c {
            let refused = match c.refused {
                0 => String::new(),
                n => format!(", refused {n} (device not up)"),
            };
            let _ = writeln!(
                o,
                "            {way} {} pkts {}, lost {}, queue full {}{refused}",
                count(c.packets),
                format_bytes(c.bytes),
                c.lost,
                c.queue_drops
            );
        }
    }
}

/// The known cause of a TCP request/response test whose transactions each
/// wait about a delayed-ACK timeout (tens to hundreds of milliseconds): a
/// message written in several writes with Nagle on holds its last write until
/// the first is acknowledged, and the peer delays that ACK. None when the
/// run does not look like that.
pub fn delayed_ack_hint(rec: &RunRecord) -> Option<String> {
    let spec = &rec.spec;
    let rr = spec.rr.as_ref()?;
    if spec.workload.is_udp() || spec.socket.nodelay {
        return None;
    }
    if rr.req_writes.len() < 2 && rr.resp_writes.len() < 2 {
        return None;
    }
    let mut p50: Vec<f64> = rec
        .iterations
        .iter()
        .filter_map(|i| i.client.latency.as_ref().map(|l| l.p50_us))
        .collect();
    p50.sort_by(f64::total_cmp);
    let median = *p50.get(p50.len().checked_sub(1)? / 2)?;
    // Linux delays an ACK by 40 ms at least and 200 ms at most.
    if !(20_000.0..=600_000.0).contains(&median) {
        return None;
    }
    Some(format!(
        "each transaction waits about {:.0} ms, a delayed-ACK timeout: with Nagle's \
         algorithm on, the last write of a message waits until the first is \
         acknowledged, and the peer delays that ACK. Try --nodelay (TCP_NODELAY), \
         TCP_QUICKACK on the receiving end, or one write per message (writev, or TCP_CORK \
         around the writes).",
        median / 1000.0
    ))
}

/// Splits `text` at spaces into lines of at most `width` columns, the
/// continuation lines starting with `indent`. A word longer than a line
/// stands alone on its line.
pub(crate) fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let lead: String = text.chars().take_while(|c| *c == ' ').collect();
    let mut line = lead;
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let add = if empty { 0 } else { 1 } + word.chars().count();
        if !empty && line.chars().count() + add > width {
            lines.push(std::mem::replace(&mut line, indent.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    if !empty {
        lines.push(line);
    }
    lines
}

fn iterations_table(o: &mut String, rec: &RunRecord) {
    let _ = writeln!(o);
    let metric = if rec.spec.is_transactional() {
        "transactions"
    } else {
        "throughput"
    };
    let mut table = Table::new([
        ("iter", Align::Left, 6),
        (metric, Align::Right, 15),
        ("client CPU", Align::Right, 11),
        ("server CPU", Align::Right, 11),
        ("retrans", Align::Right, 9),
        // What sets an iteration apart, after the figures.
        ("", Align::Left, 0),
    ]);
    let outliers: Vec<u32> = rec
        .confidence
        .as_ref()
        .map(|c| c.outliers.clone())
        .unwrap_or_default();
    for it in &rec.iterations {
        let mut flags = Vec::new();
        if outliers.contains(&it.index) {
            flags.push("outlier");
        }
        if !it.complete {
            flags.push("INCOMPLETE");
        }
        table.row([
            format!("#{}", it.index + 1),
            metric_text(rec, it.derived.metric()),
            secs(it.client.process.total_s()),
            secs(it.server.process.total_s()),
            it.derived.retransmits.to_string(),
            // Two spaces before each, as the figures' columns stand apart.
            flags
                .iter()
                .map(|f| format!(" {f}"))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    o.push_str(&table.terminal(""));
    if let Some(c) = &rec.confidence {
        let n = rec.iterations.iter().filter(|i| i.complete).count();
        let width = c
            .relative_half_width
            .map(format_half_width)
            .unwrap_or_else(|| "no interval".into());
        let lead = format!("mean  {:>16}  ", metric_text(rec, c.mean));
        let head = format!("{lead}{width} at {:.0} %, {n} iterations", c.level * 100.0);
        let target = format!(
            "(target ±{:.1} %{})",
            c.target * 100.0,
            if c.reached { ", reached" } else { "" }
        );
        // A wide interval over many iterations would pass 80 columns: the
        // target then goes under the interval it is read against.
        let sep = if head.chars().count() + 1 + target.chars().count() <= 80 {
            " ".to_string()
        } else {
            format!("\n{:1$}", "", lead.chars().count())
        };
        let _ = writeln!(o, "{head}{sep}{target}");
        if let Some(b) = &c.bimodal {
            let _ = writeln!(
                o,
                "bimodal: {} iterations near {} and {} near {}",
                b.low_n,
                metric_text(rec, b.low_mean),
                b.high_n,
                metric_text(rec, b.high_mean)
            );
        }
        if !c.outliers.is_empty() {
            let list: Vec<String> = c.outliers.iter().map(|i| format!("#{}", i + 1)).collect();
            let _ = writeln!(
                o,
                "outliers by median absolute deviation (kept): {}",
                list.join(", ")
            );
        }
    }
}

fn iteration(o: &mut String, it: &Iteration, spec: &plumb_spec::Spec) {
    let (planned_s, transactional) = (spec.duration_ms as f64 / 1000.0, spec.is_transactional());
    let _ = writeln!(
        o,
        "window {} after {} warm-up{}",
        secs(it.window_s),
        secs(it.warmup_s),
        if it.complete { "" } else { "  [INCOMPLETE]" }
    );
    let _ = writeln!(o);
    traffic(o, it, spec);
    let _ = writeln!(o);

    processes(o, it, transactional);
    sched(o, it);
    network(o, it);
    levels(o, it);
    drop_reasons(o, it);
    nic_queues(o, it);
    rcvbuf_growth(o, it);
    acks(o, it);
    let rss = |e: &EndResult| format_bytes(e.process.rss_bytes);
    let flows = it.client.flows.len().max(1) as u64;
    let _ = writeln!(
        o,
        "memory      RSS client {}, server {} ({} per client flow)",
        rss(&it.client),
        rss(&it.server),
        format_bytes(it.client.process.rss_bytes / flows)
    );
    let _ = writeln!(o);
    per_cpu(o, it);

    if it.client.udp.is_none() {
        tcp_figures(o, it);
    }
    let moved: Vec<String> = [
        "Tcp.RetransSegs",
        "TcpExt.DelayedACKs",
        "TcpExt.TCPRcvCollapsed",
        "TcpExt.PruneCalled",
        "TcpExt.TCPBacklogDrop",
        "TcpExt.TW",
        "Udp.RcvbufErrors",
        "Udp.SndbufErrors",
        "Udp.InErrors",
    ]
    .iter()
    .filter_map(|k| {
        it.client
            .counters
            .get(*k)
            .map(|v| format!("{} {v}", k.split('.').nth(1).unwrap_or(k)))
    })
    .collect();
    if !moved.is_empty() {
        let _ = writeln!(o, "host counters  {}", moved.join(", "));
    }
    let _ = writeln!(o);
    options(o, it);
    for w in it.client.warnings.iter().chain(&it.server.warnings) {
        let _ = writeln!(o, "warning: {w}");
    }
    if !it.complete {
        let _ = writeln!(
            o,
            "INCOMPLETE: interrupted after {} of the {} window",
            secs(it.window_s),
            secs(planned_s)
        );
    }
}

/// A count in at most four or five characters: 987, 98.6k, 1.23M.
fn count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{}k", sig3(n as f64 / 1e3)),
        _ => format!("{}M", sig3(n as f64 / 1e6)),
    }
}

/// Parts joined with ", " on lines of at most 80 columns, each line after
/// the first indented under the first part's figures.
fn fit_80(parts: &[String]) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for p in parts {
        if line.is_empty() {
            line = p.clone();
        } else if line.len() + 2 + p.len() <= 80 {
            line = format!("{line}, {p}");
        } else {
            out.push_str(&line);
            out.push('\n');
            line = format!("{:<19}{p}", "");
        }
    }
    out + &line
}

/// The iteration whose metric is the median one: a typical iteration
/// rather than an average no iteration had.
pub fn median_iteration(rec: &RunRecord) -> Option<&Iteration> {
    let mut order: Vec<&Iteration> = rec.iterations.iter().collect();
    order.sort_by(|a, b| a.derived.metric().total_cmp(&b.derived.metric()));
    order.get(order.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod wrap_tests {
    use super::{fit_80, options, wrap};

    #[test]
    fn a_sched_line_with_many_timeslices_fits_in_80_columns() {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        it.client.process.sched = Some(plumb_samples::SchedTimes {
            run_s: 10.25,
            wait_s: 0.375,
            timeslices: 1_234_567_890,
            migrations: Some(123_456),
        });
        let mut o = String::new();
        super::sched(&mut o, &it);
        assert!(o.lines().all(|l| l.len() <= 80), "{o}");
        assert!(o.contains("slices 1234567890  migrations 123456"), "{o}");
    }

    #[test]
    fn parts_fit_in_80_columns() {
        let parts: Vec<String> = [
            "softnet     client processed 192k (cpu0 103k cpu1 88.2k)",
            "time_squeeze 1 (cpu0 1)",
            "dropped 3 (cpu1 3)",
            "rps 12 (cpu0 12)",
        ]
        .map(String::from)
        .to_vec();
        let text = fit_80(&parts);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines.iter().all(|l| l.len() <= 80), "{text}");
        assert!(lines[1].starts_with(&" ".repeat(19)) && lines[1].contains("time_squeeze 1"));
        assert_eq!(fit_80(&parts[..1]), parts[0]);
    }

    #[test]
    fn wrap_keeps_lines_within_width_and_indents_the_rest() {
        let text = format!("      {}", "word ".repeat(40));
        let lines = wrap(&text, 30, "      ");
        assert!(lines.len() > 5);
        for l in &lines {
            assert!(l.chars().count() <= 30, "{l:?}");
            assert!(l.starts_with("      word"), "{l:?}");
        }
        let words: usize = lines.iter().map(|l| l.split_whitespace().count()).sum();
        assert_eq!(words, 40);
    }

    #[test]
    fn option_columns_stay_apart_whatever_the_width_of_a_value() {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        let pacing = |granted: &str| plumb_samples::OptionRecord {
            name: "pacing_rate".into(),
            asked: "15000000000 bit/s".into(),
            granted: granted.into(),
            status: plumb_samples::OptionStatus::Applied,
            note: None,
            at_close: None,
        };
        it.client.socket_options = vec![pacing("15000000000 bit/s")];
        it.server.socket_options = vec![pacing("14999999999 bit/s")];
        let mut o = String::new();
        options(&mut o, &it);
        let lines: Vec<&str> = o.lines().collect();
        assert_eq!(lines.len(), 2, "{o}");
        assert!(
            lines[1].contains("pacing_rate  15000000000 bit/s 15000000000 bit/s"),
            "{o}"
        );
        // Each value starts under its heading.
        let head = |h: &str| lines[0].find(h).unwrap();
        assert_eq!(
            lines[1].find("14999999999"),
            Some(head("server granted")),
            "{o}"
        );
        assert_eq!(
            lines[1].rfind("15000000000"),
            Some(head("client granted")),
            "{o}"
        );
    }
}

#[cfg(test)]
mod table_tests {
    /// The iterations and the per-CPU tables are `Table`s now; their text is
    /// the hand-aligned one they replaced: the same headers, and each figure
    /// ending in the same column.
    #[test]
    fn the_summary_tables_keep_their_columns() {
        let mut rec = plumb_samples::testing::with_throughput(&[9e9, 9.1e9, 8.9e9]);
        rec.iterations[0].complete = false;
        let text = super::run_summary(&rec);
        let header = text
            .lines()
            .find(|l| l.starts_with("iter"))
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            header,
            "iter        throughput  client CPU  server CPU   retrans"
        );
        let row = text.lines().find(|l| l.starts_with("#1 ")).unwrap();
        // Right edges of {:<6}{:>16}{:>12}{:>12}{:>10}: 22, 34, 46, 56.
        for edge in [22, 34, 46, 56] {
            assert_ne!(row.as_bytes()[edge - 1], b' ', "{row}");
            assert_eq!(row.as_bytes()[edge], b' ', "{row}");
        }
        assert!(row.ends_with("  INCOMPLETE"), "{row}");
        let cpu = text.lines().find(|l| l.starts_with("cpu  pinned")).unwrap();
        assert_eq!(
            cpu,
            "cpu  pinned            user  system     irq softirq    idle softirq%"
        );
    }

    /// The mean's line keeps its target beside the interval where both fit
    /// in 80 columns, and puts it under the interval where they would not.
    #[test]
    fn the_mean_line_fits_in_80_columns_whatever_its_interval() {
        let mut rec = plumb_samples::testing::with_throughput(&[38.2e9; 3]);
        let mut confidence = |w: f64, target: f64, n: u32| {
            rec.iterations = (0..n).map(|_| rec.iterations[0].clone()).collect();
            rec.confidence = Some(plumb_samples::Confidence {
                metric: "throughput_bps".into(),
                level: 0.95,
                target,
                min_iterations: 2,
                max_iterations: n,
                mean: 38.4e9,
                half_width: Some(38.4e9 * w),
                relative_half_width: Some(w),
                reached: w <= target,
                outliers: vec![],
                bimodal: None,
            });
            let text = super::run_summary(&rec);
            let mean = text.lines().skip_while(|l| !l.starts_with("mean "));
            assert!(mean.take(2).all(|l| l.chars().count() <= 80), "{text}");
            text
        };
        for (w, target, n) in [
            (0.0234, 0.025, 3),
            (0.0234, 0.025, 100),
            (1.503, 0.025, 100),
        ] {
            let text = confidence(w, target, n);
            let reached = if w <= target { ", reached" } else { "" };
            let line = format!(
                "{} at 95 %, {n} iterations (target ±{:.1} %{reached})\n",
                plumb_samples::units::format_half_width(w),
                target * 100.0
            );
            assert!(text.contains(&line), "{text}");
        }
        let text = confidence(0.453, 0.5, 100);
        let at = text
            .find("±45.3 % at 95 %, 100 iterations\n")
            .unwrap_or_else(|| panic!("{text}"));
        let under = text[at..].lines().nth(1).unwrap();
        assert_eq!(
            under,
            format!("{:24}(target ±50.0 %, reached)", ""),
            "{text}"
        );
    }
}
