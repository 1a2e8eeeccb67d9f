//! The report of a sweep (an experiment, or any set of labels or runs): the
//! metric against each swept axis with one line per label or variant and
//! its interval, cliffs named, CPU time per end, latency percentiles, the
//! softirq time of each CPU, the comparisons with their verdicts and the
//! environment diff. This module builds the model from the runs handed in;
//! `text` renders it as terminal text or Markdown, `html` as one
//! self-contained page with inline SVG (no script, no font, nothing fetched).

pub(crate) mod html;
mod lines;
mod text;

pub use html::html;
pub use lines::{experiment_lines, matrix_side, named_lines, Lines, TaggedRun};
pub use text::{markdown, terminal};

use crate::table::{Align, Table};
use plumb_compare::Comparison;
use plumb_samples::units::{format_cpu_load, format_latency_us, format_share};
use plumb_samples::{Metric, Role, RunRecord};
use std::collections::BTreeMap;

/// A run and where it belongs: its line (label or variant) and its
/// coordinates on the swept axes.
#[derive(Debug, Clone)]
pub struct Entry {
    pub series: String,
    pub coords: Vec<(String, String)>,
    pub record: RunRecord,
}

#[derive(Debug, Clone)]
pub struct SeriesPoint {
    pub x: String,
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: usize,
    /// What is known to cause what the point's runs show, if anything.
    pub hint: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub points: Vec<SeriesPoint>,
}

/// The metric against one axis, the other axes held at each of their
/// combinations (one line per series and combination).
#[derive(Debug, Clone)]
pub struct AxisPlot {
    pub axis: String,
    pub lines: Vec<Line>,
}

#[derive(Debug, Clone)]
pub struct CliffNote {
    pub axis: String,
    pub line: String,
    pub from: String,
    pub to: String,
    pub ratio: f64,
    pub falls: bool,
    pub text: String,
    /// The known cause of the slow side, when its runs show one.
    pub cause: Option<String>,
}

/// CPU of one end of one point, in CPU-seconds per second of window.
#[derive(Debug, Clone)]
pub struct CpuRow {
    pub name: String,
    pub end: Role,
    pub user: f64,
    pub system: f64,
    pub softirq: f64,
}

/// One probe of a point that is a run of parts with loads (`plumb run
/// load`): its median in each stretch in which the same loads ran, the
/// mean over the point's iterations, in ms.
#[derive(Debug, Clone)]
pub struct UnderLoadRow {
    pub name: String,
    /// `run` for the run's own workload, else the part's name.
    pub probe: String,
    /// (the loads that ran, or "nothing"; mean median ms) per stretch.
    pub stretches: Vec<(String, Option<f64>)>,
}

#[derive(Debug, Clone)]
pub struct LatencyRow {
    pub name: String,
    /// p50, p90, p99, p99.9, p99.99 in microseconds.
    pub us: [f64; 5],
}

/// TCP's retransmissions at one point: what a lossy or long path costs.
#[derive(Debug, Clone)]
pub struct RetransRow {
    pub name: String,
    /// Segments the sender(s) retransmitted, per iteration on average.
    pub per_iteration: f64,
    /// The same per GB received.
    pub per_gb: f64,
}

/// What limited one end's senders at one point, over its iterations: the
/// shares of their busy time, and of the samples of the rest, the share
/// with the data in flight at the congestion window.
#[derive(Debug, Clone)]
pub struct LimitsRow {
    pub name: String,
    pub end: Role,
    /// Receive window, send buffer, neither.
    pub shares: (f64, f64, f64),
    pub at_cwnd: Option<f64>,
}

pub const PERCENTILES: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

/// The softirq time of each CPU over one point's windows, as a share of
/// that CPU's time.
#[derive(Debug, Clone)]
pub struct SoftirqRow {
    pub name: String,
    pub per_cpu: Vec<(u32, f64)>,
}

#[derive(Debug, Clone)]
pub struct SweepReport {
    pub title: String,
    pub metric: Metric,
    pub plots: Vec<AxisPlot>,
    pub cliffs: Vec<CliffNote>,
    pub tables: Tables,
    /// Every line against the first, each with its environment diff.
    pub comparisons: Vec<Comparison>,
}

/// The runs of one series at one point of the axes.
type Cell<'a> = (String, Vec<(String, String)>, Vec<&'a RunRecord>);

fn coords_text(c: &[(String, String)]) -> String {
    c.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn point_name(series: &str, c: &[(String, String)]) -> String {
    let c = coords_text(c);
    if c.is_empty() {
        series.to_string()
    } else {
        format!("{series} {c}")
    }
}

/// A value the way the axis values were written: "1448" is a number, "8K"
/// a size; used only to say "bytes" after plain sizes.
fn unit_of(axis: &str) -> &'static str {
    if ["size", "buf", "payload", "header", "buffers"]
        .iter()
        .any(|s| axis.ends_with(s))
        || axis == "mtu"
        || axis == "mss"
    {
        " bytes"
    } else {
        ""
    }
}

