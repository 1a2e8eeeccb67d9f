//! The sweep report as one HTML page with inline SVG plots.

use super::{Section, SweepReport, PERCENTILES};
use crate::chart::Frame;
use crate::table::{esc, Align, Table};
use plumb_samples::units::{format_cpu_load, format_latency_us, format_share, sig3, trimmed};
use std::fmt::Write;

/// A line to draw: its name and (x index, mean, low, high) per point.
pub(crate) type PlotLine = (String, Vec<(usize, f64, f64, f64)>);

pub(crate) const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

const FRAME: Frame = Frame::new([760.0, 340.0], [20.0, 20.0, 50.0, 90.0]);

/// Colour alone cannot tell a line from one drawn over it: each line also
/// gets a dash pattern and its points a marker, and the legend shows both.
pub(crate) const DASHES: [&str; 4] = ["", "8 4", "2 3", "10 3 2 3"];

/// A point's marker: its radius, and whether it is filled. Rings of
/// different sizes stay visible around each other where points coincide.
const MARKERS: [(f64, bool); 3] = [(3.5, true), (5.5, false), (7.5, false)];

struct YScale {
    log: bool,
    lo: f64,
    hi: f64,
    /// The distance between ticks of a linear scale: 1, 2 or 5 times a
    /// power of ten, so that ticks fall on round values.
    step: f64,
}

/// The round step (1, 2 or 5 times a power of ten) nearest `raw`.
pub(crate) fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(f64::MIN_POSITIVE);
    let unit = 10f64.powf(raw.log10().floor());
    let f = raw / unit;
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * unit
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
                step: 10.0,
            }
        } else {
            // About five ticks, the top one just above the highest value.
            let step = nice_step(max * 1.05 / 5.0);
            YScale {
                log: false,
                lo: 0.0,
                hi: (max * 1.05 / step).ceil() * step,
                step,
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
        FRAME.y_at(f)
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
            let n = ((self.hi - self.lo) / self.step).round() as usize;
            // Multiples of the step, not sums of it, stay round.
            (0..=n).map(|i| self.lo + self.step * i as f64).collect()
        }
    }
}

/// A point's marker at (x, y) in colour `c`, with a title when it is a
/// point of the plot rather than the legend's sample.
fn marker(s: &mut String, li: usize, x: f64, y: f64, c: &str, title: Option<&str>) {
    let (r, filled) = MARKERS[li % MARKERS.len()];
    let fill = if filled { c } else { "none" };
    let _ = write!(
        s,
        "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" fill=\"{fill}\" stroke=\"{c}\" stroke-width=\"1.5\">"
    );
    if let Some(t) = title {
        let _ = write!(s, "<title>{}</title>", esc(t));
    }
    s.push_str("</circle>");
}

/// The dash attribute of line `li`, empty for a solid line.
fn dash(li: usize) -> String {
    match DASHES[li % DASHES.len()] {
        "" => String::new(),
        d => format!(" stroke-dasharray=\"{d}\""),
    }
}

