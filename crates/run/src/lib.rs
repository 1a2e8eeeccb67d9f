//! Orchestration of a run: start the embedded server (or reach a remote one),
//! set the flows up, run the warm-up and the measurement window on both ends
//! over the control protocol, and put the two ends' accounting together into
//! a [`RunRecord`].
#![deny(unsafe_code)]

pub mod activity;
pub mod delayline;
pub mod derive;
pub mod doctor;
pub mod embedded;
pub mod env;
pub mod experiment;
pub mod group;
pub mod knob;
pub mod notify;
pub mod serve;
pub mod ssh;
pub mod test_end;
pub mod topology;
pub mod vm;

use embedded::EmbeddedServer;
use plumb_ctl::{CtlError, Session};
use plumb_engine::{connect_flows, Link, SampleSink, Sockets};
use plumb_samples::{Bimodal, Confidence, Environment, Iteration, Role, RunRecord, RUN_SCHEMA};
use plumb_spec::{Family, Field, Spec, SpecError};
use plumb_sys::Cookie;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use test_end::{Cue, EndPlan, PartPlan, Step};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Setting up the flows failed; `flag` names the user's option at fault.
    #[error("{message}")]
    Setup {
        flag: Option<&'static str>,
        message: String,
    },
    #[error(transparent)]
    Ctl(#[from] CtlError),
    #[error("{0}")]
    Embedded(String),
    #[error("{0}")]
    Engine(String),
}

impl From<plumb_engine::SetupError> for RunError {
    fn from(e: plumb_engine::SetupError) -> Self {
        RunError::Setup {
            flag: e.flag,
            message: e.message,
        }
    }
}

#[derive(Clone)]
pub struct RunOptions {
    /// A `plumb serve` started by hand; None starts the embedded one.
    pub server: Option<SocketAddr>,
    pub label: String,
    /// Set by a signal handler: end the window now and report what was
    /// measured, marked incomplete.
    pub interrupted: Arc<AtomicBool>,
    /// The binary that runs `serve --once` (this executable).
    pub server_exe: PathBuf,
    /// The pre-shared key of a `plumb serve --psk-file`.
    pub psk: Option<Vec<u8>>,
    /// Refuse to start while another plumb run measures on this host
    /// (otherwise both runs carry a warning).
    pub exclusive: bool,
    /// Knobs for the server end's host: asked of a `plumb serve` at each
    /// session, set in the server's namespace under `--topology veth`. (An
    /// embedded server on this host and namespace shares the client's
    /// knobs; the caller sets them as its own.)
    pub server_knobs: Vec<knob::Setting>,
    /// Knobs for the client's namespace under `--topology veth`
    /// (`KNOB@client`), set there once it is made.
    pub client_knobs: Vec<knob::Setting>,
    /// What both ends read beyond the defaults over each window
    /// (`--profile`, `--tcp-probe`).
    pub observe: plumb_samples::Observe,
}

/// What the server end said besides its figures.
struct FarEnd {
    env: Option<Environment>,
    /// What its knobs did on its host, one line each.
    knobs: Vec<String>,
}

/// The loopback address of a family, for the embedded server.
pub fn loopback(family: Family) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Family::V6 => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

const POLL: Duration = Duration::from_millis(50);

/// Sleeps until `until`, waking every 50 ms to notice an interrupt or a
/// server that went away. Returns false when interrupted.
fn wait_until(until: Instant, opts: &RunOptions, session: &mut Session) -> Result<bool, RunError> {
    loop {
        if opts.interrupted.load(Relaxed) {
            return Ok(false);
        }
        if let Some(e) = session.poll_trouble() {
            return Err(e.into());
        }
        let now = Instant::now();
        if now >= until {
            return Ok(true);
        }
        std::thread::sleep((until - now).min(POLL));
    }
}

/// How many iterations a run makes: at least `min`, then more until the
/// Student-t interval of the mean metric is within `target` of the mean at
/// `level`, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Repeat {
    pub min: u32,
    pub max: u32,
    pub level: f64,
    pub target: f64,
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat {
            min: 3,
            max: 10,
            level: 0.95,
            target: 0.025,
        }
    }
}

