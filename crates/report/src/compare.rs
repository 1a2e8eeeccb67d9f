//! Renderings of a comparison. Every one states the method (test, alpha, n,
//! noise band) next to the verdicts, so a pasted table cannot lose it.

use crate::table::{Align, Table};
use plumb_compare::{BudgetLine, Comparison, Point};
use plumb_samples::units::{format_change as pct, format_cpu_cost as cost, scaled, sig3};
use plumb_samples::Metric;
use plumb_stats::Verdict;
use std::fmt::Write;

/// A metric value in its unit: bits/s scaled, transactions/s as they are.
fn value(p: &Point, v: f64) -> String {
    p.metric.format(v)
}

/// The bracket of the mail format: `8.4 vs 5.9 Gbps` or `52.1k vs 48.0k tps`.
fn pair(p: &Point) -> String {
    match p.metric {
        Metric::Tps => format!("{} vs {} tps", scaled(p.a.mean, ""), scaled(p.b.mean, "")),
        Metric::Throughput => {
            format!("{} vs {} Gbps", sig3(p.a.mean / 1e9), sig3(p.b.mean / 1e9))
        }
        Metric::Latency => format!("{} vs {} ms", sig3(p.a.mean), sig3(p.b.mean)),
        Metric::Rpm => format!("{} vs {} RPM", sig3(p.a.mean), sig3(p.b.mean)),
    }
}

/// A change as a fraction in percent without a sign: `5.0 %`.
fn size(change: f64) -> String {
    format!("{:.1} %", change * 100.0)
}

/// With too few iterations, how many a side would tell the change they
/// are sized for, or that no count worth running would.
fn needed_words(p: &Point) -> String {
    let needed_for = p.needed_for.unwrap_or(f64::NAN);
    match p.needed {
        Some(n) => format!(
            "at least {n} a side needed to tell a {} change",
            size(needed_for)
        ),
        None => format!(
            "more than {} a side needed to tell a {} change at this spread",
            plumb_stats::NEEDED_MAX,
            size(needed_for)
        ),
    }
}

/// The verdict as a reader needs it: with too few iterations, how many a
/// side would do; with a side on two levels, both levels, whatever the
/// verdict.
pub(crate) fn verdict_words(p: &Point) -> String {
    let mut o = match p.verdict {
        Verdict::TooFew => format!(
            "too few iterations ({} and {}): {}",
            p.a.n,
            p.b.n,
            needed_words(p)
        ),
        v => v.to_string(),
    };
    for l in &p.bimodal {
        let _ = write!(
            o,
            "{}{} on two levels, {} ({}) and {} ({})",
            if p.verdict == Verdict::Bimodal {
                ": "
            } else {
                "; "
            },
            l.side,
            value(p, l.low),
            l.low_n,
            value(p, l.high),
            l.high_n
        );
    }
    o
}

/// How a command asks for more iterations a side: a flag of its own
/// (`--iterations`), or the `iterations` key of the experiment file it
/// runs (the `[quick]` table's under `--quick`).
#[derive(Debug, Clone, Copy)]
pub enum IterationsAsk<'a> {
    Flag,
    File {
        path: &'a std::path::Path,
        quick: bool,
    },
}