/// A spec field as experiments and `plumb run` flags name it: the last part
/// of its path without a unit suffix (`socket.pacing_rate_bps` is
/// `pacing_rate`, `duration_ms` is `duration`).
fn field_name(path: &str) -> String {
    let last = path.rsplit('.').next().unwrap_or(path);
    ["_bps", "_ms", "_us", "_ppm"]
        .iter()
        .filter_map(|u| last.strip_suffix(u))
        .find(|f| plumb_spec::Field::from_key(f).is_some())
        .unwrap_or(last)
        .to_string()
}

/// The spec fields that differ between the runs, as the coordinates of
/// each, for runs that are not an experiment's. A field of the vocabulary
/// reads as an experiment file writes it (`8K`, `none` where unset), a rate
/// in its unit (`15 Gbit/s`), rather than as the record stores it
/// (`15000000000`, or nothing); anything else as stored, `-` where unset.
pub fn varying_coords(runs: &[&RunRecord]) -> Vec<Vec<(String, String)>> {
    let flat: Vec<_> = runs.iter().map(|r| plumb_compare::spec_fields(r)).collect();
    let value = |f: &plumb_samples::Environment, k: &str| {
        f.facts.get(k).cloned().unwrap_or_else(|| "-".into())
    };
    let keys: std::collections::BTreeSet<&String> =
        flat.iter().flat_map(|f| f.facts.keys()).collect();
    let varying: Vec<&String> = keys
        .into_iter()
        .filter(|k| flat.iter().any(|f| value(f, k) != value(&flat[0], k)))
        .collect();
    runs.iter()
        .zip(&flat)
        .map(|(r, f)| {
            varying
                .iter()
                .map(|k| {
                    let name = field_name(k);
                    let shown = plumb_spec::Field::from_key(&name)
                        .and_then(|field| setting(&r.spec, field));
                    (name, shown.unwrap_or_else(|| value(f, k)))
                })
                .collect()
        })
        .collect()
}

/// A field's value in `spec` as a report shows it on an axis and in a
/// point's name; None where the field has no value of its own.
fn setting(spec: &plumb_spec::Spec, field: plumb_spec::Field) -> Option<String> {
    use plumb_samples::units::format_bits_per_sec_exact as rate;
    use plumb_spec::{Field, Topology};
    let veth = spec.topology.as_ref().map(|Topology::Veth(v)| v);
    let bps = match field {
        Field::PacingRate => spec.socket.pacing_rate_bps,
        Field::LinkRate => veth.and_then(|v| v.link_rate_bps),
        _ => None,
    };
    match bps {
        Some(bps) => Some(rate(bps as f64)),
        None => spec.value_of(field),
    }
}

/// Puts the report together. `cliff_factor` is the ratio of adjacent points
/// that counts as a cliff.
pub fn build(
    title: &str,
    entries: &[Entry],
    comparisons: Vec<Comparison>,
    cliff_factor: f64,
) -> SweepReport {
    let metric = if entries.iter().any(|e| e.record.metric() == Metric::Tps) {
        Metric::Tps
    } else {
        Metric::Throughput
    };
    let axes = axes_of(entries);
    let cells = cells_of(entries, &axes);
    let (plots, cliffs) = plots_of(entries, &axes, &cells, metric, cliff_factor);
    SweepReport {
        title: title.to_string(),
        metric,
        plots,
        cliffs,
        tables: tables_of(&cells),
        comparisons,
    }
}

/// The axes and their values: axes in the order first seen (the
/// experiment's order), values in numeric order where they are numbers.
fn axes_of(entries: &[Entry]) -> Vec<(String, Vec<String>)> {
    // Axes and their values in the order first seen: the experiment's order.
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for e in entries {
        for (k, v) in &e.coords {
            match axes.iter_mut().find(|(a, _)| a == k) {
                Some((_, vals)) => {
                    if !vals.contains(v) {
                        vals.push(v.clone())
                    }
                }
                None => axes.push((k.clone(), vec![v.clone()])),
            }
        }
    }
    // Runs are made in random order: values that are sizes or numbers go
    // in numeric order ("auto" and other words after them, as first seen);
    // a delay, a loss or a rate of "none" is none at all, first.
    for (axis, vals) in axes.iter_mut() {
        use plumb_spec::Field;
        let field = Field::from_key(axis);
        let key = |v: &String| match field {
            Some(Field::Delay | Field::Loss | Field::PacingRate | Field::LinkRate)
                if v.eq_ignore_ascii_case("none") =>
            {
                Some(0)
            }
            Some(Field::Delay) => plumb_spec::parse_delay_us(v).ok(),
            Some(Field::Loss) => plumb_spec::parse_loss_ppm(v).ok().map(u64::from),
            Some(Field::PacingRate | Field::LinkRate) => plumb_spec::parse_rate(v).ok(),
            _ => plumb_spec::parse_size(v).ok(),
        };
        if vals.iter().any(|v| key(v).is_some()) {
            vals.sort_by_key(|v| (key(v).is_none(), key(v).unwrap_or(0)));
        }
    }
    axes
}