impl Repeat {
    /// Exactly one iteration, no confidence target (quick looks, tests).
    pub fn once() -> Repeat {
        Repeat {
            min: 1,
            max: 1,
            ..Repeat::default()
        }
    }
}

/// What the iterations so far say: the interval, outliers, two levels.
pub fn confidence(values: &[f64], repeat: &Repeat) -> Confidence {
    let mean = plumb_stats::mean(values);
    let interval = plumb_stats::t_interval(values, repeat.level);
    let relative = interval
        .as_ref()
        .map(|i| i.relative_half_width())
        .filter(|w| w.is_finite());
    Confidence {
        metric: "throughput_bps".into(),
        level: repeat.level,
        target: repeat.target,
        min_iterations: repeat.min,
        max_iterations: repeat.max,
        mean,
        half_width: interval.as_ref().map(|i| i.half_width),
        relative_half_width: relative,
        reached: relative.is_some_and(|w| w <= repeat.target),
        outliers: plumb_stats::mad_outliers(values, plumb_stats::MAD_THRESHOLD)
            .into_iter()
            .map(|i| i as u32)
            .collect(),
        bimodal: plumb_stats::bimodal(values).map(|b| Bimodal {
            low_mean: b.low_mean,
            high_mean: b.high_mean,
            low_n: b.low_n as u32,
            high_n: b.high_n as u32,
        }),
    }
}

