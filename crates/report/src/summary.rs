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

/// What emulated the path, and what plumb's delay line did: its CPU over
/// the shown iteration's window (counted to neither end) and its packets
/// over the run.
fn path(o: &mut String, rec: &RunRecord, it: Option<&Iteration>) {
    let Some(p) = &rec.path else {
        return;
    };
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
        let _ = writeln!(
            o,
            "mean  {:>16}  {} at {:.0} % over {n} iterations (target ±{:.1} %{})",
            metric_text(rec, c.mean),
            width,
            c.level * 100.0,
            c.target * 100.0,
            if c.reached { ", reached" } else { "" }
        );
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

/// What an iteration (or a part of it) moved: its transactions and
/// latency, throughput, transfer, datagrams and zero-copy sends.
fn traffic(o: &mut String, it: &Iteration, spec: &plumb_spec::Spec) {
    let d = &it.derived;
    let t = &it.transfer;
    if spec.is_transactional() {
        transactions(o, it);
    }
    // An end that was lost reported nothing: what it would have counted is
    // missing, and a sum or rate over it would read as a measured zero.
    let lost = [&it.client, &it.server].into_iter().find(|e| e.lost);
    match lost {
        Some(end) if d.throughput_bps == 0.0 => {
            let _ = writeln!(
                o,
                "throughput  not measured: the {} was lost before it reported",
                end.role
            );
        }
        _ => {
            let _ = writeln!(
                o,
                "throughput  {:<14} per second: min {}, max {}",
                format_bits_per_sec(d.throughput_bps),
                format_bits_per_sec(d.interval_min_bps),
                format_bits_per_sec(d.interval_max_bps)
            );
        }
    }
    let diff = t.difference_bytes.unsigned_abs();
    match lost {
        Some(end) => {
            let known = if end.role == plumb_samples::Role::Server {
                &it.client
            } else {
                &it.server
            };
            let _ = writeln!(
                o,
                "transfer    {} sent {}, received {}; the {}'s counts are missing",
                known.role,
                format_bytes(known.bytes_sent),
                format_bytes(known.bytes_received),
                end.role
            );
        }
        None => {
            let _ = writeln!(
                o,
                "transfer    sent {}, received {}, difference {}{}",
                format_bytes(t.sent_bytes),
                format_bytes(t.received_bytes),
                if t.difference_bytes < 0 { "-" } else { "" },
                format_bytes(diff)
            );
        }
    }
    let udp = it.client.udp.as_ref().zip(it.server.udp.as_ref());
    if let Some((c, s)) = udp {
        datagrams(o, it, c, s, spec.direction);
    } else {
        let _ = writeln!(
            o,
            "            queued in sockets at the window edges: {} and {}",
            format_bytes(t.in_flight_start_bytes),
            format_bytes(t.in_flight_end_bytes)
        );
    }
    zerocopy(o, it);
}

/// Each other part of a run of parts, in the shown iteration: what it
/// moved over its own window, and its flows' TCP figures.
fn parts(o: &mut String, rec: &RunRecord, it: &Iteration) {
    for (p, part) in rec.spec.parts.iter().zip(&it.parts) {
        let view = part.as_iteration(it);
        let from = match (p.start_ms, p.stop_ms) {
            (0, None) => "from the run's start".to_string(),
            (0, Some(stop)) => format!(
                "from the run's start to {} into its window",
                secs(stop as f64 / 1000.0)
            ),
            (_, None) => format!("from {} into the run's window", secs(part.start_s)),
            (_, Some(stop)) => format!(
                "from {} to {} into the run's window",
                secs(part.start_s),
                secs(stop as f64 / 1000.0)
            ),
        };
        let _ = writeln!(
            o,
            "\n{}\n  window {} {from}\n",
            p.summary(),
            secs(part.window_s)
        );
        traffic(o, &view, &rec.spec.part_spec(p));
        if view.client.udp.is_none() {
            tcp_figures(o, &view);
        }
        for w in view.client.warnings.iter().chain(&view.server.warnings) {
            let _ = writeln!(o, "warning: part {}: {w}", part.name);
        }
    }
}

/// MSG_ZEROCOPY accounting of each sending end: sends, completions, and
/// how many of those the kernel copied after all.
fn zerocopy(o: &mut String, it: &Iteration) {
    for end in [&it.client, &it.server] {
        let Some(z) = &end.zerocopy else { continue };
        let _ = writeln!(
            o,
            "zerocopy    {}: {} sends, {} completions, {} outstanding{}",
            end.role,
            z.sends,
            z.completions,
            z.outstanding,
            if z.enobufs > 0 {
                format!(", ENOBUFS {}", z.enobufs)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            o,
            "            {} copied by the kernel, {} zero-copy{}",
            z.copied,
            z.zero_copied(),
            if z.at_close > 0 {
                format!("; {} read at close", z.at_close)
            } else {
                String::new()
            }
        );
    }
}

/// Datagrams as both ends counted them: what the sender sent (the client,
/// or with `--direction recv` the server), what the receiver took, and
/// what the sequence numbers say went missing.
fn datagrams(
    o: &mut String,
    it: &Iteration,
    c: &plumb_samples::UdpTotals,
    s: &plumb_samples::UdpTotals,
    direction: plumb_spec::Direction,
) {
    let d = &it.derived;
    let pct = |x: f64| format!("{:.3} %", x * 100.0);
    if let Some(loss) = d.loss {
        let ((tx, sender), (rx, receiver)) = direction.sender_first((c, "client"), (s, "server"));
        let queued = match rx.queued_at_close {
            0 => String::new(),
            n => format!(", {n} read off the queue at the close"),
        };
        let _ = writeln!(
            o,
            "datagrams   sent {} by the {sender}, received {} by the {receiver} ({}/s{queued})",
            tx.packets_sent,
            rx.packets_received,
            sig3(d.pps.unwrap_or(0.0))
        );
        let _ = writeln!(
            o,
            "            lost {} ({}), reordered {} (receiver's sequence numbers)",
            rx.lost,
            pct(loss),
            rx.reordered
        );
    } else {
        let _ = writeln!(
            o,
            "datagrams   requests {} sent, {} answered by the server\n            \
             {} timed out ({}), {} late",
            c.packets_sent,
            s.packets_sent,
            c.timeouts,
            pct(d.timeout_ratio.unwrap_or(0.0)),
            c.late_responses
        );
    }
    if c.strays + s.strays > 0 {
        let _ = writeln!(
            o,
            "            {} datagrams without this test's tag dropped",
            c.strays + s.strays
        );
    }
}

fn tcp_figures(o: &mut String, it: &Iteration) {
    let d = &it.derived;
    let summaries: Vec<&plumb_samples::TcpInfoSummary> = senders(it)
        .iter()
        .filter_map(|e| e.tcp_info_summary.as_ref())
        .collect();
    if let Some(t) = summaries
        .iter()
        .max_by_key(|t| t.flows)
        .filter(|t| t.flows > 1)
    {
        let q = |v: &[f64; 4]| {
            format!(
                "{}/{}/{}/{}",
                sig3(v[0]),
                sig3(v[1]),
                sig3(v[2]),
                sig3(v[3])
            )
        };
        let _ = writeln!(o, "tcp_info     {} flows, min/median/p99/max", t.flows);
        let _ = writeln!(o, "             rtt {} us", q(&t.rtt_us));
        let _ = writeln!(
            o,
            "             cwnd {}   retransmits {}",
            q(&t.snd_cwnd),
            q(&t.total_retrans)
        );
        let _ = writeln!(o, "retransmits {} (sender, all flows)", d.retransmits);
    } else {
        // The median over the sending ends' flows of one tcp_info figure.
        let median = |of: fn(&plumb_samples::TcpInfo) -> f64| {
            let xs: Vec<f64> = senders(it)
                .iter()
                .flat_map(|e| e.tcp_info.iter())
                .map(of)
                .collect();
            plumb_stats::Summary::of(&xs).map(|s| s.median)
        };
        let rtt = median(|t| t.rtt_us as f64);
        let cwnd = median(|t| t.snd_cwnd as f64);
        let _ = writeln!(
            o,
            "retransmits {}   rtt {} us   cwnd {} segments (sender, median of flows)",
            d.retransmits,
            rtt.map(sig3).unwrap_or_else(|| "-".into()),
            cwnd.map(sig3).unwrap_or_else(|| "-".into()),
        );
    }
    limited_by(o, it);
}

/// What limited each end's sending flows over the window, as shares of
/// their busy time; the rest of the window they had nothing to send.
fn limited_by(o: &mut String, it: &Iteration) {
    let mut head = "limited by";
    for end in [&it.client, &it.server] {
        let Some((l, (rwnd, sndbuf, other))) =
            end.limited.as_ref().and_then(|l| Some((l, l.shares()?)))
        else {
            continue;
        };
        let idle = 1.0 - l.busy_s / (end.window_s * l.flows as f64).max(f64::EPSILON);
        let mut words = vec![
            format!(
                "{head:<12}{:<7}receive window {}, send buffer {}, other {}",
                end.role.to_string(),
                pct(rwnd),
                pct(sndbuf),
                pct(other)
            ),
            format!(
                "of {} busy in {} flow{}",
                secs(l.busy_s),
                l.flows,
                if l.flows == 1 { "" } else { "s" }
            ),
            format!("nothing to send {}", pct(idle.max(0.0))),
        ];
        if let Some(series) = &end.tcp_series {
            // Of "other", how much was the congestion window, by the samples.
            if let Some(c) = series.at_cwnd_share() {
                words.push(format!("in flight at cwnd in {} of samples", pct(c)));
            }
            words.extend(per_second(series, &end.intervals));
        }
        let _ = writeln!(o, "{}", fit_80(&words));
        head = "";
    }
}

/// Each share's lowest and highest over the window's whole seconds, where
/// there are two or more.
fn per_second(
    series: &plumb_samples::TcpSeries,
    intervals: &[plumb_samples::IntervalSample],
) -> Vec<String> {
    let whole: Vec<(f64, f64)> = intervals
        .iter()
        .filter(|s| s.dt_s >= 0.5)
        .map(|s| (s.t_s, s.dt_s))
        .collect();
    let shares: Vec<[f64; 3]> = series
        .interval_shares(&whole)
        .into_iter()
        .flatten()
        .map(|(r, s, o)| [r, s, o])
        .collect();
    if shares.len() < 2 {
        return Vec::new();
    }
    plumb_compare::limits::LIMITS[..3]
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let lo = shares.iter().map(|x| x[k]).fold(1.0, f64::min);
            let hi = shares.iter().map(|x| x[k]).fold(0.0, f64::max);
            let head = if k == 0 { "per second: " } else { "" };
            format!("{head}{name} {} to {}", pct(lo), pct(hi))
        })
        .collect()
}