/// Every (series, coords) with its runs, lines in order of first
/// appearance and points in axis order, whatever order the runs were made
/// in.
fn cells_of<'a>(entries: &'a [Entry], axes: &[(String, Vec<String>)]) -> Vec<Cell<'a>> {
    // Every (series, coords) with its metric values, pooled over runs.
    let mut cells: Vec<Cell> = Vec::new();
    for e in entries {
        match cells
            .iter_mut()
            .find(|(s, c, _)| *s == e.series && *c == e.coords)
        {
            Some((_, _, rs)) => rs.push(&e.record),
            None => cells.push((e.series.clone(), e.coords.clone(), vec![&e.record])),
        }
    }
    // Lines in order of first appearance, points in axis order, whatever
    // order the runs were made in.
    let mut series_order: Vec<&str> = Vec::new();
    for e in entries {
        if !series_order.contains(&e.series.as_str()) {
            series_order.push(&e.series);
        }
    }
    cells.sort_by_key(|(s, c, _)| {
        let place: Vec<usize> = axes
            .iter()
            .map(|(a, vals)| {
                c.iter()
                    .find(|(k, _)| k == a)
                    .and_then(|(_, v)| vals.iter().position(|x| x == v))
                    .unwrap_or(0)
            })
            .collect();
        (series_order.iter().position(|x| x == s), place)
    });
    cells
}

/// The mean of a point's metric over its runs, its 95 % interval and how
/// many values it is over.
fn stat(rs: &[&RunRecord]) -> (f64, f64, f64, usize) {
    let xs: Vec<f64> = rs.iter().flat_map(|r| r.metric_values()).collect();
    let (m, lo, hi) = plumb_stats::mean_with_interval(&xs, 0.95);
    (m, lo, hi, xs.len())
}

/// One plot per axis, its lines' cliffs noted.
fn plots_of(
    entries: &[Entry],
    axes: &[(String, Vec<String>)],
    cells: &[Cell],
    metric: Metric,
    cliff_factor: f64,
) -> (Vec<AxisPlot>, Vec<CliffNote>) {
    let mut plots = Vec::new();
    let mut cliffs = Vec::new();
    for (axis, values) in axes {
        let mut lines: Vec<Line> = Vec::new();
        for (series, coords, rs) in cells {
            let Some(x) = coords.iter().find(|(k, _)| k == axis).map(|(_, v)| v) else {
                continue;
            };
            let others: Vec<(String, String)> =
                coords.iter().filter(|(k, _)| k != axis).cloned().collect();
            let name = point_name(series, &others);
            let (m, lo, hi, n) = stat(rs);
            let p = SeriesPoint {
                x: x.clone(),
                mean: m,
                lo,
                hi,
                n,
                hint: rs.iter().find_map(|r| crate::delayed_ack_hint(r)),
            };
            match lines.iter_mut().find(|l| l.name == name) {
                Some(l) => l.points.push(p),
                None => lines.push(Line {
                    name,
                    points: vec![p],
                }),
            }
        }
        for l in &mut lines {
            l.points
                .sort_by_key(|p| values.iter().position(|v| *v == p.x));
            let means: Vec<f64> = l.points.iter().map(|p| p.mean).collect();
            for plumb_stats::Cliff {
                index: i,
                ratio,
                falls,
            } in plumb_stats::cliff_steps(&means, cliff_factor)
            {
                let (a, b) = (&l.points[i], &l.points[i + 1]);
                let times = if ratio.is_finite() {
                    format!("{ratio:.0}x")
                } else {
                    "to nothing".into()
                };
                let only_line = lines_count_hint(axes, axis);
                let text = format!(
                    "{} {} {times} between {axis} {} and {}{}{}",
                    metric.title(),
                    if falls { "fall" } else { "rise" },
                    a.x,
                    b.x,
                    unit_of(axis),
                    if only_line && !l.name.contains(' ') && entries_series_count(entries) == 1 {
                        String::new()
                    } else {
                        format!(" ({})", l.name)
                    }
                );
                let slow = if falls { b } else { a };
                cliffs.push(CliffNote {
                    axis: axis.clone(),
                    line: l.name.clone(),
                    from: a.x.clone(),
                    to: b.x.clone(),
                    ratio,
                    falls,
                    text,
                    cause: slow.hint.clone(),
                });
            }
        }
        plots.push(AxisPlot {
            axis: axis.clone(),
            lines,
        });
    }
    if axes.is_empty() && !cells.is_empty() {
        // Nothing swept: one bar per series, drawn as a one-point axis.
        let lines = cells
            .iter()
            .map(|(s, _, rs)| {
                let (m, lo, hi, n) = stat(rs);
                Line {
                    name: s.clone(),
                    points: vec![SeriesPoint {
                        x: "-".into(),
                        mean: m,
                        lo,
                        hi,
                        n,
                        hint: None,
                    }],
                }
            })
            .collect();
        plots.push(AxisPlot {
            axis: "series".into(),
            lines,
        });
    }

    (plots, cliffs)
}