/// What to do about the points of `c` with too few iterations, in one line
/// (None when there is none): the iterations a side that the spread
/// observed needs to tell the change they were sized for (see
/// `Comparison::size_needed_for`), with the flag or key that asks for them.
/// The point needing most speaks for all.
pub fn more_iterations(c: &Comparison, ask: IterationsAsk<'_>) -> Option<String> {
    let undecided: Vec<&Point> = c
        .points
        .iter()
        .filter(|p| p.verdict == Verdict::TooFew)
        .collect();
    // None, past the cap, needs most.
    let worst = undecided
        .iter()
        .max_by_key(|p| p.needed.map_or(usize::MAX, |n| n))?;
    let (cv_a, cv_b) = worst.spread();
    let what = format!(
        "too few iterations to decide {} test point{}",
        undecided.len(),
        if undecided.len() == 1 { "" } else { "s" }
    );
    let whose = if undecided.len() == 1 {
        "its iterations".to_string()
    } else {
        format!("the iterations of {}", worst.summary)
    };
    let spread = format!(
        "{whose} spread by {} (A) and {} (B) of A's mean",
        size(cv_a),
        size(cv_b)
    );
    let change = size(worst.needed_for.unwrap_or(f64::NAN));
    let alpha = c.method.alpha;
    let power = plumb_stats::POWER * 100.0;
    let Some(n) = worst.needed else {
        return Some(format!(
            "{what}: {spread}, at which more than {} iterations a side would be needed to \
             tell a {change} change; steady the host (see plumb doctor) before measuring again",
            plumb_stats::NEEDED_MAX
        ));
    };
    let how = match ask {
        IterationsAsk::Flag => format!("measure both sides again with --iterations {n}"),
        IterationsAsk::File { path, quick: false } => format!(
            "set iterations = {n} in {} and measure both sides again",
            path.display()
        ),
        IterationsAsk::File { path, quick: true } => format!(
            "set iterations = {n} under [quick] in {} and measure both sides again",
            path.display()
        ),
    };
    Some(format!(
        "{what}: {spread}, at which {n} iterations a side tell a {change} change at \
         alpha {alpha} with {power:.0} % power; {how}"
    ))
}

/// A ratio interval; its upper end may be unbounded (A's mean not told
/// from 0).
fn ratio_interval(p: &Point) -> String {
    if p.ratio_hi.is_finite() {
        format!("{:.3} .. {:.3}", p.ratio_lo, p.ratio_hi)
    } else {
        format!("{:.3} .. unbounded", p.ratio_lo)
    }
}

/// A point's two sides, change, interval and verdict in one line.
pub(crate) fn point_line(p: &Point) -> String {
    format!(
        "A {} [{} .. {}] (n={}), B {} [{} .. {}] (n={}): change {}, ratio B/A {}, p {:.4} => {}",
        value(p, p.a.mean),
        value(p, p.a.lo),
        value(p, p.a.hi),
        p.a.n,
        value(p, p.b.mean),
        value(p, p.b.lo),
        value(p, p.b.hi),
        p.b.n,
        pct(p.change),
        ratio_interval(p),
        p.p_value,
        verdict_words(p)
    )
}

pub(crate) fn method_line(c: &Comparison) -> String {
    let decided = c.decided_on.as_ref().map_or(String::new(), |f| {
        format!("; decided on {f}, in the points that have it (the others do not count)")
    });
    format!(
        "{}; alpha {}, {:.0} % intervals, noise band ±{:.1} %{decided}",
        c.method.test,
        c.method.alpha,
        c.method.level * 100.0,
        c.method.noise_band * 100.0
    )
}

/// The kernels of both sides, each end's where they were recorded apart:
/// `kernels: A client 6.6.0, server 6.6.0; B client 6.6.0, server 6.7.0`,
/// or once when the sides ran the same: `kernels (A and B): 6.6.0`.
fn kernels_line(c: &Comparison) -> Option<String> {
    let side = |k: &Option<String>| k.clone().unwrap_or_else(|| "not recorded".into());
    if c.kernels_a.is_none() && c.kernels_b.is_none() {
        return None;
    }
    Some(if c.kernels_a == c.kernels_b {
        format!("kernels (A and B): {}", side(&c.kernels_a))
    } else {
        format!(
            "kernels: A {}; B {}",
            side(&c.kernels_a),
            side(&c.kernels_b)
        )
    })
}

fn leftovers(o: &mut String, c: &Comparison, bullet: &str) {
    for s in &c.only_a {
        let _ = writeln!(o, "{bullet}only in {}: {s}", c.a);
    }
    for s in &c.only_b {
        let _ = writeln!(o, "{bullet}only in {}: {s}", c.b);
    }
    for s in &c.too_few {
        let _ = writeln!(
            o,
            "{bullet}not compared, fewer than 2 complete iterations on a side: {s}"
        );
    }
    if c.points.is_empty() {
        let _ = writeln!(
            o,
            "{bullet}no test point was measured under both {} and {}",
            c.a, c.b
        );
    }
}

