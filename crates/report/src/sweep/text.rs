//! The sweep report as terminal text and as Markdown.

use super::{SeriesPoint, SweepReport};
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
    for section in r.sections() {
        let title = terminal_heading(section.title);
        let _ = match section.note {
            Some(note) => writeln!(o, "{title} ({note})"),
            None => writeln!(o, "{title}"),
        };
        o.push_str(&section.table.terminal("  "));
        o.push('\n');
    }
    comparisons(&mut o, r, false);
    o
}

/// A heading as the terminal writes it: lower case first, unless its
/// first word is an acronym (CPU, TCP).
fn terminal_heading(title: &str) -> String {
    let mut chars = title.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if second.is_lowercase() => first
            .to_lowercase()
            .chain(title[first.len_utf8()..].chars())
            .collect(),
        _ => title.to_string(),
    }
}

/// `9.1 Gbit/s .. 9.4 Gbit/s`.
fn interval(r: &SweepReport, pt: &SeriesPoint) -> String {
    format!("{} .. {}", r.show(pt.lo), r.show(pt.hi))
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
    for section in r.sections() {
        let _ = writeln!(o, "\n## {}\n", section.title);
        if let Some(note) = section.note {
            let _ = writeln!(o, "_{note}_\n");
        }
        o.push_str(&section.table.markdown());
    }
    o.push('\n');
    comparisons(&mut o, r, true);
    o
}
