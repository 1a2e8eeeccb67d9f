//! The page of one run's TCP over its window (`plumb show RUN --html`):
//! for the median iteration, each end's throughput second by second, and
//! its flows' congestion window, smoothed RTT, the peer's advertised
//! window and the data in flight over the window, from the sampled TCP
//! state; and what limited its senders, as stacked bars.

use crate::sweep::html::{limits_bars, svg_lines, PlotLine};
use crate::table::esc;
use plumb_samples::units::trimmed;
use plumb_samples::{format_bits_per_sec, EndResult, FlowSeries, RunRecord, TcpSeries};
use std::fmt::Write;

/// Flows drawn one by one in each plot, beside the mean over all.
pub const FLOWS_DRAWN: usize = 8;

/// The page, self-contained (inline SVG, no script).
pub fn run_page(rec: &RunRecord) -> String {
    let title = format!("plumb run: {}", rec.spec.summary());
    let mut o = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}}\
         .t{{font-size:11px;fill:#333}}.a{{font-size:12px;fill:#000}}</style></head><body>\n\
         <h1>{}</h1>\n<p>label {}, started {}</p>\n",
        esc(&title),
        esc(&title),
        esc(&rec.label),
        esc(&rec.started_at)
    );
    let Some(it) = crate::median_iteration(rec) else {
        o.push_str("<p>No iteration was measured.</p></body></html>\n");
        return o;
    };
    let _ = writeln!(
        o,
        "<p>Iteration #{} of {} (the median one), a window of {} s.</p>",
        it.index + 1,
        rec.iterations.len(),
        trimmed(it.window_s)
    );
    for end in [&it.client, &it.server] {
        end_section(&mut o, end);
    }
    let rows: Vec<(String, (f64, f64, f64))> = [&it.client, &it.server]
        .into_iter()
        .filter_map(|e| Some((e.role.to_string(), e.limited.as_ref()?.shares()?)))
        .collect();
    if !rows.is_empty() {
        o.push_str(
            "<h2>Sender limited by</h2><p>Shares of the senders' busy time over the window.</p>",
        );
        o.push_str(&limits_bars(&rows));
    }
    o.push_str("</body></html>\n");
    o
}

fn end_section(o: &mut String, end: &EndResult) {
    let role = end.role.to_string();
    let whole: Vec<_> = end.intervals.iter().filter(|s| s.dt_s > 0.0).collect();
    if !whole.is_empty() {
        let _ = writeln!(o, "<h2>{role}: throughput</h2>");
        let xs: Vec<String> = whole.iter().map(|s| trimmed(s.t_s)).collect();
        let rate = |s: &&plumb_samples::IntervalSample| {
            (s.bytes_sent.max(s.bytes_received) as f64 * 8.0 / s.dt_s).max(0.0)
        };
        let line: PlotLine = (
            format!("{role} bits a second"),
            whole
                .iter()
                .enumerate()
                .map(|(i, s)| (i, rate(s), rate(s), rate(s)))
                .collect(),
        );
        o.push_str(&svg_lines(
            &xs,
            &[line],
            &|v| format_bits_per_sec(v),
            &|v| format_bits_per_sec(v),
            &[],
            "seconds into the window",
        ));
    }
    let Some(series) = &end.tcp_series else {
        return;
    };
    // A receiving end's flows send nothing: its own advertised window is
    // what it says of them.
    let receiving: [(&str, &str, Flow, All); 1] = [(
        "its own advertised window",
        "bytes",
        |f| f.rcv_wnd.as_deref().map(to_f).unwrap_or_default(),
        |_| Vec::new(),
    )];
    let sending: [(&str, &str, Flow, All); 4] = [
        (
            "congestion window",
            "segments",
            |f| to_f(&f.cwnd),
            |s| mean(s, &s.all.cwnd),
        ),
        (
            "smoothed RTT",
            "us",
            |f| to_f(&f.srtt_us),
            |s| mean(s, &s.all.srtt_us),
        ),
        (
            "the peer's advertised window",
            "bytes",
            |f| f.snd_wnd.as_deref().map(to_f).unwrap_or_default(),
            |_| Vec::new(),
        ),
        (
            "data in flight",
            "bytes",
            |f| {
                f.in_flight
                    .iter()
                    .map(|&n| f64::from(n) * f64::from(f.mss))
                    .collect()
            },
            |s| mean(s, &s.all.in_flight_bytes),
        ),
    ];
    let xs: Vec<String> = series
        .t_ms
        .iter()
        .map(|&t| trimmed(f64::from(t) / 1000.0))
        .collect();
    let plots: &[(&str, &str, Flow, All)] = match end.bytes_sent > 0 {
        true => &sending,
        false => &receiving,
    };
    for &(what, unit, flow, all) in plots {
        let mut lines: Vec<PlotLine> = series
            .sampled
            .iter()
            .take(FLOWS_DRAWN)
            .map(|f| (format!("flow {}", f.flow), points(&flow(f))))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        let mean_line = all(series);
        if series.flows > 1 && !mean_line.is_empty() {
            lines.push((
                format!("mean over all {} flows", series.flows),
                points(&mean_line),
            ));
        }
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "<h2>{role}: {what}</h2><p>Sampled every {} ms; {} of {} flows drawn one by one.</p>",
            series.period_ms,
            series.sampled.len().min(FLOWS_DRAWN),
            series.flows
        );
        o.push_str(&svg_lines(
            &xs,
            &lines,
            &|v| format!("{} {unit}", trimmed(v)),
            &|v| trimmed(v),
            &[],
            "seconds into the window",
        ));
    }
}

type Flow = fn(&FlowSeries) -> Vec<f64>;
type All = fn(&TcpSeries) -> Vec<f64>;

fn to_f<T: Copy + Into<f64>>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&x| x.into()).collect()
}

/// A sum over all flows as their mean.
fn mean(s: &TcpSeries, sums: &[u64]) -> Vec<f64> {
    let n = f64::from(s.flows.max(1));
    sums.iter().map(|&v| v as f64 / n).collect()
}

fn points(v: &[f64]) -> Vec<(usize, f64, f64, f64)> {
    v.iter().enumerate().map(|(i, &x)| (i, x, x, x)).collect()
}
