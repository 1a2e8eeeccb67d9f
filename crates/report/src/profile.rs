//! Kernel profiles rendered: the top functions of a run's ends (`plumb
//! show --profile`), the functions that moved between two sides (`plumb
//! compare --profile`), and both as flame graphs on one HTML page.

use crate::flame::{diff_flame_svg, flame_svg, Stack};
use crate::table::{esc, Align, Table};
use plumb_compare::profile::{folded, EndProfiles, FunctionChange, Part};
use plumb_compare::{Comparison, Point};
use plumb_samples::units::{format_change as pct, sig3};
use plumb_samples::{FunctionTime, Iteration, Role, RunRecord};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Functions listed per end and table.
pub const TOP: usize = 15;

/// What the event says of the machine, for every output to state.
fn event_words(event: &str) -> String {
    match event {
        "cycles" => "cycles (the CPU's PMU)".into(),
        "cpu-clock" => "cpu-clock (a timer: this CPU shows no PMU)".into(),
        e => e.into(),
    }
}

fn end_name(end: Role) -> &'static str {
    match end {
        Role::Client => "client",
        Role::Server => "server",
    }
}

fn profiled(rec: &RunRecord, end: Role) -> Vec<&Iteration> {
    rec.iterations
        .iter()
        .filter(|i| plumb_compare::profile::end_profile(i, end).is_some())
        .collect()
}

/// Each end's top functions by self and by total time, in CPU-seconds per
/// iteration and per unit of work.
pub fn run_profile(rec: &RunRecord, top: usize) -> String {
    let metric = rec.metric();
    let (unit, scale) = metric.profile_unit();
    let mut o = String::new();
    for end in [Role::Client, Role::Server] {
        let its = profiled(rec, end);
        let Some(first) = its
            .first()
            .and_then(|i| plumb_compare::profile::end_profile(i, end))
        else {
            continue;
        };
        let n = its.len() as f64;
        let mut functions: BTreeMap<String, FunctionTime> = BTreeMap::new();
        let (mut samples, mut lost, mut process, mut irq, mut other, mut idle) =
            (0, 0, 0.0, 0.0, 0.0, 0.0);
        let (mut charged, mut sampled_charged) = (0.0, 0.0);
        let mut work = 0.0;
        for it in &its {
            let p = plumb_compare::profile::end_profile(it, end).expect("profiled");
            samples += p.samples;
            lost += p.lost;
            process += p.process_s;
            irq += p.irq_s;
            other += p.other_s;
            idle += p.idle_s;
            work += metric.work(it);
            let e = match end {
                Role::Client => &it.client,
                Role::Server => &it.server,
            };
            charged += e.process.user_s + e.process.system_s;
            sampled_charged += p.charged_s(e.irq_time_accounting);
            for (f, t) in p.functions() {
                let e = functions.entry(f).or_default();
                e.self_s += t.self_s;
                e.total_s += t.total_s;
            }
        }
        let _ = writeln!(
            o,
            "{} profile: {} at {} Hz, {} iteration{}, {samples} samples, {lost} lost",
            end_name(end),
            event_words(&first.event),
            first.freq_hz,
            its.len(),
            if its.len() == 1 { "" } else { "s" }
        );
        let _ = writeln!(
            o,
            "  CPU-seconds per iteration: process {}, interrupts on its CPUs {}; \
             elsewhere on the host: other processes {}, idle {}",
            sig3(process / n),
            sig3(irq / n),
            sig3(other / n),
            sig3(idle / n)
        );
        if charged > 0.0 {
            let _ = writeln!(
                o,
                "  the samples of the process cover {:.0} % of the CPU time /proc charged to it{}",
                sampled_charged / charged * 100.0,
                if first.event == "cpu-clock" {
                    " (a timer cannot sample where interrupts are off: that time shows in the \
                     function that turns them back on, and a CPU that sleeps often is sampled less)"
                } else {
                    ""
                }
            );
        }
        if lost > 0 {
            let _ = writeln!(
                o,
                "  {lost} samples were lost to full rings: raise --profile-ring or lower --profile-freq"
            );
        }
        let end_s = process + irq;
        for (title, key) in [
            (
                "by self",
                (|t: &FunctionTime| t.self_s) as fn(&FunctionTime) -> f64,
            ),
            ("by total", |t: &FunctionTime| t.total_s),
        ] {
            let mut rows: Vec<(&String, f64)> =
                functions.iter().map(|(f, t)| (f, key(t))).collect();
            rows.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            let _ = writeln!(
                o,
                "  top {title:<40} {:>9} {:>9} {:>7}",
                "CPU-s", unit, "share"
            );
            for (f, s) in rows.into_iter().take(top) {
                let per_work = if work > 0.0 { s / work * scale } else { 0.0 };
                let share = if end_s > 0.0 { s / end_s } else { 0.0 };
                let _ = writeln!(
                    o,
                    "    {:<44} {:>9} {:>9} {:>6.1} %",
                    clip(f, 44),
                    sig3(s / n),
                    sig3(per_work),
                    share * 100.0
                );
            }
        }
    }
    if o.is_empty() {
        o.push_str("no profile in this run: run it with --profile\n");
    }
    o
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(n - 2).collect();
        c.push_str("..");
        c
    }
}

