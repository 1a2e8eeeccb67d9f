//! A load run's pictures on a run's page and a comparison's: each probe's
//! latency one by one over the window, over the goodput each way and the
//! bottleneck's queue, with the phases marked on the same time axis; each
//! probe's distribution in each phase (both labels' in one plot on a
//! comparison's page); and each load's flows' goodput side by side.

use super::plot::{self, Curve, Mark, Quantity, Trace};
use super::{named, plot_or_say, said, Source};
use crate::sweep::html::{svg_bars, COLORS};
use crate::table::esc;
use plumb_samples::load::{self, Probe, Stretch};
use plumb_samples::units::format_bits_per_sec;
use plumb_samples::{Iteration, Latency};
use std::fmt::Write;

/// The section, where a source's iteration is a load run's (it has probes
/// and loads); nothing otherwise.
pub(super) fn section(o: &mut String, sources: &[Source]) {
    let cut: Vec<Vec<Stretch>> = sources.iter().map(|s| load::stretches(s.it)).collect();
    let Some(first) = cut.iter().find(|c| !c.is_empty()) else {
        return;
    };
    let marks: Vec<Mark> = first
        .iter()
        .map(|st| Mark {
            t_s: st.start_s,
            label: st.running_label(),
        })
        .collect();
    o.push_str("<h2>Latency under load</h2>\n");
    let _ = writeln!(
        o,
        "<p>{}</p>",
        esc(
            "Each probe's transactions one by one, at the time each was planned to be sent \
             (its latency counts from then), over the loads' goodput each way and the queue at \
             the path's bottleneck, on one time axis; the dashed lines mark where the loads \
             start and stop, each phase named by the loads that run in it."
        )
    );
    for name in probe_names(sources) {
        let mut traces = Vec::new();
        let mut missing = Vec::new();
        for s in sources {
            let found = load::probes(s.it).into_iter().find(|p| p.name() == name);
            match found.map(|p| probe_points(s.it, &p)) {
                Some((points, one_by_one)) if !points.is_empty() => traces.push(Trace {
                    side: s.side,
                    window_s: s.it.window_s,
                    name: named(
                        s.name,
                        &match one_by_one {
                            true => format!("{name} probes, each"),
                            false => format!("{name} probes, each second's median"),
                        },
                    ),
                    mean: points,
                    dots: true,
                    ..Default::default()
                }),
                _ => missing.push(said(s.name, &format!("no {name} probe was timed"))),
            }
        }
        plot_or_say(
            o,
            &format!("latency of the {name} probes"),
            "",
            ("latency", Quantity::Micros),
            &traces,
            &missing,
            &marks,
        );
    }
    for (toward, end) in [
        ("toward the client (download)", CLIENT),
        ("toward the server (upload)", SERVER),
    ] {
        let traces: Vec<Trace> = sources
            .iter()
            .map(|s| {
                let (mean, step_s) = goodput(s.it, end);
                Trace {
                    side: s.side,
                    window_s: s.it.window_s,
                    name: named(
                        s.name,
                        &format!("the loads' goodput, every {} ms", (step_s * 1000.0).round()),
                    ),
                    mean,
                    ..Default::default()
                }
            })
            .collect();
        plot_or_say(
            o,
            &format!("goodput {toward}"),
            "",
            ("goodput", Quantity::Rate),
            &traces,
            &[],
            &marks,
        );
    }
    for (toward, words) in [
        ("to_server", "toward the server"),
        ("to_client", "toward the client"),
    ] {
        let mut traces = Vec::new();
        let mut missing = Vec::new();
        let mut intro = Vec::new();
        for s in sources {
            let Some(q) = s.it.client.path_queues.iter().find(|q| q.toward == toward) else {
                missing.push(said(
                    s.name,
                    "no queue at the path's bottleneck was sampled (--topology veth with \
                     --qdisc puts a router's qdisc there, --link-rate under --emulator plumb \
                     the delay line's queue)",
                ));
                continue;
            };
            let period_s = f64::from(q.period_ms) / 1000.0;
            intro.push(named(
                s.name,
                &match q.kind == plumb_samples::DELAY_LINE {
                    true => format!(
                        "plumb's delay line's queue toward {}, sampled every {} ms",
                        q.interface, q.period_ms
                    ),
                    false => format!(
                        "the router's {} on {}, sampled every {} ms",
                        q.kind, q.interface, q.period_ms
                    ),
                },
            ));
            traces.push(Trace {
                side: s.side,
                window_s: s.it.window_s,
                name: named(s.name, "bytes queued"),
                mean: q
                    .backlog_series
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| (i as f64 * period_s, b as f64))
                    .collect(),
                ..Default::default()
            });
        }
        plot_or_say(
            o,
            &format!("the bottleneck's queue {words}"),
            &sentence(&intro.join("; ")),
            ("backlog", Quantity::Bytes),
            &traces,
            &missing,
            &marks,
        );
    }
    distributions(o, sources, &cut);
    flows(o, sources);
}

