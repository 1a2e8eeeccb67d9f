//! plumb as a guest kernel's init: it sets up what a host's init would
//! (the kernel's file systems, loopback, the modules), makes the runs its
//! job names with both ends inside the guest (or serves them, as the
//! server's guest of `--vm-link`), sends each record back over the second
//! serial port, and powers the machine off. It never returns: init's exit
//! is a kernel panic.

use super::{Job, JOB_PATH};
use crate::RunOptions;
use plumb_ctl::frame::write_frame;
use plumb_ctl::message::{Frame, Message};
use plumb_sys::guest;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The serial port the host reads frames from (the console is ttyS0).
const RESULTS_PORT: &str = "/dev/ttyS1";

/// Whether this process is a guest's init: pid 1 with a job beside it.
/// (plumb as pid 1 of a container has no job, and runs as asked.)
pub fn is_init() -> bool {
    std::process::id() == 1 && std::path::Path::new(JOB_PATH).exists()
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
    let server = match &job.link {
        Some(link) => {
            link_up(&link.address)?;
            if link.serve {
                return serve(&link.address);
            }
            let at = std::net::SocketAddr::new(link.peer, crate::serve::DEFAULT_PORT);
            wait_for(at)?;
            Some(at)
        }
        None => None,
    };
    for (k, run) in job.runs.iter().enumerate() {
        // Put back when the run is over, before the next one's.
        let mut knobs = crate::knob::parse_all(&run.knobs)?;
        // The client's namespace under a veth topology is made by the run.
        let client_knobs = crate::knob::take_client(&mut knobs);
        let (said, _applied) = crate::knob::apply_here(knobs)?;
        for line in said {
            eprintln!("{line}");
        }
        let opts = RunOptions {
            server,
            label: String::new(),
            interrupted: Arc::new(AtomicBool::new(false)),
            server_exe: "/init".into(),
            psk: None,
            exclusive: false,
            server_knobs: crate::knob::parse_all(&run.server_knobs)?,
            client_knobs,
            observe: run.observe,
        };
        let vcpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let idle_rtt_us = super::watch::rtt_comparable(&run.spec, vcpus)
            .then(|| idle_rtt(&run.spec, &opts))
            .flatten();
        let mut record = crate::run(
            &run.spec,
            &opts,
            &run.repeat,
            &mut plumb_engine::meter::NoSink,
            &mut |it, c| {
                eprintln!(
                    "plumb: guest: run {} iteration {} done",
                    k + 1,
                    it.index + 1
                );
                send(Message::GuestIteration {
                    run: k as u32,
                    iteration: it.index,
                    value: it.derived.metric(),
                    mean: c.mean,
                    half_width: c.relative_half_width,
                });
            },
        )
        .map_err(|e| e.to_string())?;
        let env = record.environment.take().unwrap_or_default();
        if !send(Message::Guest {
            record: Box::new(record),
            env: Box::new(env),
            idle_rtt_us,
        }) {
            return Ok(());
        }
    }
    Ok(())
}

/// The median round trip of a short idle probe on `spec`'s path, made just
/// before its run: what the run's round trips are held against. A probe
/// that fails leaves the run without that check, not without its figures.
fn idle_rtt(spec: &plumb_spec::Spec, opts: &RunOptions) -> Option<f64> {
    let probe = super::watch::idle_probe(spec);
    let record = crate::run(
        &probe,
        opts,
        &crate::Repeat::once(),
        &mut plumb_engine::meter::NoSink,
        &mut |_, _| {},
    )
    .map_err(|e| eprintln!("plumb: guest: the idle probe failed: {e}"))
    .ok()?;
    let p50 = record.iterations.first()?.client.latency.as_ref()?.p50_us;
    (p50 > 0.0).then_some(p50)
}

/// Gives the guest's one NIC its address and brings it up.
fn link_up(address: &str) -> Result<(), String> {
    let nic = std::fs::read_dir("/sys/class/net")
        .map_err(|e| format!("/sys/class/net: {e}"))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .find(|n| n != "lo")
        .ok_or("no network interface: the link's virtio-net device did not come up")?;
    for args in [
        vec!["addr", "add", address, "dev", &nic],
        vec!["link", "set", &nic, "up"],
    ] {
        let out = std::process::Command::new("ip")
            .args(&args)
            .output()
            .map_err(|e| format!("cannot run ip: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// The server's guest: `plumb serve` on the link's address until the host
/// ends the guest.
fn serve(address: &str) -> Result<(), String> {
    let ip = address.split('/').next().unwrap_or(address);
    let status = std::process::Command::new("/init")
        .args(["serve", "--listen", ip])
        .status()
        .map_err(|e| format!("cannot start plumb serve: {e}"))?;
    Err(format!("plumb serve ended: {status}"))
}

/// Waits for the server's guest to listen (it boots beside this one).
fn wait_for(at: std::net::SocketAddr) -> Result<(), String> {
    let start = std::time::Instant::now();
    loop {
        match std::net::TcpStream::connect_timeout(&at, std::time::Duration::from_secs(1)) {
            Ok(_) => return Ok(()),
            Err(e) if start.elapsed() > std::time::Duration::from_secs(120) => {
                return Err(format!("the server's guest at {at} never listened: {e}"))
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
        }
    }
}