fn change_of(f: &FunctionChange) -> String {
    f.change.map(pct).unwrap_or_else(|| "new".into())
}

/// A mover's figures as text: A, B, the change, the interval of B - A,
/// p, q and the verdict.
struct Row {
    a: String,
    b: String,
    change: String,
    interval: String,
    p: String,
    q: String,
    verdict: &'static str,
}

impl Row {
    fn of(f: &FunctionChange) -> Row {
        Row {
            a: sig3(f.a),
            b: sig3(f.b),
            change: change_of(f),
            interval: f.interval.map_or_else(
                || "too few".into(),
                |(lo, hi)| format!("{} .. {}", sig3(lo), sig3(hi)),
            ),
            p: format!("{:.3}", f.p),
            q: format!("{:.3}", f.q),
            verdict: f.verdict.word(),
        }
    }
}

fn head(e: &EndProfiles) -> String {
    let event = if e.event_a == e.event_b {
        event_words(&e.event_a)
    } else {
        format!("{} vs {}", event_words(&e.event_a), event_words(&e.event_b))
    };
    format!(
        "{} profile, {}: {event}, n {} vs {} iterations, {} vs {} samples lost",
        end_name(e.end),
        e.unit,
        e.n_a,
        e.n_b,
        e.lost_a,
        e.lost_b
    )
}

/// The functions that moved most on each end, as terminal (or mail)
/// lines: `client  net_rx_action  total  0.081 -> 0.120 ms/GB  +48 % ...`.
pub fn movers_text(p: &Point, top: usize, indent: &str) -> String {
    let mut o = String::new();
    for e in &p.profile {
        let _ = writeln!(o, "{indent}{}", head(e));
        for part in [Part::Own, Part::Total] {
            let _ = writeln!(o, "{indent}  by {} time:", part.name());
            for f in e.functions.iter().filter(|f| f.part == part).take(top) {
                let r = Row::of(f);
                let _ = writeln!(
                    o,
                    "{indent}    {:<6} {:<40} {:>8} -> {:<8} {:<5} {:>8}  [{}]  p {}  q {}  => {}",
                    end_name(e.end),
                    clip(&f.function, 40),
                    r.a,
                    r.b,
                    e.unit,
                    r.change,
                    r.interval,
                    r.p,
                    r.q,
                    r.verdict
                );
            }
        }
        let _ = writeln!(
            o,
            "{indent}  ({}; interval: 95 % of the shift B - A, Hodges-Lehmann)",
            e.control
        );
    }
    o
}

