//! The page of one run's TCP over its window (`plumb show RUN --html`):
//! for the median iteration, each end's throughput second by second, and
//! its flows' congestion window, smoothed RTT, the peer's advertised
//! window and the data in flight over the window, from the sampled TCP
//! state; and what limited its senders, as stacked bars. The page of a
//! comparison (`plumb compare A B --html`) draws the same per test point,
//! A's and B's in the same plots.

use crate::sweep::html::{limits_bars, svg_lines, PlotLine};
use crate::table::esc;
use plumb_compare::{Comparison, Side};
use plumb_samples::units::trimmed;
use plumb_samples::{format_bits_per_sec, EndResult, FlowSeries, Iteration, RunRecord, TcpSeries};
use std::fmt::Write;

/// Flows drawn one by one in each plot, beside the mean over all.
pub const FLOWS_DRAWN: usize = 8;

/// The page, self-contained (inline SVG, no script).
pub fn run_page(rec: &RunRecord) -> String {
    let mut o = head(&format!("plumb run: {}", rec.spec.summary()));
    let _ = writeln!(
        o,
        "<p>label {}, started {}</p>",
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
        end_section(&mut o, &end.role.to_string(), &[("", end)], FLOWS_DRAWN);
    }
    limits_section(&mut o, &[("", it)]);
    o.push_str("</body></html>\n");
    o
}

/// The page of a comparison (`plumb compare A B --html`): per test point
/// the verdict, and A's and B's median iterations overlaid, as the run's
/// page draws one.
pub fn comparison_page<'a>(c: &Comparison, a: &'a Side, b: &'a Side) -> String {
    let title = format!("plumb compare: {} against {}", c.b, c.a);
    let mut o = head(&title);
    let _ = writeln!(
        o,
        "<p>A = {}, B = {}. {}</p>",
        esc(&c.a),
        esc(&c.b),
        esc(&crate::compare::method_line(c))
    );
    if c.points.is_empty() {
        o.push_str("<p>No test point was measured on both sides.</p>");
    }
    for p in &c.points {
        let _ = writeln!(o, "<h2>{}</h2>", esc(&p.summary));
        let _ = writeln!(o, "<p>{}</p>", esc(&crate::compare::point_line(p)));
        let median = |side: &'a Side, key: &str| -> Option<&'a Iteration> {
            side.runs
                .iter()
                .filter(|r| r.key == key && r.record.complete)
                .find_map(|r| crate::median_iteration(&r.record))
        };
        let (Some(ia), Some(ib)) = (median(a, &p.key_a), median(b, &p.key_b)) else {
            continue;
        };
        for (ea, eb) in [(&ia.client, &ib.client), (&ia.server, &ib.server)] {
            end_section(
                &mut o,
                &ea.role.to_string(),
                &[("A ", ea), ("B ", eb)],
                FLOWS_DRAWN_EACH,
            );
        }
        limits_section(&mut o, &[("A ", ia), ("B ", ib)]);
    }
    o.push_str("</body></html>\n");
    o
}

/// Flows drawn one by one for each side of a comparison.
pub const FLOWS_DRAWN_EACH: usize = 4;

fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}}\
         .t{{font-size:11px;fill:#333}}.a{{font-size:12px;fill:#000}}</style></head><body>\n\
         <h1>{}</h1>\n",
        esc(title),
        esc(title)
    )
}

/// The senders' limited-by shares of each source's iteration, one bar a
/// source and end.
fn limits_section(o: &mut String, sources: &[(&str, &Iteration)]) {
    let rows: Vec<(String, (f64, f64, f64))> = sources
        .iter()
        .flat_map(|(name, it)| {
            [&it.client, &it.server].into_iter().filter_map(move |e| {
                Some((format!("{name}{}", e.role), e.limited.as_ref()?.shares()?))
            })
        })
        .collect();
    if !rows.is_empty() {
        o.push_str(
            "<h2>Sender limited by</h2><p>Shares of the senders' busy time over the window.</p>",
        );
        o.push_str(&limits_bars(&rows));
    }
}