/// Budget lines worth a reader's eye: the processes always, the hosts'
/// softirq and other processes' time, and any line that moved by more than
/// 5 %.
fn budget_lines(p: &Point) -> impl Iterator<Item = &BudgetLine> {
    p.budget.iter().filter(|l| {
        !l.end.ends_with("host")
            || l.part == "softirq"
            || l.part == plumb_compare::OTHER
            || l.change.is_some_and(|c| c.abs() > 0.05)
    })
}

/// A table's unit, its lines, and how its figures are written.
type Explanation<'a> = (&'static str, Vec<&'a BudgetLine>, fn(f64) -> String);

/// The tables that explain a point: its CPU budget, and the events per
/// unit of work where either side counted any, each with its unit and how
/// its figures are written.
fn explanation(p: &Point) -> Vec<Explanation<'_>> {
    let mut tables: Vec<Explanation> = Vec::new();
    // A part of a run of parts has no budget of its own.
    if !p.budget.is_empty() {
        tables.push((p.budget_unit, budget_lines(p).collect(), cost));
    }
    if !p.events.is_empty() {
        tables.push((p.events_unit, p.events.iter().collect(), sig3));
    }
    tables
}

/// An explanation's table: per line, each side's figure, the change over
/// all iterations and whether B's differs iteration by iteration. `head`
/// names the first column and its width, `widths` those of the figures
/// and the change (0 for as wide as the cells).
fn budget_table(
    head: (&str, usize),
    lines: &[&BudgetLine],
    figure: fn(f64) -> String,
    widths: [usize; 2],
) -> Table {
    let mut table = Table::new([
        (head.0, Align::Left, head.1),
        ("A", Align::Right, widths[0]),
        ("B", Align::Right, widths[0]),
        ("change", Align::Right, widths[1]),
        ("B against A", Align::Left, 0),
    ]);
    for l in lines {
        table.row_of_class(
            l.verdict.name(),
            [
                format!("{} {}", l.end, l.part),
                figure(l.a),
                figure(l.b),
                change(l),
                l.verdict.name().to_string(),
            ],
        );
    }
    table
}

fn change(l: &BudgetLine) -> String {
    l.change.map(pct).unwrap_or_else(|| "-".into())
}

/// The comparison in `format`: one of [`crate::format::of::COMPARISON`].
pub fn render(c: &Comparison, format: crate::Format) -> Result<String, String> {
    use crate::Format::*;
    Ok(match format {
        Terminal => terminal(c),
        Markdown => markdown(c),
        Mail => mail(c),
        Csv => csv(c),
        Json => crate::format::json(c, "comparison")?,
        Openmetrics => return Err(format!("a comparison cannot be written as {format}")),
    })
}

/// Several comparisons in one format: JSON as one array, the others one
/// after another.
pub fn render_all(cs: &[Comparison], format: crate::Format) -> Result<String, String> {
    if format == crate::Format::Json {
        return crate::format::json(cs, "comparisons");
    }
    let mut out = String::new();
    for c in cs {
        out.push_str(&render(c, format)?);
        out.push('\n');
    }
    Ok(out)
}