/// The same as a Markdown table per end.
pub fn movers_markdown(p: &Point, top: usize) -> String {
    let mut o = String::new();
    for e in &p.profile {
        let _ = writeln!(o, "{}, {}:\n", head(e), p.summary);
        o.push_str(&movers_table(e, top, |f| format!("`{f}`")).markdown());
        let _ = writeln!(o, "\n_{}._\n", e.control);
    }
    o
}

/// An end's `top` movers, a row each marked with its verdict; `function`
/// writes a function's name as the format sets code.
fn movers_table(e: &EndProfiles, top: usize, function: fn(&str) -> String) -> Table {
    let mut table = Table::new([
        ("function", Align::Left, 0),
        ("part", Align::Left, 0),
        ("A", Align::Right, 0),
        ("B", Align::Right, 0),
        ("change", Align::Right, 0),
        ("95 % interval of the shift B - A", Align::Right, 0),
        ("p", Align::Right, 0),
        ("q", Align::Right, 0),
        ("verdict", Align::Left, 0),
    ]);
    for f in e.functions.iter().take(top) {
        let r = Row::of(f);
        let (function, part) = (function(&f.function), f.part.name().to_string());
        let verdict = r.verdict.to_string();
        table.row_of_class(
            r.verdict,
            [
                function, part, r.a, r.b, r.change, r.interval, r.p, r.q, verdict,
            ],
        );
    }
    table
}

fn stacks(folded: &[(String, f64)]) -> Vec<Stack<'_>> {
    folded
        .iter()
        .map(|(k, v)| Stack {
            frames: k.split(';').collect(),
            value: *v,
        })
        .collect()
}

const PAGE_HEAD: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;font-size:12px}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left;font-family:monospace}\
.grew{color:#b00}.shrank{color:#03b}.row{display:flex;gap:1em;align-items:flex-start;flex-wrap:wrap}</style>";

/// One run's ends as plain flame graphs, in CPU time per unit of work.
pub fn run_flame_page(rec: &RunRecord) -> String {
    let metric = rec.metric();
    let mut o = String::from(PAGE_HEAD);
    let _ = write!(
        o,
        "<title>plumb profile: {}</title></head><body><h1>{}</h1>",
        esc(&rec.spec.summary()),
        esc(&rec.spec.summary())
    );
    for end in [Role::Client, Role::Server] {
        let its = profiled(rec, end);
        if its.is_empty() {
            continue;
        }
        let f = folded(&its, end, metric);
        let event = plumb_compare::profile::end_profile(its[0], end).map_or("", |p| &p.event);
        let title = format!(
            "{}: {} of {} iterations, {}",
            end_name(end),
            metric.profile_unit().0,
            its.len(),
            event_words(event)
        );
        let _ = write!(o, "<h2>{}</h2>", esc(&title));
        o.push_str(&flame_svg(&title, &stacks(&f), 1200));
    }
    o.push_str("</body></html>\n");
    o
}

/// Per point and end, the differential flame graph beside the table of
/// the functions that moved most.
pub fn compare_flame_page(c: &Comparison, top: usize) -> String {
    let mut o = String::from(PAGE_HEAD);
    let _ = write!(
        o,
        "<title>plumb profile: {} vs {}</title></head><body><h1>A = {}, B = {}</h1>",
        esc(&c.a),
        esc(&c.b),
        esc(&c.a),
        esc(&c.b)
    );
    for p in &c.points {
        let _ = write!(o, "<h2>{}</h2>", esc(&p.summary));
        for e in &p.profile {
            let _ = write!(o, "<h3>{}</h3><div class=\"row\"><div>", esc(&head(e)));
            let title = format!(
                "{}: width B, colour B against A ({})",
                end_name(e.end),
                e.unit
            );
            o.push_str(&diff_flame_svg(
                &title,
                &stacks(&e.stacks_a),
                &stacks(&e.stacks_b),
                e.unit,
                900,
            ));
            o.push_str("</div>");
            o.push_str(&movers_table(e, top, str::to_string).html());
            let _ = write!(o, "</div><p>{}.</p>", esc(&e.control));
        }
    }
    o.push_str("</body></html>\n");
    o
}