/// The probes' names over the sources, each once, in the first's order.
fn probe_names(sources: &[Source]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in sources {
        for p in load::probes(s.it) {
            if !names.iter().any(|n| *n == p.name()) {
                names.push(p.name());
            }
        }
    }
    names
}

/// `what` as a sentence, or "" for "".
fn sentence(what: &str) -> String {
    match what {
        "" => String::new(),
        _ => said("", what),
    }
}

/// The ends whose received bytes are a direction's goodput.
const CLIENT: fn(&plumb_samples::PartIteration) -> &plumb_samples::EndResult = |p| &p.client;
const SERVER: fn(&plumb_samples::PartIteration) -> &plumb_samples::EndResult = |p| &p.server;

/// A probe's transactions as (seconds into the window they were planned
/// at, latency in µs), in the order planned, and whether they are one by
/// one: where the record keeps none one by one (a rate over 1000 a second,
/// or a record from before they were kept), each second's median at its
/// middle. The self probes are every load's.
fn probe_points(it: &Iteration, probe: &Probe) -> (Vec<(f64, f64)>, bool) {
    let ends: Vec<(&plumb_samples::EndResult, f64)> = if probe.inside {
        let probes = load::probes(it);
        load::loads(it, &probes)
            .into_iter()
            .map(|p| (&p.client, p.start_s))
            .collect()
    } else {
        vec![(probe.client, probe.offset_s)]
    };
    let mut each: Vec<(f64, f64)> = ends
        .iter()
        .flat_map(|&(e, offset)| {
            e.intervals.iter().flat_map(move |s| {
                s.each
                    .iter()
                    .map(move |&[planned, ns]| (offset + planned as f64 / 1e9, ns as f64 / 1e3))
            })
        })
        .collect();
    // The ways of a probe are kept second by second only.
    if !each.is_empty() && probe.leg == load::Leg::Round {
        each.sort_by(|a, b| a.0.total_cmp(&b.0));
        return (each, true);
    }
    let mut medians: Vec<(f64, f64)> = ends
        .iter()
        .flat_map(|&(e, offset)| {
            e.intervals.iter().filter_map(move |s| {
                let l = Latency::from_buckets(probe.buckets(s))?;
                Some((offset + s.t_s - s.dt_s / 2.0, l.p50_us))
            })
        })
        .collect();
    medians.sort_by(|a, b| a.0.total_cmp(&b.0));
    (medians, false)
}

/// The loads' goodput one way, bits a second, as steps over the window
/// (each step's rate at its start and its end), and each step's length in
/// seconds: what `end` of each load received, summed over the loads, none
/// where no load ran. Every 100 ms (the TCP state's period) from the bytes
/// received each flow's end sampled, where every load's end kept them;
/// else second by second, from the intervals.
fn goodput(
    it: &Iteration,
    end: fn(&plumb_samples::PartIteration) -> &plumb_samples::EndResult,
) -> (Vec<(f64, f64)>, f64) {
    let probes = load::probes(it);
    let loads = load::loads(it, &probes);
    let sampled: Option<Vec<(f64, &plumb_samples::TcpSeries)>> = loads
        .iter()
        .map(|p| {
            let s = end(p).tcp_series.as_ref()?;
            (!s.all.bytes_received.is_empty()).then_some((p.start_s, s))
        })
        .collect();
    let step_s = match &sampled {
        Some(series) if !series.is_empty() => {
            f64::from(series.iter().map(|s| s.1.period_ms).max().unwrap_or(1000)) / 1000.0
        }
        _ => 1.0,
    };
    let steps = (it.window_s / step_s).ceil().max(0.0) as usize;
    let mut bytes = vec![0.0; steps];
    // Spreads `n` bytes received between `t0` and `t1` over the steps
    // they overlap, in proportion.
    let mut spread = |t0: f64, t1: f64, n: f64| {
        if t1 <= t0 {
            return;
        }
        let first = (t0 / step_s).floor().max(0.0) as usize;
        for (k, b) in bytes.iter_mut().enumerate().skip(first) {
            let (a, z) = (k as f64 * step_s, (k + 1) as f64 * step_s);
            if a >= t1 {
                break;
            }
            *b += n * ((t1.min(z) - t0.max(a)).max(0.0) / (t1 - t0));
        }
    };
    match &sampled {
        Some(series) if !series.is_empty() => {
            for &(offset, s) in series {
                let at = |i: usize| offset + f64::from(s.t_ms[i]) / 1000.0;
                for (i, w) in s.all.bytes_received.windows(2).enumerate() {
                    spread(at(i), at(i + 1), w[1].saturating_sub(w[0]) as f64);
                }
            }
        }
        _ => {
            for p in &loads {
                for s in end(p).intervals.iter().filter(|s| s.dt_s > 0.0) {
                    let t1 = p.start_s + s.t_s;
                    spread(t1 - s.dt_s, t1, s.bytes_received as f64);
                }
            }
        }
    }
    let window = it.window_s;
    let points = bytes
        .into_iter()
        .enumerate()
        .flat_map(|(k, b)| {
            let (a, z) = (k as f64 * step_s, ((k + 1) as f64 * step_s).min(window));
            let bps = b * 8.0 / (z - a).max(f64::EPSILON);
            [(a, bps), (z, bps)]
        })
        .collect();
    (points, step_s)
}

