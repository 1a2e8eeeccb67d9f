//! `plumb serve`: accepts control connections one at a time and runs the
//! mirror image of each client's spec with the engine in the server role.
//! A session that goes wrong ends with an error message to the client and a
//! log line; the server itself goes on.

use crate::frame::{read_frame, write_frame, FrameError, MAX_FRAME};
use crate::message::{software, Frame, Message, PROTOCOL_VERSION};
use plumb_engine::meter::NoSink;
use plumb_engine::{
    plain_io, read_back_flows, read_back_udp, udp_server_sockets, Cookie, DataListener, Engine,
    EngineConfig, Meter, UdpPlan,
};
use plumb_samples::{EndResult, Role};
use plumb_spec::Spec;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The control port `plumb serve` listens on when none is given.
pub const DEFAULT_PORT: u16 = 12867;

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Serve one session, then exit (the embedded server).
    pub once: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {error}")]
    Listen { addr: SocketAddr, error: String },
    #[error("{0}")]
    Session(String),
}

/// Binds, prints `plumb serve: listening on ADDR` on stdout (the embedded
/// client reads the port from it), and serves sessions.
pub fn serve(cfg: &ServeConfig) -> Result<(), ServeError> {
    let listener = TcpListener::bind(cfg.listen).map_err(|e| ServeError::Listen {
        addr: cfg.listen,
        error: plain_io(&e),
    })?;
    let local = listener.local_addr().map_err(|e| ServeError::Listen {
        addr: cfg.listen,
        error: plain_io(&e),
    })?;
    let _ = plumb_sys::process::raise_nofile_limit(0);
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "plumb serve: listening on {local}");
        let _ = out.flush();
    }
    loop {
        let (ctrl, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("plumb serve: accept failed: {}", plain_io(&e));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let outcome = session(ctrl);
        if let Err(e) = &outcome {
            eprintln!("plumb serve: session from {peer}: {e}");
        }
        if cfg.once {
            return outcome.map_err(ServeError::Session);
        }
    }
}

struct Ctrl {
    stream: TcpStream,
}

impl Ctrl {
    fn send(&self, m: Message) -> Result<(), String> {
        write_frame(&self.stream, &Frame::new(m)).map_err(|e| format!("sending to the client: {e}"))
    }

    /// Tells the client why and gives up on the session.
    fn fail(&self, code: &str, message: String) -> String {
        let _ = self.send(Message::error(code, message.clone()));
        message
    }

    fn read(&self, what: &str, timeout: Duration) -> Result<Message, String> {
        let _ = self.stream.set_read_timeout(Some(timeout));
        match read_frame(&self.stream, MAX_FRAME) {
            Ok(f) if f.version != PROTOCOL_VERSION => Err(self.fail(
                "version",
                format!(
                    "this server speaks protocol version {PROTOCOL_VERSION}, the client {}",
                    f.version
                ),
            )),
            Ok(f) => Ok(f.message),
            Err(FrameError::Closed) => {
                Err(format!("the client closed the connection before {what}"))
            }
            Err(e @ (FrameError::Invalid(_) | FrameError::TooLarge(..))) => {
                Err(self.fail("frame", e.to_string()))
            }
            Err(e) => Err(format!("waiting for {what}: {e}")),
        }
    }
}

