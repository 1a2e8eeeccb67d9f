//! Figures that need both ends side by side: what was sent against what was
//! received, throughput, CPU cost per GB, the softirq share of pinned CPUs,
//! and whether an iteration moved enough to count as a measurement.

use plumb_samples::{Derived, EndResult, Iteration, PartIteration, Role, SoftirqShare, Transfer};
use plumb_spec::units::show_rate;
use plumb_spec::{Direction, Field, Spec};

/// Below this many messages (or transactions) per second over all flows an
/// iteration measured its own stall, not the path: a pacing rate far under
/// the message size, say, leaves a throughput near zero that would
/// otherwise read as a result.
const STARVED_PER_S: f64 = 0.5;

/// Why a complete iteration is not a measurement: its flows moved no data,
/// or less than half a message per second. None when it measured.
pub fn starved(spec: &Spec, it: &Iteration) -> Option<String> {
    if !it.complete || it.window_s <= 0.0 {
        return None;
    }
    let (what, per_s) = if spec.is_transactional() {
        ("transactions", it.derived.tps.unwrap_or(0.0))
    } else {
        (
            "messages",
            it.transfer.received_bytes as f64 / spec.msg_size.max(1) as f64 / it.window_s,
        )
    };
    if per_s >= STARVED_PER_S {
        return None;
    }
    let cause = match spec.socket.pacing_rate_bps {
        Some(bps) => format!(
            " ({} {} lets a flow send {} bytes per second)",
            Field::PacingRate.flag(),
            show_rate(bps),
            bps / 8
        ),
        None => String::new(),
    };
    Some(format!(
        "the flows moved {} bytes in the {:.1} s window, {per_s:.3} {what} per second{cause}; \
         this iteration is not a measurement and is not counted",
        it.transfer.received_bytes, it.window_s
    ))
}

/// The iteration counts towards the run's mean: complete, and not starved.
pub fn counts(spec: &Spec, it: &Iteration) -> bool {
    it.complete && starved(spec, it).is_none()
}

/// Each other part of a run of parts, from its two ends' figures in the
/// spec's order; where the server's never came (it was lost), its end is
/// marked lost. A part's CPU figures stay 0: the CPU is the host's and the
/// process's, measured once, with the main part.
pub fn parts(spec: &Spec, client: Vec<EndResult>, server: Vec<EndResult>) -> Vec<PartIteration> {
    let mut server = server.into_iter();
    spec.parts
        .iter()
        .zip(client)
        .map(|(p, client)| {
            let part_spec = spec.part_spec(p);
            let server = server.next().unwrap_or_else(|| EndResult {
                warnings: vec!["lost: the server's figures of this part never came".into()],
                lost: true,
                ..EndResult::empty(Role::Server, part_spec.threads)
            });
            PartIteration {
                name: p.name.clone(),
                start_s: p.start_ms as f64 / 1000.0,
                window_s: client.window_s,
                transfer: transfer(&client, &server),
                derived: derive(&part_spec, &client, &server),
                client,
                server,
            }
        })
        .collect()
}

pub fn transfer(client: &EndResult, server: &EndResult) -> Transfer {
    let sent = client.bytes_sent + server.bytes_sent;
    let received = client.bytes_received + server.bytes_received;
    Transfer {
        sent_bytes: sent,
        received_bytes: received,
        difference_bytes: sent as i64 - received as i64,
        in_flight_start_bytes: client.queued_start_bytes + server.queued_start_bytes,
        in_flight_end_bytes: client.queued_end_bytes + server.queued_end_bytes,
    }
}

/// The way data moves in `spec`'s flows: a request/response moves it both
/// ways, as `both` does.
fn data_direction(spec: &Spec) -> Direction {
    match spec.is_transactional() {
        true => Direction::Both,
        false => spec.direction,
    }
}

/// Per-interval receive rate over the receiving end(s), interval by
/// interval, over the first receiver's interval.
fn receive_rates(spec: &Spec, client: &EndResult, server: &EndResult) -> Vec<f64> {
    let (_, receivers) = data_direction(spec).ends(client, server);
    let n = client.intervals.len().min(server.intervals.len());
    (0..n)
        .filter_map(|i| {
            let bytes: u64 = receivers
                .iter()
                .map(|e| e.intervals[i].bytes_received)
                .sum();
            let dt = receivers[0].intervals[i].dt_s;
            // A sliver of an interval at the end says nothing about the rate.
            (dt >= 0.5).then(|| bytes as f64 * 8.0 / dt)
        })
        .collect()
}