/// Runs iterations of `spec` until `repeat` is satisfied or the run is
/// interrupted, and returns the record. `progress` hears of each iteration
/// as it ends, with the confidence so far.
pub fn run(
    spec: &Spec,
    opts: &RunOptions,
    repeat: &Repeat,
    sink: &mut dyn SampleSink,
    progress: &mut dyn FnMut(&Iteration, &Confidence),
) -> Result<RunRecord, RunError> {
    // `--io auto` decides on the host that runs the client (a guest's own
    // CPUs and ring), not where the spec was written.
    let mut here = spec.clone();
    plumb_spec::auto::resolve(
        &mut here,
        plumb_spec::auto::host_cpus(),
        plumb_engine::ring_works(),
    );
    let spec = &here;
    spec.validate()?;
    plumb_engine::check_io(spec)?;
    // Another plumb measuring on this host spoils this run's figures and
    // this run spoils its: each says so in the iterations they shared.
    let activity_dir = activity::default_dir();
    if let (true, Some(dir)) = (opts.exclusive, &activity_dir) {
        if let Some(other) = activity::running_in(dir).first() {
            return Err(RunError::Setup {
                flag: Some("--exclusive"),
                message: format!(
                    "--exclusive: another plumb run (pid {}) is measuring on this host; \
                     wait for it to end, or leave out --exclusive to run beside it with a warning",
                    other.pid
                ),
            });
        }
    }
    if let Some(cpus) = &spec.client_cpus {
        cpus_here(cpus, Field::ClientCpus, "the client")?;
    }
    // Every flow is a descriptor; a few dozen more go to the control
    // connection, epoll, eventfds and /proc reads.
    const SPARE_FDS: u64 = 64;
    let want = spec.all_flows() + SPARE_FDS;
    let mut groups = 1;
    if let Ok((soft, hard)) = plumb_sys::process::raise_nofile_limit(want) {
        // More flows than one process may hold are spread over a group of
        // client processes, each with its own embedded server.
        // (Over veth the namespaces are this run's own, and a run of parts
        // is one session: one process only.)
        if soft < want
            && opts.server.is_none()
            && spec.topology.is_none()
            && spec.parts.is_empty()
            && soft > 2 * SPARE_FDS
        {
            groups = group::groups_needed(spec.flows as u64, soft, SPARE_FDS) as u32;
            if opts.observe.profile.is_some() {
                return Err(RunError::Setup {
                    flag: Some("--profile"),
                    message: format!(
                        "--profile: {} flows need a group of {groups} client processes here \
                         (this process may open {soft} files), which is not profiled; \
                         raise the open-files limit (ulimit -n) or use fewer flows",
                        spec.flows
                    ),
                });
            }
        } else if soft < want {
            return Err(RunError::Setup {
                flag: Some(Field::Flows.flag()),
                message: format!(
                    "{}: {} flows need about {want} file descriptors but this process may open {soft} \
                     (hard limit {hard}; raising it needs root or CAP_SYS_RESOURCE): at most {} flows fit",
                    Field::Flows.flag(),
                    spec.flows,
                    soft.saturating_sub(SPARE_FDS)
                ),
            });
        }
    }
    if let (Some(k), None) = (opts.client_knobs.first(), &spec.topology) {
        return Err(RunError::Setup {
            flag: Some("--knob"),
            message: format!(
                "--knob {k}: @{} names the client's namespace of --topology veth; this run's \
                 client is in this host's namespace, so leave out @{}",
                knob::CLIENT_NS,
                knob::CLIENT_NS
            ),
        });
    }
    // Declared before the namespace guard so that the thread is home again
    // before the namespaces go.
    let mut veth =
        match (&spec.topology, opts.server) {
            (Some(plumb_spec::Topology::Veth(v)), None) => Some(topology::VethPair::up(
                v,
                &knob::Journal::open_default(),
                &opts.client_knobs,
                &opts.server_knobs,
            )?),
            (Some(_), Some(_)) => return Err(RunError::Setup {
                flag: Some(Field::Topology.flag()),
                message:
                    "--topology veth runs both ends on this host; it cannot be used with --server"
                        .into(),
            }),
            (None, _) => None,
        };
    // The spec as this run runs it: with the emulator the path chose.
    let resolved = veth.as_ref().map(|v| v.resolve(spec));
    let spec = resolved.as_ref().unwrap_or(spec);
    // The client's threads and sockets are made by this thread, so they are
    // born in the client's namespace.
    let _inside = match &veth {
        Some(v) => Some(
            plumb_sys::knob::enter_netns(&v.client_ns)
                .map_err(|e| RunError::Embedded(format!("--topology veth: {e}")))?,
        ),
        None => None,
    };
    let activity = activity_dir.and_then(|d| activity::Activity::begin(&d).ok());
    let started_at = jiff::Timestamp::now().to_string();
    let mut iterations: Vec<Iteration> = Vec::new();
    // The server end's environment, as its latest results brought it, and
    // what its knobs did (said by every session alike; the first is kept).
    let mut server_env = None;
    let mut server_knobs = veth
        .as_ref()
        .map(|v| v.server_knobs.clone())
        .unwrap_or_default();
    let conf = loop {
        let began = activity::now_ns();
        let mut it = if groups > 1 {
            group::run_iteration(spec, opts, groups)?
        } else {
            let (it, far) = run_iteration(spec, opts, sink, veth.as_ref())?;
            server_env = far.env.or(server_env);
            if server_knobs.is_empty() {
                server_knobs = far.knobs;
            }
            it
        };
        if let Some(a) = &activity {
            a.still_here();
            it.client
                .warnings
                .extend(a.overlapping(began).iter().map(activity::Other::describe));
        }
        it.client
            .warnings
            .extend(delayline::busy_warning(spec, &it, topology::CLIENT_IF));
        let short = it.short_window();
        it.client.warnings.extend(short);
        it.index = iterations.len() as u32;
        // More iterations of a starved spec would starve alike.
        let starved = derive::starved(spec, &it);
        it.client.warnings.extend(starved.clone());
        let go_on = it.complete && starved.is_none();
        iterations.push(it);
        let values: Vec<f64> = iterations
            .iter()
            .filter(|i| derive::counts(spec, i))
            .map(|i| i.derived.metric())
            .collect();
        let mut conf = confidence(&values, repeat);
        if spec.is_transactional() {
            conf.metric = "tps".into();
        }
        progress(iterations.last().expect("just pushed"), &conf);
        let n = iterations.len() as u32;
        if !go_on
            || n >= repeat.max
            || (n >= repeat.min && conf.reached)
            || opts.interrupted.load(Relaxed)
        {
            break conf;
        }
    };
    let complete = iterations.iter().all(|i| i.complete) && !opts.interrupted.load(Relaxed);
    // Captured here, where this thread is still in the client's namespace
    // under --topology veth, for the interfaces that reach the server.
    let server_ip = match (opts.server, &veth) {
        (Some(a), _) => a.ip(),
        (None, Some(_)) => topology::VethPair::server_ip(spec.family),
        (None, None) => loopback(spec.family),
    };
    let mut environment = env::capture_toward(server_ip);
    if let Some(s) = &server_env {
        environment.add_server_end(s);
    }
    let path = veth.as_mut().and_then(topology::VethPair::finish_path);
    Ok(RunRecord {
        schema: RUN_SCHEMA.to_string(),
        uuid: plumb_sys::cookie::new_uuid().ok(),
        plumb_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        label: opts.label.clone(),
        spec_key: spec.key(),
        spec: spec.clone(),
        complete,
        iterations,
        confidence: Some(conf),
        build: None,
        peer: None,
        server_knobs,
        environment: Some(environment),
        path,
        vm: None,
        suspect: None,
    })
}

