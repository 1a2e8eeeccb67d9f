//! `--dry-run` of `run`, `sweep` and `check`: what a command would run,
//! each test point's summary line, its spec key and its spec, with the
//! label, the server end and the repetition policy, and nothing measured,
//! stored or set on the host. A bisect script or a night's experiment can
//! be checked with it first.

use super::far::{server_end, ServerEnd};
use crate::args::ServerArgs;
use crate::Failure;
use plumb_spec::Spec;

/// One test point a command would run: its place in an experiment, if any.
#[derive(Clone)]
pub(crate) struct Planned {
    pub point: Option<String>,
    pub spec: Spec,
}

/// Points the specs at the server end `f` names, as the run would, without
/// reaching it; and says which end that is.
fn aim(f: &ServerArgs, specs: &mut [Planned]) -> Result<String, Failure> {
    let end = server_end(f, None)?;
    for p in specs.iter_mut() {
        end.aim(&mut p.spec);
    }
    Ok(match end {
        ServerEnd::Embedded => "embedded: plumb serve --once on this host".to_string(),
        ServerEnd::Manual(addr, host, _) => format!("{host} ({addr})"),
        ServerEnd::Ssh(t) => format!(
            "started over ssh on {} (the family follows the address it answers on)",
            t.host
        ),
    })
}

/// Aims the plan at the server end `f` names and prints it: what
/// `--dry-run` does in every command.
pub(crate) fn show(
    mut planned: Vec<Planned>,
    f: &ServerArgs,
    label: &str,
    repeat: &plumb_run::Repeat,
    json: bool,
) -> Result<i32, Failure> {
    let server = aim(f, &mut planned)?;
    print(&planned, label, &server, None, repeat, json)
}

/// The plan of runs in a guest of `kernel`, as the guest's records will
/// have them: its label, its machine (and so each point's key), and the
/// server end inside it.
pub(crate) fn show_in_guest(
    mut planned: Vec<Planned>,
    kernel: &std::path::Path,
    label: Option<String>,
    vm: &plumb_run::vm::VmOptions,
    repeat: &plumb_run::Repeat,
    json: bool,
) -> Result<i32, Failure> {
    let guest = super::guest::GuestPlan::of(kernel, label, vm)?;
    for p in planned.iter_mut() {
        guest.aim(&mut p.spec);
    }
    print(
        &planned,
        &guest.label,
        &guest.server,
        Some(&guest.machine()),
        repeat,
        json,
    )
}

/// Prints the plan, as text or as one JSON document.
fn print(
    planned: &[Planned],
    label: &str,
    server: &str,
    machine: Option<&str>,
    repeat: &plumb_run::Repeat,
    json: bool,
) -> Result<i32, Failure> {
    let machine = machine.unwrap_or("this host");
    if json {
        let points: Vec<serde_json::Value> = planned
            .iter()
            .map(|p| {
                serde_json::json!({
                    "point": p.point,
                    "spec_key": p.spec.key(),
                    "summary": p.spec.summary(),
                    "spec": p.spec,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "dry_run": true,
            "label": label,
            "server": server,
            "machine": machine,
            "iterations": {"min": repeat.min, "max": repeat.max},
            "confidence": {"level": repeat.level, "width": repeat.target},
            "points": points,
        });
        crate::out!(
            "{}",
            plumb_report::format::json(&doc, "plan").map_err(Failure::usage)?
        );
        return Ok(0);
    }
    crate::outln!(
        "dry run: {} test point{}, nothing measured, stored or set",
        planned.len(),
        if planned.len() == 1 { "" } else { "s" }
    );
    crate::outln!("label      {label}");
    crate::outln!("machine    {machine}");
    crate::outln!("server     {server}");
    crate::outln!(
        "iterations {} to {}, until the {:.0} % interval is within ±{} %",
        repeat.min,
        repeat.max,
        repeat.level * 100.0,
        repeat.target * 100.0
    );
    for p in planned {
        crate::outln!();
        if let Some(point) = &p.point {
            crate::outln!("point      {point}");
        }
        crate::outln!("spec key   {}", p.spec.key());
        crate::outln!("summary    {}", p.spec.summary());
        let spec = serde_json::to_string(&p.spec)
            .map_err(|e| Failure::usage(format!("cannot encode the spec: {e}")))?;
        crate::outln!("spec       {spec}");
    }
    Ok(0)
}
