//! plumb as a guest kernel's init: it sets up what a host's init would
//! (the kernel's file systems, loopback, the modules), makes the run its
//! job names with both ends inside the guest, sends the record back over
//! the second serial port, and powers the machine off. It never returns:
//! init's exit is a kernel panic.

use super::{Job, JOB_PATH};
use crate::RunOptions;
use plumb_ctl::frame::write_frame;
use plumb_ctl::message::{Frame, Message};
use plumb_sys::guest;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The serial port the host reads frames from (the console is ttyS0).
const RESULTS_PORT: &str = "/dev/ttyS1";

/// Whether this process is a guest's init: pid 1, started by the kernel.
pub fn is_init() -> bool {
    std::process::id() == 1
}

pub fn main() -> ! {
    // The kernel gives init no PATH; the host's tools are in /usr/bin.
    std::env::set_var("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    let port = setup();
    let said = match &port {
        Ok(port) => {
            let _ = write_frame(
                port,
                &Frame::new(Message::Hello {
                    software: plumb_ctl::message::software(),
                    nonce: String::new(),
                }),
            );
            match job() {
                Ok(m) => m,
                Err(e) => Message::error("guest", e),
            }
        }
        Err(e) => {
            eprintln!("plumb: guest: {e}");
            guest::power_off()
        }
    };
    if let Message::Error { message, .. } = &said {
        eprintln!("plumb: guest: {message}");
    }
    if let Ok(port) = &port {
        if let Err(e) = write_frame(port, &Frame::new(said)) {
            eprintln!("plumb: guest: cannot send the results: {e}");
        }
        guest::drain(port);
    }
    guest::power_off()
}

/// Mounts, loopback, and the results port opened raw.
fn setup() -> Result<std::fs::File, String> {
    for (kind, at) in [("proc", "/proc"), ("sysfs", "/sys"), ("devtmpfs", "/dev")] {
        guest::mount(kind, at).map_err(|e| format!("cannot mount {kind} at {at}: {e}"))?;
    }
    // Counted tracepoints read tracefs; a kernel without it runs the test
    // without them, as a host would.
    let _ = guest::mount("tracefs", "/sys/kernel/tracing");
    guest::link_up("lo").map_err(|e| format!("cannot bring lo up: {e}"))?;
    let port = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(RESULTS_PORT)
        .map_err(|e| format!("cannot open {RESULTS_PORT}: {e}"))?;
    guest::raw_terminal(&port).map_err(|e| format!("{RESULTS_PORT}: {e}"))?;
    Ok(port)
}

/// Loads the modules, sets the knobs and makes the run.
fn job() -> Result<Message, String> {
    let text = std::fs::read(JOB_PATH).map_err(|e| format!("{JOB_PATH}: {e}"))?;
    let job: Job = serde_json::from_slice(&text).map_err(|e| format!("{JOB_PATH}: {e}"))?;
    for m in &job.modules {
        let image = std::fs::read(m).map_err(|e| format!("{m}: {e}"))?;
        guest::load_module(&image).map_err(|e| format!("cannot load module {m}: {e}"))?;
    }
    // Nothing to restore: the guest ends with the run.
    let (said, _applied) = crate::knob::apply_server(&job.knobs)?;
    for line in said {
        eprintln!("{line}");
    }
    let opts = RunOptions {
        server: None,
        label: job.label.clone(),
        interrupted: Arc::new(AtomicBool::new(false)),
        server_exe: "/init".into(),
        psk: None,
        exclusive: false,
        server_knobs: Vec::new(),
        profile: job.profile,
    };
    let mut record = crate::run(
        &job.spec,
        &opts,
        &job.repeat,
        &mut plumb_engine::meter::NoSink,
        &mut |it, _| eprintln!("plumb: guest: iteration {} done", it.index + 1),
    )
    .map_err(|e| e.to_string())?;
    let env = record.environment.take().unwrap_or_default();
    Ok(Message::Guest {
        record: Box::new(record),
        env: Box::new(env),
    })
}