/// How long the server end may take, after the window closes, to stop its
/// flows, read its probes and send its results (and a millisecond more per
/// flow). Ten seconds ran out once in a test suite on a 2-CPU host; a
/// server that hangs still fails the run, later.
const RESULTS_WAIT: Duration = Duration::from_secs(30);

/// Refuses CPUs of `field` that this host lacks or this process may not
/// use; `whose` says where they were meant for.
pub(crate) fn cpus_here(
    cpus: &plumb_spec::CpuList,
    field: Field,
    whose: &str,
) -> Result<(), RunError> {
    plumb_sys::affinity::check_cpus(cpus, field.flag(), whose).map_err(|message| RunError::Setup {
        flag: Some(field.flag()),
        message,
    })
}

/// One iteration: a fresh server session and fresh flows, the warm-up, the
/// window, and both ends' accounting.
fn run_iteration(
    spec: &Spec,
    opts: &RunOptions,
    sink: &mut dyn SampleSink,
    veth: Option<&topology::VethPair>,
) -> Result<(Iteration, FarEnd), RunError> {
    run_iteration_at(spec, opts, sink, veth, &mut || Ok(()))
}

/// As [`run_iteration`], calling `all_set` once the flows are up and before
/// anything is started, so that the processes of a flow group can start
/// together.
fn run_iteration_at(
    spec: &Spec,
    opts: &RunOptions,
    sink: &mut dyn SampleSink,
    veth: Option<&topology::VethPair>,
    all_set: &mut dyn FnMut() -> Result<(), RunError>,
) -> Result<(Iteration, FarEnd), RunError> {
    let mut embedded = match (opts.server, veth) {
        (Some(_), _) => None,
        (None, None) => Some(EmbeddedServer::start(
            &opts.server_exe,
            SocketAddr::new(loopback(spec.family), 0),
        )?),
        (None, Some(v)) => Some(EmbeddedServer::start_in(
            &opts.server_exe,
            SocketAddr::new(topology::VethPair::server_ip(spec.family), 0),
            Some(&v.server_ns),
        )?),
    };
    let server_addr = match (&embedded, opts.server) {
        (Some(e), _) => e.addr,
        (None, Some(a)) => a,
        (None, None) => unreachable!("one of the two is set"),
    };

    let mut session =
        Session::connect_with_key(server_addr, Duration::from_secs(5), opts.psk.as_deref())?;
    // Only a server of its own is asked: the embedded one's knobs are set
    // by this process (in the server's namespace under --topology veth).
    let knobs: Vec<String> = match embedded {
        Some(_) => Vec::new(),
        None => opts.server_knobs.iter().map(|s| s.to_string()).collect(),
    };
    // The embedded server shares this host's kernel and CPUs: this end's
    // samplers make its profile too, so that each CPU is sampled once.
    let profile_peer = match (&embedded, opts.observe.profile) {
        (Some(e), Some(_)) => e.pid().map(|pid| plumb_engine::profile::PeerEnd {
            pid,
            cpus: spec.server_cpus.clone(),
            slot: Default::default(),
        }),
        _ => None,
    };
    let server_observe = plumb_samples::Observe {
        profile: opts.observe.profile.filter(|_| profile_peer.is_none()),
        ..opts.observe
    };
    let server_profile = profile_peer.as_ref().map(|p| p.slot.clone());
    let ready = session.setup(spec, &knobs, server_observe)?;
    let cookie = Cookie::from_hex(&ready.cookie)
        .ok_or_else(|| CtlError::Protocol(format!("malformed cookie '{}'", ready.cookie)))?;
    let data = SocketAddr::new(server_addr.ip(), ready.data_port);
    let same_clock = ready.boot_id.is_some() && ready.boot_id == plumb_sys::proc::boot_id();
    let mut announcers = Vec::new();
    let sockets = connect_sockets(data, spec, &cookie, &mut announcers)?;
    let mut parts = Vec::with_capacity(spec.parts.len());
    for (p, &port) in spec.parts.iter().zip(&ready.part_ports) {
        let part_spec = spec.part_spec(p);
        let data = SocketAddr::new(server_addr.ip(), port);
        parts.push(PartPlan {
            name: p.name.clone(),
            sockets: connect_sockets(data, &part_spec, &cookie, &mut announcers)?,
            spec: part_spec,
            start_ms: p.start_ms,
            stop_ms: p.stop_ms,
            link: Link {
                cookie,
                peer: data,
                same_clock,
            },
        });
    }
    let link = Link {
        cookie,
        peer: data,
        same_clock,
    };
    let plan = EndPlan {
        spec,
        role: Role::Client,
        link: &link,
        sockets,
        observe: opts.observe,
        profile_peer,
        parts,
        path: veth.and_then(topology::VethPair::path_watch),
    };
    let mut cues = ClientCues {
        spec,
        opts,
        session: &mut session,
        all_set,
        announcers,
        t0: Instant::now(),
        opened: Instant::now(),
        ticks: 0,
        complete: true,
        lost: None,
        server: None,
    };
    let figures = test_end::run_end(plan, &mut cues, sink)?;
    let mut client = figures.main;
    let complete = cues.complete && cues.lost.is_none();
    let served = cues
        .server
        .take()
        .expect("the results or the loss, once closed");
    let (mut server, server_env) = (served.end, served.env);
    let made =
        server_profile.and_then(|slot| slot.lock().unwrap_or_else(|p| p.into_inner()).take());
    match made {
        Some(Ok(p)) if !server.lost => server.profile = Some(p),
        Some(Err(e)) => server.warnings.push(e),
        _ => {}
    }
    if let Some(e) = embedded.as_mut() {
        e.reap(Duration::from_secs(2));
        if server.lost {
            if let Some(why) = e.said() {
                client
                    .warnings
                    .push(format!("the embedded server said: {why}"));
            }
        }
    }

    let parts = derive::parts(spec, figures.parts, served.parts);
    let mut it = Iteration {
        index: 0,
        complete,
        warmup_s: spec.warmup_ms as f64 / 1000.0,
        window_s: client.window_s,
        transfer: derive::transfer(&client, &server),
        derived: derive::derive(spec, &client, &server),
        client,
        server,
        parts,
        responsiveness: Vec::new(),
    };
    it.responsiveness = plumb_samples::rpm::loaded(&it);
    Ok((
        it,
        FarEnd {
            env: server_env,
            knobs: ready.knobs,
        },
    ))
}

