//! The history of a test point rendered: the series with its intervals and
//! its change points as a terminal table, Markdown, an HTML page with the
//! series drawn, and a regression report in the form a kernel mailing list
//! expects.

use crate::table::{esc, Align, Table};
use plumb_compare::history::{History, HistoryChange};
use plumb_samples::units::format_change as pct;
use std::fmt::Write;

fn value(h: &History, v: f64) -> String {
    h.metric.format(v)
}

/// `between run 7 (6.6-rc1) and run 8 (6.6-rc2): 10.2 -> 9.0 Gbit/s ...`
pub fn change_line(h: &History, c: &HistoryChange) -> String {
    let b = &c.between;
    format!(
        "between run {} ({}) and run {} ({}): {} -> {}, {}, p {:.3}{}",
        c.before_run,
        b.before_label,
        c.after_run,
        b.after_label,
        value(h, b.mean_before),
        value(h, b.mean_after),
        pct(b.change),
        b.p,
        if b.regression {
            "  => regression"
        } else {
            "  => improvement"
        }
    )
}

/// Only the changes, one line each (for cron): nothing when there is none.
pub fn changes_only(h: &History) -> String {
    let mut o = String::new();
    for c in &h.changes {
        let _ = writeln!(o, "{} [{}]: {}", h.summary, h.spec_key, change_line(h, c));
    }
    o
}

/// The history in `format` (one of [`crate::format::of::HISTORY`]); with
/// `changes`, only its change points (nothing in text when there is none).
/// For a mail, `compared` gives the terminal comparison of the runs before
/// and after a change, by their run ids.
pub fn render(
    h: &History,
    format: crate::Format,
    changes: bool,
    compared: &dyn Fn(i64, i64) -> String,
) -> Result<String, String> {
    use crate::Format::*;
    Ok(match format {
        Terminal | Markdown if changes => changes_only(h),
        Terminal => terminal(h),
        Markdown => markdown(h),
        Json if changes => crate::format::json(
            &serde_json::json!({
                "spec_key": h.spec_key,
                "summary": h.summary,
                "metric": h.metric,
                "unit": h.unit,
                "method": h.method,
                "changes": h.changes,
            }),
            "history",
        )?,
        Json => crate::format::json(h, "history")?,
        Mail => {
            let mut out = String::new();
            for c in &h.changes {
                out.push_str(&mail(h, c, &compared(c.before_run, c.after_run)));
                out.push('\n');
            }
            // --changes says nothing when nothing changed, for cron.
            if out.is_empty() && !changes {
                out = format!("no change in {} ({})\n", h.summary, h.method);
            }
            out
        }
        Csv | Openmetrics => return Err(format!("a history cannot be written as {format}")),
    })
}

pub fn terminal(h: &History) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}  [{}]: {}, {} runs",
        h.summary,
        h.spec_key,
        h.metric.title(),
        h.runs.len()
    );
    // The label column is as wide as the longest label shown, so that a
    // label as long as a kernel release does not push the figures out of
    // line.
    let lw = h
        .runs
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(16);
    let _ = writeln!(
        o,
        "  {:>5}  {:<20}  {:<lw$} {:>14}  95 % interval",
        "run", "started (UTC)", "label", h.unit
    );
    for (i, r) in h.runs.iter().enumerate() {
        if h.changes.iter().any(|c| c.index == i) {
            let _ = writeln!(o, "  ----- change -----");
        }
        let _ = writeln!(
            o,
            "  {:>5}  {:<20}  {:<lw$} {:>14}  {} .. {}",
            r.run,
            r.started_at
                .get(..19)
                .unwrap_or(&r.started_at)
                .replace('T', " "),
            r.label,
            value(h, r.mean),
            value(h, r.lo),
            value(h, r.hi)
        );
    }
    let _ = writeln!(o, "change points: {}", h.method);
    if h.changes.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for c in &h.changes {
        let _ = writeln!(o, "  {}", change_line(h, c));
    }
    o
}

pub fn markdown(h: &History) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "**{}** (`{}`): {}\n",
        h.summary,
        h.spec_key,
        h.metric.title()
    );
    let mut table = Table::new([
        ("run", Align::Right, 0),
        ("started", Align::Left, 0),
        ("label", Align::Left, 0),
        (h.unit, Align::Right, 0),
        ("95 % interval", Align::Right, 0),
    ]);
    for r in &h.runs {
        let interval = format!("{} .. {}", value(h, r.lo), value(h, r.hi));
        let (run, started) = (r.run.to_string(), r.started_at.clone());
        table.row([run, started, r.label.clone(), value(h, r.mean), interval]);
    }
    o.push_str(&table.markdown());
    let _ = writeln!(o, "\n_Change points: {}._\n", h.method);
    for c in &h.changes {
        let _ = writeln!(o, "- {}", change_line(h, c));
    }
    o
}

