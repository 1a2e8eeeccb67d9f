//! Latency under load: an iteration of a run of parts cut into stretches
//! by which loads ran, each with the latency of every probe's paced
//! transactions over it (read from the buckets its seconds keep), and each
//! stretch's rise over the stretches when no load ran. A probe is the main
//! part or a part of paced transactions (an open loop); a load is any
//! other part. Loads that carry self probes (`--self-probes`) make one
//! probe more, `self`, timed in each stretch over the loads that ran. Each
//! flow's share of a part is judged by Jain's fairness index.

use crate::{Iteration, Latency};

/// A stretch of the window in which the same loads ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Stretch {
    /// Seconds after the window opened.
    pub start_s: f64,
    pub stop_s: f64,
    /// The loads that ran throughout, by name, in the spec's order; empty
    /// when none did.
    pub running: Vec<String>,
    /// Each probe's transactions (in [`probes`]' order) timed in the
    /// intervals whose middle falls in the stretch, less the first of a
    /// stretch that follows another where it has more (those sent before
    /// the change and answered after it, as a queue fills or drains); None
    /// where none was timed.
    pub latency: Vec<Option<Latency>>,
    /// The same, second by second: each probe's buckets of each second it
    /// timed in the stretch.
    pub seconds: Vec<Vec<Vec<[u64; 2]>>>,
}

impl Stretch {
    /// The loads that ran, joined by ` + `, or `nothing`: how the tables
    /// name a stretch.
    pub fn running_label(&self) -> String {
        if self.running.is_empty() {
            "nothing".to_string()
        } else {
            self.running.join(" + ")
        }
    }
}

/// Probe `i`'s median in stretch `k` of each iteration (cut by
/// [`stretches`] once each), in ms, where it timed any.
pub fn medians_ms(each: &[Vec<Stretch>], i: usize, k: usize) -> Vec<f64> {
    each.iter()
        .filter_map(|c| c.get(k)?.latency.get(i)?.as_ref())
        .map(|l| l.p50_us / 1000.0)
        .collect()
}

/// A probe of a run of parts: the main part or a part of paced
/// transactions, whose seconds keep their latencies' buckets; or the self
/// probes inside the loads.
#[derive(Clone, Copy)]
pub struct Probe<'a> {
    /// `None` for the main part, else the part's name.
    pub part: Option<&'a str>,
    /// Its client's record; for the self probes, the first load's.
    pub client: &'a crate::EndResult,
    /// When its window opened, in seconds after the run's.
    pub offset_s: f64,
    /// The self probes inside the loads: timed over every load running.
    pub inside: bool,
    /// Which of its transactions' figures: the latency, or one way of it.
    pub leg: Leg,
}

/// A probe's latency, or one of the two ways it splits into where the
/// server stamped its answers on a clock the client shares (the UDP
/// probes on one kernel): toward the server (`up`, as an upload goes) and
/// back toward the client (`down`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    Round,
    Up,
    Down,
}

/// The name of the probe inside the loads.
pub const SELF: &str = "self";

impl<'a> Probe<'a> {
    /// `run` for the main part, `self` for the probes inside the loads,
    /// else the part's name; a way of it with `-up` or `-down` after.
    pub fn name(&self) -> String {
        let name = if self.inside {
            SELF
        } else {
            self.part.unwrap_or("run")
        };
        match self.leg {
            Leg::Round => name.to_string(),
            Leg::Up => format!("{name}-up"),
            Leg::Down => format!("{name}-down"),
        }
    }

    /// What the probe timed in interval `s`, as [`Latency::buckets`] holds
    /// it.
    pub fn buckets<'s>(&self, s: &'s crate::IntervalSample) -> &'s [[u64; 2]] {
        match self.leg {
            Leg::Round => &s.buckets,
            Leg::Up => &s.to_server_buckets,
            Leg::Down => &s.to_client_buckets,
        }
    }

    /// The main part of `it`, over its whole window.
    fn main(it: &'a Iteration) -> Probe<'a> {
        Probe {
            part: None,
            client: &it.client,
            offset_s: 0.0,
            inside: false,
            leg: Leg::Round,
        }
    }

    /// The probe's two ways, where its seconds keep them.
    fn ways(self) -> impl Iterator<Item = Probe<'a>> {
        let split = self
            .client
            .intervals
            .iter()
            .any(|s| !s.to_server_buckets.is_empty());
        [Leg::Up, Leg::Down]
            .into_iter()
            .filter(move |_| split)
            .map(move |leg| Probe { leg, ..self })
    }
}