/// The client's moments: it keeps the test's time and tells the server
/// each edge; a server that goes away mid-test leaves the client's figures,
/// kept and marked incomplete.
struct ClientCues<'a> {
    spec: &'a Spec,
    opts: &'a RunOptions,
    session: &'a mut Session,
    /// Every flow group has its flows up (the barrier of `group.rs`).
    all_set: &'a mut dyn FnMut() -> Result<(), RunError>,
    /// The hellos of `--direction recv` UDP flows, until the server has
    /// started (and so has heard them all).
    announcers: Vec<plumb_engine::Announcer>,
    t0: Instant,
    opened: Instant,
    ticks: u64,
    /// False once the test stopped before its time (an interrupt).
    complete: bool,
    /// Why the server was lost, once it was.
    lost: Option<String>,
    /// The server's figures and environment, once the window closed.
    server: Option<plumb_ctl::ServerResults>,
}

impl ClientCues<'_> {
    /// Waits until `until`: true there, false on an interrupt or a lost
    /// server (which is noted).
    fn wait(&mut self, until: Instant) -> Result<bool, RunError> {
        if self.lost.is_some() {
            return Ok(false);
        }
        match wait_until(until, self.opts, self.session) {
            Err(RunError::Ctl(CtlError::Lost(why))) => {
                self.lost = Some(why);
                Ok(false)
            }
            r => r,
        }
    }

    /// Tells the server an edge, noting a loss rather than failing on it.
    fn tell(&mut self, send: fn(&mut Session) -> Result<(), CtlError>) -> Result<(), RunError> {
        if self.lost.is_some() {
            return Ok(());
        }
        match send(self.session) {
            Err(CtlError::Lost(why)) => {
                self.lost = Some(why);
                Ok(())
            }
            r => Ok(r?),
        }
    }
}

