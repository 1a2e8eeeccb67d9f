//! `plumb doctor`: audit the host, print the findings.

use crate::args::DoctorArgs;
use crate::Failure;
use std::time::Duration;

pub fn exec(a: DoctorArgs) -> Result<i32, Failure> {
    let mut interfaces = a.interfaces.clone();
    if interfaces.is_empty() {
        interfaces.push("lo".to_string());
    }
    for name in &interfaces {
        if name.is_empty()
            || name.len() > 15
            || name.contains(['/', ' ', '\0'])
            || name == "."
            || name == ".."
        {
            return Err(Failure::usage(format!(
                "--interface: '{name}' is not an interface name (1 to 15 characters, no '/' or spaces)"
            )));
        }
        if !std::path::Path::new("/sys/class/net").join(name).exists() {
            return Err(Failure::usage(format!(
                "--interface: no interface '{name}' on this host (see `ip link`)"
            )));
        }
    }
    if a.sample == 0 || a.sample > 60_000 {
        return Err(Failure::usage(format!(
            "--sample: {} ms is out of range; use 1ms to 60s",
            a.sample
        )));
    }
    let mut audit = plumb_run::doctor::audit(&interfaces, Duration::from_millis(a.sample));
    audit
        .findings
        .push(plumb_run::vm::kvm_finding(a.kernel.as_deref()));
    if a.json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&audit).map_err(|e| Failure::usage(e.to_string()))?
        );
    } else {
        crate::out!("{}", plumb_report::doctor::render(&audit));
    }
    Ok(0)
}