/// The kernel test robot's form: a headline naming the change and where
/// it fell, then the test, then `detail`: the two runs around the change
/// compared (their before/after table with the CPU budget, hosts, kernels
/// and environment differences), as the caller renders it.
pub fn mail(h: &History, c: &HistoryChange, detail: &str) -> String {
    let b = &c.between;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "plumb: {} {} {} of {} between {} and {}\n",
        pct(b.change),
        h.metric.unit(),
        if b.regression {
            "regression"
        } else {
            "improvement"
        },
        h.summary,
        b.before_label,
        b.after_label
    );
    let _ = writeln!(o, "test point: {} [{}]", h.summary, h.spec_key);
    let _ = writeln!(
        o,
        "{}: {} (runs before) -> {} (runs after), {} change, p {:.3}",
        h.metric.title(),
        value(h, b.mean_before),
        value(h, b.mean_after),
        pct(b.change),
        b.p
    );
    let _ = writeln!(o, "found by {}\n", h.method);
    let _ = writeln!(
        o,
        "the two runs around the change (run {} against run {}):\n",
        c.before_run, c.after_run
    );
    o.push_str(detail);
    o
}

/// One page: the series as points with their intervals, each change a
/// dashed line with its label, and the table; no script.
pub fn html(h: &History) -> String {
    let (w, ht, pad) = (900.0, 320.0, 60.0);
    let n = h.runs.len().max(1) as f64;
    let lo = h.runs.iter().map(|r| r.lo).fold(f64::INFINITY, f64::min);
    let hi = h
        .runs
        .iter()
        .map(|r| r.hi)
        .fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo - (hi - lo) * 0.1, hi + (hi - lo) * 0.1)
    } else {
        (0.0, 1.0)
    };
    let x = |i: f64| pad + (i + 0.5) / n * (w - 2.0 * pad);
    let y = |v: f64| ht - pad - (v - lo) / (hi - lo) * (ht - 2.0 * pad);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" font-family=\"sans-serif\" font-size=\"11\">\
         <rect x=\"{pad}\" y=\"{pad}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\
         <text x=\"{pad}\" y=\"{}\">{}</text><text x=\"{pad}\" y=\"{}\">{}</text>",
        w - 2.0 * pad,
        ht - 2.0 * pad,
        pad - 6.0,
        esc(&value(h, hi)),
        ht - pad + 14.0,
        esc(&value(h, lo)),
    );
    for c in &h.changes {
        let cx = (x(c.index as f64 - 1.0) + x(c.index as f64)) / 2.0;
        let _ = write!(
            svg,
            "<g class=\"change\"><line x1=\"{cx}\" y1=\"{pad}\" x2=\"{cx}\" y2=\"{}\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"#c00\">{} {}</text></g>",
            ht - pad,
            cx + 4.0,
            pad + 12.0,
            esc(&pct(c.between.change)),
            esc(&c.between.after_label)
        );
    }
    for (i, r) in h.runs.iter().enumerate() {
        let cx = x(i as f64);
        let _ = write!(
            svg,
            "<g class=\"run\"><title>run {} ({}): {} [{} .. {}]</title>\
             <line x1=\"{cx}\" y1=\"{}\" x2=\"{cx}\" y2=\"{}\" stroke=\"#36c\"/>\
             <circle cx=\"{cx}\" cy=\"{}\" r=\"3\" fill=\"#36c\"/>\
             <text x=\"{cx}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
            r.run,
            esc(&r.label),
            esc(&value(h, r.mean)),
            esc(&value(h, r.lo)),
            esc(&value(h, r.hi)),
            y(r.lo),
            y(r.hi),
            y(r.mean),
            ht - pad + 28.0,
            esc(&r.label)
        );
    }
    svg.push_str("</svg>");
    let mut o = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>plumb history: {}</title></head>\
         <body style=\"font-family:sans-serif\"><h1>{}</h1><p>[{}] {}, {} runs; change points: {}</p>{svg}<pre>",
        esc(&h.summary),
        esc(&h.summary),
        esc(&h.spec_key),
        esc(h.metric.title()),
        h.runs.len(),
        esc(&h.method)
    );
    o.push_str(&esc(&terminal(h)));
    o.push_str("</pre></body></html>\n");
    o
}
