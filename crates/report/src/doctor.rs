//! The terminal rendering of `plumb doctor`: one block per check, within 80
//! columns, warnings first so that what needs doing is read first.

use crate::wrap;
use plumb_samples::{Audit, Status};
use std::fmt::Write;

const WIDTH: usize = 80;
const INDENT: &str = "      ";

pub fn render(a: &Audit) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plumb doctor: this host for network benchmarks (interfaces {}; {:.1} s sample)\n",
        a.interfaces.join(", "),
        a.sample_s
    );
    let order = [Status::Warn, Status::Ok, Status::Info];
    for status in order {
        for f in a.findings.iter().filter(|f| f.status == status) {
            // The columns are kept; only the value wraps.
            let head = format!("{:<5} {:<19} ", status.as_str(), f.check);
            let mut value = wrap(&f.value, WIDTH.saturating_sub(head.len()).max(20), "");
            let first = if value.is_empty() {
                String::new()
            } else {
                value.remove(0)
            };
            let _ = writeln!(out, "{head}{first}");
            for line in value {
                let _ = writeln!(out, "{INDENT}{line}");
            }
            for line in wrap(&format!("{INDENT}{}", f.why), WIDTH, INDENT) {
                let _ = writeln!(out, "{line}");
            }
            if let Some(advice) = &f.advice {
                for line in wrap(&format!("{INDENT}fix: {advice}"), WIDTH, INDENT) {
                    let _ = writeln!(out, "{line}");
                }
            }
            if !f.recorded_as.is_empty() {
                let rec = format!(
                    "{INDENT}recorded with every run as {}",
                    f.recorded_as.join(", ")
                );
                for line in wrap(&rec, WIDTH, INDENT) {
                    let _ = writeln!(out, "{line}");
                }
            }
        }
    }
    let warnings = a.warnings();
    let _ = writeln!(
        out,
        "\n{warnings} warning{}; CPUs {:.0} % busy, steal {:.1} % during the sample.",
        if warnings == 1 { "" } else { "s" },
        a.busy_percent,
        a.steal_percent
    );
    let verdict = match &a.too_noisy {
        Some(why) => why.clone(),
        None => "quiet enough to compare: no other work used the CPUs to speak of.".to_string(),
    };
    for line in wrap(&verdict, WIDTH, "") {
        let _ = writeln!(out, "{line}");
    }
    out
}
