use crate::args::{
    CloseArg, CommonArgs, CrrArgs, DirectionArg, RrArgs, RunCommand, SocketArgs, StreamArgs,
    UdpRrArgs, UdpSocketArgs, UdpStreamArgs,
};
use crate::Failure;
use plumb_engine::SampleSink;
use plumb_run::RunOptions;
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
        if let Some(p99) = s.p99_us {
            eprintln!(
                "  {:>6.2} s   {:>10.0} tx/s   p99 {:>8.1} us",
                s.t_s,
                s.transactions as f64 / s.dt_s,
                p99
            );
            return;
        }
        if s.transactions > 0 {
            // The server end of request/response: its rate is the client's.
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

fn stream_spec(a: &StreamArgs) -> Spec {
    Spec {
        workload: Workload::Stream,
        direction: match a.direction {
            DirectionArg::Send => Direction::Send,
            DirectionArg::Recv => Direction::Recv,
            DirectionArg::Both => Direction::Both,
        },
        flows: a.flows,
        threads: default_threads(a.flows, a.threads),
        msg_size: a.msg_size,
        socket: socket_opts(&a.socket),
        family: family(&a.common),
        duration_ms: a.common.duration,
        warmup_ms: a.common.warmup,
        client_cpus: a.common.client_cpus.clone(),
        server_cpus: a.common.server_cpus.clone(),
        rr: None,
        topology: None,
        zerocopy: a.zerocopy.into(),
        rx: a.rx.into(),
    }
}

fn socket_opts(a: &SocketArgs) -> SocketOpts {
    SocketOpts {
        sndbuf: a.sndbuf,
        rcvbuf: a.rcvbuf,
        nodelay: a.nodelay,
        cork: a.cork,
        mss: a.mss,
        cc: a.cc.clone(),
        pacing_rate_bps: a.pacing_rate,
    }
}

/// Worker threads when not asked: one per flow, at most one per CPU.
fn default_threads(flows: u32, asked: Option<u32>) -> u32 {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    asked.unwrap_or_else(|| flows.min(cpus))
}

/// A request/response spec: what rr, crr and udp-rr have in common.
fn transactional_spec(
    workload: Workload,
    flows: u32,
    threads: Option<u32>,
    socket: SocketOpts,
    common: &CommonArgs,
    rr: plumb_spec::RrSpec,
) -> Spec {
    Spec {
        workload,
        direction: Direction::Send,
        flows,
        threads: default_threads(flows, threads),
        msg_size: rr.req_size.max(rr.resp_size),
        socket,
        family: family(common),
        duration_ms: common.duration,
        warmup_ms: common.warmup,
        client_cpus: common.client_cpus.clone(),
        server_cpus: common.server_cpus.clone(),
        rr: Some(rr),
        topology: None,
        zerocopy: Default::default(),
        rx: Default::default(),
    }
}

fn writes(flag: &'static str, text: &Option<String>, size: u64) -> Result<Vec<u64>, Failure> {
    plumb_spec::parse_writes(flag, text.as_deref().unwrap_or(""), size)
        .map_err(|e| Failure::usage(e.to_string()))
}

fn rr_spec(a: &RrArgs) -> Result<Spec, Failure> {
    Ok(transactional_spec(
        Workload::Rr,
        a.flows,
        a.threads,
        socket_opts(&a.socket),
        &a.common,
        plumb_spec::RrSpec {
            req_size: a.req_size,
            resp_size: a.resp_size,
            pipeline: a.pipeline,
            req_writes: writes("--req-writes", &a.req_writes, a.req_size)?,
            resp_writes: writes("--resp-writes", &a.resp_writes, a.resp_size)?,
            rate: a.rate,
            ..plumb_spec::RrSpec::default()
        },
    ))
}

fn crr_spec(a: &CrrArgs) -> Result<Spec, Failure> {
    Ok(transactional_spec(
        Workload::Crr,
        a.flows,
        a.threads,
        socket_opts(&a.socket),
        &a.common,
        plumb_spec::RrSpec {
            req_size: a.req_size,
            resp_size: a.resp_size,
            req_writes: writes("--req-writes", &a.req_writes, a.req_size)?,
            resp_writes: writes("--resp-writes", &a.resp_writes, a.resp_size)?,
            close: Some(match a.close {
                CloseArg::Rst => plumb_spec::Close::Rst,
                CloseArg::Fin => plumb_spec::Close::Fin,
            }),
            ..plumb_spec::RrSpec::default()
        },
    ))
}

fn udp_socket_opts(a: &UdpSocketArgs) -> SocketOpts {
    SocketOpts {
        sndbuf: a.sndbuf,
        rcvbuf: a.rcvbuf,
        ..SocketOpts::default()
    }
}

fn udp_stream_spec(a: &UdpStreamArgs) -> Spec {
    Spec {
        workload: Workload::UdpStream,
        direction: Direction::Send,
        flows: a.flows,
        threads: default_threads(a.flows, a.threads),
        msg_size: a.msg_size,
        socket: udp_socket_opts(&a.socket),
        family: family(&a.common),
        duration_ms: a.common.duration,
        warmup_ms: a.common.warmup,
        client_cpus: a.common.client_cpus.clone(),
        server_cpus: a.common.server_cpus.clone(),
        rr: None,
        topology: None,
        zerocopy: Default::default(),
        rx: Default::default(),
    }
}

fn udp_rr_spec(a: &UdpRrArgs) -> Spec {
    transactional_spec(
        Workload::UdpRr,
        a.flows,
        a.threads,
        udp_socket_opts(&a.socket),
        &a.common,
        plumb_spec::RrSpec {
            req_size: a.req_size,
            resp_size: a.resp_size,
            timeout_ms: Some(a.timeout),
            ..plumb_spec::RrSpec::default()
        },
    )
}

fn family(c: &CommonArgs) -> Family {
    if c.ipv6 {
        Family::V6
    } else {
        Family::V4
    }
}

/// The key of --psk-file, read once: every run of this process uses it.
static PSK: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

fn psk() -> Option<Vec<u8>> {
    PSK.get().cloned()
}

/// Installs the Ctrl-C/SIGTERM handlers once and hands out their flag: the
/// first signal ends the window and reports what was measured, a second one
/// ends plumb at once.
pub(crate) fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone());
            let _ = signal_hook::flag::register(sig, flag.clone());
        }
        flag
    })
    .clone()
}