/// Whether an end's seconds keep their latencies' buckets.
fn keeps(e: &crate::EndResult) -> bool {
    e.intervals.iter().any(|s| !s.buckets.is_empty())
}

/// The probes of `it`: the main part, then the parts, of paced
/// transactions, each followed by its two ways where it has them; then
/// `self` where a load kept its self probes.
pub fn probes(it: &Iteration) -> Vec<Probe<'_>> {
    let main = Probe::main(it);
    let own = std::iter::once((main, it.derived.tps.is_some()))
        .chain(it.parts.iter().map(|p| {
            let probe = Probe {
                part: Some(&p.name),
                client: &p.client,
                offset_s: p.start_s,
                inside: false,
                leg: Leg::Round,
            };
            (probe, p.derived.tps.is_some())
        }))
        .filter(|(p, paced)| *paced && keeps(p.client))
        .flat_map(|(p, _)| std::iter::once(p).chain(p.ways()));
    let inside = it
        .parts
        .iter()
        .find(|p| p.derived.tps.is_none() && keeps(&p.client))
        .map(|p| Probe {
            part: Some(&p.name),
            client: &p.client,
            offset_s: p.start_s,
            inside: true,
            leg: Leg::Round,
        });
    own.chain(inside).collect()
}

/// How close two edges of stretches are to be one (see [`stretches`]).
const EDGE_S: f64 = 0.5;

/// The stretches of `it` in time order, cut where its loads (the parts
/// that are not probes) start and stop; none without a probe or a load.
pub fn stretches(it: &Iteration) -> Vec<Stretch> {
    let window = it.client.window_s;
    let probes = probes(it);
    let loads = loads(it, &probes);
    if probes.is_empty() || loads.is_empty() {
        return Vec::new();
    }
    let span = |p: &crate::PartIteration| (p.start_s, (p.start_s + p.window_s).min(window));
    // A part starts and stops on the window's seconds, give or take the
    // moment its engine took to start or stop (a tenth of a second, more
    // in an emulated guest): edges closer than half a second are one, as
    // no second's interval could have its middle between them.
    let mut edges: Vec<f64> = vec![0.0, window];
    for p in &loads {
        let (a, b) = span(p);
        edges.extend([a, b]);
    }
    edges.sort_by(f64::total_cmp);
    edges.dedup_by(|b, a| *b - *a < EDGE_S);
    if let Some(last) = edges.last_mut() {
        *last = last.max(window);
    }
    edges
        .windows(2)
        .map(|w| {
            let (start_s, stop_s) = (w[0], w[1]);
            let mid = (start_s + stop_s) / 2.0;
            let running = loads
                .iter()
                .filter(|p| {
                    let (a, b) = span(p);
                    a <= mid && mid < b
                })
                .map(|p| p.name.clone())
                .collect();
            // What a probe timed in each second of the stretch, less its
            // first where it has more (see `Stretch::latency`).
            let timed = |probe: &Probe| -> Vec<Vec<[u64; 2]>> {
                let inside = within(probe, start_s, stop_s);
                let settling = usize::from(start_s > 0.0 && inside.len() > 1);
                inside[settling..]
                    .iter()
                    .map(|s| probe.buckets(s).to_vec())
                    .collect()
            };
            let seconds: Vec<Vec<Vec<[u64; 2]>>> = probes
                .iter()
                .map(|probe| {
                    if !probe.inside {
                        return timed(probe);
                    }
                    // Every load that ran, each from its own start, second
                    // by second.
                    let mut merged: Vec<Vec<[u64; 2]>> = Vec::new();
                    for p in loads.iter().filter(|p| {
                        let (a, b) = span(p);
                        a <= mid && mid < b
                    }) {
                        let own = timed(&Probe {
                            part: Some(&p.name),
                            client: &p.client,
                            offset_s: p.start_s,
                            inside: true,
                            leg: Leg::Round,
                        });
                        for (k, b) in own.into_iter().enumerate() {
                            if merged.len() <= k {
                                merged.push(Vec::new());
                            }
                            merged[k].extend(b);
                        }
                    }
                    merged
                })
                .collect();
            let latency = seconds
                .iter()
                .map(|each| Latency::from_buckets(&each.concat()))
                .collect();
            Stretch {
                start_s,
                stop_s,
                running,
                latency,
                seconds,
            }
        })
        .collect()
}