/// The terminal rendering (the default).
pub fn terminal(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "A = {}   B = {}", c.a, c.b);
    if let Some(k) = kernels_line(c) {
        let _ = writeln!(o, "{k}");
    }
    let _ = writeln!(o, "method: {}", method_line(c));
    for p in &c.points {
        let _ = writeln!(o);
        let _ = writeln!(o, "{}  [{}]", p.summary, p.spec_key);
        for (name, s) in [("A", &p.a), ("B", &p.b)] {
            let _ = writeln!(
                o,
                "  {name} {:>14}  interval {} .. {}  n {} iterations in {} run{}",
                value(p, s.mean),
                value(p, s.lo),
                value(p, s.hi),
                s.n,
                s.runs,
                if s.runs == 1 { "" } else { "s" }
            );
        }
        let _ = writeln!(
            o,
            "  change {}   ratio B/A {}   p {:.4}   => {}",
            pct(p.change),
            ratio_interval(p),
            p.p_value,
            verdict_words(p)
        );
        for (unit, lines, figure) in explanation(p) {
            // A line's name is as long as a drop reason makes it.
            let table = budget_table((unit, 24), &lines, figure, [10, 9]);
            o.push_str(&table.terminal("  "));
        }
        if !p.limits.is_empty() {
            let _ = writeln!(o, "  sender's busy time limited by");
            o.push_str(&limits_table(p).terminal("    "));
        }
        if !p.under_load.is_empty() {
            let _ = writeln!(o, "  under load, the probes' median in ms");
            o.push_str(&load_table(p).terminal("    "));
        }
        for m in p
            .irq_moves
            .iter()
            .chain(&p.neighbours)
            .chain(&p.short_windows)
        {
            let _ = writeln!(o, "  {m}");
        }
        o.push_str(&crate::profile::movers_text(p, crate::profile::TOP, "  "));
    }
    if !c.points.is_empty() {
        let _ = writeln!(o);
    }
    differences(&mut o, c, "");
    o
}

/// What else tells the sides apart, after the points: points measured on
/// one side only, spec, build and environment differences.
fn differences(o: &mut String, c: &Comparison, bullet: &str) {
    leftovers(o, c, bullet);
    spec_diff(o, c, bullet);
    if let Some(b) = &c.builds {
        let _ = writeln!(o, "{bullet}{b}");
    }
    if let Some(m) = &c.machines {
        let _ = writeln!(o, "{bullet}{m}");
    }
    for why in &c.suspect {
        let _ = writeln!(o, "{bullet}suspect, so no answer for a bisect: {why}");
    }
    env_diff(o, c, bullet);
}

fn spec_diff(o: &mut String, c: &Comparison, bullet: &str) {
    if c.spec_diff.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{bullet}different test points, compared because each side has only one:"
    );
    for d in &c.spec_diff {
        let _ = writeln!(
            o,
            "{bullet}  spec {}: {} -> {}",
            d.key,
            d.a.as_deref().unwrap_or("(none)"),
            d.b.as_deref().unwrap_or("(none)")
        );
    }
}

fn env_diff(o: &mut String, c: &Comparison, bullet: &str) {
    for note in &c.env_unknown {
        let _ = writeln!(o, "{bullet}environment {note}");
    }
    if c.env_diff.is_empty() {
        let _ = writeln!(o, "{bullet}environment: no difference recorded");
        return;
    }
    let _ = writeln!(o, "{bullet}environment differences (A -> B):");
    for d in c.env_diff.iter().take(60) {
        let _ = writeln!(o, "{bullet}  {d}");
    }
    if c.env_diff.len() > 60 {
        let _ = writeln!(o, "{bullet}  ... and {} more", c.env_diff.len() - 60);
    }
}

/// Each test point's means, change, interval, p and verdict, a row each
/// marked with its verdict.
pub(crate) fn points_table(c: &Comparison) -> Table {
    let mut table = Table::new([
        ("test point", Align::Left, 0),
        ("A", Align::Right, 0),
        ("B", Align::Right, 0),
        ("change", Align::Right, 0),
        ("ratio interval", Align::Right, 0),
        ("p", Align::Right, 0),
        ("verdict", Align::Left, 0),
    ]);
    for p in &c.points {
        table.row_of_class(
            &p.verdict.to_string(),
            [
                p.summary.clone(),
                format!("{} (n={})", value(p, p.a.mean), p.a.n),
                format!("{} (n={})", value(p, p.b.mean), p.b.n),
                pct(p.change),
                ratio_interval(p).replace(" .. ", ".."),
                format!("{:.4}", p.p_value),
                verdict_words(p),
            ],
        );
    }
    table
}