/// One process of a flow group: its spec comes on stdin, its iteration goes
/// to stdout as JSON (see `plumb_run::group`).
pub fn flow_group_member() -> Result<i32, Failure> {
    let opts = RunOptions {
        server: None,
        label: String::new(),
        interrupted: interrupt_flag(),
        server_exe: std::env::current_exe()
            .map_err(|e| Failure::usage(format!("cannot find the plumb executable: {e}")))?,
        psk: None,
    };
    let it = plumb_run::group::member(&opts).map_err(|e| Failure::usage(e.to_string()))?;
    println!(
        "{}",
        serde_json::to_string(&it).map_err(|e| Failure::usage(e.to_string()))?
    );
    Ok(0)
}

/// Runs `spec` under `label`, prints progress on a terminal, captures the
/// environment and keeps the record in `store` when one is given (only a
/// complete run: an interrupted one is printed, never stored).
pub fn run_and_store(
    spec: &Spec,
    label: &str,
    server: Option<std::net::SocketAddr>,
    repeat: &plumb_run::Repeat,
    store: Option<&mut plumb_store::Store>,
    json: bool,
) -> Result<(plumb_samples::RunRecord, plumb_samples::Environment), Failure> {
    let opts = RunOptions {
        server,
        label: label.to_string(),
        interrupted: interrupt_flag(),
        server_exe: std::env::current_exe()
            .map_err(|e| Failure::usage(format!("cannot find the plumb executable: {e}")))?,
        psk: psk(),
    };
    let live = !json && std::io::stderr().is_terminal();
    let mut sink: Box<dyn SampleSink> = if live {
        Box::new(Live)
    } else {
        Box::new(plumb_engine::meter::NoSink)
    };
    let mut progress = |it: &plumb_samples::Iteration, c: &plumb_samples::Confidence| {
        if live && repeat.max > 1 {
            let width = c
                .relative_half_width
                .map(plumb_samples::units::format_half_width)
                .unwrap_or_else(|| "-".into());
            let show = |v: f64| plumb_samples::Metric::of(spec).format(v);
            eprintln!(
                "iteration {}: {}   mean {} {}",
                it.index + 1,
                show(it.derived.metric()),
                show(c.mean),
                width
            );
        }
    };
    let record = plumb_run::run(spec, &opts, repeat, sink.as_mut(), &mut progress)
        .map_err(|e| Failure::run(&e))?;
    for w in record.iterations.iter().flat_map(|i| &i.client.warnings) {
        if w.starts_with("server lost") {
            eprintln!("plumb: {w}; the partial results are marked incomplete");
        }
    }
    let ifaces: Vec<String> = match server {
        None => vec!["lo".to_string()],
        Some(a) => plumb_run::env::interfaces_for(a.ip()),
    };
    let names: Vec<&str> = ifaces.iter().map(String::as_str).collect();
    let env = plumb_run::env::capture(&names);
    if let Some(store) = store {
        if record.complete {
            let id = store
                .insert_run(&record, Some(&env))
                .map_err(|e| Failure::store(format!("the run was measured but not stored: {e}")))?;
            eprintln!("stored as run {} (label {})", id.0, record.label);
        } else {
            eprintln!("not stored: the run is incomplete");
        }
    }
    Ok((record, env))
}

pub fn exec(cmd: RunCommand) -> Result<i32, Failure> {
    let (mut spec, a) = match cmd {
        RunCommand::Stream(a) => (stream_spec(&a), a.common),
        RunCommand::Rr(a) => (rr_spec(&a)?, a.common),
        RunCommand::Crr(a) => (crr_spec(&a)?, a.common),
        RunCommand::UdpStream(a) => (udp_stream_spec(&a), a.common),
        RunCommand::UdpRr(a) => (udp_rr_spec(&a), a.common),
    };
    spec.topology = super::knob::topology(&a)?;
    let server = match &a.server {
        Some(s) => Some(super::parse_addr(s, plumb_ctl::DEFAULT_PORT, "--server")?),
        None => None,
    };
    if let Some(p) = &a.psk_file {
        let key = plumb_ctl::auth::load_key(p, "--psk-file").map_err(Failure::usage)?;
        let _ = PSK.set(key);
    }
    let label = a
        .label
        .clone()
        .unwrap_or_else(plumb_sys::proc::kernel_release);
    let repeat = super::repeat(a.iterations, a.confidence);
    // Restored when this goes out of scope: after the run, on its error, or
    // after an interrupted run has been reported.
    let _knobs = super::knob::apply(&a.knobs)?;
    // Opened before the run so a bad --db fails in a second, not after it.
    let mut store = if a.no_store {
        None
    } else {
        Some(super::db::open(&a.db)?)
    };
    let (record, _env) = run_and_store(&spec, &label, server, &repeat, store.as_mut(), a.json)?;
    if a.json {
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| Failure::usage(format!("cannot encode the record: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", plumb_report::run_summary(&record));
    }
    Ok(if record.complete {
        0
    } else {
        crate::exit::INTERRUPTED
    })
}
