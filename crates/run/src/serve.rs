//! `plumb serve`: accepts control connections, authenticates them when it
//! holds a pre-shared key, checks each client's spec against its limits and
//! runs the mirror image with the engine in the server role. Every read has
//! a deadline; a session that goes wrong ends with an error message to the
//! client, a closed connection and a log line; the server itself goes on.
//! The protocol (frames, messages, their order, authentication, limits) is
//! `plumb_ctl`'s; this is the server end's runtime, beside the client's in
//! this crate, so it captures the environment and sets knobs itself.

use crate::test_end::{self, Cue, EndPlan, PartPlan, Step};
use plumb_ctl::auth;
use plumb_ctl::frame::{frames_from, read_frame_until, write_frame, FrameError, MAX_FRAME};
use plumb_ctl::limits::{Cidr, Limits};
use plumb_ctl::message::{software, Frame, Message};
use plumb_ctl::order::{Order, IN_ORDER};
use plumb_engine::meter::NoSink;
use plumb_engine::{udp_server_sockets, DataListener, Link, Sockets};
use plumb_samples::{EndResult, Role};
use plumb_spec::Spec;
use plumb_sys::{plain_io, Cookie};
use std::cell::RefCell;
use std::io::Write;
use std::net::{IpAddr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use plumb_ctl::DEFAULT_PORT;

/// How long a client has from connecting to sending its spec, and later to
/// sending `start`: a whole frame must arrive in that time, however slowly
/// its bytes trickle in.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// Control connections being served at once (tests and handshakes); more
/// are closed at once so that a flood of idle connections cannot pile up
/// threads.
pub const MAX_SESSIONS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Serve one session, then exit (the embedded server).
    pub once: bool,
    /// The pre-shared key; None serves anyone who may connect.
    pub psk: Option<Vec<u8>>,
    pub limits: Limits,
    /// Peers allowed to connect; empty allows all.
    pub allow: Vec<Cidr>,
    /// Data ports to use, for firewalls; None lets the kernel pick.
    pub data_ports: Option<(u16, u16)>,
    /// Tests run at the same time.
    pub concurrent: u32,
    pub log: LogFormat,
    /// Sends this host's environment, for the interfaces that reach the
    /// client, with each session's results; false where the client's own
    /// capture stands for this host (the embedded server).
    pub capture_env: bool,
    /// Sets host knobs for a session (`plumb serve --allow-knobs`), with
    /// the journal that restores them after a crash; false refuses every
    /// session that asks for one.
    pub allow_knobs: bool,
}

