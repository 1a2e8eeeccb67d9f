//! The report of a sweep (an experiment, or any set of labels or runs): the
//! metric against each swept axis with one line per label or variant and
//! its interval, cliffs named, CPU time per end, latency percentiles, the
//! softirq time of each CPU, the comparisons with their verdicts and the
//! environment diff; as terminal text, Markdown, or one self-contained HTML
//! page with inline SVG (no script, no font, nothing fetched).

use plumb_compare::Comparison;
use plumb_samples::{format_bits_per_sec, EnvChange, RunRecord};
use std::collections::BTreeMap;
use std::fmt::Write;

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
    pub end: &'static str,
    pub user: f64,
    pub system: f64,
    pub softirq: f64,
}

#[derive(Debug, Clone)]
pub struct LatencyRow {
    pub name: String,
    /// p50, p90, p99, p99.9, p99.99 in microseconds.
    pub us: [f64; 5],
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
    pub metric: String,
    pub transactional: bool,
    pub plots: Vec<AxisPlot>,
    pub cliffs: Vec<CliffNote>,
    pub cpu: Vec<CpuRow>,
    pub latency: Vec<LatencyRow>,
    pub softirq: Vec<SoftirqRow>,
    pub comparisons: Vec<Comparison>,
    pub env_diff: Vec<EnvChange>,
}

/// The runs of one series at one point of the axes.
type Cell<'a> = (String, Vec<(String, String)>, Vec<&'a RunRecord>);
/// A line to draw: its name and (x index, mean, low, high) per point.
type PlotLine = (String, Vec<(usize, f64, f64, f64)>);

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

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