/// Each probe's latency in each kind of phase as a distribution, read
/// from the buckets the summary's percentiles are read from (a phase's
/// first second left out where the queue fills or drains); phases that
/// ran the same loads (idle at the start and at the end) together. A
/// colour a phase, a dash a side.
fn distributions(o: &mut String, sources: &[Source], cut: &[Vec<Stretch>]) {
    // The phases by what ran, in the order they first came.
    let mut phases: Vec<String> = Vec::new();
    for st in cut.iter().flatten() {
        let label = st.running_label();
        if !phases.contains(&label) {
            phases.push(label);
        }
    }
    for name in probe_names(sources) {
        let mut curves = Vec::new();
        for (s, stretches) in sources.iter().zip(cut) {
            let Some(i) = load::probes(s.it).iter().position(|p| p.name() == name) else {
                continue;
            };
            for (colour, phase) in phases.iter().enumerate() {
                let buckets: Vec<[u64; 2]> = stretches
                    .iter()
                    .filter(|st| &st.running_label() == phase)
                    .filter_map(|st| st.latency.get(i)?.as_ref())
                    .flat_map(|l| l.buckets.iter().copied())
                    .collect();
                let steps = steps(&buckets);
                if steps.is_empty() {
                    continue;
                }
                curves.push(Curve {
                    colour,
                    side: s.side,
                    name: named(s.name, &format!("while {phase} ran")),
                    steps,
                });
            }
        }
        let _ = writeln!(
            o,
            "<h2>{}</h2>",
            esc(&format!("the {name} probes' latency in each phase"))
        );
        if curves.is_empty() {
            o.push_str("<p class=\"none\">No phase timed any.</p>\n");
            continue;
        }
        o.push_str(&plot::cdf_svg("latency", Quantity::Micros, &curves));
        o.push('\n');
    }
}

/// Buckets (`[value_ns, count]`) merged as the share at or below each
/// value, µs.
fn steps(buckets: &[[u64; 2]]) -> Vec<(f64, f64)> {
    let mut b: Vec<[u64; 2]> = buckets.iter().copied().filter(|b| b[1] > 0).collect();
    b.sort_unstable_by_key(|b| b[0]);
    let total: u64 = b.iter().map(|b| b[1]).sum();
    let mut below = 0;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for [ns, n] in b {
        below += n;
        let (v, share) = (ns as f64 / 1e3, below as f64 / total as f64);
        match out.last_mut() {
            Some(last) if last.0 == v => last.1 = share,
            _ => out.push((v, share)),
        }
    }
    out
}

/// Each load's flows' goodput over the load's own window, a bar a flow,
/// with Jain's index over them.
fn flows(o: &mut String, sources: &[Source]) {
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    let mut indices: Vec<String> = Vec::new();
    for s in sources {
        let probes = load::probes(s.it);
        for p in load::loads(s.it, &probes) {
            let shares = load::flow_shares(&p.client, &p.server);
            if p.window_s <= 0.0 || shares.is_empty() {
                continue;
            }
            if let Some(j) = load::jain(&shares) {
                indices.push(named(
                    s.name,
                    &format!(
                        "{}: Jain's index {j:.3} over {} flows",
                        p.name,
                        shares.len()
                    ),
                ));
            }
            for (flow, bytes) in shares.iter().enumerate() {
                rows.push((
                    named(s.name, &format!("{} flow {flow}", p.name)),
                    vec![bytes * 8.0 / p.window_s],
                ));
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    o.push_str("<h2>Each flow's goodput</h2>\n");
    let _ = writeln!(
        o,
        "<p>{}</p>",
        esc(&sentence(&format!(
            "what each load's flows received over the load's own window{}{}",
            if indices.is_empty() { "" } else { "; " },
            indices.join("; ")
        )))
    );
    o.push_str(&svg_bars(
        &rows,
        &[("goodput", COLORS[0])],
        &format_bits_per_sec,
        "",
    ));
    o.push('\n');
}
