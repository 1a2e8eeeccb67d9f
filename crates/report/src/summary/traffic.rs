//! What moved: the bytes, datagrams, transactions and parts of an
//! iteration, what TCP said of them and what limited the senders.

use super::*;
use plumb_samples::load::Leg;

/// What an iteration (or a part of it) moved: its transactions and
/// latency, throughput, transfer, datagrams and zero-copy sends.
pub(super) fn traffic(o: &mut String, it: &Iteration, spec: &plumb_spec::Spec) {
    let d = &it.derived;
    let t = &it.transfer;
    if spec.is_transactional() {
        transactions(o, it);
    } else if let (Some(rate), Some(l)) = (spec.self_probes, &it.client.latency) {
        self_probes(o, rate, it.client.transactions, l);
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

/// How evenly a part's flows shared what they moved: Jain's index over
/// the bytes each flow received, at whichever end received them.
fn fairness(o: &mut String, part: &Iteration) {
    let shares = plumb_samples::load::flow_shares(&part.client, &part.server);
    if let Some(j) = plumb_samples::load::jain(&shares) {
        let _ = writeln!(
            o,
            "fairness    Jain's index {j:.3} over {} flows' bytes received",
            shares.len()
        );
    }
}

/// The main part's paced transactions (`--rate`) in each stretch of the
/// window in which the same parts ran, and how much the median rose over
/// the stretches in which none did: the latency under load.
pub(super) fn under_load(o: &mut String, spec: &plumb_spec::Spec, it: &Iteration) {
    let stretches = plumb_samples::load::stretches(it);
    if stretches.is_empty() {
        return;
    }
    for (i, probe) in plumb_samples::load::probes(it).iter().enumerate() {
        if probe.inside {
            // Under no load there are no self probes: their rise is over
            // the run's own probe alone, an exchange on an idle connection.
            let _ = writeln!(
                o,
                "\nunder load  self probes in the loads, in ms; rise over the run's probe alone"
            );
            let alone = plumb_samples::load::alone(&stretches, 0);
            stretch_table(o, &stretches, i, None, alone);
            continue;
        }
        let (whose, spec) = match probe
            .part
            .and_then(|n| spec.parts.iter().find(|p| p.name == n))
        {
            Some(p) => (format!("part {}'s", p.name), spec.part_spec(p)),
            None => ("the run's own".to_string(), spec.clone()),
        };
        let way = match probe.leg {
            Leg::Round => {
                let _ = writeln!(
                    o,
                    "\nunder load  {whose} transactions, in ms, while the loads ran"
                );
                false
            }
            leg => {
                let toward = if leg == Leg::Up { "server" } else { "client" };
                let _ = writeln!(
                    o,
                    "\nunder load  {whose} transactions one way, toward the {toward} ({}), in ms,\n            \
                     by the server's stamps on the clock both ends read",
                    probe.name()
                );
                true
            }
        };
        let lost = match (spec.workload, &spec.rr) {
            // A way cannot tell whether a request or its answer was lost.
            _ if way => None,
            (plumb_spec::Workload::UdpRr, Some(rr)) => {
                let timeout_ms = rr.timeout_ms.unwrap_or(plumb_spec::UDP_RR_TIMEOUT_MS);
                Some(plumb_samples::load::timed_out(
                    it,
                    &stretches,
                    i,
                    timeout_ms as f64 / 1000.0,
                ))
            }
            _ => None,
        };
        let alone = plumb_samples::load::alone(&stretches, i);
        stretch_table(o, &stretches, i, lost.as_deref(), alone);
        if way {
            continue;
        }
        if let Some(line) = probe_traffic(&spec, probe.client) {
            let _ = writeln!(o, "{line}");
        }
    }
    responsiveness(o, it);
    each_way(o, it, &stretches);
    dropped(o, it, &stretches);
    bottleneck(o, it, &stretches);
    if let Some(places) = where_queued(it) {
        let indent = " ".repeat(12);
        for (n, l) in wrap(&format!("{indent}{places}"), 80, &indent)
            .into_iter()
            .enumerate()
        {
            let l = if n == 0 {
                format!("queued in   {}", &l[12..])
            } else {
                l
            };
            let _ = writeln!(o, "{l}");
        }
    }
}

/// Each loaded stretch's round trips a minute from the connect probes and
/// the self probes (`plumb_samples::rpm`), as the record keeps them (or, for
/// a record made before it kept them, as its probes' buckets give them).
fn responsiveness(o: &mut String, it: &Iteration) {
    let kept = if it.responsiveness.is_empty() {
        plumb_samples::rpm::loaded(it)
    } else {
        it.responsiveness.clone()
    };
    if kept.is_empty() {
        return;
    }
    let mut t = Table::new(vec![
        ("seconds", Align::Left, 11),
        ("running", Align::Left, 20),
        ("foreign", Align::Right, 8),
        ("self", Align::Right, 8),
        ("RPM", Align::Right, 6),
        ("stability", Align::Left, 21),
    ]);
    for l in &kept {
        let r = &l.figure;
        t.row(vec![
            format!("{:.1}-{:.1}", l.start_s, l.stop_s),
            l.running.join(" + "),
            sig3(r.foreign_ms),
            sig3(r.self_ms),
            format!("{:.0}", r.rpm),
            r.stability.describe(),
        ]);
    }
    let _ = writeln!(
        o,
        "\nresponsiveness  round trips a minute, draft-ietf-ippm-responsiveness-06's\n\
         arithmetic on plumb's probes (not networkQuality's figure): trimmed means\n\
         in ms of a connect probe's round trip and of a self probe"
    );
    o.push_str(&t.terminal(""));
}

/// Each loaded stretch's goodput each way, how evenly the flows moving
/// that way shared it and the round trip their senders saw
/// (`plumb_samples::load::shared`), once settled: a row a way.
fn each_way(o: &mut String, it: &Iteration, stretches: &[plumb_samples::load::Stretch]) {
    let mut t = Table::new(vec![
        ("seconds", Align::Left, 11),
        ("running", Align::Left, 20),
        ("toward", Align::Left, 6),
        ("goodput", Align::Right, 12),
        ("flows", Align::Right, 5),
        ("Jain", Align::Right, 6),
        ("srtt ms", Align::Right, 8),
        ("in flight KiB", Align::Right, 13),
        ("unsent KiB", Align::Right, 10),
    ]);
    let mut rows = 0;
    for st in stretches.iter().filter(|s| !s.running.is_empty()) {
        let sh = plumb_samples::load::shared(it, st);
        let ways = [("client", &sh.to_client), ("server", &sh.to_server)];
        for (n, (toward, w)) in ways
            .into_iter()
            .filter_map(|(t, w)| Some((t, w.as_ref()?)))
            .enumerate()
        {
            let (seconds, running) = match n {
                0 => (
                    format!("{:.1}-{:.1}", sh.from_s, sh.to_s),
                    st.running_label(),
                ),
                _ => (String::new(), String::new()),
            };
            t.row(vec![
                seconds,
                running,
                toward.to_string(),
                format_bits_per_sec(w.goodput_bps()),
                w.bytes.len().to_string(),
                w.jain().map_or("-".to_string(), |j| format!("{j:.3}")),
                w.srtt_us.map_or("-".to_string(), |us| sig3(us / 1000.0)),
                w.in_flight_bytes
                    .map_or("-".to_string(), |b| sig3(b / 1024.0)),
                w.unsent_bytes.map_or("-".to_string(), |b| sig3(b / 1024.0)),
            ]);
            rows += 1;
        }
    }
    if rows == 0 {
        return;
    }
    let settle = plumb_samples::units::trimmed(plumb_samples::load::SETTLE_S);
    let twice = plumb_samples::units::trimmed(2.0 * plumb_samples::load::SETTLE_S);
    let _ = writeln!(
        o,
        "\neach way    the loads' goodput, Jain's index over their flows, and their\n            \
         senders' smoothed RTT, bytes in flight and bytes written but not sent\n            \
         (each flow's mean, summed), from the TCP state both ends sampled,\n            \
         leaving out the first {settle} s of each stretch (its first half where\n            \
         it is shorter than {twice} s)"
    );
    o.push_str(&t.terminal(""));
}

/// The packets the kernel dropped in each stretch, by reason, where the
/// client's end read them interval by interval: where in the run the
/// window's drops fell (a full FIFO's QDISC_DROP while the loads ran).
fn dropped(o: &mut String, it: &Iteration, stretches: &[plumb_samples::load::Stretch]) {
    let drops = plumb_samples::load::drops(it, stretches);
    if drops.iter().all(|d| d.is_empty()) {
        return;
    }
    let mut t = Table::new(vec![
        ("seconds", Align::Left, 11),
        ("running", Align::Left, 20),
        ("dropped", Align::Right, 8),
        ("by reason, most first", Align::Left, 21),
    ]);
    for (st, by) in stretches.iter().zip(&drops) {
        let mut reasons: Vec<(&String, &u64)> = by.iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        t.row(vec![
            format!("{:.1}-{:.1}", st.start_s, st.stop_s),
            st.running_label(),
            count(by.values().sum()),
            reasons
                .iter()
                .map(|(r, n)| format!("{r} {}", count(**n)))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    let _ = writeln!(
        o,
        "\ndropped     packets the kernel freed as dropped (skb:kfree_skb) in each\n            \
         stretch, by its reason, on the client's host, as read second by second"
    );
    let tp = it.client.tracepoints.as_ref();
    let counted = tp.and_then(|t| t.counts.get("skb:kfree_skb").copied());
    let read: u64 = drops.iter().flat_map(|d| d.values()).sum();
    if let Some(counted) = counted.filter(|&c| c > read) {
        let mut why = match tp.map_or(0, |t| t.drop_reasons_throttled) {
            0 => String::new(),
            n => format!(
                ":\n            the kernel throttled their sampling {} times (kernel.perf_event_max_sample_rate)",
                count(n)
            ),
        };
        if let Some(n) = tp.map(|t| t.drop_reasons_lost).filter(|&n| n > 0) {
            why.push_str(&format!(
                "{}\n            {} of their records were lost to full rings",
                if why.is_empty() { ":" } else { ";" },
                count(n)
            ));
        }
        let _ = writeln!(
            o,
            "            ({} of the window's {} drops read{why})",
            count(read),
            count(counted)
        );
    }
    o.push_str(&t.terminal(""));
}

/// What the path's bottleneck dropped and ECN-marked in each stretch, each
/// way, as its queue's samples say; nothing where it did neither.
fn bottleneck(o: &mut String, it: &Iteration, stretches: &[plumb_samples::load::Stretch]) {
    let counted = plumb_samples::load::bottleneck(it, stretches);
    if counted
        .iter()
        .flatten()
        .all(|q| q.drops == 0 && q.ecn_marks == 0)
    {
        return;
    }
    let mut columns = vec![("seconds", Align::Left, 11), ("running", Align::Left, 20)];
    for q in &it.client.path_queues {
        let (dropped, marked) = if q.toward == "to_server" {
            ("dropped up", "marked up")
        } else {
            ("dropped down", "marked down")
        };
        columns.extend([(dropped, Align::Right, 12), (marked, Align::Right, 11)]);
    }
    let mut t = Table::new(columns);
    for (st, ways) in stretches.iter().zip(&counted) {
        let mut row = vec![
            format!("{:.1}-{:.1}", st.start_s, st.stop_s),
            st.running_label(),
        ];
        for q in ways {
            row.extend([count(q.drops), count(q.ecn_marks)]);
        }
        t.row(row);
    }
    let _ = writeln!(
        o,
        "
bottleneck  packets the path's queue dropped and marked Congestion\n            \
         Experienced (ECN) in each stretch, up toward the server and down\n            \
         toward the client, as its counters sampled every {} ms say",
        it.client.path_queues.first().map_or(0, |q| q.period_ms)
    );
    o.push_str(&t.terminal(""));
}

/// Probe `i`'s percentiles in each stretch, and its median's rise over
/// `alone` (its own, or another's, latency where no load ran); with
/// `lost`, how many of its requests sent in each stretch timed out (a UDP
/// probe's, which are not retransmitted).
fn stretch_table(
    o: &mut String,
    stretches: &[plumb_samples::load::Stretch],
    i: usize,
    lost: Option<&[u64]>,
    alone: Option<plumb_samples::Latency>,
) {
    let ms = |us: f64| sig3(us / 1000.0);
    let mut columns = vec![
        ("seconds", Align::Left, 11),
        ("running", Align::Left, 16),
        ("timed", Align::Right, 6),
    ];
    if lost.is_some() {
        columns.push(("lost", Align::Right, 5));
    }
    columns.extend([
        ("p50", Align::Right, 8),
        ("p90", Align::Right, 8),
        ("p99", Align::Right, 8),
        ("max", Align::Right, 8),
        ("p50 rise", Align::Right, 9),
    ]);
    let mut t = Table::new(columns);
    for (n, s) in stretches.iter().enumerate() {
        let mut row = vec![
            format!("{:.1}-{:.1}", s.start_s, s.stop_s),
            s.running_label(),
        ];
        let timed = s.latency.get(i).and_then(Option::as_ref);
        row.push(timed.map_or(0, |l| l.count).to_string());
        if let Some(lost) = lost {
            row.push(lost.get(n).copied().unwrap_or(0).to_string());
        }
        match timed {
            Some(l) => {
                row.extend([ms(l.p50_us), ms(l.p90_us), ms(l.p99_us), ms(l.max_us)]);
                row.push(match (&alone, s.running.is_empty()) {
                    (Some(a), false) => {
                        let rise = (l.p50_us - a.p50_us) / 1000.0;
                        format!(
                            "{}{}",
                            if rise >= 0.0 { "+" } else { "-" },
                            sig3(rise.abs())
                        )
                    }
                    _ => String::new(),
                });
            }
            None => row.extend(["-", "-", "-", "-", ""].map(String::from)),
        }
        t.row(row);
    }
    o.push_str(&t.terminal(""));
}

/// Bytes on an Ethernet wire beside a TCP segment's payload: its Ethernet,
/// IPv4 and TCP (with timestamps) headers.
const SEGMENT_HEADERS: f64 = 14.0 + 20.0 + 32.0;
/// ...and beside a UDP datagram's: its Ethernet, IPv4 and UDP headers.
const DATAGRAM_HEADERS: f64 = 14.0 + 20.0 + 8.0;

/// What the probes themselves put on the path: their rate, and at most a
/// request, a response and a lone ACK a probe with their headers, against
/// the link rate where the path has one.
fn probe_traffic(spec: &plumb_spec::Spec, client: &EndResult) -> Option<String> {
    let rr = spec.rr.as_ref()?;
    // A UDP probe is a request and a response, each one datagram, and it
    // goes out whether or not the last came back; a probe on a new
    // connection adds the handshake and the close (SYN, SYN-ACK, ACK and
    // the default close's RST: about seven segments with the exchange).
    let (probes, headers) = match (&client.udp, spec.workload) {
        (Some(u), _) => (u.packets_sent, 2.0 * DATAGRAM_HEADERS),
        (None, plumb_spec::Workload::Crr) => (client.transactions, 7.0 * SEGMENT_HEADERS),
        (None, _) => (client.transactions, 3.0 * SEGMENT_HEADERS),
    };
    let per_s = probes as f64 / client.window_s.max(f64::EPSILON);
    let bits = per_s * 8.0 * ((rr.req_size + rr.resp_size) as f64 + headers);
    let share = match &spec.topology {
        Some(plumb_spec::Topology::Veth(v)) => v
            .link_rate_bps
            .map(|r| format!(", {} of the link", pct(bits / r as f64)))
            .unwrap_or_default(),
        None => String::new(),
    };
    Some(format!(
        "probes      {}/s, at most {} on the path with their headers{share}",
        sig3(per_s),
        format_bits_per_sec(bits)
    ))
}

/// Where the queue built up, by what the kernel held at its peak: the
/// router's qdisc each way (`--qdisc`), and the most unsent bytes the
/// loads' sending sockets held (what TCP_NOTSENT_LOWAT bounds). None
/// where nothing held more than a packet.
fn where_queued(it: &Iteration) -> Option<String> {
    const PACKET: u64 = 1514;
    let mut held: Vec<String> = Vec::new();
    for q in it
        .client
        .path_queues
        .iter()
        .filter(|q| q.peak_backlog_bytes > PACKET)
    {
        let way = q.toward.replace('_', " ");
        held.push(format!(
            "{} {way} ({} at most)",
            q.holder(),
            format_bytes(q.peak_backlog_bytes)
        ));
    }
    for end in [&it.client, &it.server] {
        if let Some(q) = end.nic_queues.iter().max_by_key(|q| q.peak_inflight_bytes) {
            if q.peak_inflight_bytes > PACKET {
                held.push(format!(
                    "the {}'s NIC ({} {} in flight at most)",
                    end.role,
                    q.interface,
                    format_bytes(q.peak_inflight_bytes)
                ));
            }
        }
    }
    let unsent = it
        .parts
        .iter()
        .filter_map(|p| {
            let most = [&p.client, &p.server]
                .into_iter()
                .filter_map(|e| e.tcp_series.as_ref())
                .flat_map(|s| s.all.notsent_bytes.iter().copied())
                .max()?;
            Some((most, &p.name))
        })
        .max();
    if let Some((most, name)) = unsent.filter(|(most, _)| *most > PACKET) {
        held.push(format!(
            "the loads' sending sockets ({} unsent at most, part {name})",
            format_bytes(most)
        ));
    }
    (!held.is_empty()).then(|| held.join(", "))
}

/// Each other part of a run of parts, in the shown iteration: what it
/// moved over its own window, and its flows' TCP figures.
pub(super) fn parts(o: &mut String, rec: &RunRecord, it: &Iteration) {
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
        let spec = rec.spec.part_spec(p);
        traffic(o, &view, &spec);
        // A probe's flows are slots for its paced requests, not shares of
        // a load.
        if spec.rr.as_ref().is_none_or(|r| r.rate.is_none()) {
            fairness(o, &view);
        }
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
pub(super) fn zerocopy(o: &mut String, it: &Iteration) {
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
pub(super) fn datagrams(
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

pub(super) fn tcp_figures(o: &mut String, it: &Iteration) {
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
pub(super) fn limited_by(o: &mut String, it: &Iteration) {
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
pub(super) fn per_second(
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

/// The latency's two ways over the window, where the client split it by
/// the server's stamps on the clock both read.
fn one_way(o: &mut String, client: &plumb_samples::EndResult) {
    let way = |buckets: fn(&plumb_samples::IntervalSample) -> &[[u64; 2]]| {
        let all: Vec<[u64; 2]> = client
            .intervals
            .iter()
            .flat_map(|s| buckets(s).iter().copied())
            .collect();
        plumb_samples::Latency::from_buckets(&all)
    };
    let (Some(up), Some(down)) = (way(|s| &s.to_server_buckets), way(|s| &s.to_client_buckets))
    else {
        return;
    };
    for (what, l) in [("to server", up), ("to client", down)] {
        let _ = writeln!(
            o,
            "{:<13}{what}: p50 {}  p90 {}  p99 {}  max {}",
            if what == "to server" {
                "one way us"
            } else {
                ""
            },
            sig3(l.p50_us),
            sig3(l.p90_us),
            sig3(l.p99_us),
            sig3(l.max_us)
        );
    }
}

/// Transactions, their rate interval by interval, latency percentiles and
/// fairness over flows.
pub(super) fn transactions(o: &mut String, it: &Iteration) {
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
    one_way(o, &it.client);
    if let Some(f) = d.fairness {
        let _ = writeln!(
            o,
            "fairness     {:.3} (Jain's index over {} flows)",
            f,
            it.client.flows.len()
        );
    }
}

/// A stream's self probes: how many were answered of the rate asked, and
/// their latency from planned time to answer, in ms.
fn self_probes(o: &mut String, rate: u32, answered: u64, l: &plumb_samples::Latency) {
    let ms = |us: f64| sig3(us / 1000.0);
    let _ = writeln!(
        o,
        "self probes {answered} answered ({rate}/s asked), ms: p50 {}  p90 {}  p99 {}  max {}",
        ms(l.p50_us),
        ms(l.p90_us),
        ms(l.p99_us),
        ms(l.max_us),
    );
}

pub(super) fn senders(it: &Iteration) -> Vec<&EndResult> {
    let mut v = Vec::new();
    if it.client.bytes_sent > 0 {
        v.push(&it.client);
    }
    if it.server.bytes_sent > 0 {
        v.push(&it.server);
    }
    v
}