impl ServeConfig {
    /// No key, no limits, one test at a time.
    pub fn open(listen: SocketAddr) -> ServeConfig {
        ServeConfig {
            listen,
            once: false,
            psk: None,
            limits: Limits::default(),
            allow: Vec::new(),
            data_ports: None,
            concurrent: 1,
            log: LogFormat::Text,
            capture_env: false,
            allow_knobs: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {error}")]
    Listen { addr: SocketAddr, error: String },
    #[error("{0}")]
    Session(String),
}

/// A test in progress, for the `busy` answer.
struct Running {
    id: u64,
    peer: SocketAddr,
    since: jiff::Timestamp,
    ends: Instant,
}

struct Shared {
    cfg: ServeConfig,
    tests: Mutex<Vec<Running>>,
    next_id: AtomicU64,
    sessions: AtomicUsize,
}

impl Shared {
    fn log(&self, event: &str, peer: Option<SocketAddr>, message: &str) {
        let line = match self.cfg.log {
            LogFormat::Text => match peer {
                Some(p) => format!("plumb serve: session from {p}: {message}"),
                None => format!("plumb serve: {message}"),
            },
            LogFormat::Json => {
                let mut o = serde_json::json!({
                    "time": jiff::Timestamp::now().to_string(),
                    "event": event,
                    "message": message,
                });
                if let Some(p) = peer {
                    o["peer"] = p.to_string().into();
                }
                o.to_string()
            }
        };
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }

    /// Takes a test slot, or says who holds them.
    fn claim(self: &Arc<Self>, peer: SocketAddr, spec: &Spec) -> Result<Slot, String> {
        let mut tests = self.tests.lock().unwrap_or_else(|p| p.into_inner());
        if tests.len() >= self.cfg.concurrent.max(1) as usize {
            let t = tests
                .iter()
                .min_by_key(|t| t.ends)
                .expect("full means not empty");
            let left = t.ends.saturating_duration_since(Instant::now()).as_secs();
            return Err(format!(
                "busy: running a test for {} since {}, ends in {left} s",
                t.peer,
                t.since.round(jiff::Unit::Second).unwrap_or(t.since)
            ));
        }
        let id = self.next_id.fetch_add(1, SeqCst);
        tests.push(Running {
            id,
            peer,
            since: jiff::Timestamp::now(),
            ends: Instant::now()
                + HANDSHAKE
                + Duration::from_millis(spec.warmup_ms.saturating_add(spec.duration_ms)),
        });
        Ok(Slot {
            shared: Arc::clone(self),
            id,
        })
    }
}

/// A claimed test slot; given back however the session ends.
struct Slot {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut tests = self.shared.tests.lock().unwrap_or_else(|p| p.into_inner());
        tests.retain(|t| t.id != self.id);
    }
}

struct SessionCount(Arc<Shared>);
impl Drop for SessionCount {
    fn drop(&mut self) {
        self.0.sessions.fetch_sub(1, SeqCst);
    }
}

/// A v4 peer on a dual-stack socket shows as ::ffff:a.b.c.d; people and
/// --allow know it as a.b.c.d.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None)?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        // [::] takes IPv4 clients too, whatever net.ipv6.bindv6only says.
        sock.set_only_v6(false)?;
    }
    sock.bind(&addr.into())?;
    sock.listen(128)?;
    Ok(sock.into())
}