impl test_end::Cues for ClientCues<'_> {
    type Error = RunError;

    fn go(&mut self) -> Result<(), RunError> {
        (self.all_set)()?;
        self.session.start(self.spec.setup_flows())?;
        self.announcers.clear();
        Ok(())
    }

    fn started(&mut self) -> Result<(), RunError> {
        self.t0 = Instant::now();
        Ok(())
    }

    fn warm_up(&mut self) -> Result<Cue, RunError> {
        self.complete = self.wait(self.t0 + Duration::from_millis(self.spec.warmup_ms))?;
        // The peer is told first, then this end snapshots: both edges are
        // then late on the server by the same one-way delay, so both
        // windows have the same length.
        self.tell(Session::mark)?;
        self.opened = Instant::now();
        Ok(match self.complete && self.lost.is_none() {
            true => Cue::Open,
            false => Cue::Close,
        })
    }

    fn next(&mut self) -> Result<Cue, RunError> {
        let end = self.opened + Duration::from_millis(self.spec.duration_ms);
        self.ticks += 1;
        let next = (self.opened + Duration::from_secs(self.ticks)).min(end);
        if !self.wait(next)? {
            self.complete = false;
            return Ok(Cue::Close);
        }
        Ok(if next >= end { Cue::Close } else { Cue::Tick })
    }

    fn closing(&mut self) -> Result<(), RunError> {
        self.tell(Session::stop)
    }

    fn closed(&mut self, client: &mut plumb_samples::EndResult) -> Result<(), RunError> {
        self.server = Some(match &self.lost {
            None => self
                .session
                .results(RESULTS_WAIT + Duration::from_millis(self.spec.flows as u64))?,
            Some(why) => {
                client.warnings.push(format!(
                    "server lost: {why}; only the client's figures remain"
                ));
                plumb_ctl::ServerResults {
                    end: lost_server(self.spec),
                    env: None,
                    parts: Vec::new(),
                }
            }
        });
        Ok(())
    }

    fn refused(&mut self, e: plumb_engine::SetupError) -> RunError {
        e.into()
    }

    fn failed(&mut self, step: Step, message: String) -> RunError {
        match step {
            Step::Engine => RunError::Engine(message),
            Step::Observe { flag } => RunError::Setup {
                flag: Some(flag),
                message,
            },
        }
    }
}

/// Connects one part's flows to `data`, each announced by the cookie, and
/// for UDP its sockets, whose hellos (for a stream the server sends) go on
/// in `announcers`.
fn connect_sockets(
    data: SocketAddr,
    spec: &Spec,
    cookie: &Cookie,
    announcers: &mut Vec<plumb_engine::Announcer>,
) -> Result<Sockets, RunError> {
    let flows = connect_flows(
        data,
        spec.setup_flows(),
        &spec.socket,
        cookie,
        Duration::from_secs(5),
    )?;
    let (udp, announcer) = plumb_engine::client_udp_sockets(data, spec, cookie)?;
    announcers.extend(announcer);
    Ok(Sockets {
        flows,
        udp,
        listener: None,
    })
}

/// The server's end of an iteration whose server went away: nothing
/// measured, and marked lost so that reports show its figures as missing.
fn lost_server(spec: &Spec) -> plumb_samples::EndResult {
    plumb_samples::EndResult {
        warnings: vec!["lost: the server went away during the test".into()],
        lost: true,
        ..plumb_samples::EndResult::empty(Role::Server, spec.threads)
    }
}
