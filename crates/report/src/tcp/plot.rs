//! Plots over a run's measurement window: time in seconds from the
//! window's opening to its close on a numeric axis, the values on an axis
//! in their quantity's unit, and each side's mean over its flows as a
//! line with the flows' spread as a band around it.

use crate::chart::Frame;
use crate::sweep::html::{nice_step, COLORS, DASHES};
use crate::table::esc;
use plumb_samples::units::trimmed;
use std::fmt::Write;

/// What a plot's values are: the unit its axis is written in follows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Quantity {
    /// Bits a second, in decimal prefixes as plumb writes rates.
    Rate,
    /// Microseconds, written in µs or ms as the values' range asks.
    Micros,
    /// Bytes, in binary prefixes.
    Bytes,
    /// A count of the named thing (segments), written plain.
    Count(&'static str),
}

impl Quantity {
    /// The unit a value as large as `v` is written in: its size in the
    /// quantity's own unit, and its name ("" for a count).
    pub(crate) fn unit(self, v: f64) -> (f64, &'static str) {
        const RATE: [(f64, &str); 5] = [
            (1.0, "bit/s"),
            (1e3, "Kbit/s"),
            (1e6, "Mbit/s"),
            (1e9, "Gbit/s"),
            (1e12, "Tbit/s"),
        ];
        const TIME: [(f64, &str); 2] = [(1.0, "µs"), (1e3, "ms")];
        const BYTES: [(f64, &str); 4] = [
            (1.0, "B"),
            (1024.0, "KiB"),
            (1024.0 * 1024.0, "MiB"),
            (1024.0 * 1024.0 * 1024.0, "GiB"),
        ];
        let pick = |units: &[(f64, &'static str)]| {
            units
                .iter()
                .rev()
                .find(|u| v.abs() >= u.0)
                .copied()
                .unwrap_or(units[0])
        };
        match self {
            Quantity::Rate => pick(&RATE),
            Quantity::Micros => pick(&TIME),
            Quantity::Bytes => pick(&BYTES),
            Quantity::Count(_) => (1.0, ""),
        }
    }

    /// The base of a log axis's ticks: powers of two keep bytes round in
    /// KiB and MiB, where powers of ten would not.
    fn log_base(self) -> f64 {
        match self {
            Quantity::Bytes => 2.0,
            _ => 10.0,
        }
    }

    /// Whether values come in whole units (a count, bytes): no tick
    /// between them.
    fn whole(self) -> bool {
        matches!(self, Quantity::Bytes | Quantity::Count(_))
    }

    /// `v` written in the unit `unit` (from [`Quantity::unit`]).
    fn label(self, v: f64, (size, name): (f64, &str)) -> String {
        match name {
            "" => trimmed(v / size),
            _ => format!("{} {name}", trimmed(v / size)),
        }
    }

    /// The axis title: what is drawn, with the count's noun where the
    /// ticks carry no unit.
    fn title(self, what: &str) -> String {
        match self {
            Quantity::Count(noun) => format!("{what} ({noun})"),
            _ => what.to_string(),
        }
    }
}

/// The value axis of a plot: linear from zero, or logarithmic where the
/// values span a hundredfold or more; its ticks with their labels.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YAxis {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<(f64, String)>,
}

/// Ticks a linear axis aims at.
const Y_TICKS: f64 = 5.0;

/// A log axis is drawn only where fewer than one value in this many is
/// zero (or less), which it cannot show.
const ZEROS_ON_LOG: usize = 20;

/// Ticks a log axis holds at most: beyond it they step over powers.
const LOG_TICKS_MAX: i32 = 8;

