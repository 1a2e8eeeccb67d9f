//! What the kernel saw at each end: CPUs, softirqs, devices and their
//! drops, protocol levels, tracepoints and the sampled ACKs.

use super::*;

/// What a qdisc counted, after `lead` (what it is): what it sent, and
/// what it dropped, held back and had requeued where it did.
fn sent_words(lead: String, stats: &plumb_samples::QdiscStats) -> Vec<String> {
    let mut words = vec![format!(
        "{lead} sent {} {} pkts",
        format_bytes(stats.bytes),
        count(stats.packets)
    )];
    let said = [
        ("dropped", stats.drops, ""),
        ("over limit", stats.overlimits, " times"),
        ("requeued", stats.requeues, ""),
        ("ECN marked", stats.ecn_marks, ""),
    ];
    for (what, n, unit) in said.into_iter().filter(|(_, n, _)| *n > 0) {
        words.push(format!("{what} {}{unit}", count(n)));
    }
    words
}

/// A root qdisc under its interface's line: what it sent, and what it
/// dropped, held back and held at the close where it did.
fn qdisc_words(q: &plumb_samples::QdiscCounts) -> Vec<String> {
    let lead = format!("{:<19}qdisc {} {}", "", q.kind, q.handle);
    let mut words = sent_words(lead, &q.stats);
    if q.stats.qlen > 0 {
        words.push(format!(
            "held {} in {} pkts at close",
            format_bytes(q.stats.backlog_bytes),
            count(q.stats.qlen)
        ));
    }
    words
}

/// The bottleneck on the router between the ends (`--qdisc`), each way:
/// what its root qdisc sent and dropped, the most it held and how long a
/// packet waits behind that much at the link rate.
pub(super) fn router(o: &mut String, spec: &plumb_spec::Spec, it: &Iteration) {
    let queues = &it.client.path_queues;
    let Some(plumb_spec::Topology::Veth(v)) = &spec.topology else {
        return;
    };
    if queues.is_empty() {
        return;
    }
    let queue = format_bytes(v.queue_or_default());
    // The delay line's packets and drops stand under it already (the
    // path's own lines): here only what its queue held.
    let delay_line = v.qdisc.is_none();
    let _ = match (&v.qdisc, v.link_rate_bps) {
        (Some(qdisc), Some(r)) => writeln!(
            o,
            "\npath        router, qdisc {qdisc} under htb at {}, queue {queue} each way",
            format_bits_per_sec(r as f64)
        ),
        (Some(qdisc), None) => writeln!(
            o,
            "\npath        router, qdisc {qdisc}, no shaper, queue {queue} each way"
        ),
        (None, Some(r)) => writeln!(
            o,
            "            its link at {}, queue {queue} each way",
            format_bits_per_sec(r as f64)
        ),
        (None, None) => return,
    };
    for q in queues {
        let way = q.toward.replace('_', " ");
        let peak = (q.peak_backlog_bytes > 0).then(|| {
            let mut peak = format!(
                "held at most {} in {} pkts",
                format_bytes(q.peak_backlog_bytes),
                count(q.peak_qlen)
            );
            if let Some(r) = v.link_rate_bps {
                peak.push_str(&format!(
                    " ({} ms at the link rate)",
                    sig3(q.peak_backlog_bytes as f64 * 8.0 / r as f64 * 1000.0)
                ));
            }
            peak
        });
        if delay_line {
            if let Some(peak) = peak {
                let _ = writeln!(o, "{:<12}{way} {peak}", "");
            }
            continue;
        }
        let lead = format!("{:<12}{way} {} {}", "", q.interface, q.kind);
        let mut words = sent_words(lead, &q.stats);
        words.extend(peak);
        let _ = writeln!(o, "{}", fit_80(&words));
    }
}