/// What limited each end's senders on the two sides: each share of their
/// busy time, its interval over the iterations, and whether B's differs.
fn limits_table(p: &Point) -> Table {
    let mut t = Table::new([
        ("end", Align::Left, 0),
        ("limited by", Align::Left, 0),
        ("A", Align::Right, 0),
        ("B", Align::Right, 0),
        ("B against A", Align::Left, 0),
    ]);
    let share = |s: &plumb_compare::limits::Share| {
        use plumb_samples::units::format_share as of;
        format!("{} [{}, {}]", of(s.mean), of(s.lo), of(s.hi))
    };
    for l in &p.limits {
        t.row_of_class(
            l.verdict.name(),
            [
                l.end.clone(),
                l.limit.to_string(),
                share(&l.a),
                share(&l.b),
                l.verdict.name().to_string(),
            ],
        );
    }
    t
}

/// Each probe's median in each stretch of a run of parts on the two
/// sides (the mean over the iterations), the ratio's interval, and whether
/// B's probes waited longer (`higher`) or shorter.
fn load_table(p: &Point) -> Table {
    let mut t = Table::new([
        ("probe", Align::Left, 0),
        ("seconds", Align::Left, 0),
        ("running", Align::Left, 0),
        ("A", Align::Right, 0),
        ("B", Align::Right, 0),
        ("B/A interval", Align::Right, 0),
        ("B against A", Align::Left, 0),
    ]);
    let ms = |m: &plumb_compare::load::Median| sig3(m.mean_ms);
    let ratio = |r: Option<(f64, f64)>| match r {
        Some((lo, hi)) if hi.is_finite() => format!("[{}, {}]", sig3(lo), sig3(hi)),
        Some((lo, _)) => format!("[{}, inf]", sig3(lo)),
        None => "-".to_string(),
    };
    use plumb_compare::load::LoadVerdict;
    for l in &p.under_load {
        let words = l.verdict.name();
        // Higher latency is worse: classed as a worse verdict is.
        let class = match l.verdict {
            LoadVerdict::Higher => "worse",
            LoadVerdict::Lower => "better",
            v => v.name(),
        };
        t.row_of_class(
            class,
            [
                l.probe.clone(),
                l.seconds.clone(),
                l.running.clone(),
                ms(&l.a),
                ms(&l.b),
                ratio(l.ratio),
                words.to_string(),
            ],
        );
    }
    t
}

/// A Markdown table for an issue or a pull request.
pub fn markdown(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "**A** = `{}`, **B** = `{}`\n", c.a, c.b);
    if let Some(k) = kernels_line(c) {
        let _ = writeln!(o, "{k}\n");
    }
    o.push_str(&points_table(c).markdown());
    let _ = writeln!(o, "\n_Method: {}._\n", method_line(c));
    for p in &c.points {
        for (unit, lines, figure) in explanation(p) {
            let _ = writeln!(o, "{unit}, {}:\n", p.summary);
            let table = budget_table(("end", 0), &lines, figure, [0, 0]);
            let _ = writeln!(o, "{}", table.markdown());
        }
        if !p.limits.is_empty() {
            let _ = writeln!(o, "Sender's busy time limited by, {}:\n", p.summary);
            let _ = writeln!(o, "{}", limits_table(p).markdown());
        }
        if !p.under_load.is_empty() {
            let _ = writeln!(o, "Under load, the probes' median in ms, {}:\n", p.summary);
            let _ = writeln!(o, "{}", load_table(p).markdown());
        }
        let notes: Vec<&String> = p
            .irq_moves
            .iter()
            .chain(&p.neighbours)
            .chain(&p.short_windows)
            .collect();
        for m in &notes {
            let _ = writeln!(o, "- {m}");
        }
        if !notes.is_empty() {
            let _ = writeln!(o);
        }
        o.push_str(&crate::profile::movers_markdown(p, crate::profile::TOP));
    }
    differences(&mut o, c, "- ");
    o
}