/// The per-point tables: CPU, latency, softirq share and retransmissions.
#[derive(Debug, Clone)]
pub struct Tables {
    pub cpu: Vec<CpuRow>,
    pub latency: Vec<LatencyRow>,
    pub softirq: Vec<SoftirqRow>,
    /// TCP's retransmissions at each point; empty when there were none.
    pub retransmits: Vec<RetransRow>,
    /// What limited the senders at each point; empty without TCP senders.
    pub limits: Vec<LimitsRow>,
    /// Each probe's latency under load per stretch, at the points that
    /// are runs of probes and loads.
    pub under_load: Vec<UnderLoadRow>,
}

/// Each probe's median per stretch at one point, over its iterations.
fn under_load_of(name: &str, its: &[&plumb_samples::Iteration]) -> Vec<UnderLoadRow> {
    use plumb_samples::load::{medians_ms, probes, stretches};
    let Some(first) = its.first() else {
        return Vec::new();
    };
    let cut = stretches(first);
    if cut.is_empty() {
        return Vec::new();
    }
    let each: Vec<Vec<plumb_samples::load::Stretch>> = its.iter().map(|i| stretches(i)).collect();
    probes(first)
        .iter()
        .enumerate()
        .map(|(i, probe)| UnderLoadRow {
            name: name.to_string(),
            probe: probe.name().to_string(),
            stretches: cut
                .iter()
                .enumerate()
                .map(|(k, s)| {
                    let ms = medians_ms(&each, i, k);
                    (
                        s.running_label(),
                        (!ms.is_empty()).then(|| plumb_stats::mean(&ms)),
                    )
                })
                .collect(),
        })
        .collect()
}

fn tables_of(cells: &[Cell]) -> Tables {
    let mut limits = Vec::new();
    let mut cpu = Vec::new();
    let mut latency = Vec::new();
    let mut softirq = Vec::new();
    let mut retransmits = Vec::new();
    let mut under_load = Vec::new();
    for (series, coords, rs) in cells {
        let name = point_name(series, coords);
        let its: Vec<_> = rs
            .iter()
            .flat_map(|r| r.iterations.iter().filter(|i| i.complete))
            .collect();
        if its.is_empty() {
            continue;
        }
        let window: f64 = its.iter().map(|i| i.window_s.max(1e-9)).sum();
        under_load.extend(under_load_of(&name, &its));
        let retrans: f64 = its.iter().map(|i| i.derived.retransmits as f64).sum();
        let gb: f64 = its
            .iter()
            .map(|i| i.transfer.received_bytes as f64 / 1e9)
            .sum();
        retransmits.push(RetransRow {
            name: name.clone(),
            per_iteration: retrans / its.len() as f64,
            per_gb: if gb > 0.0 { retrans / gb } else { 0.0 },
        });
        for end in [Role::Client, Role::Server] {
            let mut sum = plumb_samples::SenderLimits::default();
            let (mut at, mut busy_other) = (0u64, 0u64);
            for i in &its {
                let e = match end {
                    Role::Client => &i.client,
                    Role::Server => &i.server,
                };
                if let Some(l) = &e.limited {
                    sum.busy_s += l.busy_s;
                    sum.rwnd_limited_s += l.rwnd_limited_s;
                    sum.sndbuf_limited_s += l.sndbuf_limited_s;
                }
                if let Some(t) = &e.tcp_series {
                    at += t.all.at_cwnd.iter().map(|&v| u64::from(v)).sum::<u64>();
                    busy_other += t.all.busy_other.iter().map(|&v| u64::from(v)).sum::<u64>();
                }
            }
            if let Some(shares) = sum.shares() {
                limits.push(LimitsRow {
                    name: name.clone(),
                    end,
                    shares,
                    at_cwnd: (busy_other > 0).then(|| at as f64 / busy_other as f64),
                });
            }
            let pick = |i: &plumb_samples::Iteration| -> (f64, f64, f64) {
                let e = match end {
                    Role::Client => &i.client,
                    Role::Server => &i.server,
                };
                (
                    e.process.user_s,
                    e.process.system_s,
                    e.cpus.iter().map(|c| c.softirq_s).sum::<f64>(),
                )
            };
            let (u, s, q) = its.iter().fold((0.0, 0.0, 0.0), |acc, i| {
                let (u, s, q) = pick(i);
                (acc.0 + u, acc.1 + s, acc.2 + q)
            });
            cpu.push(CpuRow {
                name: name.clone(),
                end,
                user: u / window,
                system: s / window,
                softirq: q / window,
            });
        }
        let lats: Vec<_> = its
            .iter()
            .filter_map(|i| i.client.latency.as_ref())
            .collect();
        if !lats.is_empty() {
            let avg = |f: fn(&plumb_samples::Latency) -> f64| {
                plumb_stats::mean(&lats.iter().map(|l| f(l)).collect::<Vec<_>>())
            };
            latency.push(LatencyRow {
                name: name.clone(),
                us: [
                    avg(|l| l.p50_us),
                    avg(|l| l.p90_us),
                    avg(|l| l.p99_us),
                    avg(|l| l.p999_us),
                    avg(|l| l.p9999_us),
                ],
            });
        }
        let mut per: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
        for i in &its {
            for c in &i.client.cpus {
                let e = per.entry(c.cpu).or_insert((0.0, 0.0));
                e.0 += c.softirq_s;
                e.1 += c.total_s();
            }
        }
        softirq.push(SoftirqRow {
            name,
            per_cpu: per
                .into_iter()
                .map(|(cpu, (q, t))| (cpu, if t > 0.0 { q / t } else { 0.0 }))
                .collect(),
        });
    }
    // A table of zeros says nothing (request/response on a clean path).
    if retransmits.iter().all(|t| t.per_iteration == 0.0) {
        retransmits.clear();
    }
    Tables {
        cpu,
        latency,
        softirq,
        retransmits,
        limits,
        under_load,
    }
}