impl YAxis {
    /// The axis for `values` of `q`; values that are not finite are left
    /// out, and on a log axis so is anything not above zero.
    pub(crate) fn new(q: Quantity, values: impl IntoIterator<Item = f64>) -> YAxis {
        let v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        let max = v.iter().copied().fold(0.0, f64::max);
        let min_pos = v
            .iter()
            .copied()
            .filter(|x| *x > 0.0)
            .fold(f64::INFINITY, f64::min);
        // A rise of 100x or more (slow start, a queue filling) flattens
        // everything below it on a linear axis; but a log axis leaves out
        // the zeros, and where they are many (flows idle, nothing in
        // flight) they are what the plot has to show.
        let zeros = v.iter().filter(|x| **x <= 0.0).count();
        if min_pos.is_finite() && max / min_pos >= 100.0 && zeros * ZEROS_ON_LOG < v.len() {
            return YAxis::log(q, min_pos, max);
        }
        // Nothing above zero still gets an axis of a few units.
        let max = if max > 0.0 { max } else { Y_TICKS };
        let unit = q.unit(max);
        let top = max * 1.05 / unit.0;
        let mut step = nice_step(top / Y_TICKS);
        if q.whole() && unit.0 == 1.0 {
            step = step.max(1.0);
        }
        let n = (top / step).ceil() as usize;
        // Multiples of the step, not sums of it, stay round.
        let ticks: Vec<(f64, String)> = (0..=n)
            .map(|i| {
                let t = step * i as f64 * unit.0;
                (t, q.label(t, unit))
            })
            .collect();
        YAxis {
            log: false,
            lo: 0.0,
            hi: ticks.last().map_or(1.0, |t| t.0),
            ticks,
        }
    }

    /// A log axis from the power below `min` to the one above `max`, each
    /// tick written in the unit its own size asks (10 µs, 100 µs, 1 ms).
    fn log(q: Quantity, min: f64, max: f64) -> YAxis {
        let base = q.log_base();
        // A power's logarithm may come out a hair off the integer.
        let lo_e = (min.log(base) + 1e-9).floor() as i32;
        let hi_e = (max.log(base) - 1e-9).ceil() as i32;
        let mut stride = 1;
        while hi_e.div_euclid(stride) + i32::from(hi_e.rem_euclid(stride) != 0)
            - lo_e.div_euclid(stride)
            > LOG_TICKS_MAX
        {
            stride += 1;
        }
        let lo_e = lo_e.div_euclid(stride) * stride;
        let hi_e = (hi_e + stride - 1).div_euclid(stride) * stride;
        let ticks: Vec<(f64, String)> = (lo_e..=hi_e)
            .step_by(stride as usize)
            .map(|e| {
                let t = base.powi(e);
                (t, q.label(t, q.unit(t)))
            })
            .collect();
        YAxis {
            log: true,
            lo: base.powi(lo_e),
            hi: base.powi(hi_e),
            ticks,
        }
    }

    /// Whether `v` can be drawn: a log axis has no place for zero or less.
    fn holds(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0)
    }

    /// Where `v` falls, 0 at the bottom and 1 at the top.
    fn fraction(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        f.clamp(0.0, 1.0)
    }
}

/// Ticks a time axis aims at.
const T_TICKS: f64 = 6.0;

/// The ticks of a window of `window_s` seconds: from its opening, every 1,
/// 2 or 5 times a power of ten seconds, none past its close.
pub(crate) fn time_ticks(window_s: f64) -> Vec<f64> {
    // A window of no length (or none recorded, NaN) has its opening only.
    if window_s.is_nan() || window_s <= 0.0 {
        return vec![0.0];
    }
    let step = nice_step(window_s / T_TICKS);
    let n = (window_s / step + 1e-9).floor() as usize;
    (0..=n).map(|i| step * i as f64).collect()
}

/// One side's lines in a plot.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trace {
    /// The side it draws: its colour and dash.
    pub side: usize,
    /// Its window, seconds: nothing after its close is drawn.
    pub window_s: f64,
    /// The mean line's name in the legend.
    pub name: String,
    /// Per sample: seconds into the window, the mean.
    pub mean: Vec<(f64, f64)>,
    /// Per sample: seconds into the window, the lowest flow's value and
    /// the highest's; empty where there is no spread to draw.
    pub band: Vec<(f64, f64, f64)>,
    pub band_name: String,
    /// Flows drawn one by one, each named, thin in the side's colour.
    pub flows: Vec<(String, Vec<(f64, f64)>)>,
    pub flows_name: String,
    /// The mean's samples as dots, not joined: events (a probe each), not
    /// a quantity between them.
    pub dots: bool,
}

impl Trace {
    fn inside(&self, t: f64) -> bool {
        (0.0..=self.window_s + 1e-9).contains(&t)
    }
}