/// Binds, prints `plumb serve: listening on ADDR` on stdout (the embedded
/// client reads the port from it), and serves sessions.
pub fn serve(cfg: &ServeConfig) -> Result<(), ServeError> {
    let mut listen = cfg.listen;
    let listener = match bind(listen) {
        Ok(l) => l,
        // A host without IPv6 still serves IPv4 on the default address.
        Err(e)
            if listen.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                && e.raw_os_error() == Some(rustix::io::Errno::AFNOSUPPORT.raw_os_error()) =>
        {
            listen = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), listen.port());
            bind(listen).map_err(|e| ServeError::Listen {
                addr: listen,
                error: plain_io(&e),
            })?
        }
        Err(e) => {
            return Err(ServeError::Listen {
                addr: listen,
                error: plain_io(&e),
            })
        }
    };
    let local = listener.local_addr().map_err(|e| ServeError::Listen {
        addr: listen,
        error: plain_io(&e),
    })?;
    let _ = plumb_sys::process::raise_nofile_limit(0);
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "plumb serve: listening on {local}");
        let _ = out.flush();
    }
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        tests: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(0),
        sessions: AtomicUsize::new(0),
    });
    loop {
        let (ctrl, peer) = match listener.accept() {
            Ok((c, p)) => (c, canonical(p)),
            Err(e) => {
                shared.log(
                    "accept_failed",
                    None,
                    &format!("accept failed: {}", plain_io(&e)),
                );
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if !cfg.allow.is_empty() && !cfg.allow.iter().any(|c| c.contains(peer.ip())) {
            shared.log("refused", Some(peer), "refused: not in --allow");
            tell_refused(ctrl, peer);
            continue;
        }
        if cfg.once {
            let outcome = session(&shared, ctrl, peer);
            if let Err(e) = &outcome {
                shared.log("session_failed", Some(peer), e);
            }
            return outcome.map_err(ServeError::Session);
        }
        if shared.sessions.fetch_add(1, SeqCst) >= MAX_SESSIONS {
            shared.sessions.fetch_sub(1, SeqCst);
            shared.log(
                "refused",
                Some(peer),
                &format!("refused: {MAX_SESSIONS} control connections are open already"),
            );
            continue;
        }
        let count = SessionCount(Arc::clone(&shared));
        let sh = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("plumb-session".into())
            .spawn(move || {
                let _count = count;
                if let Err(e) = session(&sh, ctrl, peer) {
                    sh.log("session_failed", Some(peer), &e);
                }
            });
        if let Err(e) = spawned {
            shared.log(
                "refused",
                Some(peer),
                &format!("refused: cannot start a thread: {e}"),
            );
        }
    }
}

/// Refusals being told at once; more are closed unanswered, so that
/// peers the server does not serve cannot make it hold threads.
static REFUSALS: AtomicUsize = AtomicUsize::new(0);
const MAX_REFUSALS: usize = 16;
/// How long a refused peer gets to say hello before it is told.
const REFUSAL_WAIT: Duration = Duration::from_secs(1);

/// Tells a peer outside --allow why it is refused: one error frame after
/// its hello (written before the hello, it could be lost in the reset that
/// its hello would draw), then the connection closes. On its own thread,
/// bounded in time and in number.
fn tell_refused(ctrl: TcpStream, peer: SocketAddr) {
    if REFUSALS.fetch_add(1, SeqCst) >= MAX_REFUSALS {
        REFUSALS.fetch_sub(1, SeqCst);
        return;
    }
    let told = std::thread::Builder::new()
        .name("plumb-refuse".into())
        .spawn(move || {
            let until = Instant::now() + REFUSAL_WAIT;
            let _ = read_frame_until(&ctrl, MAX_FRAME, until);
            let _ = ctrl.set_write_timeout(Some(REFUSAL_WAIT));
            let why = format!(
                "refused: {} is not in this server's --allow list",
                peer.ip()
            );
            let _ = write_frame(&ctrl, &Frame::new(Message::error("refused", why)));
            let _ = ctrl.shutdown(Shutdown::Write);
            // Read to the client's end, so closing sends a FIN, not a reset
            // that could take the error with it.
            let _ = ctrl.set_read_timeout(Some(REFUSAL_WAIT));
            let _ = std::io::copy(&mut &ctrl, &mut std::io::sink());
            REFUSALS.fetch_sub(1, SeqCst);
        });
    if told.is_err() {
        REFUSALS.fetch_sub(1, SeqCst);
    }
}

struct Ctrl {
    stream: TcpStream,
    /// Every frame either way steps it.
    order: RefCell<Order>,
}

impl Drop for Ctrl {
    /// Shuts the socket down, not just this handle: a reader thread's clone
    /// then sees the end at once instead of holding the connection open.
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

impl Ctrl {
    fn send(&self, m: Message) -> Result<(), String> {
        self.order
            .borrow_mut()
            .take(&m)
            .map_err(|e| format!("sending to the client out of order: {e}"))?;
        let _ = self.stream.set_write_timeout(Some(HANDSHAKE));
        write_frame(&self.stream, &Frame::new(m)).map_err(|e| format!("sending to the client: {e}"))
    }

    /// Tells the client why and gives up on the session.
    fn fail(&self, code: &str, message: String) -> String {
        let _ = self.send(Message::error(code, message.clone()));
        message
    }

    /// The next message, which must be the one the order says is due.
    fn next(&self, until: Instant) -> Result<Message, String> {
        let m = self.read(until)?;
        self.take(&m)?;
        Ok(m)
    }

    /// Steps the order with a message received; one out of place ends the
    /// session.
    fn take(&self, m: &Message) -> Result<(), String> {
        let taken = match m {
            // A client has no error to report: one is out of place too.
            Message::Error { .. } => Err(format!(
                "expected {}, got {}",
                self.order.borrow().due(),
                m.name()
            )),
            _ => self.order.borrow_mut().take(m),
        };
        taken.map_err(|e| self.fail("order", e))
    }

    /// The next message, whatever it is.
    fn read(&self, until: Instant) -> Result<Message, String> {
        let what = self.order.borrow().due();
        match read_frame_until(&self.stream, MAX_FRAME, until) {
            Ok(f) => Ok(f.message),
            Err(FrameError::Closed) => {
                Err(format!("the client closed the connection before {what}"))
            }
            Err(e @ FrameError::Version(_)) => Err(self.fail("version", e.to_string())),
            Err(e @ (FrameError::Invalid(_) | FrameError::TooLarge(..))) => {
                Err(self.fail("frame", e.to_string()))
            }
            Err(FrameError::Timeout) => Err(self.fail(
                "timeout",
                format!(
                    "no complete {what} within {} s; closing",
                    HANDSHAKE.as_secs()
                ),
            )),
            Err(e) => Err(format!("waiting for {what}: {e}")),
        }
    }

    /// Whether the client is still there: a closed or reset connection ends
    /// waits that do not read from it.
    fn alive(&self) -> Result<(), String> {
        use rustix::net::{recv, RecvFlags};
        let mut b = [0u8; 1];
        match recv(&self.stream, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            Ok((0, _)) => Err("the client closed the control connection".into()),
            Ok(_) => Ok(()),
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::INTR => Ok(()),
            Err(e) => Err(format!("the control connection failed: {e}")),
        }
    }
}

/// Proves the client holds the key and proves this server does too.
fn authenticate(
    sh: &Shared,
    ctrl: &Ctrl,
    peer: SocketAddr,
    key: &[u8],
    server_nonce: &str,
    client_nonce: &str,
    until: Instant,
) -> Result<(), String> {
    let m = ctrl.read(until);
    if let Ok(m @ Message::Auth { .. }) = &m {
        ctrl.take(m)?;
    }
    let why = match m {
        Err(e) => format!("no key ({e})"),
        Ok(Message::Auth { proof }) => {
            if !auth::is_nonce(client_nonce) {
                "the client sent no nonce".to_string()
            } else if auth::verify(key, auth::CLIENT_LABEL, server_nonce, client_nonce, &proof) {
                return ctrl.send(Message::AuthOk {
                    proof: auth::proof(key, auth::SERVER_LABEL, server_nonce, client_nonce),
                });
            } else {
                "wrong key".to_string()
            }
        }
        Ok(m) => format!("no key (the client sent {} instead of auth)", m.name()),
    };
    sh.log(
        "auth_failed",
        Some(peer),
        &format!("authentication failed: {why}"),
    );
    ctrl.fail("auth", "authentication failed".into());
    Err(String::new())
}

/// Applies the knobs a client asked for, all or none, when this server
/// allows knobs and the session proved the key; returns what each did and
/// the guard that puts them back. The refusal names the flag and the reason.
fn session_knobs(
    sh: &Arc<Shared>,
    peer: SocketAddr,
    knobs: &[String],
) -> Result<(Vec<String>, Option<crate::knob::Applied>), String> {
    if knobs.is_empty() {
        return Ok((Vec::new(), None));
    }
    if !sh.cfg.allow_knobs {
        return Err(
            "--server-knob: this server does not set knobs (start plumb serve with --allow-knobs)"
                .into(),
        );
    }
    if sh.cfg.psk.is_none() {
        return Err(
            "--server-knob: knobs need a session that proved the key, and this server \
                    has none (start plumb serve with --psk-file and --allow-knobs)"
                .into(),
        );
    }
    // Knobs are the host's: two sessions setting one would each put back
    // what the other set.
    if sh.cfg.concurrent > 1 {
        return Err(format!(
            "--server-knob: this server runs {} tests at once (--concurrent) and knobs are \
             host-wide; start it with --concurrent 1 to let clients set knobs",
            sh.cfg.concurrent
        ));
    }
    let (lines, guard) =
        crate::knob::apply_server(knobs).map_err(|e| format!("--server-knob: {e}"))?;
    for l in &lines {
        sh.log("knob", Some(peer), l);
    }
    Ok((lines, Some(guard)))
}

fn session(sh: &Arc<Shared>, stream: TcpStream, peer: SocketAddr) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    plumb_ctl::liveness::watch_peer(&stream);
    let local_ip = stream
        .local_addr()
        .map_err(|e| plain_io(&e))?
        .ip()
        .to_canonical();
    let ctrl = Ctrl {
        stream,
        order: RefCell::new(Order::new()),
    };
    // Everything before the spec is in shares one deadline.
    let until = Instant::now() + HANDSHAKE;

    let Message::Hello {
        nonce: client_nonce,
        ..
    } = ctrl.next(until)?
    else {
        unreachable!("{IN_ORDER}")
    };
    let nonce = Cookie::random().map_err(|e| plain_io(&e))?.to_hex();
    ctrl.send(Message::Welcome {
        software: software(),
        nonce: nonce.clone(),
        auth: sh.cfg.psk.is_some(),
    })?;
    if let Some(key) = &sh.cfg.psk {
        match authenticate(sh, &ctrl, peer, key, &nonce, &client_nonce, until) {
            // Logged already, with the reason the client is not told.
            Err(e) if e.is_empty() => return Ok(()),
            r => r?,
        }
    }

    let Message::Setup {
        spec,
        knobs,
        observe,
    } = ctrl.next(until)?
    else {
        unreachable!("{IN_ORDER}")
    };
    let spec = *spec;
    if let Err(e) = spec.validate() {
        return Err(ctrl.fail("spec", e.to_string()));
    }
    if let Err(e) = sh.cfg.limits.check(&spec) {
        return Err(ctrl.fail("limit", e));
    }
    if let Some(cpus) = &spec.server_cpus {
        if let Err(msg) = plumb_sys::affinity::check_cpus(
            cpus,
            plumb_spec::Field::ServerCpus.flag(),
            "the server",
        ) {
            return Err(ctrl.fail("spec", msg));
        }
    }
    if let Some(why) = observe.profile.and_then(|_| plumb_sys::perf::refusal()) {
        return Err(ctrl.fail("profile", format!("the server: {why}")));
    }
    let slot = match sh.claim(peer, &spec) {
        Ok(s) => s,
        Err(busy) => {
            sh.log("busy", Some(peer), &format!("refused: {busy}"));
            ctrl.fail("busy", busy);
            return Ok(());
        }
    };

    // Held to the results, or to the end of the session whichever way it
    // ends: dropping it puts the knobs back.
    let (knob_lines, knob_guard) =
        session_knobs(sh, peer, &knobs).map_err(|e| ctrl.fail("knob", e))?;
    let _ = plumb_sys::process::raise_nofile_limit(spec.all_flows() + 256);
    // The main part's sockets, then each other part's on a port of its own.
    let part_specs: Vec<Spec> = spec.parts.iter().map(|p| spec.part_spec(p)).collect();
    let mut bound = Vec::with_capacity(1 + part_specs.len());
    for s in std::iter::once(&spec).chain(&part_specs) {
        bound.push(data_sockets(&sh.cfg, local_ip, s).map_err(|e| ctrl.fail("setup", e))?);
    }
    let cookie = Cookie::random().map_err(|e| plain_io(&e))?;
    ctrl.send(Message::Ready(plumb_ctl::Ready {
        data_port: bound[0].0.port(),
        cookie: cookie.to_hex(),
        threads: spec.threads,
        knobs: knob_lines,
        part_ports: bound[1..].iter().map(|(l, _)| l.port()).collect(),
        boot_id: plumb_sys::proc::boot_id(),
    }))?;
    let mut sockets = Vec::with_capacity(bound.len());
    for (s, (listener, udp)) in std::iter::once(&spec).chain(&part_specs).zip(bound) {
        sockets.push(accept_sockets(&ctrl, s, listener, udp, &cookie)?);
    }
    let mut sockets = sockets.into_iter();
    let main_sockets = sockets.next().expect("the main part's sockets come first");
    // Only the client times, so only it needs to know.
    let link = Link {
        cookie,
        peer,
        same_clock: false,
    };
    let parts = spec
        .parts
        .iter()
        .zip(part_specs)
        .zip(sockets)
        .map(|((p, s), sockets)| PartPlan {
            name: p.name.clone(),
            spec: s,
            start_ms: p.start_ms,
            stop_ms: p.stop_ms,
            link,
            sockets,
        })
        .collect();
    let plan = EndPlan {
        spec: &spec,
        role: Role::Server,
        link: &link,
        sockets: main_sockets,
        observe,
        profile_peer: None,
        parts,
        path: None,
    };
    let mut cues = ServerCues {
        ctrl: &ctrl,
        spec: &spec,
        rx: None,
        opened: Instant::now(),
        next_tick: Instant::now(),
    };
    let figures = test_end::run_end(plan, &mut cues, &mut NoSink)?;
    let stopped = figures.stopped;
    if spec.workload == plumb_spec::Workload::Crr && stopped.strays > 0 {
        sh.log(
            "strays",
            Some(peer),
            &format!(
                "closed {} crr connections from other addresses",
                stopped.strays
            ),
        );
    }
    // After the window: the capture reads /proc/sys and runs ethtool and tc,
    // with the session's knobs still set. They go back before the results
    // do, so that the client's next session finds this server free.
    let env = sh
        .cfg
        .capture_env
        .then(|| Box::new(crate::env::capture_toward(peer.ip())));
    drop(knob_guard);
    // The test is over: a client that starts its next session as soon as
    // it has these results finds the slot free.
    drop(slot);
    ctrl.send(Message::Results {
        end: Box::new(figures.main),
        env,
        parts: figures.parts,
    })?;
    Ok(())
}

/// Accepts the flows of one part on its listener, each announced by the
/// session's cookie; crr keeps the listener, since each of its
/// transactions is a new connection.
fn accept_sockets(
    ctrl: &Ctrl,
    spec: &Spec,
    listener: DataListener,
    udp: Vec<std::net::UdpSocket>,
    cookie: &Cookie,
) -> Result<Sockets, String> {
    let deadline = Instant::now() + HANDSHAKE + Duration::from_millis(spec.flows as u64);
    let (flows, _rejected) = listener
        .accept_flows_while(
            spec.setup_flows(),
            cookie,
            &spec.socket,
            deadline,
            &mut || ctrl.alive(),
        )
        .map_err(|e| ctrl.fail("setup", e.message))?;
    let listener = (spec.workload == plumb_spec::Workload::Crr).then(|| listener.into_inner());
    let udp = plumb_engine::server_udp_sockets(udp, spec, cookie, deadline)
        .map_err(|e| ctrl.fail("setup", e.message))?;
    Ok(Sockets {
        flows,
        udp,
        listener,
    })
}

/// The data listener (and for UDP the sockets on the same port number), on
/// a port of --data-ports when given: the first one free for both.
fn data_sockets(
    cfg: &ServeConfig,
    ip: IpAddr,
    spec: &Spec,
) -> Result<(DataListener, Vec<std::net::UdpSocket>), String> {
    let backlog = spec.flows.min(4096) as i32;
    let bind_at = |port: u16| -> Result<(DataListener, Vec<std::net::UdpSocket>), String> {
        let listener =
            DataListener::bind(ip, port, &spec.socket, backlog).map_err(|e| e.message)?;
        // UDP datagrams come to the same port number; the sockets are bound
        // before the client hears of the port, so its first datagram finds them.
        let udp = if spec.workload.is_udp() {
            udp_server_sockets(ip, listener.port(), spec.threads, &spec.socket)
                .map_err(|e| e.message)?
        } else {
            Vec::new()
        };
        Ok((listener, udp))
    };
    let Some((lo, hi)) = cfg.data_ports else {
        return bind_at(0);
    };
    let mut last = String::new();
    for port in lo..=hi {
        match bind_at(port) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(format!(
        "no free port in --data-ports {lo}-{hi} (last: {last})"
    ))
}

/// Runs the server's window: opened by the client's mark, closed by its stop,
/// one interval sample per second in between. A client that goes silent for
/// longer than the spec allows ends the session.
/// A server's moments, as its client tells them.
struct ServerCues<'a> {
    ctrl: &'a Ctrl,
    spec: &'a Spec,
    /// The client's messages once the traffic runs, read on a thread of
    /// their own so that waiting for one can time out.
    rx: Option<std::sync::mpsc::Receiver<Result<Frame, FrameError>>>,
    opened: Instant,
    next_tick: Instant,
}

/// How long after its due time a client's mark or stop is waited for.
const GRACE: Duration = Duration::from_secs(10);

impl ServerCues<'_> {
    /// The client's next message within `timeout`, None without one.
    fn message(&self, timeout: Duration) -> Result<Option<Message>, String> {
        let what = self.ctrl.order.borrow().due();
        let rx = self.rx.as_ref().expect("started");
        match rx.recv_timeout(timeout) {
            Ok(Ok(f)) => self.ctrl.take(&f.message).map(|_| Some(f.message)),
            Ok(Err(e)) => Err(format!("client lost while waiting for {what}: {e}")),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                Err(format!("client lost while waiting for {what}"))
            }
        }
    }
}