/// The intervals of `probe` whose middle falls between `start_s` and
/// `stop_s` (seconds after the run's window opened).
fn within<'a>(probe: &Probe<'a>, start_s: f64, stop_s: f64) -> Vec<&'a crate::IntervalSample> {
    probe
        .client
        .intervals
        .iter()
        .filter(|s| {
            let m = probe.offset_s + s.t_s - s.dt_s / 2.0;
            start_s <= m && m < stop_s
        })
        .collect()
}

/// Probe `i`'s requests sent in each stretch that timed out (udp-rr: lost,
/// or answered after the timeout). A timeout is counted in the interval
/// its time ran out, `timeout_s` after the request was planned, so each
/// interval's count is placed that much earlier; those of the window's last
/// `timeout_s` are not known.
pub fn timed_out(it: &Iteration, stretches: &[Stretch], i: usize, timeout_s: f64) -> Vec<u64> {
    let probes = probes(it);
    let Some(probe) = probes.get(i) else {
        return vec![0; stretches.len()];
    };
    let early = Probe {
        offset_s: probe.offset_s - timeout_s,
        ..*probe
    };
    stretches
        .iter()
        .map(|s| {
            within(&early, s.start_s, s.stop_s)
                .iter()
                .map(|x| x.timeouts)
                .sum()
        })
        .collect()
}

/// The packets the kernel dropped in each stretch, by reason: the client
/// end's intervals (the main part's, over the whole window) whose middle
/// falls in it. The reasons are host-wide, as read; an interval that
/// straddles a stretch's edge counts wholly in the stretch its middle is in.
pub fn drops(
    it: &Iteration,
    stretches: &[Stretch],
) -> Vec<std::collections::BTreeMap<String, u64>> {
    let main = Probe::main(it);
    stretches
        .iter()
        .map(|st| {
            let mut by = std::collections::BTreeMap::new();
            for s in within(&main, st.start_s, st.stop_s) {
                for (reason, n) in &s.drop_reasons {
                    *by.entry(reason.clone()).or_default() += n;
                }
            }
            by
        })
        .collect()
}

/// What the path's bottleneck counted in each stretch, each way (in the
/// client's `path_queues` order): its samples at the stretch's edges, a
/// period apart from the window's open, told apart; what it held is the
/// later one's. A load starts and stops on its second give or take the
/// few milliseconds its flows take, so an edge inside the window is read a
/// sample to the side of the stretch with fewer loads: what a load's first
/// and last moments dropped is its own. The stretches' counts add up to
/// the window's.
pub fn bottleneck(it: &Iteration, stretches: &[Stretch]) -> Vec<Vec<crate::QueueSample>> {
    // Each edge's sample index, given a queue's period and samples.
    let edge = |i: usize, period_ms: u32, last: usize| -> usize {
        if i == 0 {
            return 0;
        }
        let Some(after) = stretches.get(i) else {
            return last;
        };
        let before = &stretches[i - 1];
        let k = (after.start_s * 1000.0 / f64::from(period_ms.max(1))).round() as usize;
        let k = if after.running.len() >= before.running.len() {
            k.saturating_sub(1)
        } else {
            k + 1
        };
        k.min(last)
    };
    (0..stretches.len())
        .map(|i| {
            it.client
                .path_queues
                .iter()
                .filter_map(|q| {
                    let last = q.samples.len().checked_sub(1)?;
                    let a = q.samples[edge(i, q.period_ms, last)];
                    let b = q.samples[edge(i + 1, q.period_ms, last)];
                    Some(b.since(&a))
                })
                .collect()
        })
        .collect()
}