fn lines_count_hint(axes: &[(String, Vec<String>)], axis: &str) -> bool {
    axes.iter().all(|(a, _)| a == axis)
}

fn entries_series_count(entries: &[Entry]) -> usize {
    let mut s: Vec<&str> = entries.iter().map(|e| e.series.as_str()).collect();
    s.sort();
    s.dedup();
    s.len()
}

/// Per-point figures as a table under a heading, the same in every format.
pub(crate) struct Section {
    /// Written as a heading in Markdown and HTML, and lower case first on
    /// the terminal as plumb's other terminal headings are.
    pub title: &'static str,
    /// What the figures are, where the title does not say it.
    pub note: Option<&'static str>,
    pub table: Table,
}

impl SweepReport {
    /// A value of the report's metric in its unit.
    pub fn show(&self, v: f64) -> String {
        self.metric.format(v)
    }

    /// The tables of figures per point, in report order; latency,
    /// retransmissions and softirq shares only where there are any.
    pub(crate) fn sections(&self) -> Vec<Section> {
        let mut out = vec![self.cpu_section()];
        out.extend(self.under_load_section());
        out.extend(self.latency_section());
        out.extend(self.retransmit_section());
        out.extend(self.limits_section());
        out.extend(self.softirq_section());
        out
    }

    fn cpu_section(&self) -> Section {
        let mut table = Table::new([
            ("point", Align::Left, NAME_W),
            ("end", Align::Left, 7),
            ("user", Align::Right, 7),
            ("system", Align::Right, 7),
            ("softirq", Align::Right, 8),
        ]);
        for c in &self.tables.cpu {
            table.row([
                c.name.clone(),
                c.end.to_string(),
                format_cpu_load(c.user),
                format_cpu_load(c.system),
                format_cpu_load(c.softirq),
            ]);
        }
        Section {
            title: "CPU per end",
            note: Some("CPU-seconds per second of window; softirq over the whole host"),
            table,
        }
    }

    /// Each probe's median per stretch at the points that are runs of
    /// probes and loads: the columns are the first such point's stretches,
    /// named by what ran.
    pub(crate) fn under_load_section(&self) -> Option<Section> {
        let first = self.tables.under_load.first()?;
        let columns = first
            .stretches
            .iter()
            .map(|(running, _)| (running.clone(), Align::Right, 8));
        let mut table = Table::new(
            [
                ("point".to_string(), Align::Left, NAME_W),
                ("probe".to_string(), Align::Left, 7),
            ]
            .into_iter()
            .chain(columns),
        );
        for r in &self.tables.under_load {
            table.row(
                [r.name.clone(), r.probe.clone()].into_iter().chain(
                    r.stretches
                        .iter()
                        .map(|(_, ms)| ms.map_or("-".to_string(), plumb_samples::units::sig3)),
                ),
            );
        }
        Some(Section {
            title: "Latency under load (ms)",
            note: Some(
                "each probe's median in each stretch of the window, by the loads that ran; \
                 the mean over the iterations",
            ),
            table,
        })
    }

    fn latency_section(&self) -> Option<Section> {
        let columns = PERCENTILES.iter().map(|p| (*p, Align::Right, 8));
        section(
            ("Latency percentiles (us)", None),
            [("point", Align::Left, NAME_W)].into_iter().chain(columns),
            &self.tables.latency,
            |l| {
                let mut row = vec![l.name.clone()];
                row.extend(l.us.iter().map(|v| format_latency_us(*v)));
                row
            },
        )
    }

    /// TCP's retransmissions, when there were any.
    pub(crate) fn retransmit_section(&self) -> Option<Section> {
        section(
            ("TCP retransmissions", Some("sender's segments")),
            [
                ("point", Align::Left, NAME_W),
                ("per iteration", Align::Right, 13),
                ("per GB", Align::Right, 10),
            ],
            &self.tables.retransmits,
            |t| {
                [
                    t.name.clone(),
                    format!("{:.0}", t.per_iteration),
                    format!("{:.1}", t.per_gb),
                ]
            },
        )
    }