/// Transactions, their rate interval by interval, latency percentiles and
/// fairness over flows.
fn transactions(o: &mut String, it: &Iteration) {
    let d = &it.derived;
    let rates: Vec<f64> = it
        .client
        .intervals
        .iter()
        .filter(|s| s.dt_s >= 0.5)
        .map(|s| s.transactions as f64 / s.dt_s)
        .collect();
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().copied().fold(0.0, f64::max);
    let _ = writeln!(
        o,
        "transactions {} ({}); the server counted {}",
        it.client.transactions,
        format_tx_rate(d.tps.unwrap_or(0.0)),
        it.server.transactions,
    );
    if !rates.is_empty() {
        let _ = writeln!(
            o,
            "             per second: min {}, max {}",
            format_tx_rate(lo),
            format_tx_rate(hi)
        );
    }
    if let Some(l) = &it.client.latency {
        let _ = writeln!(
            o,
            "latency us   mean {}  p50 {}  p90 {}  p99 {}",
            sig3(l.mean_us),
            sig3(l.p50_us),
            sig3(l.p90_us),
            sig3(l.p99_us),
        );
        let _ = writeln!(
            o,
            "             p99.9 {}  p99.99 {}  max {}",
            sig3(l.p999_us),
            sig3(l.p9999_us),
            sig3(l.max_us)
        );
    }
    if let Some(f) = d.fairness {
        let _ = writeln!(
            o,
            "fairness     {:.3} (Jain's index over {} flows)",
            f,
            it.client.flows.len()
        );
    }
}