/// One line per CPU (at most 16, pinned ones first): where the time went,
/// with the threads pinned to it where any are.
pub(super) fn per_cpu(o: &mut String, it: &Iteration) {
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

/// The `most` CPUs with the highest counts, highest first ("cpu1 7.4k cpu0
/// 5.2k +2 CPUs"), so that a line stays short on a big host; CPUs that
/// counted nothing are left out.
pub(super) fn busiest_cpus(counts: impl IntoIterator<Item = (u32, u64)>, most: usize) -> String {
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
pub(super) fn network(o: &mut String, it: &Iteration) {
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
            for q in end.qdiscs.iter().filter(|q| q.interface == i.name) {
                let _ = writeln!(o, "{}", fit_80(&qdisc_words(q)));
            }
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
pub(super) fn levels(o: &mut String, it: &Iteration) {
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
pub(super) fn end_lines(
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
pub(super) fn drop_reasons(o: &mut String, it: &Iteration) {
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
pub(super) fn drop_reason_words(t: &plumb_samples::Tracepoints) -> Vec<String> {
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
    if t.drop_reasons_throttled > 0 {
        words.push(format!(
            "(the kernel throttled their sampling {} times)",
            count(t.drop_reasons_throttled)
        ));
    }
    if t.drop_reasons_lost > 0 {
        words.push(format!(
            "({} of their records lost to full rings)",
            count(t.drop_reasons_lost)
        ));
    }
    words
}

/// Each end's NICs' transmit queues that held bytes in the window, by
/// their byte queue limits: the most in flight at a sample against the
/// limit the kernel had tuned, and its mean over the samples.
pub(super) fn nic_queues(o: &mut String, it: &Iteration) {
    end_lines(o, "bql", it, |end| {
        let words = end
            .nic_queues
            .iter()
            .map(|q| {
                let mean = q.inflight_series.iter().sum::<u64>() as f64
                    / q.inflight_series.len().max(1) as f64;
                format!(
                    "{} tx-{} in flight at most {}, {} on average, limit {}",
                    q.interface,
                    q.queue,
                    format_bytes(q.peak_inflight_bytes),
                    format_bytes(mean as u64),
                    format_bytes(q.limit_bytes)
                )
            })
            .collect();
        Some(words)
    });
}

/// Each end's receive buffers as the kernel tuned them, as means over the
/// tunings read: the story of a window that a scaling ratio keeps small.
pub(super) fn rcvbuf_growth(o: &mut String, it: &Iteration) {
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
pub(super) fn acks(o: &mut String, it: &Iteration) {
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

/// The driver's statistics that moved, on one line or two: those that
/// count trouble (drops, errors, misses) first, then the largest.
pub(super) fn driver_line(driver: &BTreeMap<String, i64>) -> Vec<String> {
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
pub(super) fn sched(o: &mut String, it: &Iteration) {
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

#[cfg(test)]
mod count_tests {

    #[test]
    fn a_qdisc_says_what_it_dropped_and_held_and_is_quiet_about_the_rest() {
        let q = plumb_samples::QdiscCounts {
            interface: "plumb-s".into(),
            kind: "tbf".into(),
            handle: "8001:".into(),
            stats: plumb_samples::QdiscStats {
                bytes: 5 << 20,
                packets: 3306,
                drops: 8,
                overlimits: 1420,
                qlen: 3,
                backlog_bytes: 27_341,
                ..Default::default()
            },
        };
        let words = super::qdisc_words(&q);
        assert_eq!(
            words[1..],
            [
                "dropped 8",
                "over limit 1420 times",
                "held 26.7 KiB in 3 pkts at close"
            ]
        );
        assert!(
            words[0].ends_with("qdisc tbf 8001: sent 5.00 MiB 3306 pkts"),
            "{words:?}"
        );
        let idle = plumb_samples::QdiscCounts {
            stats: plumb_samples::QdiscStats {
                drops: 0,
                overlimits: 0,
                qlen: 0,
                ..q.stats
            },
            ..q
        };
        assert_eq!(super::qdisc_words(&idle).len(), 1);
    }
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