/// Fixed-width plain text for a mailing list, one line per test point in the
/// form netdev readers know: `8K - [8.4 vs 5.9 Gbps] -29.8%`.
pub fn mail(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} vs {}:", c.a, c.b);
    if let Some(k) = kernels_line(c) {
        let _ = writeln!(o, "{k}");
    }
    let _ = writeln!(o);
    let w = c.points.iter().map(|p| p.summary.len()).max().unwrap_or(0);
    for p in &c.points {
        let _ = writeln!(
            o,
            "{:<w$} - [{}] {:>7}  {}",
            p.summary,
            pair(p),
            pct(p.change),
            verdict_words(p)
        );
    }
    let n: Vec<String> = c
        .points
        .iter()
        .map(|p| format!("{}/{}", p.a.n, p.b.n))
        .collect();
    let _ = writeln!(
        o,
        "\n{}.\niterations per side: {}",
        method_line(c),
        n.join(" ")
    );
    for p in c.points.iter().filter(|p| !p.profile.is_empty()) {
        let _ = writeln!(o, "\n{}:", p.summary);
        o.push_str(&crate::profile::movers_text(p, crate::profile::TOP, ""));
    }
    o
}

/// One line per test point, for spreadsheets.
pub fn csv(c: &Comparison) -> String {
    let mut o = String::from(
        "spec_key,summary,metric,unit,a_label,a_mean,a_lo,a_hi,a_n,b_label,b_mean,b_lo,b_hi,b_n,change,p_value,ratio_lo,ratio_hi,verdict,alpha,noise_band\n",
    );
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    for p in &c.points {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            p.spec_key,
            q(&p.summary),
            p.metric,
            p.unit,
            q(&c.a),
            p.a.mean,
            p.a.lo,
            p.a.hi,
            p.a.n,
            q(&c.b),
            p.b.mean,
            p.b.lo,
            p.b.hi,
            p.b.n,
            p.change,
            p.p_value,
            p.ratio_lo,
            p.ratio_hi,
            p.verdict,
            c.method.alpha,
            c.method.noise_band
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use plumb_compare::{compare, Side};
    use plumb_samples::{InterfaceCounts, IrqCounts, IrqCpu, SchedTimes};

    /// The example run, its server on a host of its own, migrated
    /// `migrations` times and taking eth0's interrupts on `cpu`.
    fn side(name: &str, migrations: u64, cpu: u32) -> Side {
        let mut r = plumb_samples::testing::example();
        r.complete = true;
        let mut it = r.iterations[0].clone();
        it.complete = true;
        it.server.hostname = "far".into();
        it.server.process.sched = Some(SchedTimes {
            migrations: Some(migrations),
            ..Default::default()
        });
        it.server.interfaces = vec![InterfaceCounts {
            name: "eth0".into(),
            irqs: vec![IrqCounts {
                irq: 40,
                name: "eth0-TxRx-0".into(),
                cpus: vec![IrqCpu { cpu, count: 10 }],
            }],
            ..Default::default()
        }];
        r.iterations = (0..3).map(|_| it.clone()).collect();
        Side::new(name, vec![r], None)
    }

    #[test]
    fn terminal_and_markdown_show_the_events_and_the_moved_interrupts() {
        let c = compare(&side("a", 4, 2), &side("b", 8, 5), &Default::default());
        let moved = "server: IRQs of eth0 moved from CPU 2 (100 %) to CPU 5 (100 %)";
        let unit = c.points[0].events_unit;
        for text in [super::terminal(&c), super::markdown(&c)] {
            assert!(text.contains(unit), "{text}");
            let line = text
                .lines()
                .find(|l| l.contains("server migrations"))
                .unwrap_or_else(|| panic!("{text}"));
            assert!(line.contains("+100.0%"), "{line}");
            assert!(
                line.trim_end()
                    .trim_end_matches('|')
                    .trim_end()
                    .ends_with("more"),
                "{line}"
            );
            assert!(text.contains(moved), "{text}");
        }
    }

    fn throughput(name: &str, xs: &[f64]) -> Side {
        let mut r = plumb_samples::testing::with_throughput(xs);
        r.complete = true;
        Side::new(name, vec![r], None)
    }

    #[test]
    fn a_verdict_names_what_it_lacks_and_the_levels_of_a_side() {
        let c = compare(
            &throughput("a", &[9e9, 9.2e9]),
            &throughput("b", &[1e9, 8e9]),
            &Default::default(),
        );
        // That spread is past any count worth running.
        assert_eq!(c.points[0].needed, None);
        let words =
            "too few iterations (2 and 2): more than 1000 a side needed to tell a 2.0 % change";
        for text in [super::terminal(&c), super::markdown(&c), super::mail(&c)] {
            assert!(text.contains(words), "{text}");
        }
        // The interval beside it holds 1, and the means' intervals stay
        // positive with two iterations.
        let p = &c.points[0];
        assert!(p.ratio_lo < 1.0 && 1.0 < p.ratio_hi);
        assert!(p.b.lo > 0.0, "{:?}", p.b);
        let a = [9e9, 9.1e9, 8.9e9, 9.05e9, 8.95e9, 9e9];
        let c = compare(
            &throughput("a", &a),
            &throughput("b", &[9e9, 1e9, 9.1e9, 8.9e9, 1.1e9, 9.05e9]),
            &Default::default(),
        );
        let text = super::terminal(&c);
        assert!(
            text.contains("=> bimodal: B on two levels, 1.05 Gbit/s (2) and 9.01 Gbit/s (4)"),
            "{text}"
        );
    }

    #[test]
    fn too_few_iterations_say_how_many_a_side_and_how_to_ask() {
        // 10.0 and 10.4 Gbit/s against 9.8 and 10.2: each side spreads by
        // √8 / 102 = 2.8 % of A's mean; 2 (1.960 + 0.842)² 0.0277² / d²
        // gives 30.2 for the 2 % noise band, 4.8 for a 5 % threshold.
        let mut c = compare(
            &throughput("a", &[10e9, 10.4e9]),
            &throughput("b", &[9.8e9, 10.2e9]),
            &Default::default(),
        );
        let words =
            "too few iterations (2 and 2): at least 31 a side needed to tell a 2.0 % change";
        assert!(
            super::terminal(&c).contains(words),
            "{}",
            super::terminal(&c)
        );
        let line = super::more_iterations(&c, super::IterationsAsk::Flag).unwrap();
        assert_eq!(
            line,
            "too few iterations to decide 1 test point: its iterations spread by 2.8 % (A) \
             and 2.8 % (B) of A's mean, at which 31 iterations a side tell a 2.0 % change at \
             alpha 0.05 with 80 % power; measure both sides again with --iterations 31"
        );
        c.size_needed_for(0.05);
        assert!(super::terminal(&c).contains("at least 5 a side needed to tell a 5.0 % change"));
        let path = std::path::Path::new("examples/s1-small-buffers.toml");
        let file = super::IterationsAsk::File { path, quick: true };
        let line = super::more_iterations(&c, file).unwrap();
        assert!(
            line.ends_with(
                "5 iterations a side tell a 5.0 % change at alpha 0.05 with 80 % power; \
                 set iterations = 5 under [quick] in examples/s1-small-buffers.toml and \
                 measure both sides again"
            ),
            "{line}"
        );
        // A spread past the cap says what to work on instead.
        let wild = compare(
            &throughput("a", &[9e9, 9.2e9]),
            &throughput("b", &[1e9, 8e9]),
            &Default::default(),
        );
        let line = super::more_iterations(&wild, super::IterationsAsk::Flag).unwrap();
        assert!(line.contains("more than 1000 iterations a side"), "{line}");
        assert!(line.contains("steady the host"), "{line}");
        // Nothing undecided for too few, nothing to say.
        let decided = compare(
            &throughput("a", &[10e9, 10.01e9, 9.99e9, 10e9]),
            &throughput("b", &[5e9, 5.01e9, 4.99e9, 5e9]),
            &Default::default(),
        );
        assert_eq!(
            super::more_iterations(&decided, super::IterationsAsk::Flag),
            None
        );
    }
}
