//! The page of one run's TCP over its window (`plumb show RUN --html`):
//! for the median iteration, each end's throughput, and its flows'
//! congestion window, smoothed RTT, the peer's advertised window and the
//! data in flight over the window, from the sampled TCP state, as the
//! mean over the flows with their spread around it (or each flow, with
//! `--per-flow`); and what limited its senders, as stacked bars. The page
//! of a comparison (`plumb compare A B --html`) draws the same per test
//! point, A's and B's in the same plots.

mod load;
mod plot;

use crate::sweep::html::limits_bars;
use crate::table::esc;
use plot::{Quantity, Trace};
use plumb_compare::{Comparison, Side};
use plumb_samples::units::trimmed;
use plumb_samples::{EndResult, FlowSeries, IntervalSample, Iteration, RunRecord, TcpSeries};
use std::fmt::Write;

/// How a page draws an end's flows.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageOptions {
    /// Each sampled flow as its own thin line beside the mean, rather
    /// than their spread as a band.
    pub per_flow: bool,
}

/// The page, self-contained (inline SVG, no script).
pub fn run_page(rec: &RunRecord, opts: PageOptions) -> String {
    let mut o = head(&format!("plumb run: {}", rec.spec.summary()), opts);
    let _ = writeln!(
        o,
        "<p>label {}, started {}</p>",
        esc(&rec.label),
        esc(&rec.started_at)
    );
    for note in rec.emulation_notes() {
        let _ = writeln!(o, "<p class=\"none\">{}</p>", esc(&note));
    }
    let Some(it) = crate::median_iteration(rec) else {
        o.push_str("<p class=\"none\">No iteration was measured.</p></body></html>\n");
        return o;
    };
    let _ = writeln!(
        o,
        "<p>Iteration #{} of {} (the median one), a window of {} s.</p>",
        it.index + 1,
        rec.iterations.len(),
        trimmed(it.window_s)
    );
    let sources = [Source {
        side: 0,
        name: "",
        it,
    }];
    load::section(&mut o, &sources);
    for end in ENDS {
        end_section(&mut o, &sources, end, opts);
    }
    limits_section(&mut o, &sources);
    o.push_str("</body></html>\n");
    o
}

/// The page of a comparison (`plumb compare A B --html`): per test point
/// the verdict, and A's and B's median iterations overlaid, as the run's
/// page draws one. Without a point in common, each side's points.
pub fn comparison_page(c: &Comparison, a: &Side, b: &Side, opts: PageOptions) -> String {
    let title = format!("plumb compare: {} against {}", c.b, c.a);
    let mut o = head(&title, opts);
    let _ = writeln!(
        o,
        "<p>A = {}, B = {}. {}</p>",
        esc(&c.a),
        esc(&c.b),
        esc(&crate::compare::method_line(c))
    );
    // Where the sides ran, and the runs a busy host spoiled, before any
    // figure is read.
    let suspect = c.suspect.iter().map(|w| format!("suspect: {w}"));
    for line in c.machines.iter().cloned().chain(suspect) {
        let _ = writeln!(o, "<p class=\"none\">{}</p>", esc(&line));
    }
    if c.points.is_empty() {
        no_common_point(&mut o, a, b);
    }
    for p in &c.points {
        let _ = writeln!(o, "<h2>{}</h2>", esc(&p.summary));
        let _ = writeln!(o, "<p>{}</p>", esc(&crate::compare::point_line(p)));
        fn median<'s>(side: &'s Side, key: &str) -> Option<&'s Iteration> {
            side.runs
                .iter()
                .filter(|r| r.key == key && r.record.complete)
                .find_map(|r| crate::median_iteration(&r.record))
        }
        let its = [("A", median(a, &p.key_a)), ("B", median(b, &p.key_b))];
        let mut sources = Vec::new();
        for (side, (name, it)) in its.into_iter().enumerate() {
            match it {
                Some(it) => sources.push(Source { side, name, it }),
                None => {
                    let _ = writeln!(
                        o,
                        "<p class=\"none\">{}</p>",
                        esc(&said(name, "no complete run of this point to draw"))
                    );
                }
            }
        }
        if sources.is_empty() {
            continue;
        }
        load::section(&mut o, &sources);
        for end in ENDS {
            end_section(&mut o, &sources, end, opts);
        }
        limits_section(&mut o, &sources);
    }
    o.push_str("</body></html>\n");
    o
}