/// A line chart with categorical x, interval bars, and cliffs marked;
/// `show` writes a value as the page's tables do, `tick` an axis tick's
/// round value.
pub(crate) fn svg_lines(
    x_labels: &[String],
    lines: &[PlotLine],
    show: &dyn Fn(f64) -> String,
    tick: &dyn Fn(f64) -> String,
    marks: &[(usize, String)],
    x_title: &str,
) -> String {
    let scale = YScale::new(
        lines
            .iter()
            .flat_map(|(_, p)| p.iter().flat_map(|&(_, m, lo, hi)| [m, lo, hi])),
    );
    let n = x_labels.len().max(1);
    let step = FRAME.inner_w() / n as f64;
    let x = |i: usize| FRAME.left + step * (i as f64 + 0.5);
    let mut s = FRAME.open(FRAME.h + 20.0 * lines.len() as f64, "");
    s.push_str(&FRAME.area());
    for t in scale.ticks() {
        let y = scale.y(t);
        let _ = write!(
            s,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"t\">{}</text>",
            FRAME.left,
            FRAME.x1(),
            FRAME.left - 6.0,
            y + 4.0,
            esc(&tick(t))
        );
    }
    let every = (n / 16).max(1);
    for (i, l) in x_labels.iter().enumerate() {
        if i % every == 0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"t\">{}</text>",
                x(i),
                FRAME.y1() + 16.0,
                esc(l)
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"a\">{}</text>",
        FRAME.x_at(0.5),
        FRAME.y1() + 36.0,
        esc(x_title)
    );
    for (i, text) in marks {
        let xm = x(*i) + step / 2.0;
        let _ = write!(
            s,
            "<line x1=\"{xm:.1}\" x2=\"{xm:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"#d00\" stroke-dasharray=\"4 3\"><title>{}</title></line>",
            FRAME.top,
            FRAME.y1(),
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
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{} points=\"{}\"/>",
            dash(li),
            path.join(" ")
        );
        for &(i, m, lo, hi) in pts {
            let (xi, y0, y1) = (x(i), scale.y(lo), scale.y(hi));
            let _ = write!(
                s,
                "<line x1=\"{xi:.1}\" x2=\"{xi:.1}\" y1=\"{y0:.1}\" y2=\"{y1:.1}\" stroke=\"{c}\"/>\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y0:.1}\" y2=\"{y0:.1}\" stroke=\"{c}\"/>\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y1:.1}\" y2=\"{y1:.1}\" stroke=\"{c}\"/>",
                xi - 4.0,
                xi + 4.0,
                xi - 4.0,
                xi + 4.0,
            );
            let title = format!("{name}: {} ({} .. {})", show(m), show(lo), show(hi));
            marker(&mut s, li, xi, scale.y(m), c, Some(&title));
        }
        // The legend shows each line as drawn: its dash and its marker.
        let ly = FRAME.h + 20.0 * li as f64 + 4.0;
        let _ = write!(
            s,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{c}\" stroke-width=\"2\"{}/>",
            FRAME.left,
            FRAME.left + 32.0,
            ly - 4.0,
            ly - 4.0,
            dash(li)
        );
        marker(&mut s, li, FRAME.left + 16.0, ly - 4.0, c, None);
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{ly}\" class=\"t\">{}</text>",
            FRAME.left + 40.0,
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

/// Horizontal stacked bars: one row per name, parts in the given colors,
/// values written by `show` as the section's table writes them.
pub(crate) fn svg_bars(
    rows: &[(String, Vec<f64>)],
    parts: &[(&str, &str)],
    show: &dyn Fn(f64) -> String,
    unit: &str,
) -> String {
    let row_h = 22.0;
    let label_w = 330.0;
    let h = FRAME.top + row_h * rows.len() as f64 + 50.0;
    let max = rows
        .iter()
        .map(|(_, v)| v.iter().sum::<f64>())
        .fold(0.0, f64::max)
        .max(1e-9);
    let bw = FRAME.x1() - label_w - 60.0;
    let mut s = FRAME.open(h, "");
    for (i, (name, vals)) in rows.iter().enumerate() {
        let y = FRAME.top + row_h * i as f64;
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
                "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{}\" fill=\"{color}\"><title>{}: {part} {}{unit}</title></rect>",
                row_h - 6.0,
                esc(name),
                esc(&show(*v))
            );
            x0 += w;
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"t\">{}</text>",
            x0 + 4.0,
            y + 14.0,
            esc(&show(vals.iter().sum::<f64>()))
        );
    }
    let ly = FRAME.top + row_h * rows.len() as f64 + 20.0;
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
    plots(&mut o, r);
    cliffs(&mut o, r);
    cpu(&mut o, r);
    under_load(&mut o, r);
    latency(&mut o, r);
    retransmits(&mut o, r);
    limits(&mut o, r);
    softirq(&mut o, r);
    comparisons(&mut o, r);
    env_diff(&mut o, r);
    o.push_str("</body></html>\n");
    o
}

/// One line plot per axis, its cliffs marked.
fn plots(o: &mut String, r: &SweepReport) {
    for p in &r.plots {
        let _ = writeln!(o, "<h2>{} by {}</h2>", esc(r.metric.title()), esc(&p.axis));
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
        o.push_str(&svg_lines(
            &xs,
            &lines,
            &|v| r.show(v),
            &|v| r.metric.format_round(v),
            &marks,
            &p.axis,
        ));
        o.push('\n');
    }
}

/// The cliffs, each with its likely cause when one is known.
fn cliffs(o: &mut String, r: &SweepReport) {
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
}

/// CPU per end, as bars.
fn cpu(o: &mut String, r: &SweepReport) {
    let _ = writeln!(
        o,
        "<h2>CPU per end</h2><p>CPU-seconds per second of window: the process's user and system time, and softirq time over the whole host.</p>"
    );
    let rows: Vec<(String, Vec<f64>)> = r
        .tables
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
        &format_cpu_load,
        " CPU-s/s",
    ));
}

/// The latency percentiles of each point, when any were timed.
fn latency(o: &mut String, r: &SweepReport) {
    if !r.tables.latency.is_empty() {
        let _ = writeln!(o, "<h2>Latency percentiles</h2>");
        let xs: Vec<String> = PERCENTILES.iter().map(|s| s.to_string()).collect();
        let lines: Vec<PlotLine> = r
            .tables
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
            &|v| format!("{} us", format_latency_us(v)),
            &|v| format!("{} us", trimmed(v)),
            &[],
            "percentile",
        ));
    }
}