fn senders(it: &Iteration) -> Vec<&EndResult> {
    let mut v = Vec::new();
    if it.client.bytes_sent > 0 {
        v.push(&it.client);
    }
    if it.server.bytes_sent > 0 {
        v.push(&it.server);
    }
    v
}

/// The worker threads pinned to each CPU of the client's host, by CPU:
/// `client` where an end's one thread is, its threads by name where it has
/// more (`plumb-c0 plumb-c2`), or how many where that is long. An end on
/// another host pins CPUs of that host, which this table does not show.
fn pinned_threads(it: &Iteration) -> BTreeMap<u32, String> {
    let mut by: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for end in [&it.client, &it.server] {
        if end.lost || end.hostname != it.client.hostname {
            continue;
        }
        let Some(cpus) = end
            .pinned_cpus
            .as_deref()
            .and_then(|c| c.parse::<plumb_spec::CpuList>().ok())
            .filter(|c| !c.is_empty())
        else {
            continue;
        };
        // As the engine pins them: worker w to the w-th CPU of the list,
        // round and round.
        let threads = end.threads.max(1) as usize;
        let mut on: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for w in 0..threads {
            on.entry(cpus.cpus()[w % cpus.len()]).or_default().push(w);
        }
        // The workers' thread names, as ps and top show them.
        let prefix = match end.role {
            plumb_samples::Role::Client => "plumb-c",
            plumb_samples::Role::Server => "plumb-s",
        };
        for (cpu, workers) in on {
            let who = match workers.len() {
                _ if threads == 1 => end.role.to_string(),
                1 | 2 => workers
                    .iter()
                    .map(|w| format!("{prefix}{w}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                n => format!("{} {n} threads", end.role),
            };
            by.entry(cpu).or_default().push(who);
        }
    }
    by.into_iter().map(|(cpu, v)| (cpu, v.join(", "))).collect()
}

/// One line per CPU (at most 16, pinned ones first): where the time went,
/// with the threads pinned to it where any are.
fn per_cpu(o: &mut String, it: &Iteration) {
    let pinned = pinned_threads(it);
    let mut columns = vec![("cpu", Align::Left, 4)];
    if !pinned.is_empty() {
        columns.push(("pinned", Align::Left, 14));
    }
    columns.extend([
        ("user", Align::Right, 7),
        ("system", Align::Right, 7),
        ("irq", Align::Right, 7),
        ("softirq", Align::Right, 7),
        ("idle", Align::Right, 7),
        ("softirq%", Align::Right, 8),
    ]);
    let mut table = Table::new(columns);
    let mut cpus: Vec<_> = it.client.cpus.iter().collect();
    cpus.sort_by_key(|c| (!pinned.contains_key(&c.cpu), c.cpu));
    for c in cpus.iter().take(16) {
        let total = c.total_s().max(f64::EPSILON);
        let mut row = vec![c.cpu.to_string()];
        if !pinned.is_empty() {
            row.push(pinned.get(&c.cpu).cloned().unwrap_or_default());
        }
        row.extend([
            format!("{:.2}", c.user_s + c.nice_s),
            format!("{:.2}", c.system_s),
            format!("{:.2}", c.irq_s),
            format!("{:.2}", c.softirq_s),
            format!("{:.2}", c.idle_s + c.iowait_s),
            pct(c.softirq_s / total),
        ]);
        table.row(row);
    }
    o.push_str(&table.terminal(""));
    if cpus.len() > 16 {
        let _ = writeln!(o, "({} more CPUs in --json)", cpus.len() - 16);
    }
    let _ = writeln!(o, "(seconds over the window; softirq% of each CPU's time)");
    let _ = writeln!(o, "{}", irq_time_note(&it.client));
    let _ = writeln!(o);
}

/// How far this end's softirq seconds can be trusted.
pub fn irq_time_note(end: &EndResult) -> &'static str {
    match end.irq_time_accounting {
        Some(true) => "(irq and softirq time measured exactly: CONFIG_IRQ_TIME_ACCOUNTING)",
        Some(false) => "(irq and softirq time sampled at each tick: small differences are noise)",
        None => "(irq and softirq time: kernel config unreadable, may be tick samples)",
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

/// The `most` CPUs with the highest counts, highest first ("cpu1 7.4k cpu0
/// 5.2k +2 CPUs"), so that a line stays short on a big host; CPUs that
/// counted nothing are left out.
fn busiest_cpus(counts: impl IntoIterator<Item = (u32, u64)>, most: usize) -> String {
    let mut cpus: Vec<(u32, u64)> = counts.into_iter().filter(|&(_, n)| n > 0).collect();
    cpus.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let mut s: Vec<String> = cpus
        .iter()
        .take(most)
        .map(|(c, n)| format!("cpu{c} {}", count(*n)))
        .collect();
    if cpus.len() > most {
        s.push(format!("+{} CPUs", cpus.len() - most));
    }
    s.join(" ")
}

/// One counter of a CPU's softnet row.
type Field = fn(&SoftnetCounts) -> u64;

/// Each end's interfaces and per-CPU packet processing, where they moved:
/// once for ends that share a host and namespace, per end otherwise.
fn network(o: &mut String, it: &Iteration) {
    use plumb_samples::figure::Merge;
    let (c, s) = (&it.client, &it.server);
    let mut head = "net";
    for end in [c, s] {
        if end.lost || it.shared_with_client(end.role, Merge::OncePerNamespace) {
            continue;
        }
        for i in &end.interfaces {
            let line = format!(
                "{head:<12}{:<7}{} rx {} {} pkts, tx {} {} pkts",
                end.role.to_string(),
                i.name,
                format_bytes(i.counters.rx_bytes),
                count(i.counters.rx_packets),
                format_bytes(i.counters.tx_bytes),
                count(i.counters.tx_packets)
            );
            let n = &i.counters;
            let bad = [
                ("rx drop", n.rx_dropped),
                ("rx err", n.rx_errors),
                ("rx fifo", n.rx_fifo),
                ("tx drop", n.tx_dropped),
                ("tx err", n.tx_errors),
                ("tx fifo", n.tx_fifo),
            ];
            let mut extra: Vec<String> = bad
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(what, n)| format!("{what} {n}"))
                .collect();
            if i.virtual_device {
                extra.push("virtual: no IRQs".into());
            }
            if i.driver_counters == Some(0) {
                extra.push("no driver stats".into());
            }
            let _ = writeln!(o, "{}", fit_80(&[vec![line], extra].concat()));
            head = "";
            if !i.driver.is_empty() {
                let _ = writeln!(o, "{}", fit_80(&driver_line(&i.driver)));
            }
            if !i.irqs.is_empty() {
                // Which CPUs took the device's interrupts, most first.
                let mut per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
                for q in &i.irqs {
                    for c in &q.cpus {
                        *per_cpu.entry(c.cpu).or_default() += c.count;
                    }
                }
                let _ = writeln!(
                    o,
                    "{:<19}{} IRQs took {} interrupts: {}",
                    "",
                    i.irqs.len(),
                    count(per_cpu.values().sum()),
                    busiest_cpus(per_cpu, 4)
                );
            }
        }
    }
    let mut head = "softnet";
    for end in [c, s] {
        if end.lost || end.softnet.is_empty() || it.shared_with_client(end.role, Merge::OncePerHost)
        {
            continue;
        }
        let t = SoftnetCounts::total(&end.softnet);
        let per_cpu = |f: Field| busiest_cpus(end.softnet.iter().map(|r| (r.cpu, f(r))), 3);
        let mut parts = vec![format!(
            "{head:<12}{:<7}processed {} ({})",
            end.role.to_string(),
            count(t.processed),
            per_cpu(|r| r.processed)
        )];
        let moved: [(&str, u64, Field); 4] = [
            ("time_squeeze", t.time_squeeze, |r| r.time_squeeze),
            ("dropped", t.dropped, |r| r.dropped),
            ("rps", t.received_rps, |r| r.received_rps),
            ("flow limit", t.flow_limit_count, |r| r.flow_limit_count),
        ];
        for (what, n, f) in moved {
            if n > 0 {
                parts.push(format!("{what} {} ({})", count(n), per_cpu(f)));
            }
        }
        let _ = writeln!(o, "{}", fit_80(&parts));
        head = "";
    }
}

/// The levels and counts the probes declare for the summary
/// (`plumb_samples::figure`), one line per part and end, those that are not
/// zero: once for a part of the host or the namespace where both ends
/// share it.
fn levels(o: &mut String, it: &Iteration) {
    use plumb_samples::figure::{self, Kind};
    let (c, s) = (&it.client, &it.server);
    let json = |e: &EndResult| serde_json::to_value(e).unwrap_or_default();
    let records = [(c, json(c)), (s, json(s))];
    for (_, part) in figure::parts() {
        let shown: Vec<(&str, &str, &str)> = part
            .figures
            .iter()
            .filter_map(|f| match f.kind {
                Kind::Level(name) | Kind::Counted(name) => Some((name, f.path, f.unit)),
                Kind::Event(_) | Kind::Detail => None,
            })
            .collect();
        if shown.is_empty() {
            continue;
        }
        let mut head = part.key;
        for (end, record) in &records {
            if end.lost || it.shared_with_client(end.role, part.merge) {
                continue;
            }
            let Some(value) = figure::part_of(record, part.key) else {
                continue;
            };
            // What a probe could not count of what the line shows, it says
            // once, with why (the record keeps the rest).
            if let Some((what, why)) = value
                .get("unavailable")
                .and_then(|u| u.as_object())
                .and_then(|u| {
                    u.iter()
                        .find(|(k, _)| shown.iter().any(|(_, path, _)| path.ends_with(k.as_str())))
                })
            {
                let why = why.as_str().unwrap_or_default();
                let _ = writeln!(
                    o,
                    "{}",
                    fit_80(&[format!(
                        "{head:<12}{:<7}not counted: {what}: {why}",
                        end.role.to_string()
                    )])
                );
            }
            let mut words: Vec<String> = shown
                .iter()
                .filter_map(|(name, path, unit)| {
                    let v = figure::figure_value(value, path).filter(|v| *v != 0.0)?;
                    Some(match name.ends_with(unit) {
                        true => format!("{name} {}", count(v as u64)),
                        false => format!("{name} {} {unit}", count(v as u64)),
                    })
                })
                .collect();
            if words.is_empty() {
                continue;
            }
            words[0] = format!("{head:<12}{:<7}{}", end.role.to_string(), words[0]);
            let _ = writeln!(o, "{}", fit_80(&words));
            head = "";
        }
    }
}

/// One line per end under `head`, the end's `words` after its role, the
/// head on the first line only; an end without words has no line.
fn end_lines(
    o: &mut String,
    head: &str,
    it: &Iteration,
    words: impl Fn(&EndResult) -> Option<Vec<String>>,
) {
    let mut head = head;
    for end in [&it.client, &it.server] {
        let Some(mut w) = words(end).filter(|w| !w.is_empty()) else {
            continue;
        };
        w[0] = format!("{head:<12}{:<7}{}", end.role.to_string(), w[0]);
        let _ = writeln!(o, "{}", fit_80(&w));
        head = "";
    }
}

/// The drops of the tracepoints' line by the kernel's reason, most first,
/// once where both ends share the host.
fn drop_reasons(o: &mut String, it: &Iteration) {
    end_lines(o, "drop reason", it, |end| {
        if end.lost || it.shared_with_client(end.role, plumb_samples::figure::Merge::OncePerHost) {
            return None;
        }
        let t = end.tracepoints.as_ref()?;
        Some(drop_reason_words(t))
    });
}

/// The drops by reason, most first: as read where every drop's reason was,
/// else each reason as read beside its estimate, which scales the reasons
/// read to the drops counted (and so adds up to them).
fn drop_reason_words(t: &plumb_samples::Tracepoints) -> Vec<String> {
    let mut by: Vec<(&String, &u64)> = t.drop_reasons.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let counted = t.counts.get("skb:kfree_skb").copied().unwrap_or(0);
    let estimated = t.drop_reasons_read.is_some_and(|r| r != counted) && !by.is_empty();
    if !estimated {
        return by
            .iter()
            .map(|(reason, n)| format!("{reason} {}", count(**n)))
            .collect();
    }
    let mut words: Vec<String> = by
        .iter()
        .map(|(reason, n)| match t.drop_reasons_as_read.get(*reason) {
            Some(read) => format!("{reason} {} read ~{} est.", count(*read), count(**n)),
            // Older records kept the estimate alone.
            None => format!("{reason} ~{} est.", count(**n)),
        })
        .collect();
    words.push(format!(
        "est.: the {} reasons read scaled to the {} dropped",
        count(t.drop_reasons_read.unwrap_or(0)),
        count(counted)
    ));
    words
}

/// Each end's receive buffers as the kernel tuned them, as means over the
/// tunings read: the story of a window that a scaling ratio keeps small.
fn rcvbuf_growth(o: &mut String, it: &Iteration) {
    end_lines(o, "rcvbuf", it, |end| {
        let g = end.flow_events.as_ref()?.rcvbuf_grow?;
        let (rcvbuf, clamp, rwnd, ratio) = g.means()?;
        let times = match g.read {
            1 => "once".to_string(),
            n => format!("{} times", count(n)),
        };
        Some(vec![
            format!(
                "tuned {times}, the buffer {} on average",
                format_bytes(rcvbuf as u64)
            ),
            format!("window clamp {}", format_bytes(clamp as u64)),
            format!("advertised {}", format_bytes(rwnd as u64)),
            format!("scaling ratio {ratio:.2}"),
        ])
    });
}

/// The ACKs of each end whose flows sent, as its senders saw them
/// (`--tcp-probe`): how many, and each figure's min/median/p99/max over
/// them. A receiving end's records are the data it took, whose send-side
/// figures say nothing.
fn acks(o: &mut String, it: &Iteration) {
    end_lines(o, "acks", it, |end| {
        let a = end
            .acks
            .as_ref()
            .filter(|a| a.read > 0 && end.bytes_sent > 0)?;
        let of = |v: [f64; 4], f: &dyn Fn(f64) -> String| {
            v.iter().map(|&x| f(x)).collect::<Vec<_>>().join("/")
        };
        let bytes = |x: f64| format_bytes(x as u64);
        let read = match a.read < a.counted {
            true => format!("{:.1} % read", (a.read * 1000 / a.counted) as f64 / 10.0),
            false => "all read".to_string(),
        };
        Some(vec![
            format!("{} ({read}), min/median/p99/max at each:", count(a.counted)),
            format!("srtt {} us", of(a.srtt_us, &|x| format!("{x:.0}"))),
            format!("cwnd {}", of(a.cwnd, &|x| format!("{x:.0}"))),
            format!("peer's window {}", of(a.snd_wnd, &bytes)),
            format!("in flight {}", of(a.in_flight_bytes, &bytes)),
        ])
    });
}

/// The iteration whose metric is the median one: a typical iteration
/// rather than an average no iteration had.
pub fn median_iteration(rec: &RunRecord) -> Option<&Iteration> {
    let mut order: Vec<&Iteration> = rec.iterations.iter().collect();
    order.sort_by(|a, b| a.derived.metric().total_cmp(&b.derived.metric()));
    order.get(order.len().saturating_sub(1) / 2).copied()
}

/// Each end's process and the host: CPU seconds over the window, how busy,
/// per unit of work, and context switches (the host's softirq seconds).
fn processes(o: &mut String, it: &Iteration, transactional: bool) {
    let d = &it.derived;
    let mut t = Table::new([
        ("CPU", Align::Left, 13),
        ("user", Align::Right, 9),
        ("system", Align::Right, 8),
        ("total", Align::Right, 8),
        ("util", Align::Right, 7),
        (
            if transactional { "per tx" } else { "per GB" },
            Align::Right,
            9,
        ),
        ("ctx vol/invol", Align::Left, 0),
    ])
    .gap(6, 2);
    let cost = |per_gb: f64, per_tx: Option<f64>| {
        if transactional {
            per_tx.map(micros).unwrap_or_else(|| "-".into())
        } else {
            secs(per_gb)
        }
    };
    for (end, per_unit) in [
        (
            &it.client,
            cost(d.client_cpu_s_per_gb, d.client_cpu_s_per_tx),
        ),
        (
            &it.server,
            cost(d.server_cpu_s_per_gb, d.server_cpu_s_per_tx),
        ),
    ] {
        if end.lost {
            let mut cells = vec![end.role.to_string()];
            cells.resize(6, String::new());
            cells.push("lost: not measured".into());
            t.row(cells);
            continue;
        }
        let p = &end.process;
        let util = if end.window_s > 0.0 {
            p.total_s() / end.window_s
        } else {
            0.0
        };
        t.row([
            format!("{} pid {}", end.role, p.pid),
            secs(p.user_s),
            secs(p.system_s),
            secs(p.total_s()),
            pct(util),
            per_unit,
            format!("{}/{}", p.voluntary_csw, p.involuntary_csw),
        ]);
    }
    let ncpu = it.client.cpus.len().max(1) as f64;
    t.row([
        format!("host {} CPUs", it.client.cpus.len()),
        String::new(),
        String::new(),
        secs(d.host_busy_s),
        pct(d.host_busy_s / (it.window_s * ncpu).max(f64::EPSILON)),
        cost(d.host_cpu_s_per_gb, d.host_cpu_s_per_tx),
        format!("softirq {}", secs(d.host_softirq_s)),
    ]);
    o.push_str(&t.terminal(""));
    if let Some(w) = busy_host(it) {
        for line in wrap(&format!("warning: {w}"), 80, "         ") {
            let _ = writeln!(o, "{line}");
        }
    }
}

/// Whether other processes took more of the host over the window than the
/// ends did: then the figures measure a busy host as much as the test.
fn busy_host(it: &Iteration) -> Option<String> {
    let mut ends = vec![&it.client];
    // A server on another host spends nothing of this one's.
    if !it.server.lost && it.server.hostname == it.client.hostname {
        ends.push(&it.server);
    }
    let ours: f64 = ends.iter().map(|e| e.process.total_s()).sum();
    let others = it.derived.host_busy_s - ours;
    (others > ours && others > 0.0).then(|| {
        format!(
            "other processes took {} of the host's CPU time over the window, more than \
             the ends' {}: the figures measure a busy host as well as the test \
             (plumb doctor lists the busiest)",
            secs(others),
            secs(ours)
        )
    })
}

/// The driver's statistics that moved, on one line or two: those that
/// count trouble (drops, errors, misses) first, then the largest.
fn driver_line(driver: &BTreeMap<String, i64>) -> Vec<String> {
    const SHOWN: usize = 4;
    let trouble = |name: &str| {
        ["drop", "err", "miss", "discard", "fail", "timeout", "over"]
            .iter()
            .any(|w| name.contains(w))
    };
    let mut moved: Vec<(&String, &i64)> = driver.iter().collect();
    moved.sort_by_key(|(name, v)| (!trouble(name), std::cmp::Reverse(v.unsigned_abs())));
    let mut parts: Vec<String> = moved
        .iter()
        .take(SHOWN)
        .map(|(name, v)| {
            let n = count(v.unsigned_abs());
            let sign = if **v < 0 { "-" } else { "" };
            format!("{name} {sign}{n}")
        })
        .collect();
    parts[0] = format!("{:<19}driver: {}", "", parts[0]);
    if moved.len() > SHOWN {
        parts.push(format!("+{} more in --json", moved.len() - SHOWN));
    }
    parts
}

/// The scheduler's accounting of each end's threads: time on a CPU, time
/// waiting on a run queue, timeslices and moves between CPUs.
fn sched(o: &mut String, it: &Iteration) {
    let mut head = "sched";
    for end in [&it.client, &it.server] {
        let Some(s) = end.process.sched.filter(|_| !end.lost) else {
            continue;
        };
        let migrations = match s.migrations {
            Some(m) => m.to_string(),
            None => "unavailable".into(),
        };
        let line = format!(
            "{head:<12}{:<7}run {}  run-queue wait {}  slices {}  migrations {migrations}",
            end.role.to_string(),
            secs(s.run_s),
            secs(s.wait_s),
            s.timeslices,
        );
        // Many timeslices make it run past 80 columns: the counts go on a
        // line of their own.
        let _ = match line.split_once("  slices") {
            Some((times, counts)) if line.len() > 80 => {
                writeln!(o, "{times}\n{:<19}slices{counts}", "")
            }
            _ => writeln!(o, "{line}"),
        };
        head = "";
    }
}

/// The socket options as asked and as each end read them back, in columns
/// sized from their cells: a value wider than its column (a pacing rate in
/// bit/s) would otherwise run into the next one.
fn options(o: &mut String, it: &Iteration) {
    let mut table = Table::new([
        ("option", Align::Left, 12),
        ("asked", Align::Left, 15),
        ("client granted", Align::Left, 24),
        ("server granted", Align::Left, 0),
    ]);
    let show = |r: &plumb_samples::OptionRecord| -> String {
        match (r.status, &r.at_close) {
            (OptionStatus::Unsupported, _) => "unsupported".into(),
            // Autotuned over the run: where it began, and where it ended.
            (_, Some(tuned)) => format!("{} -> {tuned}", r.granted),
            _ => r.granted.clone(),
        }
    };
    for c in &it.client.socket_options {
        let s = it.server.socket_options.iter().find(|s| s.name == c.name);
        table.row([
            c.name.clone(),
            c.asked.clone(),
            show(c),
            s.map(show).unwrap_or_else(|| "-".into()),
        ]);
    }
    o.push_str(&table.terminal(""));
    let ends = [&it.client, &it.server];
    if ends
        .iter()
        .any(|e| e.socket_options.iter().any(|r| r.at_close.is_some()))
    {
        let _ = writeln!(
            o,
            "(A -> B: read back as the flows were set up, and as the window closed)"
        );
    }
}

#[cfg(test)]
mod busy_host_tests {
    use super::busy_host;

    #[test]
    fn a_host_busier_with_others_than_with_the_ends_is_said() {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        it.server.hostname = it.client.hostname.clone();
        it.server.lost = false;
        let ours = it.client.process.total_s() + it.server.process.total_s();
        // Others took a little: nothing said.
        it.derived.host_busy_s = ours * 1.2;
        assert_eq!(busy_host(&it), None);
        // 20 CPU-seconds busy while the ends used 9.7 of them.
        it.derived.host_busy_s = ours / 9.7 * 20.0;
        let w = busy_host(&it).expect("a warning");
        assert!(w.contains("more than the ends'"), "{w}");
        // A server on another host is not this host's: only the client is
        // the test's here.
        it.server.hostname = "elsewhere".into();
        it.derived.host_busy_s = it.client.process.total_s() * 2.5;
        assert!(busy_host(&it).is_some());
    }
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
mod count_tests {
    use plumb_samples::{OptionRecord, OptionStatus, Tracepoints};

    fn dropped(counted: u64, read: &[(&str, u64)]) -> Tracepoints {
        let read: std::collections::BTreeMap<String, u64> =
            read.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        let n = read.values().sum();
        let (drop_reasons, drop_reasons_as_read) = Tracepoints::reasons(read, counted);
        Tracepoints {
            counts: [("skb:kfree_skb".to_string(), counted)].into(),
            drop_reasons,
            drop_reasons_read: Some(n),
            drop_reasons_as_read,
            ..Default::default()
        }
    }

    #[test]
    fn a_drop_reasons_estimate_stands_beside_what_was_read_and_adds_up() {
        let t = dropped(126, &[("TCP_OLD_DATA", 60), ("TCP_OLD_SEQUENCE", 38)]);
        let words = super::drop_reason_words(&t);
        assert_eq!(
            words,
            [
                "TCP_OLD_DATA 60 read ~77 est.",
                "TCP_OLD_SEQUENCE 38 read ~49 est.",
                "est.: the 98 reasons read scaled to the 126 dropped",
            ],
        );
        // More read than counted: the estimate comes down to the count.
        let t = dropped(
            123_945,
            &[("TCP_OLD_DATA", 127_880), ("TCP_OLD_SEQUENCE", 812)],
        );
        assert!(t.drop_reasons.values().all(|&n| n <= 123_945), "{t:?}");
        assert_eq!(t.drop_reasons.values().sum::<u64>(), 123_945);
        let words = super::drop_reason_words(&t);
        assert_eq!(words[0], "TCP_OLD_DATA 128k read ~123k est.", "{words:?}");
        // Every drop's reason read: the reasons alone.
        let t = dropped(98, &[("TCP_OLD_DATA", 60), ("TCP_OLD_SEQUENCE", 38)]);
        assert_eq!(
            super::drop_reason_words(&t),
            ["TCP_OLD_DATA 60", "TCP_OLD_SEQUENCE 38"]
        );
    }

    #[test]
    fn an_autotuned_buffer_shows_where_it_began_and_where_it_ended() {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        let rcvbuf = |at_close: Option<&str>| OptionRecord {
            name: "rcvbuf".into(),
            asked: "auto".into(),
            granted: "131072".into(),
            status: OptionStatus::Default,
            note: None,
            at_close: at_close.map(str::to_string),
        };
        it.client.socket_options = vec![rcvbuf(Some("28835840"))];
        it.server.socket_options = vec![rcvbuf(None)];
        let mut o = String::new();
        super::options(&mut o, &it);
        let row = o.lines().find(|l| l.starts_with("rcvbuf")).unwrap();
        assert!(row.contains("131072 -> 28835840"), "{o}");
        assert!(o.contains("as the window closed"), "{o}");
        it.client.socket_options = vec![rcvbuf(None)];
        let mut o = String::new();
        super::options(&mut o, &it);
        assert!(!o.contains("->") && !o.contains("closed"), "{o}");
    }

    #[test]
    fn the_pinned_column_names_the_threads_pinned_or_is_left_out() {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        it.client.pinned_cpus = None;
        it.server.pinned_cpus = None;
        let mut o = String::new();
        super::per_cpu(&mut o, &it);
        let head = o.lines().next().unwrap();
        assert!(head.starts_with("cpu ") && !head.contains("pinned"), "{o}");

        let cpu0 = it.client.cpus[0].cpu;
        it.client.pinned_cpus = Some(cpu0.to_string());
        it.client.threads = 1;
        it.server.pinned_cpus = Some(cpu0.to_string());
        it.server.threads = 2;
        it.server.hostname = it.client.hostname.clone();
        let mut o = String::new();
        super::per_cpu(&mut o, &it);
        let mut lines = o.lines();
        let head = lines.next().unwrap();
        let at = head.find("pinned").unwrap_or_else(|| panic!("{o}"));
        let row = lines.next().unwrap();
        assert!(row.starts_with(&format!("{cpu0} ")), "pinned first: {o}");
        assert!(row[at..].starts_with("client, plumb-s0 plumb-s1"), "{o}");
        // A server on another host pins CPUs of that host.
        it.server.hostname = "elsewhere".into();
        let mut o = String::new();
        super::per_cpu(&mut o, &it);
        assert!(
            o.lines().nth(1).unwrap()[at..].starts_with("client "),
            "{o}"
        );
        assert!(!o.contains("plumb-s"), "{o}");
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
}