    /// What limited the senders at each point, where any sent.
    pub(crate) fn limits_section(&self) -> Option<Section> {
        section(
            (
                "Sender limited by",
                Some(
                    "shares of the senders' busy time over the point's windows; of the samples \
                     of the other time, those with the data in flight at the congestion window",
                ),
            ),
            [
                ("point", Align::Left, NAME_W),
                ("end", Align::Left, 7),
                ("receive window", Align::Right, 14),
                ("send buffer", Align::Right, 11),
                ("other", Align::Right, 7),
                ("in flight at cwnd", Align::Right, 17),
            ],
            &self.tables.limits,
            |l| {
                let (r, s, o) = l.shares;
                [
                    l.name.clone(),
                    l.end.to_string(),
                    format_share(r),
                    format_share(s),
                    format_share(o),
                    l.at_cwnd.map_or_else(|| "-".into(), format_share),
                ]
            },
        )
    }

    /// The softirq share of each CPU of the client's host, a column per CPU
    /// that any point used: points pinned to different CPUs leave the
    /// others' cells empty rather than shifting under the wrong heading.
    pub(crate) fn softirq_section(&self) -> Option<Section> {
        if self.tables.softirq.is_empty() {
            return None;
        }
        let mut cpus: Vec<u32> = self
            .tables
            .softirq
            .iter()
            .flat_map(|s| s.per_cpu.iter().map(|(c, _)| *c))
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        let columns = cpus.iter().map(|c| (format!("cpu{c}"), Align::Right, 6));
        let mut table = Table::new(
            [("point".to_string(), Align::Left, NAME_W)]
                .into_iter()
                .chain(columns),
        );
        for s in &self.tables.softirq {
            let share = |cpu: &u32| {
                s.per_cpu
                    .iter()
                    .find(|(c, _)| c == cpu)
                    .map_or_else(String::new, |(_, f)| format_share(*f))
            };
            table.row([s.name.clone()].into_iter().chain(cpus.iter().map(share)));
        }
        Some(Section {
            title: "Softirq share of each CPU",
            note: Some("on the client's host, of all of each CPU's time"),
            table,
        })
    }
}

/// A section (its title and note) of a row per item, with `columns`;
/// none where there are no items.
fn section<T, S: Into<String>, R: IntoIterator<Item = String>>(
    (title, note): (&'static str, Option<&'static str>),
    columns: impl IntoIterator<Item = (S, Align, usize)>,
    items: &[T],
    row: impl Fn(&T) -> R,
) -> Option<Section> {
    if items.is_empty() {
        return None;
    }
    let mut table = Table::new(columns);
    for i in items {
        table.row(row(i));
    }
    Some(Section { title, note, table })
}