pub fn derive(spec: &Spec, client: &EndResult, server: &EndResult) -> Derived {
    let received = client.bytes_received + server.bytes_received;
    // The window the throughput is over: the (first) receiver's, by the
    // direction asked for.
    let window = spec.direction.ends(client, server).1[0].window_s;
    let throughput_bps = if window > 0.0 {
        received as f64 * 8.0 / window
    } else {
        0.0
    };
    let rates = receive_rates(spec, client, server);
    let (min, max) = rates.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| {
        (lo.min(r), hi.max(r))
    });
    let gb = received as f64 / 1e9;
    let per_gb = |s: f64| if gb > 0.0 { s / gb } else { 0.0 };

    // The host as the client sees it; a remote server's host adds its own.
    let mut host_busy: f64 = client.cpus.iter().map(|c| c.busy_s()).sum();
    let mut host_softirq: f64 = client.cpus.iter().map(|c| c.softirq_s).sum();
    if server.hostname != client.hostname {
        host_busy += server.cpus.iter().map(|c| c.busy_s()).sum::<f64>();
        host_softirq += server.cpus.iter().map(|c| c.softirq_s).sum::<f64>();
    }

    let mut shares = Vec::new();
    for (end, cpus) in [(client, &spec.client_cpus), (server, &spec.server_cpus)] {
        let Some(cpus) = cpus else { continue };
        for &cpu in cpus.cpus() {
            if let Some(t) = end.cpus.iter().find(|t| t.cpu == cpu) {
                let total = t.total_s();
                shares.push(SoftirqShare {
                    cpu,
                    role: end.role,
                    softirq_s: t.softirq_s,
                    busy_s: t.busy_s(),
                    share: if total > 0.0 {
                        t.softirq_s / total
                    } else {
                        0.0
                    },
                });
            }
        }
    }

    let (senders, _) = data_direction(spec).ends(client, server);
    // Over the window; records made before it was kept have only each
    // flow's lifetime count, warm-up included.
    let retransmits = senders
        .iter()
        .map(|e| match (e.window_retransmits, &e.tcp_info_summary) {
            (Some(n), _) => n,
            (None, Some(t)) => t.retrans_sum,
            (None, None) => e.tcp_info.iter().map(|t| t.total_retrans as u64).sum(),
        })
        .sum();

    // The senders' round trip, the median over their flows as the window
    // closed, against the window's length.
    let rtts: Vec<f64> = senders
        .iter()
        .flat_map(|e| match &e.tcp_info_summary {
            Some(t) if e.tcp_info.is_empty() => vec![t.rtt_us[1]],
            _ => e.tcp_info.iter().map(|t| t.rtt_us as f64).collect(),
        })
        .filter(|r| *r > 0.0)
        .collect();
    let window_rtts = plumb_stats::Summary::of(&rtts)
        .map(|s| client.window_s / (s.median / 1e6))
        .filter(|n| n.is_finite());

    Derived {
        throughput_bps,
        window_rtts,
        interval_min_bps: if rates.is_empty() {
            throughput_bps
        } else {
            min
        },
        interval_max_bps: if rates.is_empty() {
            throughput_bps
        } else {
            max
        },
        client_cpu_s_per_gb: per_gb(client.process.total_s()),
        server_cpu_s_per_gb: per_gb(server.process.total_s()),
        host_cpu_s_per_gb: per_gb(host_busy),
        host_busy_s: host_busy,
        host_softirq_s: host_softirq,
        softirq_shares: shares,
        retransmits,
        ..datagrams(spec, client, server, host_busy)
    }
}

/// The UDP figures on top of the transactional ones: the receiver's
/// datagram rate and loss for a stream, the share of requests that timed
/// out for request/response.
fn datagrams(spec: &Spec, client: &EndResult, server: &EndResult, host_busy: f64) -> Derived {
    let mut d = transactional(spec, client, server, host_busy);
    if let (Some(c), Some(s)) = (&client.udp, &server.udp) {
        if spec.is_transactional() {
            let asked = client.transactions + c.timeouts;
            d.timeout_ratio = Some(if asked > 0 {
                c.timeouts as f64 / asked as f64
            } else {
                0.0
            });
        } else {
            let ((tx, _), (rx, receiver)) = spec.direction.sender_first((c, client), (s, server));
            if receiver.window_s > 0.0 {
                d.pps = Some(rx.packets_received as f64 / receiver.window_s);
            }
            // Over the sender's window, from the datagrams it marked: exact
            // whatever the skew of the two windows. Records of servers that
            // did not count marks fall back to the receiver's gaps over its
            // own window.
            let (lost, seen) = if tx.window_sent > 0 {
                (
                    tx.window_sent.saturating_sub(rx.window_received),
                    tx.window_sent,
                )
            } else {
                (rx.lost, rx.packets_received + rx.lost)
            };
            d.loss = Some(if seen > 0 {
                lost as f64 / seen as f64
            } else {
                0.0
            });
        }
    }
    d
}

/// Transactions per second, CPU per transaction and fairness, counted by
/// the client: a transaction is done when its response has been read.
fn transactional(spec: &Spec, client: &EndResult, server: &EndResult, host_busy: f64) -> Derived {
    if !spec.is_transactional() || client.window_s <= 0.0 {
        return Derived::default();
    }
    let tx = client.transactions as f64;
    let per_tx = |s: f64| (tx > 0.0).then(|| s / tx);
    let per_flow: Vec<f64> = client
        .flows
        .iter()
        .map(|f| f.transactions.unwrap_or(0) as f64)
        .collect();
    Derived {
        tps: Some(tx / client.window_s),
        client_cpu_s_per_tx: per_tx(client.process.total_s()),
        server_cpu_s_per_tx: per_tx(server.process.total_s()),
        host_cpu_s_per_tx: per_tx(host_busy),
        fairness: if per_flow.len() > 1 {
            plumb_stats::jain_fairness(&per_flow)
        } else {
            None
        },
        ..Derived::default()
    }
}