fn session(stream: TcpStream) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let local_ip = stream.local_addr().map_err(|e| plain_io(&e))?.ip();
    let ctrl = Ctrl { stream };
    let handshake = Duration::from_secs(10);

    match ctrl.read("hello", handshake)? {
        Message::Hello { .. } => {}
        m => return Err(ctrl.fail("order", format!("expected hello, got {}", m.name()))),
    }
    let nonce = Cookie::random().map_err(|e| plain_io(&e))?.to_hex();
    ctrl.send(Message::Welcome {
        software: software(),
        nonce,
        auth: false,
    })?;

    let spec = match ctrl.read("setup", handshake)? {
        Message::Setup { spec } => *spec,
        m => return Err(ctrl.fail("order", format!("expected setup, got {}", m.name()))),
    };
    if let Err(e) = spec.validate() {
        return Err(ctrl.fail("spec", e.to_string()));
    }
    if let Some(cpus) = &spec.server_cpus {
        if let Err(msg) = check_cpus(cpus, "--server-cpus", "the server") {
            return Err(ctrl.fail("spec", msg));
        }
    }

    let _ = plumb_sys::process::raise_nofile_limit(spec.flows as u64 + 256);
    let backlog = spec.flows.min(4096) as i32;
    let listener = DataListener::bind(local_ip, 0, &spec.socket, backlog)
        .map_err(|e| ctrl.fail("setup", e.message))?;
    // UDP datagrams come to the same port number; the sockets are bound
    // before the client hears of the port, so its first datagram finds them.
    let udp_socks = if spec.workload.is_udp() {
        udp_server_sockets(local_ip, listener.port(), spec.threads, &spec.socket)
            .map_err(|e| ctrl.fail("setup", e.message))?
    } else {
        Vec::new()
    };
    let cookie = Cookie::random().map_err(|e| plain_io(&e))?;
    ctrl.send(Message::Ready {
        data_port: listener.port(),
        cookie: cookie.to_hex(),
        threads: spec.threads,
    })?;

    let deadline = Instant::now() + handshake + Duration::from_millis(spec.flows as u64);
    let (flows, _rejected) = listener
        .accept_flows(spec.setup_flows(), &cookie, &spec.socket, deadline)
        .map_err(|e| ctrl.fail("setup", e.message))?;
    // crr keeps listening: each of its transactions is a new connection.
    let listener = (spec.workload == plumb_spec::Workload::Crr).then(|| listener.into_inner());
    plumb_engine::check_rx_mode(&flows, spec.rx).map_err(|e| ctrl.fail("setup", e.message))?;
    let options = match udp_socks.first() {
        Some(u) => read_back_udp(u, &spec.socket),
        None => read_back_flows(&flows, &spec.socket),
    };

    match ctrl.read("start", handshake)? {
        Message::Start => {}
        m => return Err(ctrl.fail("order", format!("expected start, got {}", m.name()))),
    }
    let mut config = EngineConfig::for_spec(&spec, Role::Server);
    let engine = match config.udp.as_mut() {
        Some(u) => {
            u.tag = UdpPlan::tag_of(&cookie);
            Engine::start_udp(config, flows, udp_socks)
        }
        None => Engine::start_with_listener(config, flows, listener),
    }
    .map_err(|e| ctrl.fail("engine", e.to_string()))?;
    ctrl.send(Message::Started)?;

    let end = measure(&ctrl, &engine, &spec, options);
    let zerocopy = engine.zerocopy_probe();
    let errors = engine.stop();
    let mut end = end?;
    zerocopy.fill(&mut end);
    match errors {
        Ok(errors) => end.warnings.extend(
            errors
                .into_iter()
                .filter(|e| !e.after_window)
                .map(|e| format!("server flow {}: {}", e.flow, e.error)),
        ),
        Err(e) => return Err(ctrl.fail("engine", e.to_string())),
    }
    ctrl.send(Message::Results { end: Box::new(end) })?;
    Ok(())
}

/// Runs the server's window: opened by the client's mark, closed by its stop,
/// one interval sample per second in between. A client that goes silent for
/// longer than the spec allows ends the session.
fn measure(
    ctrl: &Ctrl,
    engine: &Engine,
    spec: &Spec,
    options: Vec<plumb_samples::OptionRecord>,
) -> Result<EndResult, String> {
    let reader = ctrl.stream.try_clone().map_err(|e| plain_io(&e))?;
    let _ = reader.set_read_timeout(None);
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("plumb-ctl".into())
        .spawn(move || loop {
            let f = read_frame(&reader, MAX_FRAME);
            let end = f.is_err();
            if tx.send(f).is_err() || end {
                break;
            }
        })
        .map_err(|e| e.to_string())?;
    let grace = Duration::from_secs(10);
    let next = |what: &str, timeout: Duration| -> Result<Option<Message>, String> {
        match rx.recv_timeout(timeout) {
            Ok(Ok(f)) => Ok(Some(f.message)),
            Ok(Err(e)) => Err(format!("client lost while waiting for {what}: {e}")),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                Err(format!("client lost while waiting for {what}"))
            }
        }
    };

    let warmup = Duration::from_millis(spec.warmup_ms);
    let mut meter = match next("mark", warmup + grace)? {
        Some(Message::Mark) => Meter::open(engine),
        // A client interrupted during warm-up may stop without a mark.
        Some(Message::Stop) => {
            let m = Meter::open(engine);
            return Ok(m.close(engine, &mut NoSink, options));
        }
        Some(m) => return Err(ctrl.fail("order", format!("expected mark, got {}", m.name()))),
        None => return Err("client sent no mark in time".into()),
    };
    let window = Duration::from_millis(spec.duration_ms);
    let opened = Instant::now();
    let mut next_tick = opened + Duration::from_secs(1);
    loop {
        let now = Instant::now();
        if now > opened + window + grace {
            return Err("client sent no stop in time".into());
        }
        let wait = next_tick.saturating_duration_since(now);
        match next("stop", wait)? {
            Some(Message::Stop) => return Ok(meter.close(engine, &mut NoSink, options)),
            Some(m) => return Err(ctrl.fail("order", format!("expected stop, got {}", m.name()))),
            None => {
                meter.tick(engine, &mut NoSink);
                next_tick += Duration::from_secs(1);
            }
        }
    }
}

/// Refuses CPUs this machine does not have or this process may not use.
pub fn check_cpus(cpus: &plumb_spec::CpuList, flag: &str, whose: &str) -> Result<(), String> {
    let online = plumb_sys::proc::online_cpus()
        .map_err(|e| format!("{flag}: cannot read the online CPUs: {e}"))?;
    let allowed = plumb_sys::affinity::allowed_cpus().unwrap_or_default();
    for &c in cpus.cpus() {
        if !online.contains(c) {
            return Err(format!(
                "{flag}: CPU {c} does not exist on {whose} (online: {online})"
            ));
        }
        if !allowed.is_empty() && !allowed.contains(&c) {
            return Err(format!(
                "{flag}: CPU {c} is not available to plumb on {whose} (allowed: {})",
                plumb_spec::CpuList::new(allowed.clone())
            ));
        }
    }
    Ok(())
}