/// Probe `i`'s latency over the stretches in which no load ran, together.
pub fn alone(stretches: &[Stretch], i: usize) -> Option<Latency> {
    let buckets: Vec<[u64; 2]> = stretches
        .iter()
        .filter(|s| s.running.is_empty())
        .filter_map(|s| s.latency.get(i)?.as_ref())
        .flat_map(|l| l.buckets.iter().copied())
        .collect();
    Latency::from_buckets(&buckets)
}

/// The loads of `it`: its parts that are none of `probes` (which
/// [`probes`] gave), in the spec's order. A load's self probes are a probe
/// inside it, not a probe of its own.
pub fn loads<'a>(it: &'a Iteration, probes: &[Probe]) -> Vec<&'a crate::PartIteration> {
    it.parts
        .iter()
        .filter(|p| {
            !probes
                .iter()
                .any(|q| !q.inside && q.part == Some(p.name.as_str()))
        })
        .collect()
}

/// What each flow of a part received, in bytes, at whichever end received
/// it: the shares [`jain`] weighs.
pub fn flow_shares(client: &crate::EndResult, server: &crate::EndResult) -> Vec<f64> {
    let mut shares: Vec<f64> = vec![0.0; client.flows.len().max(server.flows.len())];
    for f in client.flows.iter().chain(&server.flows) {
        if let Some(s) = shares.get_mut(f.flow as usize) {
            *s += f.bytes_received as f64;
        }
    }
    shares
}

/// Seconds of a stretch left out when weighing how its flows shared the
/// path: slow start and its first losses deal the link out by chance. A
/// stretch of less than twice this leaves out its first half instead.
pub const SETTLE_S: f64 = 2.0;

/// What the loads' flows moving one way received over part of a stretch,
/// from the TCP state sampled at the receiving end (bytes received since
/// the window opened, every 100 ms), and the round trip their senders saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Way {
    /// Each flow's bytes, the loads' in the spec's order.
    pub bytes: Vec<f64>,
    /// The seconds they were received over.
    pub seconds: f64,
    /// The senders' smoothed RTT over those seconds, µs: the mean of their
    /// flows' samples; None where the sending end sampled none.
    pub srtt_us: Option<f64>,
    /// The bytes the senders had in flight together (sent, not yet
    /// acknowledged: on the path and in its queues), each flow's mean over
    /// its samples in those seconds, summed; None as `srtt_us`.
    pub in_flight_bytes: Option<f64>,
    /// The bytes they held written but not yet sent, likewise (in their
    /// sockets); None where the kernel does not say (before 4.6).
    pub unsent_bytes: Option<f64>,
}

impl Way {
    /// The flows' goodput together, bits a second.
    pub fn goodput_bps(&self) -> f64 {
        self.bytes.iter().sum::<f64>() * 8.0 / self.seconds.max(f64::EPSILON)
    }

    /// Jain's index over the flows.
    pub fn jain(&self) -> Option<f64> {
        jain(&self.bytes)
    }
}

/// How the loads of a stretch shared the path each way, after it settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared {
    /// Seconds after the window opened: the stretch less its settling.
    pub from_s: f64,
    pub to_s: f64,
    /// The flows the client received, and those the server received; None
    /// where no load's flows moved that way, or where an end sampled only
    /// some of its flows (over [`crate::TCP_SERIES_FLOWS`]) or none.
    pub to_client: Option<Way>,
    pub to_server: Option<Way>,
}

/// An end of a part: its client or its server.
type EndOf = fn(&crate::PartIteration) -> &crate::EndResult;