impl test_end::Cues for ServerCues<'_> {
    type Error = String;

    fn go(&mut self) -> Result<(), String> {
        self.ctrl.next(Instant::now() + HANDSHAKE).map(|_| ())
    }

    fn started(&mut self) -> Result<(), String> {
        self.ctrl.send(Message::Started)?;
        let reader = self.ctrl.stream.try_clone().map_err(|e| plain_io(&e))?;
        let _ = reader.set_read_timeout(None);
        self.rx = Some(frames_from(reader, MAX_FRAME).map_err(|e| e.to_string())?);
        Ok(())
    }

    fn warm_up(&mut self) -> Result<Cue, String> {
        let cue = match self.message(Duration::from_millis(self.spec.warmup_ms) + GRACE)? {
            Some(Message::Mark) => Cue::Open,
            // A client interrupted during warm-up may stop without a mark.
            Some(Message::Stop) => Cue::Close,
            Some(_) => unreachable!("{IN_ORDER}"),
            None => return Err("client sent no mark in time".into()),
        };
        self.opened = Instant::now();
        self.next_tick = self.opened + Duration::from_secs(1);
        Ok(cue)
    }

    fn next(&mut self) -> Result<Cue, String> {
        let now = Instant::now();
        if now > self.opened + Duration::from_millis(self.spec.duration_ms) + GRACE {
            return Err("client sent no stop in time".into());
        }
        match self.message(self.next_tick.saturating_duration_since(now))? {
            Some(Message::Stop) => Ok(Cue::Close),
            Some(_) => unreachable!("{IN_ORDER}"),
            None => {
                self.next_tick += Duration::from_secs(1);
                Ok(Cue::Tick)
            }
        }
    }

    fn closing(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn closed(&mut self, _: &mut EndResult) -> Result<(), String> {
        Ok(())
    }

    fn refused(&mut self, e: plumb_engine::SetupError) -> String {
        self.ctrl.fail("setup", e.message)
    }

    fn failed(&mut self, step: Step, message: String) -> String {
        match step {
            Step::Engine => self.ctrl.fail("engine", message),
            Step::Observe { flag } => self.ctrl.fail(
                flag.trim_start_matches('-'),
                format!("the server: {message}"),
            ),
        }
    }
}