/// The terminal width of a point's name, so that sections line up.
const NAME_W: usize = 40;

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU's window with `softirq_s` of its second in softirq.
    fn cpu(cpu: u32, softirq_s: f64) -> plumb_samples::CpuTimes {
        plumb_samples::CpuTimes {
            cpu,
            idle_s: 1.0 - softirq_s,
            softirq_s,
            ..Default::default()
        }
    }

    fn record(throughput: &[f64]) -> RunRecord {
        plumb_samples::testing::with_throughput(throughput)
    }

    fn sweep() -> Vec<Entry> {
        let mut out = Vec::new();
        for (size, t) in [
            ("1024", 9e9),
            ("1447", 9.5e9),
            ("1448", 1.1e7),
            ("2048", 1.0e7),
        ] {
            for series in ["nagle", "nodelay"] {
                let v = if series == "nagle" { t } else { 9e9 };
                out.push(Entry {
                    series: series.into(),
                    coords: vec![("msg_size".into(), size.into())],
                    record: record(&[v * 0.99, v, v * 1.01]),
                });
            }
        }
        out
    }

    #[test]
    fn cliffs_are_found_and_named_on_their_line() {
        // Made in any order, reported in the axis's order.
        let mut runs = sweep();
        runs.reverse();
        let r = build("t", &runs, Vec::new(), 4.0);
        assert_eq!(r.plots.len(), 1);
        assert_eq!(r.plots[0].lines.len(), 2);
        assert_eq!(r.plots[0].lines[0].points[2].x, "1448");
        assert_eq!(r.cliffs.len(), 1, "{:?}", r.cliffs);
        assert_eq!(
            r.cliffs[0].text,
            "throughput fall 864x between msg_size 1447 and 1448 bytes (nagle)"
        );
        let p = &r.plots[0].lines[0].points[0];
        assert_eq!(p.n, 3);
        assert!(p.lo < p.mean && p.mean < p.hi);
    }

    #[test]
    fn softirq_shares_stand_under_their_own_cpu_in_every_format() {
        // One point measured on CPUs 0 and 1, the other on 1 and 3: cpu3's
        // share must not slide under cpu1's heading.
        let mut runs = sweep();
        runs.truncate(2);
        for (e, cpus) in runs
            .iter_mut()
            .zip([[cpu(0, 0.25), cpu(1, 0.5)], [cpu(1, 0.125), cpu(3, 0.75)]])
        {
            for i in &mut e.record.iterations {
                i.client.cpus = cpus.to_vec();
            }
        }
        let r = build("t", &runs, Vec::new(), 4.0);
        let md = markdown(&r);
        assert!(md.contains("| point | cpu0 | cpu1 | cpu3 |"), "{md}");
        assert!(
            md.contains("| nagle msg_size=1024 | 25.0% | 50.0% |  |"),
            "{md}"
        );
        assert!(
            md.contains("| nodelay msg_size=1024 |  | 12.5% | 75.0% |"),
            "{md}"
        );
        let text = terminal(&r);
        let rows: Vec<&str> = text
            .split("softirq share of each CPU")
            .nth(1)
            .expect("the section on the terminal")
            .lines()
            .skip(1)
            .take(3)
            .collect();
        let at = |row: &str, cell: &str| row.find(cell).map(|i| i + cell.len());
        // Right-aligned: a share ends where its heading ends.
        assert_eq!(at(rows[1], "25.0%"), at(rows[0], "cpu0"), "{text}");
        assert_eq!(at(rows[2], "75.0%"), at(rows[0], "cpu3"), "{text}");
        let page = html(&r);
        assert!(page.contains("<th>cpu3</th>"), "{page}");
    }

    #[test]
    fn every_rendering_carries_the_same_findings() {
        let r = build("t", &sweep(), Vec::new(), 4.0);
        let text = terminal(&r);
        let md = markdown(&r);
        let page = html(&r);
        for out in [&text, &md, &page] {
            assert!(out.contains("throughput fall 864x between msg_size 1447 and 1448 bytes"));
            assert!(out.contains("nodelay"));
        }
        assert!(md.contains("| nagle | 1448 |"));
        assert_eq!(
            page.matches("<svg").count(),
            3,
            "axis, CPU and softirq plots"
        );
        assert!(
            page.contains("stroke=\"#d00\" stroke-dasharray"),
            "the cliff is marked"
        );
        assert!(
            !page.contains("http://") && !page.contains("https://") && !page.contains("<script")
        );
    }

    #[test]
    fn the_page_compares_with_the_cells_of_the_markdown_and_marks_each_verdict() {
        let side = |name: &str, t: f64| {
            plumb_compare::Side::new(name, vec![record(&[t, t * 1.01, t * 0.99])], None)
        };
        let c = plumb_compare::compare(
            &side("a", 9e9),
            &side("b", 4e9),
            &plumb_stats::CompareParams::default(),
        );
        let r = build("t", &sweep(), vec![c], 4.0);
        let (md, page) = (markdown(&r), html(&r));
        let p = &r.comparisons[0].points[0];
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {} |", p.summary)))
            .unwrap_or_else(|| panic!("{md}"));
        for cell in row.split('|').map(str::trim).filter(|c| !c.is_empty()) {
            let cell = crate::table::esc(cell);
            assert!(page.contains(&format!(">{cell}</td>")), "{cell}\n{page}");
        }
        assert_eq!(p.verdict, plumb_stats::Verdict::Regression);
        assert!(page.contains("<tr class=\"regression\">"), "{page}");
    }

    #[test]
    fn the_environment_is_stated_once() {
        let side =
            |name: &str| plumb_compare::Side::new(name, vec![record(&[9e9, 9.1e9, 8.9e9])], None);
        let c = plumb_compare::compare(
            &side("a"),
            &side("b"),
            &plumb_stats::CompareParams::default(),
        );
        let r = build("t", &sweep(), vec![c], 4.0);
        for out in [terminal(&r), markdown(&r)] {
            assert_eq!(
                out.matches("environment: no difference recorded").count(),
                1,
                "{out}"
            );
        }
    }

    #[test]
    fn varying_fields_are_named_and_valued_as_experiments_write_them() {
        let with = |pacing: Option<u64>, cc: Option<&str>| {
            let mut r = record(&[1e9]);
            r.spec.socket.pacing_rate_bps = pacing;
            r.spec.socket.cc = cc.map(str::to_string);
            r
        };
        let (a, b, c) = (
            with(None, None),
            with(Some(15_000_000_000), None),
            with(None, Some("reno")),
        );
        let coords = varying_coords(&[&a, &b, &c]);
        let at = |run: usize, axis: &str| {
            coords[run]
                .iter()
                .find(|(k, _)| k == axis)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(coords[0].len(), 2, "{coords:?}");
        assert_eq!(at(0, "cc"), Some("none"));
        assert_eq!(at(0, "pacing_rate"), Some("none"));
        assert_eq!(at(1, "pacing_rate"), Some("15 Gbit/s"));
        assert_eq!(at(2, "cc"), Some("reno"));
        for c in coords.iter().flatten() {
            assert!(c.0 != "null" && c.1 != "null", "{c:?}");
        }
        assert!(varying_coords(&[]).is_empty());
    }

    #[test]
    fn a_paced_run_against_an_unpaced_one_is_plotted_on_readable_ticks() {
        let mut paced = record(&[4.2e9, 4.3e9, 4.25e9]);
        paced.spec.socket.pacing_rate_bps = Some(15_000_000_000);
        let free = record(&[8.4e9, 8.5e9, 8.45e9]);
        let lines = named_lines(vec![
            plumb_compare::Side::new("baseline", vec![free], None),
            plumb_compare::Side::new("paced", vec![paced], None),
        ]);
        let r = build(&lines.title, &lines.entries, Vec::new(), 4.0);
        assert_eq!(r.plots[0].axis, "pacing_rate");
        // Unpaced first, as a delay of none comes first.
        let xs: Vec<&str> = r.plots[0]
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.x.as_str()))
            .collect();
        assert_eq!(xs, ["none", "15 Gbit/s"]);
        let page = html(&r);
        let labels = |class: &str| -> Vec<String> {
            let open = format!("class=\"{class}\">");
            page.split(&open)
                .skip(1)
                .map(|t| t[..t.find("</text>").unwrap()].to_string())
                .collect()
        };
        let ticks = labels("t");
        for want in [
            "none",
            "15 Gbit/s",
            "0 bit/s",
            "2 Gbit/s",
            "8 Gbit/s",
            "10 Gbit/s",
        ] {
            assert!(ticks.iter().any(|t| t == want), "{want} in {ticks:?}");
        }
        assert!(!page.contains(">15000000000<") && !page.contains(">-</text>"));
        assert!(
            !ticks
                .iter()
                .any(|t| t.contains(".") && t.ends_with("bit/s")),
            "a tick that is not round: {ticks:?}"
        );
        assert!(terminal(&r).contains("15 Gbit/s"));
    }

    #[test]
    fn bars_are_labelled_as_their_table_writes_the_figures() {
        let mut runs = sweep();
        runs.truncate(1);
        for i in &mut runs[0].record.iterations {
            i.client.cpus = vec![cpu(0, 0.27363)];
        }
        let r = build("t", &runs, Vec::new(), 4.0);
        let page = html(&r);
        assert!(markdown(&r).contains("| 27.4% |"));
        let bars = &page[page.find("<h2>Softirq share").unwrap()..];
        assert!(bars.contains(">27.4%</text>"), "{bars}");
        assert!(bars.contains(": softirq share 27.4%</title>"), "{bars}");
        assert!(!bars.contains("27.363"), "{bars}");
        let c = &r.tables.cpu[0];
        let total = format_cpu_load(c.user + c.system + c.softirq);
        assert!(page.contains(&format!(">{total}</text>")), "{page}");
    }

    #[test]
    fn each_line_is_told_apart_by_its_dash_and_marker_as_the_legend_shows() {
        /// An attribute of the element whose markup follows its tag's name.
        fn attr<'a>(el: &'a str, name: &str) -> Option<&'a str> {
            let el = &el[..el.find('>')?];
            let value = el.split(&format!(" {name}=\"")).nth(1)?;
            Some(&value[..value.find('"')?])
        }
        let mut runs = sweep();
        for e in &mut runs {
            for i in &mut e.record.iterations {
                i.client.latency = Some(plumb_samples::Latency {
                    p50_us: 50.0,
                    p90_us: 60.0,
                    p99_us: 80.0,
                    p999_us: 90.0,
                    p9999_us: 100.0,
                    ..Default::default()
                });
            }
        }
        let r = build("t", &runs, Vec::new(), 4.0);
        let page = html(&r);
        let chart = &page[page.find("<h2>Latency percentiles").unwrap()..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        // Eight points at the same latencies: each line lies on the others.
        let polylines: Vec<&str> = chart.split("<polyline").skip(1).collect();
        assert_eq!(polylines.len(), 8);
        let dashes: std::collections::BTreeSet<Option<&str>> = polylines
            .iter()
            .map(|p| attr(p, "stroke-dasharray"))
            .collect();
        assert!(dashes.len() > 1, "lines dashed apart: {dashes:?}");
        let markers: std::collections::BTreeSet<(Option<&str>, bool)> = chart
            .split("<circle")
            .skip(1)
            .map(|c| (attr(c, "r"), attr(c, "fill") == Some("none")))
            .collect();
        assert!(
            markers.len() > 1,
            "markers of more than one kind: {markers:?}"
        );
        // The legend draws each line's sample, dashed as the line is, beside
        // its name.
        for (l, line) in r.tables.latency.iter().zip(&polylines) {
            let name = format!(">{}</text>", crate::table::esc(&l.name));
            let at = chart
                .find(&name)
                .unwrap_or_else(|| panic!("{name} in {chart}"));
            let sample = &chart[chart[..at].rfind("<line").unwrap()..];
            assert_eq!(attr(sample, "stroke"), attr(line, "stroke"), "{sample}");
            assert_eq!(
                attr(sample, "stroke-dasharray"),
                attr(line, "stroke-dasharray"),
                "{sample}"
            );
        }
    }
}