/// How the loads running through `st` shared the path each way, from
/// [`SETTLE_S`] into it to its end: each receiving flow's bytes over that
/// time, read from its end's TCP series at the samples nearest the two
/// moments, and the sending flows' smoothed RTT at the samples between. A
/// flow counts at the end it moved data toward over its part's window (it
/// received more of it than it sent: the other way go only the self
/// probes' marks), so a flow starved in the stretch still counts, as none.
pub fn shared(it: &Iteration, st: &Stretch) -> Shared {
    let settle = SETTLE_S.min((st.stop_s - st.start_s) / 2.0);
    let (from_s, to_s) = (st.start_s + settle, st.stop_s);
    let probes = probes(it);
    let running: Vec<&crate::PartIteration> = loads(it, &probes)
        .into_iter()
        .filter(|p| st.running.contains(&p.name))
        .collect();
    // Part `p`'s end's samples nearest `from_s` and `to_s` (seconds after
    // the run's window opened).
    let span = |p: &crate::PartIteration, series: &crate::TcpSeries| -> (usize, usize) {
        let at = |t_s: f64| -> usize {
            let ms = (t_s - p.start_s) * 1000.0;
            let off = |i: usize| (f64::from(series.t_ms[i]) - ms).abs();
            (0..series.t_ms.len())
                .min_by(|&x, &y| off(x).total_cmp(&off(y)))
                .unwrap_or(0)
        };
        (at(from_s), at(to_s))
    };
    let toward = |e: &crate::EndResult, flow: u32| {
        e.flows
            .iter()
            .find(|t| t.flow == flow)
            .is_some_and(|t| t.bytes_received > t.bytes_sent)
    };
    let mean = |v: &[u32]| -> Option<f64> {
        (!v.is_empty()).then(|| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64)
    };
    let way = |receiver: EndOf, sender: EndOf| -> Option<Way> {
        let mut bytes = Vec::new();
        let (mut rtt_sum, mut rtt_n) = (0.0, 0usize);
        let (mut in_flight, mut unsent) = (None::<f64>, Some(0.0));
        for p in &running {
            let series = receiver(p).tcp_series.as_ref()?;
            if series.sampled.len() != series.flows as usize {
                return None;
            }
            let (a, b) = span(p, series);
            for f in &series.sampled {
                let got = f.bytes_received.as_deref()?;
                if toward(receiver(p), f.flow) {
                    let moved = got.get(b).zip(got.get(a)).map_or(0, |(b, a)| b - a.min(b));
                    bytes.push(moved as f64);
                }
            }
            let Some(sent) = sender(p).tcp_series.as_ref() else {
                continue;
            };
            let (a, b) = span(p, sent);
            for f in sent.sampled.iter().filter(|f| toward(receiver(p), f.flow)) {
                for &us in f.srtt_us.get(a..=b).unwrap_or_default() {
                    rtt_sum += f64::from(us);
                    rtt_n += 1;
                }
                if let Some(segs) = f.in_flight.get(a..=b).and_then(mean) {
                    *in_flight.get_or_insert(0.0) += segs * f64::from(f.mss);
                }
                let held = f.notsent_bytes.as_deref().and_then(|v| mean(v.get(a..=b)?));
                unsent = unsent.zip(held).map(|(u, h)| u + h);
            }
        }
        (!bytes.is_empty()).then_some(Way {
            bytes,
            seconds: to_s - from_s,
            srtt_us: (rtt_n > 0).then(|| rtt_sum / rtt_n as f64),
            unsent_bytes: unsent.filter(|_| in_flight.is_some()),
            in_flight_bytes: in_flight,
        })
    };
    Shared {
        from_s,
        to_s,
        to_client: way(|p| &p.client, |p| &p.server),
        to_server: way(|p| &p.server, |p| &p.client),
    }
}

/// Jain's fairness index of the flows' shares: 1 when all are equal, 1/n
/// when one has everything; None for fewer than two flows or none moved.
pub fn jain(shares: &[f64]) -> Option<f64> {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    (shares.len() >= 2 && squares > 0.0).then(|| sum * sum / (shares.len() as f64 * squares))
}