/// Puts the report together. `cliff_factor` is the ratio of adjacent points
/// that counts as a cliff.
pub fn build(
    title: &str,
    entries: &[Entry],
    comparisons: Vec<Comparison>,
    env_diff: Vec<EnvChange>,
    cliff_factor: f64,
) -> SweepReport {
    let transactional = entries.iter().any(|e| e.record.spec.is_transactional());
    let metric = if transactional {
        "transactions/s"
    } else {
        "throughput"
    }
    .to_string();
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
    // in numeric order ("auto" and other words after them, as first seen).
    for (_, vals) in axes.iter_mut() {
        let key = |v: &String| plumb_spec::parse_size(v).ok();
        if vals.iter().any(|v| key(v).is_some()) {
            vals.sort_by_key(|v| (key(v).is_none(), key(v).unwrap_or(0)));
        }
    }
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
    let stat = |rs: &[&RunRecord]| -> (f64, f64, f64, usize) {
        let xs: Vec<f64> = rs.iter().flat_map(|r| r.metric_values()).collect();
        let m = mean(&xs);
        let (lo, hi) = plumb_stats::t_interval(&xs, 0.95)
            .map(|i| (i.lo, i.hi))
            .unwrap_or((m, m));
        (m, lo, hi, xs.len())
    };
    let mut plots = Vec::new();
    let mut cliffs = Vec::new();
    for (axis, values) in &axes {
        let mut lines: Vec<Line> = Vec::new();
        for (series, coords, rs) in &cells {
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
            let pts: Vec<(f64, f64)> = l
                .points
                .iter()
                .enumerate()
                .map(|(i, p)| (i as f64, p.mean))
                .collect();
            for i in plumb_stats::cliffs(&pts, cliff_factor) {
                let (a, b) = (&l.points[i], &l.points[i + 1]);
                let falls = b.mean < a.mean;
                let ratio = if falls {
                    a.mean / b.mean
                } else {
                    b.mean / a.mean
                };
                let times = if ratio.is_finite() {
                    format!("{ratio:.0}x")
                } else {
                    "to nothing".into()
                };
                let only_line = lines_count_hint(&axes, axis);
                let text = format!(
                    "{metric} {} {times} between {axis} {} and {}{}{}",
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

    let mut cpu = Vec::new();
    let mut latency = Vec::new();
    let mut softirq = Vec::new();
    for (series, coords, rs) in &cells {
        let name = point_name(series, coords);
        let its: Vec<_> = rs
            .iter()
            .flat_map(|r| r.iterations.iter().filter(|i| i.complete))
            .collect();
        if its.is_empty() {
            continue;
        }
        let window: f64 = its.iter().map(|i| i.window_s.max(1e-9)).sum();
        for end in ["client", "server"] {
            let pick = |i: &plumb_samples::Iteration| -> (f64, f64, f64) {
                let e = if end == "client" {
                    &i.client
                } else {
                    &i.server
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
                mean(&lats.iter().map(|l| f(l)).collect::<Vec<_>>())
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
    SweepReport {
        title: title.to_string(),
        metric,
        transactional,
        plots,
        cliffs,
        cpu,
        latency,
        softirq,
        comparisons,
        env_diff,
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

impl SweepReport {
    pub fn show(&self, v: f64) -> String {
        if self.transactional {
            if v >= 1e6 {
                format!("{:.2}M tx/s", v / 1e6)
            } else if v >= 10_000.0 {
                format!("{:.1}k tx/s", v / 1000.0)
            } else {
                format!("{v:.0} tx/s")
            }
        } else {
            format_bits_per_sec(v)
        }
    }
}

/// The report as terminal text.
pub fn terminal(r: &SweepReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}\n", r.title);
    for p in &r.plots {
        let _ = writeln!(o, "{} by {} (mean, 95 % interval, n)", r.metric, p.axis);
        for l in &p.lines {
            let _ = writeln!(o, "  {}", l.name);
            for pt in &l.points {
                let _ = writeln!(
                    o,
                    "    {:<10} {:>14}  {} .. {}  n {}",
                    pt.x,
                    r.show(pt.mean),
                    r.show(pt.lo),
                    r.show(pt.hi),
                    pt.n
                );
            }
        }
        o.push('\n');
    }
    if r.cliffs.is_empty() {
        let _ = writeln!(o, "cliffs: none\n");
    } else {
        let _ = writeln!(o, "cliffs:");
        for c in &r.cliffs {
            let _ = writeln!(o, "  {}", c.text);
            if let Some(cause) = &c.cause {
                let text = format!("    likely cause: {cause}");
                for line in crate::wrap(&text, 80, "      ") {
                    let _ = writeln!(o, "{line}");
                }
            }
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "CPU per end (CPU-seconds per second of window; softirq over the whole host)"
    );
    let _ = writeln!(
        o,
        "  {:<40} {:<7} {:>7} {:>7} {:>8}",
        "point", "end", "user", "system", "softirq"
    );
    for c in &r.cpu {
        let _ = writeln!(
            o,
            "  {:<40} {:<7} {:>7.3} {:>7.3} {:>8.3}",
            c.name, c.end, c.user, c.system, c.softirq
        );
    }
    o.push('\n');
    if !r.latency.is_empty() {
        let _ = writeln!(o, "latency percentiles (us)");
        let _ = writeln!(
            o,
            "  {:<40} {}",
            "point",
            PERCENTILES
                .iter()
                .map(|p| format!("{p:>9}"))
                .collect::<String>()
        );
        for l in &r.latency {
            let _ = writeln!(
                o,
                "  {:<40} {}",
                l.name,
                l.us.iter().map(|v| format!("{v:>9.1}")).collect::<String>()
            );
        }
        o.push('\n');
    }
    if !r.softirq.is_empty() {
        let _ = writeln!(o, "softirq share of each CPU");
        for s in &r.softirq {
            let cpus: Vec<String> = s
                .per_cpu
                .iter()
                .map(|(c, f)| format!("cpu{c} {:.1}%", f * 100.0))
                .collect();
            let _ = writeln!(o, "  {:<40} {}", s.name, cpus.join("  "));
        }
        o.push('\n');
    }
    for c in &r.comparisons {
        o.push_str(&crate::compare::terminal(c));
        o.push('\n');
    }
    env_text(&mut o, &r.env_diff, false);
    o
}

fn env_text(o: &mut String, diff: &[EnvChange], md: bool) {
    if diff.is_empty() {
        let _ = writeln!(o, "environment: no difference recorded");
        return;
    }
    if md {
        let _ = writeln!(o, "## Environment diff\n\n| fact | A | B |\n|---|---|---|");
    } else {
        let _ = writeln!(o, "environment diff");
    }
    for d in diff {
        let a = d.a.as_deref().unwrap_or("(absent)");
        let b = d.b.as_deref().unwrap_or("(absent)");
        if md {
            let _ = writeln!(o, "| {} | {} | {} |", d.key, a, b);
        } else {
            let _ = writeln!(o, "  {}: {} -> {}", d.key, a, b);
        }
    }
}

/// The report as Markdown.
pub fn markdown(r: &SweepReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {}\n", r.title);
    for p in &r.plots {
        let _ = writeln!(o, "## {} by {}\n", r.metric, p.axis);
        let _ = writeln!(o, "| line | {} | mean | 95 % interval | n |", p.axis);
        let _ = writeln!(o, "|---|---|---:|---|---:|");
        for l in &p.lines {
            for pt in &l.points {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} .. {} | {} |",
                    l.name,
                    pt.x,
                    r.show(pt.mean),
                    r.show(pt.lo),
                    r.show(pt.hi),
                    pt.n
                );
            }
        }
        o.push('\n');
    }
    let _ = writeln!(o, "## Cliffs\n");
    if r.cliffs.is_empty() {
        let _ = writeln!(o, "none\n");
    }
    for c in &r.cliffs {
        let _ = writeln!(o, "- {}", c.text);
        if let Some(cause) = &c.cause {
            let _ = writeln!(o, "  - likely cause: {cause}");
        }
    }
    let _ = writeln!(
        o,
        "\n## CPU per end\n\nCPU-seconds per second of window; softirq over the whole host.\n\n| point | end | user | system | softirq |\n|---|---|---:|---:|---:|"
    );
    for c in &r.cpu {
        let _ = writeln!(
            o,
            "| {} | {} | {:.3} | {:.3} | {:.3} |",
            c.name, c.end, c.user, c.system, c.softirq
        );
    }
    if !r.latency.is_empty() {
        let _ = writeln!(
            o,
            "\n## Latency percentiles (us)\n\n| point | {} |\n|---|{}",
            PERCENTILES.join(" | "),
            "---:|".repeat(5)
        );
        for l in &r.latency {
            let v: Vec<String> = l.us.iter().map(|x| format!("{x:.1}")).collect();
            let _ = writeln!(o, "| {} | {} |", l.name, v.join(" | "));
        }
    }
    if !r.softirq.is_empty() {
        let _ = writeln!(o, "\n## Softirq share of each CPU\n");
        for s in &r.softirq {
            let cpus: Vec<String> = s
                .per_cpu
                .iter()
                .map(|(c, f)| format!("cpu{c} {:.1}%", f * 100.0))
                .collect();
            let _ = writeln!(o, "- {}: {}", s.name, cpus.join(", "));
        }
    }
    o.push('\n');
    for c in &r.comparisons {
        o.push_str(&crate::compare::markdown(c));
        o.push('\n');
    }
    env_text(&mut o, &r.env_diff, true);
    o
}

// ---- HTML and SVG ----

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

const W: f64 = 760.0;
const H: f64 = 340.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 50.0;

struct YScale {
    log: bool,
    lo: f64,
    hi: f64,
}

impl YScale {
    fn new(values: impl Iterator<Item = f64>) -> YScale {
        let v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
        let max = v.iter().cloned().fold(0.0, f64::max).max(1e-9);
        let min_pos = v
            .iter()
            .cloned()
            .filter(|x| *x > 0.0)
            .fold(f64::INFINITY, f64::min);
        // A cliff of 100x or more is invisible on a linear axis.
        if min_pos.is_finite() && max / min_pos >= 100.0 {
            YScale {
                log: true,
                lo: 10f64.powf(min_pos.log10().floor()),
                hi: 10f64.powf(max.log10().ceil()),
            }
        } else {
            YScale {
                log: false,
                lo: 0.0,
                hi: max * 1.1,
            }
        }
    }
    fn y(&self, v: f64) -> f64 {
        let f = if self.log {
            let v = v.max(self.lo);
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        TOP + (H - TOP - BOTTOM) * (1.0 - f.clamp(0.0, 1.0))
    }
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut t = Vec::new();
            let mut x = self.lo;
            while x <= self.hi * 1.0001 {
                t.push(x);
                x *= 10.0;
            }
            t
        } else {
            (0..=5)
                .map(|i| self.lo + (self.hi - self.lo) * i as f64 / 5.0)
                .collect()
        }
    }
}

/// A line chart with categorical x, interval bars, and cliffs marked.
fn svg_lines(
    x_labels: &[String],
    lines: &[PlotLine],
    show: &dyn Fn(f64) -> String,
    marks: &[(usize, String)],
    x_title: &str,
) -> String {
    let scale = YScale::new(
        lines
            .iter()
            .flat_map(|(_, p)| p.iter().flat_map(|&(_, m, lo, hi)| [m, lo, hi])),
    );
    let n = x_labels.len().max(1);
    let step = (W - LEFT - RIGHT) / n as f64;
    let x = |i: usize| LEFT + step * (i as f64 + 0.5);
    let mut s = format!(
        "<svg viewBox=\"0 0 {W} {}\" width=\"{W}\" height=\"{}\" role=\"img\">",
        H + 20.0 * lines.len() as f64,
        H + 20.0 * lines.len() as f64
    );
    let _ = write!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>",
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    for t in scale.ticks() {
        let y = scale.y(t);
        let _ = write!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"t\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            esc(&show(t))
        );
    }
    let every = (n / 16).max(1);
    for (i, l) in x_labels.iter().enumerate() {
        if i % every == 0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"t\">{}</text>",
                x(i),
                H - BOTTOM + 16.0,
                esc(l)
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"a\">{}</text>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - BOTTOM + 36.0,
        esc(x_title)
    );
    for (i, text) in marks {
        let xm = x(*i) + step / 2.0;
        let _ = write!(
            s,
            "<line x1=\"{xm:.1}\" x2=\"{xm:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#d00\" stroke-dasharray=\"4 3\"><title>{}</title></line>",
            H - BOTTOM,
            esc(text)
        );
    }
    for (li, (name, pts)) in lines.iter().enumerate() {
        let c = COLORS[li % COLORS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(i, m, _, _)| format!("{:.1},{:.1}", x(i), scale.y(m)))
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for &(i, m, lo, hi) in pts {
            let (xi, y0, y1) = (x(i), scale.y(lo), scale.y(hi));
            let _ = write!(
                s,
                "<line x1=\"{xi:.1}\" x2=\"{xi:.1}\" y1=\"{y0:.1}\" y2=\"{y1:.1}\" stroke=\"{c}\"/>\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y0:.1}\" y2=\"{y0:.1}\" stroke=\"{c}\"/>\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y1:.1}\" y2=\"{y1:.1}\" stroke=\"{c}\"/>\
                 <circle cx=\"{xi:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{c}\"><title>{}: {} ({} .. {})</title></circle>",
                xi - 4.0,
                xi + 4.0,
                xi - 4.0,
                xi + 4.0,
                scale.y(m),
                esc(name),
                esc(&show(m)),
                esc(&show(lo)),
                esc(&show(hi))
            );
        }
        let ly = H + 20.0 * li as f64 + 4.0;
        let _ = write!(
            s,
            "<rect x=\"{LEFT}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{c}\"/><text x=\"{}\" y=\"{ly}\" class=\"t\">{}</text>",
            ly - 6.0,
            LEFT + 20.0,
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

/// Horizontal stacked bars: one row per name, parts in the given colors.
fn svg_bars(rows: &[(String, Vec<f64>)], parts: &[(&str, &str)], unit: &str) -> String {
    let row_h = 22.0;
    let label_w = 330.0;
    let h = TOP + row_h * rows.len() as f64 + 50.0;
    let max = rows
        .iter()
        .map(|(_, v)| v.iter().sum::<f64>())
        .fold(0.0, f64::max)
        .max(1e-9);
    let bw = W - label_w - RIGHT - 60.0;
    let mut s = format!("<svg viewBox=\"0 0 {W} {h}\" width=\"{W}\" height=\"{h}\" role=\"img\">");
    for (i, (name, vals)) in rows.iter().enumerate() {
        let y = TOP + row_h * i as f64;
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"t\">{}</text>",
            label_w - 6.0,
            y + 14.0,
            esc(name)
        );
        let mut x0 = label_w;
        for (v, (part, color)) in vals.iter().zip(parts) {
            let w = bw * v / max;
            let _ = write!(
                s,
                "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{}\" fill=\"{color}\"><title>{}: {part} {v:.3}{unit}</title></rect>",
                row_h - 6.0,
                esc(name)
            );
            x0 += w;
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"t\">{:.3}</text>",
            x0 + 4.0,
            y + 14.0,
            vals.iter().sum::<f64>()
        );
    }
    let ly = TOP + row_h * rows.len() as f64 + 20.0;
    let mut lx = label_w;
    for (part, color) in parts {
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{ly}\" class=\"t\">{part}</text>",
            ly - 10.0,
            lx + 16.0
        );
        lx += 110.0;
    }
    s.push_str("</svg>");
    s
}

/// The report as one HTML page with everything inline.
pub fn html(r: &SweepReport) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}}\
         table{{border-collapse:collapse;margin:8px 0 16px}}td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px}}\
         th{{background:#f0f0f0}}td.n{{text-align:right}}.t{{font-size:11px;fill:#333}}.a{{font-size:12px;fill:#000}}\
         .regression{{color:#b00;font-weight:bold}}.improvement{{color:#070;font-weight:bold}}.cliff{{color:#b00}}\
         </style></head><body>\n<h1>{}</h1>\n",
        esc(&r.title),
        esc(&r.title)
    );
    for p in &r.plots {
        let _ = writeln!(o, "<h2>{} by {}</h2>", esc(&r.metric), esc(&p.axis));
        let mut xs: Vec<String> = Vec::new();
        for l in &p.lines {
            for pt in &l.points {
                if !xs.contains(&pt.x) {
                    xs.push(pt.x.clone());
                }
            }
        }
        let lines: Vec<PlotLine> = p
            .lines
            .iter()
            .map(|l| {
                (
                    l.name.clone(),
                    l.points
                        .iter()
                        .map(|pt| {
                            (
                                xs.iter().position(|x| *x == pt.x).unwrap_or(0),
                                pt.mean,
                                pt.lo,
                                pt.hi,
                            )
                        })
                        .collect(),
                )
            })
            .collect();
        let marks: Vec<(usize, String)> = r
            .cliffs
            .iter()
            .filter(|c| c.axis == p.axis)
            .map(|c| {
                (
                    xs.iter().position(|x| *x == c.from).unwrap_or(0),
                    c.text.clone(),
                )
            })
            .collect();
        o.push_str(&svg_lines(&xs, &lines, &|v| r.show(v), &marks, &p.axis));
        o.push('\n');
    }
    let _ = writeln!(o, "<h2>Cliffs</h2>");
    if r.cliffs.is_empty() {
        let _ = writeln!(o, "<p>none</p>");
    } else {
        let _ = writeln!(o, "<ul>");
        for c in &r.cliffs {
            match &c.cause {
                Some(cause) => {
                    let _ = writeln!(
                        o,
                        "<li class=\"cliff\">{}<br><small>likely cause: {}</small></li>",
                        esc(&c.text),
                        esc(cause)
                    );
                }
                None => {
                    let _ = writeln!(o, "<li class=\"cliff\">{}</li>", esc(&c.text));
                }
            }
        }
        let _ = writeln!(o, "</ul>");
    }
    let _ = writeln!(
        o,
        "<h2>CPU per end</h2><p>CPU-seconds per second of window: the process's user and system time, and softirq time over the whole host.</p>"
    );
    let rows: Vec<(String, Vec<f64>)> = r
        .cpu
        .iter()
        .map(|c| {
            (
                format!("{} [{}]", c.name, c.end),
                vec![c.user, c.system, c.softirq],
            )
        })
        .collect();
    o.push_str(&svg_bars(
        &rows,
        &[
            ("user", "#4e79a7"),
            ("system", "#f28e2b"),
            ("softirq", "#e15759"),
        ],
        " CPU-s/s",
    ));
    if !r.latency.is_empty() {
        let _ = writeln!(o, "<h2>Latency percentiles</h2>");
        let xs: Vec<String> = PERCENTILES.iter().map(|s| s.to_string()).collect();
        let lines: Vec<PlotLine> = r
            .latency
            .iter()
            .map(|l| {
                (
                    l.name.clone(),
                    l.us.iter()
                        .enumerate()
                        .map(|(i, v)| (i, *v, *v, *v))
                        .collect(),
                )
            })
            .collect();
        o.push_str(&svg_lines(
            &xs,
            &lines,
            &|v| format!("{v:.0} us"),
            &[],
            "percentile",
        ));
    }
    if !r.softirq.is_empty() {
        let _ = writeln!(o, "<h2>Softirq share of each CPU</h2>");
        let ncpu = r.softirq.iter().map(|s| s.per_cpu.len()).max().unwrap_or(0);
        let _ = write!(o, "<table><tr><th>point</th>");
        for c in 0..ncpu {
            let _ = write!(o, "<th>cpu{c}</th>");
        }
        let _ = writeln!(o, "</tr>");
        for s in &r.softirq {
            let _ = write!(o, "<tr><td>{}</td>", esc(&s.name));
            for (_, f) in &s.per_cpu {
                let _ = write!(o, "<td class=\"n\">{:.1} %</td>", f * 100.0);
            }
            let _ = writeln!(o, "</tr>");
        }
        let _ = writeln!(o, "</table>");
        let rows: Vec<(String, Vec<f64>)> = r
            .softirq
            .iter()
            .flat_map(|s| {
                s.per_cpu
                    .iter()
                    .map(move |(c, f)| (format!("{} cpu{c}", s.name), vec![f * 100.0]))
            })
            .collect();
        o.push_str(&svg_bars(&rows, &[("softirq %", "#e15759")], " %"));
    }
    for c in &r.comparisons {
        let _ = writeln!(
            o,
            "<h2>{} vs {}</h2><p>{}: alpha {}, noise band ±{:.1} %, {} % intervals</p>",
            esc(&c.a),
            esc(&c.b),
            esc(&c.method.test),
            c.method.alpha,
            c.method.noise_band * 100.0,
            c.method.level * 100.0
        );
        let _ = writeln!(
            o,
            "<table><tr><th>point</th><th>A</th><th>B</th><th>change</th><th>p</th><th>verdict</th></tr>"
        );
        for p in &c.points {
            let class = p.verdict.to_string().replace(' ', "-");
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:+.1} %</td><td class=\"n\">{:.4}</td><td class=\"{class}\">{}</td></tr>",
                esc(&format!("{} [{}]", p.summary, p.spec_key)),
                esc(&r.show(p.a.mean)),
                esc(&r.show(p.b.mean)),
                p.change * 100.0,
                p.p_value,
                p.verdict
            );
        }
        let _ = writeln!(o, "</table>");
    }
    let _ = writeln!(o, "<h2>Environment diff</h2>");
    if r.env_diff.is_empty() {
        let _ = writeln!(o, "<p>no difference recorded</p>");
    } else {
        let _ = writeln!(o, "<table><tr><th>fact</th><th>A</th><th>B</th></tr>");
        for d in &r.env_diff {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&d.key),
                esc(d.a.as_deref().unwrap_or("(absent)")),
                esc(d.b.as_deref().unwrap_or("(absent)"))
            );
        }
        let _ = writeln!(o, "</table>");
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(throughput: &[f64]) -> RunRecord {
        let text = include_str!("../../../schemas/examples/run.v1.example.json");
        let mut r: RunRecord = serde_json::from_str(text).unwrap();
        let it = r.iterations[0].clone();
        r.iterations = throughput
            .iter()
            .map(|t| {
                let mut i = it.clone();
                i.complete = true;
                i.derived.throughput_bps = *t;
                i.derived.tps = None;
                i
            })
            .collect();
        r
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
        let r = build("t", &runs, Vec::new(), Vec::new(), 4.0);
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
    fn every_rendering_carries_the_same_findings() {
        let r = build("t", &sweep(), Vec::new(), Vec::new(), 4.0);
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
        assert!(page.contains("stroke-dasharray"), "the cliff is marked");
        assert!(
            !page.contains("http://") && !page.contains("https://") && !page.contains("<script")
        );
    }
}