const FRAME: Frame = Frame::new([760.0, 300.0], [16.0, 24.0, 44.0, 96.0]);
const LEGEND_ROW: f64 = 18.0;

/// Where time `t` falls on an axis of `span` seconds.
fn x_at(t: f64, span: f64) -> f64 {
    FRAME.x_at(t / span)
}

fn y_at(axis: &YAxis, v: f64) -> f64 {
    FRAME.y_at(axis.fraction(v))
}

/// `points` as an SVG path, broken where a point cannot be drawn on the
/// axis rather than joined across it.
fn path(points: &[(f64, f64)], axis: &YAxis, span: f64) -> String {
    let mut d = String::new();
    for run in points.split(|p| !axis.holds(p.1)) {
        for (i, &(t, v)) in run.iter().enumerate() {
            let _ = write!(
                d,
                " {}{:.1},{:.1}",
                if i == 0 { 'M' } else { 'L' },
                x_at(t, span),
                y_at(axis, v)
            );
        }
        // A point alone between two gaps still shows, as a dot (a line of
        // no length with round caps).
        if run.len() == 1 {
            d.push_str(" h0");
        }
    }
    d.trim_start().to_string()
}

/// `points` as dots: a line of no length with round caps at each point
/// the axis can draw.
fn dots(points: &[(f64, f64)], axis: &YAxis, span: f64) -> String {
    let mut d = String::new();
    for &(t, v) in points.iter().filter(|p| axis.holds(p.1)) {
        let _ = write!(d, " M{:.1},{:.1} h0", x_at(t, span), y_at(axis, v));
    }
    d.trim_start().to_string()
}