impl Latency {
    /// The summary of merged buckets (`[value_ns, count]`, the value the
    /// highest of its bucket, as [`Latency::buckets`] holds them): each
    /// percentile is the value of the bucket that reaches it, as the
    /// histogram itself answers. None for no transactions.
    pub fn from_buckets(buckets: &[[u64; 2]]) -> Option<Latency> {
        let mut merged: Vec<[u64; 2]> = buckets.iter().copied().filter(|b| b[1] > 0).collect();
        merged.sort_unstable_by_key(|b| b[0]);
        merged.dedup_by(|b, a| {
            let same = a[0] == b[0];
            if same {
                a[1] += b[1];
            }
            same
        });
        let count: u64 = merged.iter().map(|b| b[1]).sum();
        if count == 0 {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let at = |q: f64| {
            let reach = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0;
            for [v, n] in &merged {
                seen += n;
                if seen >= reach {
                    return us(*v);
                }
            }
            us(merged[merged.len() - 1][0])
        };
        let total: f64 = merged.iter().map(|[v, n]| *v as f64 * *n as f64).sum();
        Some(Latency {
            count,
            mean_us: total / count as f64 / 1000.0,
            min_us: us(merged[0][0]),
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            p999_us: at(0.999),
            p9999_us: at(0.9999),
            max_us: us(merged[merged.len() - 1][0]),
            buckets: merged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IntervalSample;

    #[test]
    fn buckets_merge_and_give_the_percentiles_a_histogram_would() {
        // 90 transactions of 1 ms and 10 of 100 ms, in two lists.
        let l =
            Latency::from_buckets(&[[1_000_000, 50], [100_000_000, 10], [1_000_000, 40]]).unwrap();
        assert_eq!(l.count, 100);
        assert_eq!((l.p50_us, l.p90_us, l.p99_us), (1000.0, 1000.0, 100_000.0));
        assert_eq!((l.min_us, l.max_us), (1000.0, 100_000.0));
        assert!((l.mean_us - 10_900.0).abs() < 1e-9, "{}", l.mean_us);
        assert_eq!(l.buckets, vec![[1_000_000, 90], [100_000_000, 10]]);
        assert!(Latency::from_buckets(&[]).is_none());
        assert!(Latency::from_buckets(&[[5, 0]]).is_none());
    }

    #[test]
    fn jains_index_is_one_for_equal_shares_and_one_over_n_for_one_taking_all() {
        assert_eq!(jain(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        let j = jain(&[3.0, 1.0]).unwrap();
        assert!((j - 0.8).abs() < 1e-12, "{j}");
        assert_eq!(jain(&[3.0]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    fn second(t_s: f64, latency_ns: u64) -> IntervalSample {
        IntervalSample {
            t_s,
            dt_s: 1.0,
            buckets: vec![[latency_ns, 10]],
            ..Default::default()
        }
    }

    /// Six seconds, a part running from 2.003 s to 4.001 s: three stretches,
    /// each with its own seconds' latencies.
    #[test]
    fn a_run_of_parts_is_cut_where_its_parts_start_and_stop() {
        let mut it = crate::testing::example().iterations[0].clone();
        // The run's own workload is paced transactions.
        it.derived.tps = Some(10.0);
        it.client.window_s = 6.0;
        it.client.intervals = (1..=6)
            .map(|s| {
                second(
                    s as f64,
                    if s == 3 || s == 4 {
                        80_000_000
                    } else {
                        100_000
                    },
                )
            })
            .collect();
        it.parts = vec![crate::testing::part(&it, "down", 2.003, 1.998)];
        let s = stretches(&it);
        let cut: Vec<(f64, f64, Vec<String>)> = s
            .iter()
            .map(|s| (s.start_s, s.stop_s, s.running.clone()))
            .collect();
        assert_eq!(
            cut,
            vec![
                (0.0, 2.003, vec![]),
                (2.003, 4.001, vec!["down".to_string()]),
                (4.001, 6.0, vec![]),
            ]
        );
        let p50: Vec<f64> = s
            .iter()
            .map(|s| s.latency[0].as_ref().unwrap().p50_us)
            .collect();
        assert_eq!(p50, vec![100.0, 80_000.0, 100.0]);
        // Two loads in turn whose engines stopped late and early (as in an
        // emulated guest, by a tenth or two of a second): no stretch of
        // both or of neither between them.
        let mut late = it.clone();
        late.parts = vec![
            crate::testing::part(&it, "down", 1.0, 2.15),
            crate::testing::part(&it, "up", 3.0, 1.8),
        ];
        let cut: Vec<(f64, Vec<String>)> = stretches(&late)
            .iter()
            .map(|s| (s.start_s, s.running.clone()))
            .collect();
        assert_eq!(
            cut,
            vec![
                (0.0, vec![]),
                (1.0, vec!["down".to_string()]),
                (3.0, vec!["up".to_string()]),
                (4.8, vec![]),
            ]
        );
        // The first second of a stretch after another is left out.
        let counts: Vec<u64> = s
            .iter()
            .map(|s| s.latency[0].as_ref().unwrap().count)
            .collect();
        assert_eq!(counts, vec![20, 10, 10]);
        let alone = alone(&s, 0).unwrap();
        assert_eq!((alone.count, alone.p50_us), (30, 100.0));
        // A part that keeps buckets is a probe of its own, not a load: the
        // stretches stay, each with its latency too, on the run's axis.
        let mut probed = it.clone();
        let mut tcp = probed.parts[0].clone();
        tcp.name = "tcp".into();
        tcp.start_s = 1.0;
        tcp.client.intervals = (1..=5).map(|s| second(s as f64, 2_000_000)).collect();
        probed.parts.push(tcp);
        let names: Vec<Option<&str>> = probes(&probed).iter().map(|p| p.part).collect();
        assert_eq!(names, vec![None, Some("tcp")]);
        let s = stretches(&probed);
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|s| s.running.len() <= 1));
        // Its seconds 1 to 2 of its own are 2 to 3 of the run's: the first
        // stretch holds its first second alone.
        let counts: Vec<u64> = s
            .iter()
            .map(|s| s.latency[1].as_ref().unwrap().count)
            .collect();
        assert_eq!(counts, vec![10, 10, 10]);
        // A load with self probes stays a load, and its probes are the
        // probe `self`, timed in the stretch it ran, from its own start.
        let mut inside = it.clone();
        inside.parts[0].derived.tps = None;
        inside.parts[0].client.intervals = (1..=2).map(|s| second(s as f64, 5_000_000)).collect();
        let names: Vec<String> = probes(&inside).iter().map(|p| p.name()).collect();
        assert_eq!(names, vec!["run", SELF]);
        let s = stretches(&inside);
        let cut: Vec<Vec<String>> = s.iter().map(|s| s.running.clone()).collect();
        assert_eq!(cut, vec![vec![], vec!["down".to_string()], vec![]]);
        let own: Vec<Option<(u64, f64)>> = s
            .iter()
            .map(|s| s.latency[1].as_ref().map(|l| (l.count, l.p50_us)))
            .collect();
        assert_eq!(own, vec![None, Some((10, 5000.0)), None]);
        // A probe whose seconds keep its two ways is followed by them, each
        // a probe of its own, cut into the same stretches.
        let mut split = it.clone();
        for i in &mut split.client.intervals {
            let [[ns, n]] = i.buckets[..] else { panic!() };
            i.to_server_buckets = vec![[ns / 4, n]];
            i.to_client_buckets = vec![[ns - ns / 4, n]];
        }
        let names: Vec<String> = probes(&split).iter().map(|p| p.name()).collect();
        assert_eq!(names, vec!["run", "run-up", "run-down"]);
        let p50: Vec<Vec<f64>> = stretches(&split)
            .iter()
            .map(|s| {
                s.latency
                    .iter()
                    .map(|l| l.as_ref().unwrap().p50_us)
                    .collect()
            })
            .collect();
        assert_eq!(p50[1], vec![80_000.0, 20_000.0, 60_000.0]);
        // The kernel's drops fall in the stretch each second's middle is in.
        let mut dropped = it.clone();
        for (k, i) in dropped.client.intervals.iter_mut().enumerate() {
            i.drop_reasons = [("QDISC_DROP".to_string(), k as u64 * 10)].into();
        }
        let by: Vec<u64> = drops(&dropped, &stretches(&dropped))
            .iter()
            .map(|d| d.get("QDISC_DROP").copied().unwrap_or(0))
            .collect();
        assert_eq!(by, vec![10, 20 + 30, 40 + 50]);
        // Without the buckets of an open loop there is nothing to cut.
        for i in &mut it.client.intervals {
            i.buckets.clear();
        }
        assert!(stretches(&it).is_empty());
    }
}