/// One end's record under a name: "" on a run's page, "A " and "B " on a
/// comparison's, where their lines share each plot.
type Source<'a> = (&'a str, &'a EndResult);

/// An end's throughput second by second and its flows' TCP over the
/// window, each source's lines in the same plots: `flows` of each drawn
/// one by one, beside the mean over all. Sources are aligned sample by
/// sample (the same spec samples at the same period), the longest one's
/// times labelling the axis.
fn end_section(o: &mut String, role: &str, sources: &[Source], flows: usize) {
    let whole = |e: &EndResult| -> Vec<plumb_samples::IntervalSample> {
        e.intervals
            .iter()
            .filter(|s| s.dt_s > 0.0)
            .cloned()
            .collect()
    };
    let rate = |s: &plumb_samples::IntervalSample| {
        (s.bytes_sent.max(s.bytes_received) as f64 * 8.0 / s.dt_s).max(0.0)
    };
    let seconds: Vec<Vec<plumb_samples::IntervalSample>> =
        sources.iter().map(|(_, e)| whole(e)).collect();
    if let Some(longest) = seconds
        .iter()
        .max_by_key(|s| s.len())
        .filter(|s| !s.is_empty())
    {
        let _ = writeln!(o, "<h2>{role}: throughput</h2>");
        let xs: Vec<String> = longest.iter().map(|s| trimmed(s.t_s)).collect();
        let lines: Vec<PlotLine> = sources
            .iter()
            .zip(&seconds)
            .filter(|(_, s)| !s.is_empty())
            .map(|((name, _), s)| {
                let points = s.iter().map(rate).collect::<Vec<_>>();
                (format!("{name}{role} bits a second"), self::points(&points))
            })
            .collect();
        o.push_str(&svg_lines(
            &xs,
            &lines,
            &|v| format_bits_per_sec(v),
            &|v| format_bits_per_sec(v),
            &[],
            "seconds into the window",
        ));
    }
    let sampled: Vec<(&str, &EndResult, &TcpSeries)> = sources
        .iter()
        .filter_map(|&(name, e)| Some((name, e, e.tcp_series.as_ref()?)))
        .collect();
    let Some(longest) = sampled.iter().map(|s| s.2).max_by_key(|s| s.t_ms.len()) else {
        return;
    };
    let xs: Vec<String> = longest
        .t_ms
        .iter()
        .map(|&t| trimmed(f64::from(t) / 1000.0))
        .collect();
    // A receiving end's flows send nothing: its own advertised window is
    // what it says of them.
    let plots: &[(&str, &str, Flow, All)] = match sampled.iter().any(|s| s.1.bytes_sent > 0) {
        true => &SENDING,
        false => &RECEIVING,
    };
    for &(what, unit, flow, all) in plots {
        let mut lines: Vec<PlotLine> = Vec::new();
        let mut said = Vec::new();
        for &(name, _, series) in &sampled {
            let before = lines.len();
            lines.extend(
                series
                    .sampled
                    .iter()
                    .take(flows)
                    .map(|f| (format!("{name}flow {}", f.flow), points(&flow(f))))
                    .filter(|(_, p)| !p.is_empty()),
            );
            let mean_line = all(series);
            if series.flows > 1 && !mean_line.is_empty() {
                lines.push((
                    format!("{name}mean over all {} flows", series.flows),
                    points(&mean_line),
                ));
            }
            if lines.len() > before {
                said.push(format!(
                    "{name}sampled every {} ms, {} of {} flows drawn one by one",
                    series.period_ms,
                    series.sampled.len().min(flows),
                    series.flows
                ));
            }
        }
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "<h2>{}</h2><p>{}.</p>",
            esc(&format!("{role}: {what}")),
            esc(&said.join("; "))
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

/// What a sending end's plots draw: per flow, and over all flows.
const SENDING: [(&str, &str, Flow, All); 4] = [
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

const RECEIVING: [(&str, &str, Flow, All); 1] = [(
    "its own advertised window",
    "bytes",
    |f| f.rcv_wnd.as_deref().map(to_f).unwrap_or_default(),
    |_| Vec::new(),
)];

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

#[cfg(test)]
mod tests {
    use plumb_compare::{compare, Side};
    use plumb_samples::SenderLimits;

    /// A side of complete runs of the schema's example, one iteration per
    /// throughput; `many_flows` gives its sender 32 flows, six of them
    /// sampled one by one, and what limited them.
    fn side(name: &str, xs: &[f64], many_flows: bool) -> Side {
        let mut r = plumb_samples::testing::with_throughput(xs);
        r.complete = true;
        for it in &mut r.iterations {
            let client = &mut it.client;
            if !many_flows {
                client.tcp_series = None;
                it.server.tcp_series = None;
                continue;
            }
            let series = client.tcp_series.as_mut().expect("the example samples");
            let flow = series.sampled[0].clone();
            series.flows = 32;
            series.sampled = (0..6)
                .map(|i| plumb_samples::FlowSeries {
                    flow: i * 5,
                    ..flow.clone()
                })
                .collect();
            client.limited = Some(SenderLimits {
                flows: 32,
                busy_s: 1.0,
                rwnd_limited_s: 0.25,
                sndbuf_limited_s: 0.125,
                slow_start_flows: 0,
            });
        }
        Side::new(name, vec![r], None)
    }

    fn page(many_flows: bool) -> String {
        let a = side("a", &[9e9, 9.1e9, 8.9e9], many_flows);
        let b = side("b", &[8e9, 8.1e9, 7.9e9], many_flows);
        let c = compare(&a, &b, &Default::default());
        assert_eq!(c.points.len(), 1);
        let page = super::comparison_page(&c, &a, &b);
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
        // Self-contained: nothing runs, nothing is fetched.
        for outside in ["<script", "href=", "src=", "http"] {
            assert!(!page.contains(outside), "{outside}: {page}");
        }
        assert!(!page.contains("NaN"), "{page}");
        assert!(page.contains("A = a, B = b."), "{page}");
        assert!(page.contains("=&gt; regression"), "{page}");
        page
    }

    #[test]
    fn a_comparison_draws_both_sides_in_each_plot() {
        let page = page(true);
        // The sender's throughput and four TCP plots, the receiver's
        // throughput and its own window, the limited-by bars.
        assert_eq!(page.matches("<svg").count(), 8, "{page}");
        for line in [
            "A client bits a second",
            "B client bits a second",
            "A server bits a second",
            "client: congestion window",
            "client: smoothed RTT",
            "client: the peer&apos;s advertised window",
            "client: data in flight",
            "server: its own advertised window",
            "A flow 0",
            "A flow 15",
            "B flow 15",
            "A mean over all 32 flows",
            "B mean over all 32 flows",
            "A sampled every 100 ms, 4 of 32 flows drawn one by one; \
             B sampled every 100 ms, 4 of 32 flows drawn one by one",
        ] {
            assert!(page.contains(line), "{line}: {page}");
        }
        assert!(!page.contains("flow 20"), "four flows a side: {page}");
        let bars = &page[page.find("Sender limited by").expect("the bars")..];
        for row in [">A client<", ">B client<"] {
            assert!(bars.contains(row), "{row}: {bars}");
        }
    }

    #[test]
    fn a_comparison_without_sampled_tcp_draws_the_throughput_only() {
        let page = page(false);
        assert_eq!(page.matches("<svg").count(), 2, "{page}");
        assert!(page.contains("A server bits a second"), "{page}");
        assert!(page.contains("B server bits a second"), "{page}");
        assert!(!page.contains("congestion window"), "{page}");
        assert!(!page.contains("Sender limited by"), "{page}");
    }
}
