use crate::args::{DirectionArg, RunCommand, StreamArgs};
use crate::Failure;
use plumb_engine::SampleSink;
use plumb_run::{RunError, RunOptions};
use plumb_samples::{format_bits_per_sec, IntervalSample, Role};
use plumb_spec::{Direction, Family, SocketOpts, Spec, Workload};
use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Per-second lines on stderr while a run goes, when a person is watching.
struct Live;
impl SampleSink for Live {
    fn interval(&mut self, _role: Role, s: &IntervalSample) {
        if s.dt_s <= 0.0 {
            return;
        }
        eprintln!(
            "  {:>6.2} s   sent {:>14}   received {:>14}",
            s.t_s,
            format_bits_per_sec(s.bytes_sent as f64 * 8.0 / s.dt_s),
            format_bits_per_sec(s.bytes_received as f64 * 8.0 / s.dt_s)
        );
    }
}

struct Quiet;
impl SampleSink for Quiet {
    fn interval(&mut self, _: Role, _: &IntervalSample) {}
}

fn stream_spec(a: &StreamArgs) -> Spec {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    Spec {
        workload: Workload::Stream,
        direction: match a.direction {
            DirectionArg::Send => Direction::Send,
            DirectionArg::Recv => Direction::Recv,
            DirectionArg::Both => Direction::Both,
        },
        flows: a.flows,
        threads: a.threads.unwrap_or_else(|| a.flows.min(cpus)),
        msg_size: a.msg_size,
        socket: SocketOpts {
            sndbuf: a.sndbuf,
            rcvbuf: a.rcvbuf,
            nodelay: a.nodelay,
            cork: a.cork,
            mss: a.mss,
            cc: a.cc.clone(),
            pacing_rate_bps: a.pacing_rate,
        },
        family: if a.common.ipv6 {
            Family::V6
        } else {
            Family::V4
        },
        duration_ms: a.common.duration,
        warmup_ms: a.common.warmup,
        client_cpus: a.common.client_cpus.clone(),
        server_cpus: a.common.server_cpus.clone(),
    }
}

pub fn exec(cmd: RunCommand) -> Result<i32, Failure> {
    let RunCommand::Stream(a) = cmd;
    let spec = stream_spec(&a);
    let server = match &a.common.server {
        Some(s) => Some(super::parse_addr(s, plumb_ctl::DEFAULT_PORT, "--server")?),
        None => None,
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while the first is being handled ends plumb at once.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, interrupted.clone());
        let _ = signal_hook::flag::register(sig, interrupted.clone());
    }
    let opts = RunOptions {
        server,
        label: a
            .common
            .label
            .clone()
            .unwrap_or_else(plumb_sys::proc::kernel_release),
        interrupted: interrupted.clone(),
        server_exe: std::env::current_exe()
            .map_err(|e| Failure::usage(format!("cannot find the plumb executable: {e}")))?,
    };
    let live = !a.common.json && std::io::stderr().is_terminal();
    let mut sink: Box<dyn SampleSink> = if live {
        Box::new(Live)
    } else {
        Box::new(Quiet)
    };
    let record = plumb_run::run(&spec, &opts, sink.as_mut()).map_err(|e| match e {
        RunError::Setup { message, .. } => Failure::usage(message),
        other => Failure::usage(other.to_string()),
    })?;
    if a.common.json {
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| Failure::usage(format!("cannot encode the record: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", plumb_report::run_summary(&record));
    }
    Ok(if record.complete { 0 } else { 130 })
}