/// The band as polygons, one per stretch of samples the axis can draw.
fn band_polygons(band: &[(f64, f64, f64)], axis: &YAxis, span: f64) -> Vec<String> {
    band.split(|&(_, lo, hi)| !axis.holds(lo) || !axis.holds(hi))
        .filter(|run| !run.is_empty())
        .map(|run| {
            let top = run.iter().map(|&(t, _, hi)| (t, hi));
            let bottom = run.iter().rev().map(|&(t, lo, _)| (t, lo));
            top.chain(bottom)
                .map(|(t, v)| format!("{:.1},{:.1}", x_at(t, span), y_at(axis, v)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn dash(side: usize) -> String {
    match DASHES[side % DASHES.len()] {
        "" => String::new(),
        d => format!(" stroke-dasharray=\"{d}\""),
    }
}

/// A moment of the window marked across a plot (where a phase of a load
/// run begins), with what follows it written at the top.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mark {
    pub t_s: f64,
    pub label: String,
}

/// A plot of `traces` over their windows: `what` is drawn, in `q`, with
/// `marks` across it.
pub(crate) fn svg(what: &str, q: Quantity, traces: &[Trace], marks: &[Mark]) -> String {
    // Points after a trace's close are not drawn, nor do they stretch the
    // axes.
    let traces: Vec<Trace> = traces
        .iter()
        .map(|tr| Trace {
            mean: keep(&tr.mean, |t| tr.inside(t)),
            band: tr.band.iter().copied().filter(|p| tr.inside(p.0)).collect(),
            flows: tr
                .flows
                .iter()
                .map(|(n, p)| (n.clone(), keep(p, |t| tr.inside(t))))
                .collect(),
            ..tr.clone()
        })
        .collect();
    let span = traces
        .iter()
        .map(|t| t.window_s)
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let axis = YAxis::new(
        q,
        traces.iter().flat_map(|tr| {
            tr.mean
                .iter()
                .map(|p| p.1)
                .chain(tr.band.iter().flat_map(|p| [p.1, p.2]))
                .chain(tr.flows.iter().flat_map(|f| f.1.iter().map(|p| p.1)))
        }),
    );
    let legend: Vec<(usize, Key, &str)> = traces
        .iter()
        .flat_map(|tr| {
            [
                (!tr.mean.is_empty()).then_some((
                    tr.side,
                    if tr.dots { Key::Dots } else { Key::Mean },
                    tr.name.as_str(),
                )),
                (!tr.band.is_empty()).then_some((tr.side, Key::Band, tr.band_name.as_str())),
                (!tr.flows.is_empty()).then_some((tr.side, Key::Flows, tr.flows_name.as_str())),
            ]
        })
        .flatten()
        .collect();
    let mut s = FRAME.open(FRAME.h + LEGEND_ROW * legend.len() as f64, what);
    s.push_str(&FRAME.area());
    let y_ticks: Vec<(f64, String)> = axis
        .ticks
        .iter()
        .map(|(t, label)| (y_at(&axis, *t), label.clone()))
        .collect();
    let x_ticks: Vec<(f64, String)> = time_ticks(span)
        .into_iter()
        .map(|t| (x_at(t, span), trimmed(t)))
        .collect();
    grid(
        &mut s,
        &x_ticks,
        &y_ticks,
        "seconds into the window",
        &q.title(what),
    );
    let (x0, y0, y1) = (FRAME.left, FRAME.top, FRAME.y1());
    for m in marks.iter().filter(|m| (0.0..span).contains(&m.t_s)) {
        let x = x_at(m.t_s, span);
        if m.t_s > 0.0 {
            let _ = write!(
                s,
                "<line class=\"mark\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y0}\" y2=\"{y1}\" stroke=\"#888\" stroke-dasharray=\"3 3\"/>"
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" class=\"t mark\">{}</text>",
            x + 3.0,
            y0 + 11.0,
            esc(&m.label)
        );
    }
    // Bands first, then single flows, then the means over them all.
    for tr in &traces {
        let c = COLORS[tr.side % COLORS.len()];
        for poly in band_polygons(&tr.band, &axis, span) {
            let _ = write!(
                s,
                "<polygon class=\"band\" points=\"{poly}\" fill=\"{c}\" fill-opacity=\"0.18\" stroke=\"none\"><title>{}</title></polygon>",
                esc(&tr.band_name)
            );
        }
    }
    for tr in &traces {
        let c = COLORS[tr.side % COLORS.len()];
        for (name, points) in &tr.flows {
            let d = path(points, &axis, span);
            if !d.is_empty() {
                let _ = write!(
                    s,
                    "<path class=\"flow\" d=\"{d}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"1\" stroke-opacity=\"0.55\" stroke-linecap=\"round\"><title>{}</title></path>",
                    esc(name)
                );
            }
        }
    }
    for tr in &traces {
        let c = COLORS[tr.side % COLORS.len()];
        if tr.dots {
            let d = dots(&tr.mean, &axis, span);
            if !d.is_empty() {
                let _ = write!(
                    s,
                    "<path class=\"dots\" d=\"{d}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"3\" stroke-linecap=\"round\"><title>{}</title></path>",
                    esc(&tr.name)
                );
            }
            continue;
        }
        let d = path(&tr.mean, &axis, span);
        if !d.is_empty() {
            let _ = write!(
                s,
                "<path class=\"mean\" d=\"{d}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" stroke-linecap=\"round\"{}><title>{}</title></path>",
                dash(tr.side),
                esc(&tr.name)
            );
        }
    }
    for (i, (side, key, name)) in legend.iter().enumerate() {
        let c = COLORS[side % COLORS.len()];
        let y = FRAME.h + LEGEND_ROW * i as f64;
        let _ = match key {
            Key::Dots => write!(
                s,
                "<line x1=\"{}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{c}\" stroke-width=\"3\" stroke-linecap=\"round\"/>",
                x0 + 16.0,
                x0 + 16.0
            ),
            Key::Mean => write!(
                s,
                "<line x1=\"{x0}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{c}\" stroke-width=\"2\"{}/>",
                x0 + 32.0,
                dash(*side)
            ),
            Key::Band => write!(
                s,
                "<rect x=\"{x0}\" y=\"{}\" width=\"32\" height=\"10\" fill=\"{c}\" fill-opacity=\"0.18\"/>",
                y - 5.0
            ),
            Key::Flows => write!(
                s,
                "<line x1=\"{x0}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{c}\" stroke-width=\"1\" stroke-opacity=\"0.55\"/>",
                x0 + 32.0
            ),
        };
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" class=\"t\">{}</text>",
            x0 + 40.0,
            y + 4.0,
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

/// One line of a plot of distributions: the share of values at or below
/// each value, as steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Curve {
    /// Its colour.
    pub colour: usize,
    /// Its dash: the side it draws.
    pub side: usize,
    pub name: String,
    /// Each value that holds some, and the share at or below it, rising.
    pub steps: Vec<(f64, f64)>,
}

/// A plot of distributions of `q`: its values along the x axis (on a log
/// axis where they span a hundredfold or more), the share at or below
/// each up the y axis, 0 to 1.
pub(crate) fn cdf_svg(what: &str, q: Quantity, curves: &[Curve]) -> String {
    let axis = YAxis::new(q, curves.iter().flat_map(|c| c.steps.iter().map(|p| p.0)));
    let x = |v: f64| FRAME.x_at(axis.fraction(v));
    let y = |f: f64| FRAME.y_at(f);
    let legend: Vec<&Curve> = curves.iter().filter(|c| !c.steps.is_empty()).collect();
    let mut s = FRAME.open(FRAME.h + LEGEND_ROW * legend.len() as f64, what);
    s.push_str(&FRAME.area());
    let y_ticks: Vec<(f64, String)> = [0.0, 0.25, 0.5, 0.75, 1.0]
        .into_iter()
        .map(|share| (y(share), trimmed(share)))
        .collect();
    let x_ticks: Vec<(f64, String)> = axis
        .ticks
        .iter()
        .map(|(v, label)| (x(*v), label.clone()))
        .collect();
    grid(
        &mut s,
        &x_ticks,
        &y_ticks,
        &q.title(what),
        "share at or below",
    );
    let x0 = FRAME.left;
    for c in &legend {
        let colour = COLORS[c.colour % COLORS.len()];
        let mut d = String::new();
        let mut below = 0.0;
        for &(v, share) in c.steps.iter().filter(|p| axis.holds(p.0)) {
            let op = if d.is_empty() { 'M' } else { 'L' };
            let _ = write!(
                d,
                "{op}{:.1},{:.1} L{:.1},{:.1} ",
                x(v),
                y(below),
                x(v),
                y(share)
            );
            below = share;
        }
        let _ = write!(
            s,
            "<path class=\"cdf\" d=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{}><title>{}</title></path>",
            d.trim_end(),
            dash(c.side),
            esc(&c.name)
        );
    }
    for (i, c) in legend.iter().enumerate() {
        let colour = COLORS[c.colour % COLORS.len()];
        let yl = FRAME.h + LEGEND_ROW * i as f64;
        let _ = write!(
            s,
            "<line x1=\"{x0}\" x2=\"{}\" y1=\"{yl}\" y2=\"{yl}\" stroke=\"{colour}\" stroke-width=\"2\"{}/>\
             <text x=\"{}\" y=\"{}\" class=\"t\">{}</text>",
            x0 + 32.0,
            dash(c.side),
            x0 + 40.0,
            yl + 4.0,
            esc(&c.name)
        );
    }
    s.push_str("</svg>");
    s
}

/// A plot's grid lines and their labels at each tick (a pixel along its
/// axis and its label), and the two axes' titles.
fn grid(
    s: &mut String,
    x_ticks: &[(f64, String)],
    y_ticks: &[(f64, String)],
    x_title: &str,
    y_title: &str,
) {
    let (x0, x1, y0, y1) = (FRAME.left, FRAME.x1(), FRAME.top, FRAME.y1());
    for (y, label) in y_ticks {
        let _ = write!(
            s,
            "<line x1=\"{x0}\" x2=\"{x1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"t y\">{}</text>",
            x0 - 6.0,
            y + 4.0,
            esc(label)
        );
    }
    for (x, label) in x_ticks {
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y0}\" y2=\"{y1}\" stroke=\"#eee\"/>\
             <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"t x\">{}</text>",
            y1 + 15.0,
            esc(label)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"a\">{}</text>\
         <text x=\"14\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.1})\" class=\"a\">{}</text>",
        (x0 + x1) / 2.0,
        y1 + 34.0,
        esc(x_title),
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        esc(y_title)
    );
}

/// What a legend row shows.
#[derive(Clone, Copy)]
enum Key {
    Dots,
    Mean,
    Band,
    Flows,
}

fn keep(points: &[(f64, f64)], inside: impl Fn(f64) -> bool) -> Vec<(f64, f64)> {
    points.iter().copied().filter(|p| inside(p.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `step` is 1, 2 or 5 times a power of ten.
    fn round(step: f64) -> bool {
        let unit = 10f64.powf(step.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .any(|m| (step / unit - m).abs() < 1e-9)
    }

    #[test]
    fn time_ticks_step_roundly_from_the_opening_and_stop_at_the_close() {
        for (window, step, last) in [
            (2.0, 0.5, 2.0),
            (10.0, 2.0, 10.0),
            (1.0, 0.2, 1.0),
            (60.0, 10.0, 60.0),
            (2.3, 0.5, 2.0),
            (0.35, 0.05, 0.35),
            (7.9, 1.0, 7.0),
        ] {
            let ticks = time_ticks(window);
            assert_eq!(ticks[0], 0.0, "{window}");
            assert!(
                (ticks.last().unwrap() - last).abs() < 1e-9,
                "{window}: {ticks:?}"
            );
            assert!(ticks.iter().all(|&t| t <= window + 1e-9), "{ticks:?}");
            for w in ticks.windows(2) {
                assert!((w[1] - w[0] - step).abs() < 1e-9, "{window}: {ticks:?}");
                assert!(round(w[1] - w[0]));
            }
            assert!((4..=11).contains(&ticks.len()), "{window}: {ticks:?}");
        }
        assert_eq!(time_ticks(0.0), vec![0.0]);
        assert_eq!(time_ticks(f64::NAN), vec![0.0]);
    }

    fn labels(a: &YAxis) -> Vec<&str> {
        a.ticks.iter().map(|t| t.1.as_str()).collect()
    }

    #[test]
    fn times_are_written_in_microseconds_or_milliseconds_by_their_range() {
        let a = YAxis::new(Quantity::Micros, [40.0, 180.0, 310.0]);
        assert!(!a.log);
        assert_eq!(
            labels(&a),
            ["0 µs", "50 µs", "100 µs", "150 µs", "200 µs", "250 µs", "300 µs", "350 µs"],
            "{a:?}"
        );
        let a = YAxis::new(Quantity::Micros, [2_500.0, 9_000.0, 12_000.0]);
        assert_eq!(
            labels(&a),
            ["0 ms", "2 ms", "4 ms", "6 ms", "8 ms", "10 ms", "12 ms", "14 ms"],
            "{a:?}"
        );
        let a = YAxis::new(Quantity::Micros, [1_200.0, 1_900.0]);
        assert_eq!(
            labels(&a),
            ["0 ms", "0.5 ms", "1 ms", "1.5 ms", "2 ms"],
            "{a:?}"
        );
    }

    #[test]
    fn bytes_carry_binary_prefixes_and_counts_are_plain() {
        let a = YAxis::new(Quantity::Bytes, [0.0, 60.0 * 1024.0, 200.0 * 1024.0]);
        assert_eq!(
            labels(&a),
            ["0 KiB", "50 KiB", "100 KiB", "150 KiB", "200 KiB", "250 KiB"],
            "{a:?}"
        );
        let a = YAxis::new(Quantity::Bytes, [3.0 * 1024.0 * 1024.0]);
        assert_eq!(labels(&a)[1], "0.5 MiB", "{a:?}");
        let a = YAxis::new(Quantity::Bytes, [5.0 * 1024.0 * 1024.0 * 1024.0]);
        assert_eq!(labels(&a)[1], "1 GiB", "{a:?}");
        // Few bytes are never split below one.
        let a = YAxis::new(Quantity::Bytes, [3.0]);
        assert_eq!(labels(&a), ["0 B", "1 B", "2 B", "3 B", "4 B"], "{a:?}");
        let a = YAxis::new(Quantity::Count("segments"), [10.0, 37.0]);
        assert_eq!(labels(&a), ["0", "10", "20", "30", "40"], "{a:?}");
        assert_eq!(Quantity::Count("segments").title("cwnd"), "cwnd (segments)");
        let a = YAxis::new(Quantity::Rate, [9.4e9]);
        assert_eq!(labels(&a)[1], "2 Gbit/s", "{a:?}");
        // Nothing above zero: still an axis, from zero.
        let a = YAxis::new(Quantity::Count("segments"), [0.0, 0.0]);
        assert!(!a.log && a.lo == 0.0 && a.hi > 0.0, "{a:?}");
    }

    #[test]
    fn linear_ticks_are_round_multiples_and_cover_the_values() {
        for (q, values) in [
            (Quantity::Micros, vec![41.0, 77.3]),
            (Quantity::Bytes, vec![1.0e6, 3.3e6]),
            (Quantity::Rate, vec![8.1e9, 9.4e9]),
            (Quantity::Count("segments"), vec![3.0, 9.0]),
        ] {
            let a = YAxis::new(q, values.iter().copied());
            let max = values.iter().copied().fold(0.0, f64::max);
            assert!(a.lo == 0.0 && a.hi >= max, "{q:?}: {a:?}");
            let (size, _) = q.unit(a.hi);
            let step = (a.ticks[1].0 - a.ticks[0].0) / size;
            assert!(round(step), "{q:?}: {a:?}");
            for (i, (t, _)) in a.ticks.iter().enumerate() {
                assert!((t / size - step * i as f64).abs() < 1e-9, "{q:?}: {a:?}");
            }
        }
    }

    #[test]
    fn a_log_axis_never_starts_at_zero_nor_draws_it() {
        // One zero among twenty-odd values, the others between the ends.
        let many = |v: &[f64]| {
            let mid = v[v.len() - 2];
            v.iter().copied().chain([mid; 20]).collect::<Vec<_>>()
        };
        let a = YAxis::new(Quantity::Micros, many(&[0.0, 30.0, 450.0, 12_000.0]));
        assert!(a.log, "{a:?}");
        assert_eq!(a.lo, 10.0);
        assert_eq!(
            labels(&a),
            ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms"],
            "{a:?}"
        );
        assert!(!a.holds(0.0) && !a.holds(-1.0) && a.holds(30.0));
        // Bytes step over powers of two, as many as fit.
        let a = YAxis::new(Quantity::Bytes, many(&[0.0, 1500.0, 3.0 * 1024.0 * 1024.0]));
        assert!(a.log && a.lo > 0.0, "{a:?}");
        assert_eq!(
            labels(&a),
            ["1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB"],
            "{a:?}"
        );
        // Zeros that are many keep the axis linear, where they show.
        let a2 = YAxis::new(Quantity::Bytes, [0.0, 0.0, 1500.0, 3.0 * 1024.0 * 1024.0]);
        assert!(!a2.log && a2.lo == 0.0, "{a2:?}");
        // A zero between two points breaks the line rather than falling
        // to the axis's foot.
        let d = path(&[(0.0, 100.0), (1.0, 0.0), (2.0, 20_000.0)], &a, 2.0);
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert!(!d.contains('L'), "{d}");
        // Each alone, drawn as a dot.
        assert_eq!(d.matches("h0").count(), 2, "{d}");
        let polys = band_polygons(
            &[
                (0.0, 10.0, 100.0),
                (1.0, 0.0, 50.0),
                (2.0, 5.0, 80.0),
                (3.0, 9.0, 90.0),
            ],
            &a,
            3.0,
        );
        assert_eq!(polys.len(), 2, "{polys:?}");
    }

    #[test]
    fn nothing_after_a_traces_close_is_drawn() {
        let tr = Trace {
            side: 0,
            window_s: 2.0,
            name: "mean".into(),
            mean: vec![(0.0, 5.0), (1.0, 6.0), (2.0, 7.0), (2.5, 700.0)],
            ..Default::default()
        };
        let s = svg("cwnd", Quantity::Count("segments"), &[tr], &[]);
        let d = &s[s.find("class=\"mean\" d=\"").unwrap()..];
        let d = &d[..d.find("\" fill").unwrap()];
        assert_eq!(d.matches(',').count(), 3, "{d}");
        // The point after the close neither stretched the axis to 700 nor
        // made it log.
        assert!(s.contains(">8<") && !s.contains(">700<"), "{s}");
        let x_ticks: Vec<&str> = s
            .split("class=\"t x\">")
            .skip(1)
            .map(|t| &t[..t.find('<').unwrap()])
            .collect();
        assert_eq!(x_ticks, ["0", "0.5", "1", "1.5", "2"], "{s}");
    }
}