/// Each probe's median per stretch at the points that are runs of probes
/// and loads: its table, and a line per point and probe across the
/// stretches.
fn under_load(o: &mut String, r: &SweepReport) {
    let Some(section) = r.under_load_section() else {
        return;
    };
    write_section(o, &section);
    let xs: Vec<String> = r.tables.under_load[0]
        .stretches
        .iter()
        .map(|(running, _)| running.clone())
        .collect();
    let lines: Vec<PlotLine> = r
        .tables
        .under_load
        .iter()
        .map(|u| {
            (
                format!("{} {}", u.name, u.probe),
                u.stretches
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (_, ms))| ms.map(|v| (i, v, v, v)))
                    .collect(),
            )
        })
        .collect();
    o.push_str(&svg_lines(
        &xs,
        &lines,
        &|v| format!("{} ms", sig3(v)),
        &|v| format!("{} ms", trimmed(v)),
        &[],
        "stretch",
    ));
}

/// TCP's retransmissions at each point, when there were any.
fn retransmits(o: &mut String, r: &SweepReport) {
    if let Some(section) = r.retransmit_section() {
        write_section(o, &section);
    }
}

/// What limited the senders at each point, as its table and as stacked
/// bars of the shares of their busy time.
fn limits(o: &mut String, r: &SweepReport) {
    let Some(section) = r.limits_section() else {
        return;
    };
    write_section(o, &section);
    let rows: Vec<(String, (f64, f64, f64))> = r
        .tables
        .limits
        .iter()
        .map(|l| (format!("{} [{}]", l.name, l.end), l.shares))
        .collect();
    o.push_str(&limits_bars(&rows));
}

/// Shares of senders' busy time (receive window, send buffer, other) as
/// stacked bars, a row each.
pub(crate) fn limits_bars(rows: &[(String, (f64, f64, f64))]) -> String {
    let rows: Vec<(String, Vec<f64>)> = rows
        .iter()
        .map(|(name, (r, s, o))| (name.clone(), vec![*r, *s, *o]))
        .collect();
    svg_bars(
        &rows,
        &[
            ("receive window", "#e15759"),
            ("send buffer", "#f28e2b"),
            ("other", "#bab0ac"),
        ],
        &format_share,
        "",
    )
}

/// A section's heading, its note and its table.
fn write_section(o: &mut String, section: &Section) {
    let _ = writeln!(o, "<h2>{}</h2>", esc(section.title));
    if let Some(note) = section.note {
        let _ = writeln!(o, "<p>{}</p>", esc(note));
    }
    o.push_str(&section.table.html());
}

/// The softirq share of each CPU, as a table and as bars.
fn softirq(o: &mut String, r: &SweepReport) {
    let Some(section) = r.softirq_section() else {
        return;
    };
    write_section(o, &section);
    let rows: Vec<(String, Vec<f64>)> = r
        .tables
        .softirq
        .iter()
        .flat_map(|s| {
            s.per_cpu
                .iter()
                .map(move |(c, f)| (format!("{} cpu{c}", s.name), vec![*f]))
        })
        .collect();
    o.push_str(&svg_bars(
        &rows,
        &[("softirq share", "#e15759")],
        &format_share,
        "",
    ));
}

/// Each line against the first.
fn comparisons(o: &mut String, r: &SweepReport) {
    for c in &r.comparisons {
        let _ = writeln!(
            o,
            "<h2>{} vs {}</h2><p>{}</p>",
            esc(&c.a),
            esc(&c.b),
            esc(&crate::compare::method_line(c))
        );
        o.push_str(&crate::compare::points_table(c).html());
    }
}

/// The environment diff of the first line against the last.
fn env_diff(o: &mut String, r: &SweepReport) {
    // The first line against the last, as the last comparison has it.
    let env_diff = r.comparisons.last().map_or(&[][..], |c| &c.env_diff[..]);
    let _ = writeln!(o, "<h2>Environment diff</h2>");
    if env_diff.is_empty() {
        let _ = writeln!(o, "<p>no difference recorded</p>");
    } else {
        let mut table = Table::new([
            ("fact", Align::Left, 0),
            ("A", Align::Left, 0),
            ("B", Align::Left, 0),
        ]);
        let absent = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
        for d in env_diff {
            // The end is named where the runs kept the server's facts apart.
            let fact = match &d.end {
                Some(end) => format!("{end}: {}", d.key),
                None => d.key.clone(),
            };
            table.row([fact, absent(&d.a), absent(&d.b)]);
        }
        o.push_str(&table.html());
    }
}