/// Each side's test points, where the two have none in common: what was
/// run on each, so that the reader sees why nothing is drawn.
fn no_common_point(o: &mut String, a: &Side, b: &Side) {
    o.push_str(
        "<p class=\"none\">No test point was measured on both sides: nothing to draw side by side. \
         Each side's points follow.</p>\n",
    );
    for (tag, side) in [("A", a), ("B", b)] {
        // A point's runs, in the order the side holds them.
        let mut points: Vec<(&str, String, usize)> = Vec::new();
        for r in &side.runs {
            match points.iter_mut().find(|p| p.0 == r.key) {
                Some(p) => p.2 += 1,
                None => points.push((&r.key, r.record.spec.summary(), 1)),
            }
        }
        let _ = writeln!(
            o,
            "<h2>{tag} = {}: {} point{}</h2>",
            esc(&side.name),
            points.len(),
            if points.len() == 1 { "" } else { "s" }
        );
        if points.is_empty() {
            o.push_str("<p class=\"none\">No run.</p>\n");
            continue;
        }
        o.push_str("<ul>");
        for (key, summary, runs) in &points {
            let _ = write!(
                o,
                "<li>{} ({runs} run{}), key <code>{}</code></li>",
                esc(summary),
                if *runs == 1 { "" } else { "s" },
                esc(key)
            );
        }
        o.push_str("</ul>\n");
    }
}

