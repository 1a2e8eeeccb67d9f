//! Knobs from the command line: `--knob KNOB=VALUE` on a run, `plumb
//! restore`, and the recovery every start of plumb makes of changes left by
//! a plumb process that died.

use crate::args::{RestoreArgs, TopologyDownArgs};
use crate::Failure;
use plumb_run::knob::{self, Applied, Journal, Setting};

/// Restores what dead plumb processes left changed. A start that cannot
/// (not root, say) says so and goes on: the entries stay for later.
pub fn recover_at_start() {
    let journal = Journal::open_default();
    match knob::recover(&journal) {
        Ok(said) => {
            for line in said {
                eprintln!("plumb: {line}");
            }
        }
        Err(e) => eprintln!(
            "plumb: warning: cannot read the knob journal {}: {e}",
            journal.path.display()
        ),
    }
}

/// Sets the knobs of a run, saying what changed; the returned guard puts
/// them back when dropped.
pub fn apply(settings: &[Setting]) -> Result<Applied, Failure> {
    let journal = Journal::open_default();
    if settings.is_empty() {
        return Ok(Applied::empty(&journal));
    }
    let (applied, changes) = knob::apply(&journal, settings).map_err(|e| Failure::usage(e.0))?;
    for c in &changes {
        eprintln!("{}", c.line());
    }
    Ok(applied)
}

pub fn restore(a: RestoreArgs) -> Result<i32, Failure> {
    let journal = a
        .journal
        .map(Journal::at)
        .unwrap_or_else(Journal::open_default);
    let said = knob::recover(&journal).map_err(|e| {
        Failure::usage(format!(
            "cannot read the knob journal {}: {e}",
            journal.path.display()
        ))
    })?;
    let left = journal
        .entries()
        .map_err(|e| Failure::usage(e.to_string()))?;
    let mut failed = false;
    for line in &said {
        failed |= line.starts_with("could not");
        crate::outln!("{line}");
    }
    for e in left
        .iter()
        .filter(|e| !said.iter().any(|s| s.contains(&e.knob)))
    {
        crate::outln!(
            "{} is held by running plumb process {}, which restores it itself",
            e.knob,
            e.pid
        );
    }
    if said.is_empty() && left.is_empty() {
        crate::outln!("nothing to restore ({})", journal.path.display());
    }
    Ok(if failed { 1 } else { 0 })
}

pub fn topology_down(a: TopologyDownArgs) -> Result<i32, Failure> {
    if !plumb_sys::process::is_root() {
        return Err(Failure::usage(
            "topology down: needs root to remove network namespaces",
        ));
    }
    let (removed, failed) = plumb_run::topology::down(a.all);
    for ns in &removed {
        crate::outln!("removed network namespace {ns}");
    }
    for f in &failed {
        eprintln!("plumb: could not remove {f}");
    }
    if removed.is_empty() && failed.is_empty() {
        crate::outln!("no plumb topology left over");
    }
    Ok(if failed.is_empty() { 0 } else { 1 })
}
