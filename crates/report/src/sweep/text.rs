//! The sweep report as terminal text and as Markdown.

use super::{SeriesPoint, SoftirqRow, SweepReport, PERCENTILES};
use plumb_samples::units::format_share;
use std::fmt::Write;

/// The report as terminal text.
pub fn terminal(r: &SweepReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}\n", r.title);
    for p in &r.plots {
        let _ = writeln!(
            o,
            "{} by {} (mean, 95 % interval, n)",
            r.metric.title(),
            p.axis
        );
        for l in &p.lines {
            let _ = writeln!(o, "  {}", l.name);
            for pt in &l.points {
                let _ = writeln!(
                    o,
                    "    {:<10} {:>14}  {}  n {}",
                    pt.x,
                    r.show(pt.mean),
                    interval(r, pt),
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
    if !r.retransmits.is_empty() {
        let _ = writeln!(o, "TCP retransmissions (sender's segments)");
        let _ = writeln!(
            o,
            "  {:<40} {:>13} {:>10}",
            "point", "per iteration", "per GB"
        );
        for t in &r.retransmits {
            let _ = writeln!(
                o,
                "  {:<40} {:>13.0} {:>10.1}",
                t.name, t.per_iteration, t.per_gb
            );
        }
        o.push('\n');
    }
    if !r.softirq.is_empty() {
        let _ = writeln!(o, "softirq share of each CPU");
        for s in &r.softirq {
            let _ = writeln!(o, "  {:<40} {}", s.name, softirq_cells(s).join("  "));
        }
        o.push('\n');
    }
    comparisons(&mut o, r, false);
    o
}

/// `9.1 Gbit/s .. 9.4 Gbit/s`.
fn interval(r: &SweepReport, pt: &SeriesPoint) -> String {
    format!("{} .. {}", r.show(pt.lo), r.show(pt.hi))
}

/// `cpu0 1.3%` for each CPU.
fn softirq_cells(s: &SoftirqRow) -> Vec<String> {
    s.per_cpu
        .iter()
        .map(|(c, f)| format!("cpu{c} {}", format_share(*f)))
        .collect()
}

/// The comparisons, each with its environment diff.
fn comparisons(o: &mut String, r: &SweepReport, md: bool) {
    for c in &r.comparisons {
        o.push_str(&if md {
            crate::compare::markdown(c)
        } else {
            crate::compare::terminal(c)
        });
        o.push('\n');
    }
    if r.comparisons.is_empty() {
        let _ = writeln!(o, "environment: no difference recorded");
    }
}

/// The report as Markdown.
pub fn markdown(r: &SweepReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {}\n", r.title);
    for p in &r.plots {
        let _ = writeln!(o, "## {} by {}\n", r.metric.title(), p.axis);
        let _ = writeln!(o, "| line | {} | mean | 95 % interval | n |", p.axis);
        let _ = writeln!(o, "|---|---|---:|---|---:|");
        for l in &p.lines {
            for pt in &l.points {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} |",
                    l.name,
                    pt.x,
                    r.show(pt.mean),
                    interval(r, pt),
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
    if !r.retransmits.is_empty() {
        let _ = writeln!(
            o,
            "\n## TCP retransmissions\n\n| point | per iteration | per GB |\n|---|---:|---:|"
        );
        for t in &r.retransmits {
            let _ = writeln!(
                o,
                "| {} | {:.0} | {:.1} |",
                t.name, t.per_iteration, t.per_gb
            );
        }
    }
    if !r.softirq.is_empty() {
        let _ = writeln!(o, "\n## Softirq share of each CPU\n");
        for s in &r.softirq {
            let _ = writeln!(o, "- {}: {}", s.name, softirq_cells(s).join(", "));
        }
    }
    o.push('\n');
    comparisons(&mut o, r, true);
    o
}