fn head(title: &str, opts: PageOptions) -> String {
    let how = if opts.per_flow {
        "Each line is the mean over an end's flows, each thin line one of its flows sampled one by one."
    } else {
        "Each line is the mean over an end's flows; the band around it spans the lowest to the \
         highest of its flows sampled one by one (--per-flow draws them one by one)."
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}}\
         .t{{font-size:11px;fill:#333}}.a{{font-size:12px;fill:#000}}\
         .none{{color:#666;font-style:italic}}</style></head><body>\n\
         <h1>{}</h1>\n<p>{}</p>\n",
        esc(title),
        esc(title),
        esc(how)
    )
}

/// One side's median iteration: the side's index (its colour) and its
/// name, "" on a run's page, "A" and "B" on a comparison's.
struct Source<'a> {
    side: usize,
    name: &'a str,
    it: &'a Iteration,
}

/// The two ends of an iteration, the client's first.
const ENDS: [fn(&Iteration) -> &EndResult; 2] = [|it| &it.client, |it| &it.server];

/// `what` of the source called `name`: "A mean over all 2 flows".
fn named(name: &str, what: &str) -> String {
    match name {
        "" => what.to_string(),
        _ => format!("{name} {what}"),
    }
}

/// A sentence of what the source called `name` lacks.
fn said(name: &str, what: &str) -> String {
    match name {
        "" => {
            let mut c = what.chars();
            let first = c.next().map(|f| f.to_uppercase().collect::<String>());
            format!("{}{}.", first.unwrap_or_default(), c.as_str())
        }
        _ => format!("{name}: {what}."),
    }
}

/// The senders' limited-by shares of each source's iteration, one bar a
/// source and end.
fn limits_section(o: &mut String, sources: &[Source]) {
    let rows: Vec<(String, (f64, f64, f64))> = sources
        .iter()
        .flat_map(|s| {
            ENDS.into_iter().filter_map(move |end| {
                let e = end(s.it);
                Some((
                    named(s.name, &e.role.to_string()),
                    e.limited.as_ref()?.shares()?,
                ))
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

/// A plot under its heading of `what` in `q`, with `marks` across it; in
/// its place a line saying why, where no source has anything to draw;
/// above it, which sources have not.
fn plot_or_say(
    o: &mut String,
    heading: &str,
    intro: &str,
    (what, q): (&str, Quantity),
    traces: &[Trace],
    missing: &[String],
    marks: &[plot::Mark],
) {
    let _ = writeln!(o, "<h2>{}</h2>", esc(heading));
    if traces.is_empty() {
        let _ = writeln!(o, "<p class=\"none\">{}</p>", esc(&missing.join(" ")));
        return;
    }
    if !intro.is_empty() {
        let _ = writeln!(o, "<p>{}</p>", esc(intro));
    }
    for m in missing {
        let _ = writeln!(o, "<p class=\"none\">{}</p>", esc(m));
    }
    o.push_str(&plot::svg(what, q, traces, marks));
    o.push('\n');
}

/// An interval's rate, bits a second, the way the end moved its bytes.
fn rate(s: &IntervalSample) -> f64 {
    (s.bytes_sent.max(s.bytes_received) as f64 * 8.0 / s.dt_s).max(0.0)
}

/// An end's throughput interval by interval and its flows' TCP over the
/// window, each source's in the same plots.
fn end_section(
    o: &mut String,
    sources: &[Source],
    end: fn(&Iteration) -> &EndResult,
    opts: PageOptions,
) {
    let role = end(sources[0].it).role.to_string();
    let mut traces = Vec::new();
    let mut missing = Vec::new();
    for s in sources {
        // Each interval's rate at its middle: it is the rate over it.
        let mean: Vec<(f64, f64)> = end(s.it)
            .intervals
            .iter()
            .filter(|v| v.dt_s > 0.0)
            .map(|v| (v.t_s - v.dt_s / 2.0, rate(v)))
            .collect();
        if mean.is_empty() {
            missing.push(said(s.name, "no interval was recorded at this end"));
            continue;
        }
        traces.push(Trace {
            side: s.side,
            window_s: s.it.window_s,
            name: named(s.name, &format!("{role} throughput")),
            mean,
            ..Default::default()
        });
    }
    plot_or_say(
        o,
        &format!("{role}: throughput"),
        "",
        ("throughput", Quantity::Rate),
        &traces,
        &missing,
        &[],
    );

    let sampled: Vec<Option<&TcpSeries>> = sources
        .iter()
        .map(|s| end(s.it).tcp_series.as_ref())
        .collect();
    if sampled.iter().all(Option::is_none) {
        let _ = writeln!(
            o,
            "<h2>{}</h2><p class=\"none\">No TCP state was sampled at this end{}.</p>",
            esc(&format!("{role}: TCP state")),
            if sources.len() > 1 {
                " on either side"
            } else {
                ""
            }
        );
        return;
    }
    // A receiving end's flows send nothing: its own advertised window is
    // what it says of them.
    let sending = sources
        .iter()
        .zip(&sampled)
        .any(|(s, t)| t.is_some() && end(s.it).bytes_sent > 0);
    let figures: &[Figure] = if sending { &SENDING } else { &RECEIVING };
    for fig in figures {
        let mut traces = Vec::new();
        let mut missing = Vec::new();
        let mut intro = Vec::new();
        for (s, series) in sources.iter().zip(&sampled) {
            let Some(series) = series else {
                missing.push(said(s.name, "no TCP state was sampled at this end"));
                continue;
            };
            match trace(s, series, fig, opts) {
                Some(t) => {
                    let flows = match (series.flows, series.sampled.len()) {
                        (1, _) => "1 flow".to_string(),
                        (n, k) if k == n as usize => format!("{n} flows"),
                        (n, k) => format!("{n} flows ({k} of them one by one)"),
                    };
                    intro.push(named(
                        s.name,
                        &format!("sampled every {} ms, {flows}", series.period_ms),
                    ));
                    traces.push(t);
                }
                None => missing.push(said(s.name, "the kernel did not report it")),
            }
        }
        let mut intro = intro.join("; ");
        if let Some(first) = intro.get(..1) {
            intro = format!("{}{}.", first.to_uppercase(), &intro[1..]);
        }
        plot_or_say(
            o,
            &format!("{role}: {}", fig.what),
            &intro,
            (fig.what, fig.q),
            &traces,
            &missing,
            &[],
        );
    }
}

/// One source's lines of a figure: the mean over its flows, and their
/// spread as a band or, with `--per-flow`, each sampled flow; None where
/// none of its flows reported the figure.
fn trace(s: &Source, series: &TcpSeries, fig: &Figure, opts: PageOptions) -> Option<Trace> {
    let t: Vec<f64> = series
        .t_ms
        .iter()
        .map(|&ms| f64::from(ms) / 1000.0)
        .collect();
    let flows: Vec<(u32, Vec<f64>)> = series
        .sampled
        .iter()
        .map(|f| (f.flow, (fig.flow)(f)))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let at = |i: usize| flows.iter().filter_map(move |(_, v)| v.get(i).copied());
    let over_all = (fig.all)(series);
    let (mean, of_all) = if !over_all.is_empty() {
        (over_all, true)
    } else if !flows.is_empty() {
        // The sampled flows' own mean, where the end keeps no sum of all.
        let mean = (0..t.len())
            .map(|i| {
                let (n, sum) = at(i).fold((0usize, 0.0), |(n, s), v| (n + 1, s + v));
                if n == 0 {
                    f64::NAN
                } else {
                    sum / n as f64
                }
            })
            .collect();
        (mean, flows.len() == series.flows as usize)
    } else {
        return None;
    };
    let sampled_n = flows.len();
    let of = |n: usize, all: bool| match (n, all) {
        (1, _) => "the one flow".to_string(),
        (n, true) => format!("all {n} flows"),
        (n, false) => format!("the {n} flows sampled"),
    };
    let name = match (series.flows, of_all) {
        (1, _) => named(s.name, "the one flow"),
        (n, true) => named(s.name, &format!("mean over all {n} flows")),
        (_, false) => named(s.name, &format!("mean over {}", of(sampled_n, false))),
    };
    let mut tr = Trace {
        side: s.side,
        window_s: s.it.window_s,
        name,
        mean: t.iter().copied().zip(mean).collect(),
        ..Default::default()
    };
    let every = sampled_n == series.flows as usize;
    if opts.per_flow && sampled_n > 1 {
        tr.flows = flows
            .iter()
            .map(|(id, v)| {
                (
                    named(s.name, &format!("flow {id}")),
                    t.iter().copied().zip(v.iter().copied()).collect(),
                )
            })
            .collect();
        tr.flows_name = named(
            s.name,
            &match every {
                true => format!("each of its {sampled_n} flows"),
                false => format!(
                    "each of the {sampled_n} flows sampled (of {})",
                    series.flows
                ),
            },
        );
    } else if sampled_n > 1 {
        tr.band = t
            .iter()
            .enumerate()
            .filter_map(|(i, &ti)| {
                let lo = at(i).fold(f64::INFINITY, f64::min);
                let hi = at(i).fold(f64::NEG_INFINITY, f64::max);
                (lo <= hi).then_some((ti, lo, hi))
            })
            .collect();
        tr.band_name = named(
            s.name,
            &format!("lowest to highest of {}", of(sampled_n, every)),
        );
    }
    Some(tr)
}

/// One plot of an end's flows: what it draws, in what, each sampled
/// flow's values and the mean over all flows (empty where the end keeps
/// no sum of all: then the sampled flows' mean is drawn).
struct Figure {
    what: &'static str,
    q: Quantity,
    flow: fn(&FlowSeries) -> Vec<f64>,
    all: fn(&TcpSeries) -> Vec<f64>,
}

/// What a sending end's plots draw.
const SENDING: [Figure; 4] = [
    Figure {
        what: "congestion window",
        q: Quantity::Count("segments"),
        flow: |f| to_f(&f.cwnd),
        all: |s| mean(s, &s.all.cwnd),
    },
    Figure {
        what: "smoothed RTT",
        q: Quantity::Micros,
        flow: |f| to_f(&f.srtt_us),
        all: |s| mean(s, &s.all.srtt_us),
    },
    Figure {
        what: "the peer's advertised window",
        q: Quantity::Bytes,
        flow: |f| f.snd_wnd.as_deref().map(to_f).unwrap_or_default(),
        all: |_| Vec::new(),
    },
    Figure {
        what: "data in flight",
        q: Quantity::Bytes,
        flow: |f| {
            f.in_flight
                .iter()
                .map(|&n| f64::from(n) * f64::from(f.mss))
                .collect()
        },
        all: |s| mean(s, &s.all.in_flight_bytes),
    },
];

const RECEIVING: [Figure; 1] = [Figure {
    what: "its own advertised window",
    q: Quantity::Bytes,
    flow: |f| f.rcv_wnd.as_deref().map(to_f).unwrap_or_default(),
    all: |_| Vec::new(),
}];

fn to_f<T: Copy + Into<f64>>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&x| x.into()).collect()
}

/// A sum over all flows as their mean.
fn mean(s: &TcpSeries, sums: &[u64]) -> Vec<f64> {
    let n = f64::from(s.flows.max(1));
    sums.iter().map(|&v| v as f64 / n).collect()
}

#[cfg(test)]
mod tests {
    use super::PageOptions;
    use plumb_compare::{compare, Side};
    use plumb_samples::{RunRecord, SenderLimits};

    /// Complete runs of the schema's example, one iteration per
    /// throughput; `many_flows` gives its sender 32 flows, six of them
    /// sampled one by one (each a little larger than the one before), and
    /// what limited them; without, no end sampled its TCP.
    fn record(xs: &[f64], many_flows: bool) -> RunRecord {
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
            // The sums over all 32 flows, as if each were like the
            // example's one.
            for sums in [
                &mut series.all.cwnd,
                &mut series.all.srtt_us,
                &mut series.all.in_flight_bytes,
            ] {
                for v in sums.iter_mut() {
                    *v *= 32;
                }
            }
            series.flows = 32;
            series.sampled = (0..6u32)
                .map(|i| plumb_samples::FlowSeries {
                    flow: i * 5,
                    cwnd: flow.cwnd.iter().map(|c| c + 2 * i).collect(),
                    srtt_us: flow.srtt_us.iter().map(|c| c + 20 * i).collect(),
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
        r
    }

    fn side(name: &str, xs: &[f64], many_flows: bool) -> Side {
        Side::new(name, vec![record(xs, many_flows)], None)
    }

    /// The comparison's page, checked for what every page must be.
    fn checked(a: &Side, b: &Side, opts: PageOptions) -> String {
        let c = compare(a, b, &Default::default());
        let page = super::comparison_page(&c, a, b, opts);
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
        // Self-contained: nothing runs, nothing is fetched.
        for outside in ["<script", "href=", "src=", "http"] {
            assert!(!page.contains(outside), "{outside}: {page}");
        }
        assert!(!page.contains("NaN"), "{page}");
        assert!(page.contains("A = a, B = b."), "{page}");
        page
    }

    fn page(many_a: bool, many_b: bool, opts: PageOptions) -> String {
        let a = side("a", &[9e9, 9.1e9, 8.9e9], many_a);
        let b = side("b", &[8e9, 8.1e9, 7.9e9], many_b);
        let page = checked(&a, &b, opts);
        assert!(page.contains("=&gt; regression"), "{page}");
        page
    }

    /// Each plot over the window, under its heading.
    fn plots(page: &str) -> Vec<(&str, &str)> {
        page.split("<h2>")
            .skip(1)
            .filter_map(|sec| {
                let heading = &sec[..sec.find("</h2>")?];
                let svg = &sec[sec.find("<svg")?..];
                let svg = &svg[..svg.find("</svg>")?];
                svg.contains("seconds into the window")
                    .then_some((heading, svg))
            })
            .collect()
    }

    /// The texts of an SVG's elements of class `class`.
    fn texts<'p>(svg: &'p str, class: &str) -> Vec<&'p str> {
        let open = format!("class=\"{class}\">");
        svg.split(open.as_str())
            .skip(1)
            .map(|t| &t[..t.find('<').unwrap()])
            .collect()
    }

    #[test]
    fn a_comparison_of_guests_under_tcg_says_what_the_figures_measure_and_which_run_is_suspect() {
        let guest = |name: &str, xs: &[f64], suspect: Option<&str>| {
            let mut r = record(xs, false);
            r.spec.machine = Some(plumb_spec::Machine {
                accel: "tcg".into(),
                vcpus: 2,
                memory_mib: 1024,
                link: None,
            });
            r.spec_key = r.spec.key();
            r.suspect = suspect.map(str::to_string);
            Side::new(name, vec![r], None)
        };
        let a = guest("a", &[9e9, 9.1e9, 8.9e9], None);
        let b = guest(
            "b",
            &[8e9, 8.1e9, 7.9e9],
            Some("other processes took 41.0 %"),
        );
        let page = checked(&a, &b, PageOptions::default());
        assert!(
            page.contains("measure QEMU&apos;s emulator as well as the kernel"),
            "{page}"
        );
        assert!(page.contains("suspect: b ("), "{page}");
        assert!(page.contains("other processes took 41.0 %"), "{page}");
    }

    #[test]
    fn a_comparison_draws_each_sides_mean_with_its_flows_spread() {
        let page = page(true, true, PageOptions::default());
        // The sender's throughput and four TCP plots, the receiver's
        // throughput and its own window, the limited-by bars.
        assert_eq!(page.matches("<svg").count(), 8, "{page}");
        for line in [
            "A client throughput",
            "B client throughput",
            "A server throughput",
            "client: congestion window",
            "client: smoothed RTT",
            "client: the peer&apos;s advertised window",
            "client: data in flight",
            "server: its own advertised window",
            "A mean over all 32 flows",
            "B mean over all 32 flows",
            "A lowest to highest of the 6 flows sampled",
            "B lowest to highest of the 6 flows sampled",
            // The peer's window is kept per sampled flow only.
            "A mean over the 6 flows sampled",
            "A sampled every 100 ms, 32 flows (6 of them one by one); \
             B sampled every 100 ms, 32 flows (6 of them one by one).",
        ] {
            assert!(page.contains(line), "{line}: {page}");
        }
        // A band a side in each of the sender's four TCP plots, and no
        // flow drawn one by one.
        assert_eq!(page.matches("class=\"band\"").count(), 8, "{page}");
        assert!(!page.contains("class=\"flow\""), "{page}");
        let bars = &page[page.find("Sender limited by").expect("the bars")..];
        for row in [">A client<", ">B client<"] {
            assert!(bars.contains(row), "{row}: {bars}");
        }
    }

    #[test]
    fn every_axis_carries_its_unit_and_time_ticks_are_round_inside_the_window() {
        let page = page(true, true, PageOptions::default());
        let plots = plots(&page);
        assert_eq!(plots.len(), 7, "{page}");
        // The example's window is 10.000412 s.
        for (heading, svg) in plots {
            let unit = match heading {
                h if h.ends_with("throughput") => "bit/s",
                h if h.ends_with("smoothed RTT") => "µs",
                h if h.ends_with("congestion window") => "",
                _ => "B",
            };
            let ys = texts(svg, "t y");
            assert!(ys.len() >= 3, "{heading}: {svg}");
            for y in &ys {
                assert!(y.ends_with(unit), "{heading}: {y} in {ys:?}");
                // Counts are plain numbers, their noun in the title.
                if unit.is_empty() {
                    assert!(y.parse::<u32>().is_ok(), "{heading}: {y}");
                }
            }
            if unit.is_empty() {
                assert!(texts(svg, "a").contains(&"congestion window (segments)"));
            }
            let xs: Vec<f64> = texts(svg, "t x")
                .iter()
                .map(|x| x.parse().unwrap())
                .collect();
            assert_eq!(xs, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0], "{heading}");
            assert!(texts(svg, "a").contains(&"seconds into the window"));
            // No point right of the axis's end at the window's close.
            for path in svg.split(" d=\"").skip(1) {
                for xy in path[..path.find('"').unwrap()].split(['M', 'L']) {
                    let Some((x, _)) = xy.trim().split_once(',') else {
                        continue;
                    };
                    let x: f64 = x.parse().unwrap();
                    assert!((96.0..=736.0 + 0.05).contains(&x), "{heading}: {x}");
                }
            }
        }
    }

    #[test]
    fn per_flow_draws_each_sampled_flow_instead_of_the_band() {
        let page = page(true, true, PageOptions { per_flow: true });
        // Six flows a side in each of the sender's four TCP plots.
        assert_eq!(page.matches("class=\"flow\"").count(), 48, "{page}");
        assert!(!page.contains("class=\"band\""), "{page}");
        for line in [
            "<title>A flow 25</title>",
            "<title>B flow 0</title>",
            "A each of the 6 flows sampled (of 32)",
            "A mean over all 32 flows",
        ] {
            assert!(page.contains(line), "{line}: {page}");
        }
    }

    #[test]
    fn a_side_without_a_series_says_so_in_its_place() {
        let page = page(true, false, PageOptions::default());
        // A's plots are drawn; each says B has nothing in it.
        assert_eq!(page.matches("<svg").count(), 8, "{page}");
        assert_eq!(
            page.matches("B: no TCP state was sampled at this end.")
                .count(),
            5,
            "{page}"
        );
        let page = self::page(false, false, PageOptions::default());
        assert_eq!(page.matches("<svg").count(), 2, "{page}");
        assert!(page.contains("A server throughput"), "{page}");
        assert!(page.contains("B server throughput"), "{page}");
        assert!(!page.contains("congestion window"), "{page}");
        assert!(!page.contains("Sender limited by"), "{page}");
        for end in ["client", "server"] {
            let said = format!(
                "<h2>{end}: TCP state</h2><p class=\"none\">No TCP state was sampled at this end on either side.</p>"
            );
            assert!(page.contains(&said), "{said}: {page}");
        }
    }

    #[test]
    fn a_comparison_without_a_common_point_lists_each_sides_points() {
        let a = side("a", &[9e9, 9.1e9], true);
        // B's two points (two single ones would be weighed against each
        // other), neither of them A's.
        let with_flows = |n: u32| {
            let mut r = record(&[8e9, 8.1e9], true);
            r.spec.flows = n;
            r.spec_key = r.spec.key();
            r
        };
        let (seven, eight) = (with_flows(7), with_flows(8));
        let b = Side::new("b", vec![seven.clone(), eight.clone(), seven.clone()], None);
        let page = checked(&a, &b, PageOptions::default());
        assert!(!page.contains("<svg"), "{page}");
        for line in [
            "No test point was measured on both sides",
            "A = a: 1 point</h2>",
            "B = b: 2 points</h2>",
        ] {
            assert!(page.contains(line), "{line}: {page}");
        }
        let item = |rec: &RunRecord, runs: &str| {
            format!(
                "<li>{} ({runs}), key <code>{}</code></li>",
                crate::table::esc(&rec.spec.summary()),
                crate::table::esc(&rec.spec_key)
            )
        };
        let items = [
            item(&a.runs[0].record, "1 run"),
            item(&seven, "2 runs"),
            item(&eight, "1 run"),
        ];
        let at: Vec<usize> = items
            .iter()
            .map(|i| {
                page.find(i.as_str())
                    .unwrap_or_else(|| panic!("{i}: {page}"))
            })
            .collect();
        assert!(at.is_sorted(), "in the sides' order: {page}");
        assert!(
            page.contains("7 flows") && page.contains("8 flows"),
            "{page}"
        );
    }

    #[test]
    fn a_runs_page_draws_nothing_after_its_window_closes() {
        let mut r = record(&[9e9], true);
        // The sampler's close falls after a window shortened to 0.85 s.
        r.iterations[0].window_s = 0.85;
        let page = super::run_page(&r, PageOptions::default());
        let plots = plots(&page);
        assert!(plots.len() >= 5, "{page}");
        for (heading, svg) in plots {
            let xs: Vec<f64> = texts(svg, "t x")
                .iter()
                .map(|x| x.parse().unwrap())
                .collect();
            assert_eq!(
                xs,
                [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
                "{heading}"
            );
            let mean = &svg[svg.find("class=\"mean\" d=\"").unwrap()..];
            let mean = &mean[..mean.find("\" fill").unwrap()];
            // Of the seconds, only the first's middle is inside; of the
            // samples, 0 .. 821 ms are, 901 and 1000 ms are not (998 ms
            // neither at the receiver).
            let inside = if heading.ends_with("throughput") {
                1
            } else {
                9
            };
            assert_eq!(mean.matches(',').count(), inside, "{heading}: {mean}");
        }
    }
}
