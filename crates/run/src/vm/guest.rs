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
    let port = match setup() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("plumb: guest: {e}");
            guest::power_off()
        }
    };
    let send = |m: Message| {
        if let Message::Error { message, .. } = &m {
            eprintln!("plumb: guest: {message}");
        }
        let sent = write_frame(&port, &Frame::new(m));
        if let Err(e) = &sent {
            eprintln!("plumb: guest: cannot send to the host: {e}");
        }
        sent.is_ok()
    };
    let said_hello = send(Message::Hello {
        software: plumb_ctl::message::software(),
        nonce: String::new(),
    });
    if said_hello {
        if let Err(e) = job(&send) {
            send(Message::error("guest", e));
        }
    }
    guest::drain(&port);
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

/// Loads the modules, then makes each run under its knobs and sends its
/// record.
fn job(send: &dyn Fn(Message) -> bool) -> Result<(), String> {
    let text = std::fs::read(JOB_PATH).map_err(|e| format!("{JOB_PATH}: {e}"))?;
    let job: Job = serde_json::from_slice(&text).map_err(|e| format!("{JOB_PATH}: {e}"))?;
    for m in &job.modules {
        let image = std::fs::read(m).map_err(|e| format!("{m}: {e}"))?;
        guest::load_module(&image).map_err(|e| format!("cannot load module {m}: {e}"))?;
    }
    for (k, run) in job.runs.iter().enumerate() {
        // Put back when the run is over, before the next one's.
        let (said, _applied) = crate::knob::apply_server(&run.knobs)?;
        for line in said {
            eprintln!("{line}");
        }
        let opts = RunOptions {
            server: None,
            label: String::new(),
            interrupted: Arc::new(AtomicBool::new(false)),
            server_exe: "/init".into(),
            psk: None,
            exclusive: false,
            server_knobs: Vec::new(),
            profile: run.profile,
        };
        let mut record = crate::run(
            &run.spec,
            &opts,
            &run.repeat,
            &mut plumb_engine::meter::NoSink,
            &mut |it, _| {
                eprintln!(
                    "plumb: guest: run {} iteration {} done",
                    k + 1,
                    it.index + 1
                )
            },
        )
        .map_err(|e| e.to_string())?;
        let env = record.environment.take().unwrap_or_default();
        if !send(Message::Guest {
            record: Box::new(record),
            env: Box::new(env),
        }) {
            return Ok(());
        }
    }
    Ok(())
}
