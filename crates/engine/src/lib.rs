//! The data path. Worker threads, each an epoll loop over its share of many
//! non-blocking flows; per-flow counters summed by a sampler; a measurement
//! window with CPU and kernel-counter snapshots at both edges. The same engine
//! runs the client and the server role. It emits interval samples into a
//! [`SampleSink`] and knows nothing of storage, reports or the control protocol.
#![deny(unsafe_code)]

pub mod acks;
mod crr;
#[cfg(test)]
mod dice;
pub mod end;
mod flow;
pub mod latency;
pub mod meter;
mod plan;
pub mod probe;
pub mod profile;
mod ring;
mod rr;
mod schedule;
pub mod setup;
mod stream;
mod udp;
mod worker;
mod workload;

pub use crr::CrrPlan;
pub use end::{ReadyEnd, RunningEnd, Sockets, Stopped};
pub use flow::FlowError;
pub use meter::{Meter, SampleSink};
pub use rr::RrPlan;
pub use setup::{
    check_io, check_rx_mode, connect_flows, local_port_count, read_back, read_back_flows,
    read_back_udp, ring_works, udp_client_sockets, udp_server_sockets, DataListener, SetupError,
};
pub use stream::StreamPlan;
pub use udp::{client_udp_sockets, server_udp_sockets, Announcer, UdpPlan};
pub use workload::Workload;

use flow::{FlowCounters, Shared};
use plan::Plan;
use plumb_samples::{Role, TcpInfo};
use plumb_spec::CpuList;
use plumb_sys::plain_io;
use std::net::TcpStream;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed,
    Ordering::Release,
};
use std::sync::Arc;
use std::thread::JoinHandle;
use workload::WorkerPlan;

/// How one end drives its flows.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub role: Role,
    pub threads: u32,
    /// Worker i runs on cpus[i % len]; None leaves placement to the scheduler.
    pub cpus: Option<CpuList>,
    pub workload: Workload,
    /// How the workers move the data.
    pub io: plumb_spec::Io,
}

/// What an end knows of the other before its engine starts.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    /// The test's cookie; UDP datagrams carry its first bytes as their tag.
    pub cookie: plumb_sys::Cookie,
    /// On the client the server's data address, where crr connects; on the
    /// server the client's address, the only one crr connections are served
    /// from.
    pub peer: std::net::SocketAddr,
    /// The ends run on one kernel (one host, its namespaces, one guest)
    /// and so read one CLOCK_MONOTONIC: the client splits each udp-rr
    /// latency into its two ways from the server's stamps.
    pub same_clock: bool,
}

impl EngineConfig {
    /// How `role` drives the flows of `spec` with the other end `link`.
    pub fn for_spec(spec: &plumb_spec::Spec, role: Role, link: &Link) -> EngineConfig {
        let server = role == Role::Server;
        // Every workload is named, so that a new one gets its plan on
        // purpose rather than running as a stream.
        let workload = match spec.workload {
            plumb_spec::Workload::Stream => Workload::Stream(Plan::for_spec(spec, server, link)),
            plumb_spec::Workload::Rr => Workload::Rr(Plan::for_spec(spec, server, link)),
            plumb_spec::Workload::Crr => Workload::Crr(Plan::for_spec(spec, server, link)),
            plumb_spec::Workload::UdpStream | plumb_spec::Workload::UdpRr => {
                Workload::Udp(Plan::for_spec(spec, server, link))
            }
        };
        EngineConfig {
            role,
            threads: spec.threads,
            cpus: if server {
                spec.server_cpus.clone()
            } else {
                spec.client_cpus.clone()
            },
            workload,
            io: spec.io,
        }
    }

    /// Stream: MSG_ZEROCOPY sends from this end.
    fn sends_zerocopy(&self) -> bool {
        self.zerocopy_sends() == Some(plumb_spec::ZeroCopy::Msg)
    }

    /// Stream: the zero-copy sends of this end whose completions the kernel
    /// reports (MSG_ZEROCOPY's or IORING_OP_SEND_ZC's).
    fn zerocopy_sends(&self) -> Option<plumb_spec::ZeroCopy> {
        match &self.workload {
            Workload::Stream(s) if s.sends => {
                let z = s.zerocopy;
                matches!(z, plumb_spec::ZeroCopy::Msg | plumb_spec::ZeroCopy::Uring).then_some(z)
            }
            _ => None,
        }
    }

    /// Stream: TCP_ZEROCOPY_RECEIVE on this end.
    fn receives_mapped(&self) -> bool {
        matches!(&self.workload, Workload::Stream(s) if s.receives && s.rx == plumb_spec::RxMode::Zerocopy)
    }

    /// Whether this end keeps each transaction's planned time and latency
    /// beside its histogram: an open loop of probes, at most
    /// [`EACH_MOST_RATE`] a second, whose transactions are few enough to
    /// keep one by one.
    pub fn keeps_each(&self) -> bool {
        self.workload
            .schedule()
            .is_some_and(|r| r <= EACH_MOST_RATE)
    }

    /// Whether this end sends transactions on a schedule (`--rate`).
    pub fn open_loop(&self) -> bool {
        self.workload.schedule().is_some()
    }

    /// The UDP plan, for a UDP workload.
    pub fn udp(&self) -> Option<&UdpPlan> {
        match &self.workload {
            Workload::Udp(u) => Some(u),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot start worker threads: {0}")]
    Spawn(String),
    #[error("worker {worker} failed: {error}")]
    Worker { worker: u32, error: String },
}

/// Per-flow byte counts at one instant.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub flows: Vec<(u64, u64)>,
    /// Transactions per flow (request/response workloads).
    pub transactions: Vec<u64>,
    /// Datagram counts summed over the flows (UDP workloads).
    pub udp: plumb_samples::UdpTotals,
}

impl Counts {
    /// Counts of the same flows, all zero: those of an engine as it starts.
    pub fn zeroed(&self) -> Counts {
        Counts {
            flows: vec![(0, 0); self.flows.len()],
            transactions: vec![0; self.transactions.len()],
            udp: Default::default(),
        }
    }

    pub fn transactions(&self) -> u64 {
        self.transactions.iter().sum()
    }
    pub fn sent(&self) -> u64 {
        self.flows.iter().map(|f| f.0).sum()
    }
    pub fn received(&self) -> u64 {
        self.flows.iter().map(|f| f.1).sum()
    }
}

/// The counts of an engine that are final only once its workers are done:
/// MSG_ZEROCOPY's, and the datagrams a udp-stream sender marked as sent in
/// its window (a worker may be between sending a marked datagram and
/// counting it as the window closes).
pub struct FinalCounts {
    /// The zero-copy sends counted, if any.
    mode: Option<plumb_spec::ZeroCopy>,
    rx_mapped: bool,
    counters: Arc<Vec<FlowCounters>>,
}

impl FinalCounts {
    /// The totals over all flows; None when this end sent nothing zero-copy.
    pub fn totals(&self) -> Option<plumb_samples::ZeroCopyTotals> {
        self.mode?;
        let mut t = plumb_samples::ZeroCopyTotals {
            optmem_max: plumb_sys::sock::zerocopy::optmem_max(),
            ..Default::default()
        };
        for c in self.counters.iter() {
            t.sends += c.zc_sends.load(Acquire);
            t.completions += c.zc_completions.load(Acquire);
            t.copied += c.zc_copied.load(Acquire);
            t.enobufs += c.zc_enobufs.load(Acquire);
            t.fallback_copies += c.zc_fallback.load(Acquire);
            t.at_close += c.zc_close_completions.load(Acquire);
            t.copied_at_close += c.zc_close_copied.load(Acquire);
        }
        t.outstanding = t.sends.saturating_sub(t.completions);
        Some(t)
    }

    /// The totals, and the warnings they call for, into `end`.
    pub fn fill(&self, end: &mut plumb_samples::EndResult) {
        let total = |n: fn(&FlowCounters) -> &AtomicU64| -> u64 {
            self.counters.iter().map(|c| n(c).load(Acquire)).sum()
        };
        if let Some(u) = end.udp.as_mut() {
            // The sender's marks, also those of a server that sends.
            u.window_sent = total(|c| &c.window_sent);
            // A receiving client (`--direction recv`) closes its window
            // before its sender does: the marked datagrams that came after
            // its close, before it stopped, are counted too. A receiving
            // server closes after its sender, and keeps its close's count.
            if end.role == Role::Client {
                u.window_received = total(|c| &c.window_received);
            }
        }
        if self.rx_mapped {
            let (mut mapped, mut copied) = (0, 0);
            for c in self.counters.iter() {
                mapped += c.rx_mapped.load(Acquire);
                copied += c.rx_copied.load(Acquire);
            }
            if mapped == 0 && copied > 0 {
                end.warnings.push(
                    "rx zerocopy: TCP_ZEROCOPY_RECEIVE mapped nothing; every byte was copied"
                        .to_string(),
                );
            }
            end.rx_zerocopy = Some(plumb_samples::RxZeroCopyTotals {
                mapped_bytes: mapped,
                copied_bytes: copied,
            });
        }
        let (Some(t), Some(mode)) = (self.totals(), self.mode) else {
            return;
        };
        let who = match end.role {
            Role::Client => "client",
            Role::Server => "server",
        };
        end.warnings.extend(
            zerocopy_warnings(&t, mode)
                .into_iter()
                .map(|w| format!("{who} {w}")),
        );
        end.zerocopy = Some(t);
    }
}

/// What a person must know about a result of zero-copy sends in `mode`:
/// that nothing was zero-copy, that optmem_max held the sends back, that
/// completions are missing.
pub fn zerocopy_warnings(
    t: &plumb_samples::ZeroCopyTotals,
    mode: plumb_spec::ZeroCopy,
) -> Vec<String> {
    let how = match mode {
        plumb_spec::ZeroCopy::Uring => "IORING_OP_SEND_ZC",
        _ => "MSG_ZEROCOPY",
    };
    let mut w = Vec::new();
    if t.all_copied() {
        let (done, copied) = t.running();
        w.push(format!(
            "zerocopy {mode}: the kernel copied the data of {} sends completed while the flows \
             ran, as it does on loopback and veth: this measured the overhead of {how}, \
             not its gain",
            if copied == done {
                format!("every one of the {done}")
            } else {
                format!(
                    "{copied} of the {done} ({:.2} %)",
                    copied as f64 * 100.0 / done as f64
                )
            }
        ));
    }
    if t.enobufs > 0 {
        w.push(format!(
            "zerocopy {mode}: {} sends were refused with ENOBUFS{}: net.core.optmem_max{} limits \
             the zero-copy sends a socket may have outstanding; raise it, e.g. \
             sysctl -w net.core.optmem_max=1048576",
            t.enobufs,
            if t.fallback_copies > 0 {
                format!(" ({} written as plain copies instead)", t.fallback_copies)
            } else {
                String::new()
            },
            t.optmem_max
                .map(|m| format!(" ({m} bytes)"))
                .unwrap_or_default()
        ));
    }
    if t.outstanding > 0 {
        w.push(format!(
            "zerocopy {mode}: {} of {} sends had no completion when the flows closed",
            t.outstanding, t.sends
        ));
    }
    w
}

/// The most transactions a second an open loop keeps one by one (see
/// [`EngineConfig::keeps_each`]): the most self probes a spec takes.
pub const EACH_MOST_RATE: f64 = 1000.0;

/// What the workers timed since the last collection: the histogram, and
/// each transaction's planned time on the engine's clock and latency, in
/// ns, in the order planned, where the end keeps them.
pub struct Timed {
    pub hist: hdrhistogram::Histogram<u64>,
    pub each: Vec<[u64; 2]>,
    /// The two ways of the latencies that have them, to the server and
    /// back (udp-rr where the ends share a clock); None where none did.
    pub ways: Option<Box<latency::Ways>>,
}

/// What one [`Engine::hand_over`] read: the latencies, the counts that go
/// with them, and when the workers had handed over.
pub struct HandOver {
    pub timed: Option<Timed>,
    pub counts: Counts,
    pub at: std::time::Instant,
}

/// The longest [`Engine::hand_over`] waits for every worker.
const HAND_OVER_GUARD: std::time::Duration = std::time::Duration::from_secs(10);

/// A running engine: flows moving data until [`Engine::stop`].
pub struct Engine {
    config: EngineConfig,
    flows: Arc<Vec<TcpStream>>,
    /// The UDP sockets and a crr server's listener, held here as well as
    /// by the workers, so that a halted engine's stay open with its flows.
    udp_socks: Arc<Vec<std::net::UdpSocket>>,
    _listener: Option<Arc<std::net::TcpListener>>,
    counters: Arc<Vec<FlowCounters>>,
    stop: Arc<AtomicBool>,
    window_closed: Arc<AtomicBool>,
    in_window: Arc<AtomicBool>,
    nudges: Vec<flow::Nudge>,
    workers: Vec<JoinHandle<std::io::Result<Vec<FlowError>>>>,
    latency: Vec<Arc<latency::LatencySlot>>,
    epoch: Arc<AtomicU64>,
    strays: Arc<AtomicU64>,
    /// Each worker's thread as it last was, written as it returns.
    exited: Arc<std::sync::Mutex<Vec<plumb_sys::proc::TaskSnapshot>>>,
    /// The time base of the workers' latency stamps.
    clock: std::time::Instant,
}

impl Engine {
    /// Spreads the flows over `threads` workers in contiguous chunks and starts
    /// them; traffic begins at once.
    pub fn start(config: EngineConfig, flows: Vec<TcpStream>) -> Result<Engine, EngineError> {
        Engine::start_with_listener(config, flows, None)
    }

    /// As [`Engine::start`]; a crr server also takes the data listener its
    /// workers accept the test's connections on.
    pub fn start_with_listener(
        config: EngineConfig,
        flows: Vec<TcpStream>,
        listener: Option<std::net::TcpListener>,
    ) -> Result<Engine, EngineError> {
        Engine::start_inner(config, flows, listener, Vec::new())
    }

    /// A UDP test: the client's sockets, one per flow, or the server's, one
    /// per worker. `flows` holds the TCP flow that carried the cookie.
    pub fn start_udp(
        config: EngineConfig,
        flows: Vec<TcpStream>,
        socks: Vec<std::net::UdpSocket>,
    ) -> Result<Engine, EngineError> {
        for s in &socks {
            s.set_nonblocking(true)
                .map_err(|e| EngineError::Spawn(e.to_string()))?;
        }
        Engine::start_inner(config, flows, None, socks)
    }

    fn start_inner(
        config: EngineConfig,
        flows: Vec<TcpStream>,
        listener: Option<std::net::TcpListener>,
        udp_socks: Vec<std::net::UdpSocket>,
    ) -> Result<Engine, EngineError> {
        // Workers split slots: flows, or for crr the client's concurrent
        // connections and the server's threads, or the server's UDP sockets.
        // Counters are per flow in every case.
        let (n, counted) = match &config.workload {
            Workload::Crr(c) if c.client => (c.slots, c.slots),
            Workload::Crr(_) => (config.threads as usize, config.threads as usize),
            Workload::Udp(u) if u.client => (u.flows, u.flows),
            Workload::Udp(u) => (udp_socks.len(), u.flows),
            Workload::Stream(_) | Workload::Rr(_) => (flows.len(), flows.len()),
        };
        let listener = match listener {
            Some(l) => {
                l.set_nonblocking(true)
                    .map_err(|e| EngineError::Spawn(e.to_string()))?;
                Some(Arc::new(l))
            }
            None => None,
        };
        let threads = (config.threads as usize).clamp(1, n.max(1));
        if config.sends_zerocopy() {
            for f in &flows {
                plumb_sys::sock::zerocopy::set_zerocopy(f).map_err(|e| {
                    EngineError::Spawn(format!(
                        "{} msg: the kernel refused SO_ZEROCOPY ({}); it needs Linux 4.14",
                        plumb_spec::Field::ZeroCopy.flag(),
                        plain_io(&e)
                    ))
                })?;
            }
        }
        if matches!(&config.workload, Workload::Stream(s) if s.sends && s.zerocopy == plumb_spec::ZeroCopy::Splice)
        {
            // Each flow splices through a pipe of its own: two more
            // descriptors per flow than the caller planned for.
            let _ = plumb_sys::process::raise_nofile_limit(flows.len() as u64 * 3 + 256);
        }
        let flows = Arc::new(flows);
        let counters: Arc<Vec<FlowCounters>> =
            Arc::new((0..counted).map(|_| FlowCounters::default()).collect());
        let udp_socks = Arc::new(udp_socks);
        let strays = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let window_closed = Arc::new(AtomicBool::new(false));
        let in_window = Arc::new(AtomicBool::new(false));
        let mut engine = Engine {
            config: config.clone(),
            flows: flows.clone(),
            udp_socks: udp_socks.clone(),
            _listener: listener.clone(),
            counters: counters.clone(),
            stop: stop.clone(),
            window_closed: window_closed.clone(),
            in_window: in_window.clone(),
            nudges: Vec::new(),
            workers: Vec::new(),
            latency: Vec::new(),
            epoch: Arc::new(AtomicU64::new(0)),
            strays: strays.clone(),
            exited: Default::default(),
            clock: std::time::Instant::now(),
        };
        let clock = engine.clock;
        let prefix = match config.role {
            Role::Client => "plumb-c",
            Role::Server => "plumb-s",
        };
        for w in 0..threads {
            let nudge = flow::Nudge::new().map_err(|e| EngineError::Spawn(e.to_string()))?;
            let latency = config.workload.hands_over().then(|| {
                let slot = Arc::new(latency::LatencySlot::new());
                engine.latency.push(slot.clone());
                slot
            });
            let plan = WorkerPlan {
                shared: Shared {
                    flows: flows.clone(),
                    counters: counters.clone(),
                    range: (w * n / threads)..((w + 1) * n / threads),
                    stop: stop.clone(),
                    window_closed: window_closed.clone(),
                    in_window: in_window.clone(),
                    nudge: nudge.clone(),
                    listener: listener.clone(),
                    udp_socks: udp_socks.clone(),
                    strays: strays.clone(),
                    latency,
                    timed: config.workload.timed(),
                    each: config.keeps_each(),
                    epoch: engine.epoch.clone(),
                    clock,
                },
                workload: config.workload.clone(),
                cpu: config.cpus.as_ref().map(|c| c.cpus()[w % c.len()]),
                io: config.io,
            };
            let exited = engine.exited.clone();
            let handle = std::thread::Builder::new()
                .name(format!("{prefix}{w}"))
                .spawn(move || {
                    let r = workload::run(plan);
                    // Its last figures, for a window that closes after it
                    // ended (its flows torn down by the other end first):
                    // a thread that is gone is gone from /proc too.
                    if let Ok(me) = plumb_sys::proc::read_this_thread() {
                        exited.lock().unwrap_or_else(|e| e.into_inner()).push(me);
                    }
                    r
                })
                .map_err(|e| EngineError::Spawn(e.to_string()))?;
            engine.nudges.push(nudge);
            engine.workers.push(handle);
        }
        Ok(engine)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn flows(&self) -> &[TcpStream] {
        &self.flows
    }

    pub fn threads(&self) -> u32 {
        self.workers.len() as u32
    }

    /// The workers that have returned, as they last were.
    pub fn exited_workers(&self) -> Vec<plumb_sys::proc::TaskSnapshot> {
        self.exited
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Thread ids are not exposed by std; workers are found by name instead.
    pub fn worker_name_prefix(&self) -> &'static str {
        match self.config.role {
            Role::Client => "plumb-c",
            Role::Server => "plumb-s",
        }
    }

    /// Datagrams with another test's tag, and crr connections from another
    /// address than the client's, that this end ignored.
    pub fn strays(&self) -> u64 {
        self.strays.load(Relaxed)
    }

    /// Per-flow counters now. A flow's byte and datagram counters are read
    /// together, and again if a datagram landed in between, so that a
    /// sampler preempted half-way through cannot pair the bytes of one
    /// moment with the datagrams of a later one. Where this end's workers
    /// hand over (see [`Workload::hands_over`]), the counts are those handed
    /// over at the last hand-over, which [`Engine::hand_over`] reads them
    /// with.
    pub fn counts(&self) -> Counts {
        let udp = self.config.udp();
        let mut flows = Vec::with_capacity(self.counters.len());
        let mut transactions = Vec::with_capacity(self.counters.len());
        let mut t = plumb_samples::UdpTotals::default();
        let (mut gaps, mut late) = (0u64, 0u64);
        let handed = !self.latency.is_empty();
        for c in self.counters.iter() {
            let h = &c.handed;
            let rd = |live: &AtomicU64, kept: &AtomicU64| {
                if handed {
                    kept.load(Acquire)
                } else {
                    live.load(Acquire)
                }
            };
            if udp.is_none() {
                flows.push((rd(&c.sent, &h.sent), rd(&c.received, &h.received)));
                transactions.push(rd(&c.transactions, &h.transactions));
                continue;
            }
            // The worker adds the bytes before the datagram: a pair read
            // with the bytes unchanged around it is at most one datagram off.
            let mut attempts = 0;
            let snap = loop {
                let (s0, r0) = (rd(&c.sent, &h.sent), rd(&c.received, &h.received));
                let (ps, pr) = (
                    rd(&c.packets_sent, &h.packets_sent),
                    rd(&c.packets_received, &h.packets_received),
                );
                let snap = (
                    s0,
                    r0,
                    ps,
                    pr,
                    rd(&c.transactions, &h.transactions),
                    rd(&c.timeouts, &h.timeouts),
                    rd(&c.gaps, &h.gaps),
                    rd(&c.late, &h.late),
                );
                let (s1, r1) = (rd(&c.sent, &h.sent), rd(&c.received, &h.received));
                attempts += 1;
                if (s0, r0) == (s1, r1) || attempts == 8 {
                    break snap;
                }
            };
            flows.push((snap.0, snap.1));
            transactions.push(snap.4);
            t.window_sent += c.window_sent.load(Acquire);
            t.window_received += rd(&c.window_received, &h.window_received);
            t.packets_sent += snap.2;
            t.packets_received += snap.3;
            t.timeouts += snap.5;
            gaps += snap.6;
            late += snap.7;
        }
        if let Some(u) = udp {
            if u.rr && u.client {
                t.late_responses = late;
            } else if !u.rr && !u.sends {
                // A datagram that arrives after a later one filled a gap
                // that was counted as lost.
                t.lost = gaps.saturating_sub(late);
                t.reordered = late;
            }
            t.strays = self.strays.load(Relaxed);
        }
        Counts {
            flows,
            transactions,
            udp: t,
        }
    }

    /// Asks the workers to hand their counts over (where this end's do) and
    /// returns what they handed over: the latencies timed since the last
    /// call, merged over the workers (None when this end does not time
    /// transactions), and the counts ([`Engine::counts`]), for a timed end
    /// exactly those of the transactions whose latencies it has handed over
    /// by now. Workers hand over when they see the new epoch, and also as
    /// they end (a flow the peer's teardown failed ends its worker at any
    /// moment), so the latencies and the counts are read under the slots'
    /// locks, which a worker holds through its hand-over. With a `wait`,
    /// one kept off its CPU for longer hands over at the next call instead;
    /// without, the call waits for every worker still running. `at` is
    /// when they had handed over.
    pub fn hand_over(&self, wait: Option<std::time::Duration>) -> HandOver {
        if self.latency.is_empty() {
            return HandOver {
                timed: None,
                at: std::time::Instant::now(),
                counts: self.counts(),
            };
        }
        let epoch = self.epoch.fetch_add(1, AcqRel) + 1;
        for (n, w) in self.nudges.iter().zip(&self.workers) {
            n.nudge(w);
        }
        // Without a wait, a worker that never answers (a bug) must not
        // hang the run: what it did not hand over is then neither timed nor
        // counted, since its counts are those it handed over.
        let deadline = std::time::Instant::now() + wait.unwrap_or(HAND_OVER_GUARD);
        // A worker that ended hands over for the last time as it returns; one
        // that panicked never will.
        for ((s, w), n) in self.latency.iter().zip(&self.workers).zip(&self.nudges) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            n.until(w, left, || latency::caught_up(s, epoch) || w.is_finished());
        }
        let at = std::time::Instant::now();
        let held: Vec<_> = (self.latency.iter())
            .map(|s| s.hist.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let counts = self.counts();
        if !self.config.workload.timed() {
            return HandOver {
                timed: None,
                at,
                counts,
            };
        }
        let mut out = Timed {
            hist: latency::new_histogram(),
            each: Vec::new(),
            ways: None,
        };
        for (s, mut h) in self.latency.iter().zip(held) {
            let _ = out.hist.add(&*h);
            h.reset();
            out.each
                .append(&mut s.each.lock().unwrap_or_else(|e| e.into_inner()));
            if let Some(w) = s.ways.lock().unwrap_or_else(|e| e.into_inner()).take() {
                latency::add_ways(&mut out.ways, &w);
            }
        }
        out.each.sort_unstable();
        HandOver {
            timed: Some(out),
            at,
            counts,
        }
    }

    /// The instant `ns` on the engine's clock stands for.
    pub fn instant_of(&self, ns: u64) -> std::time::Instant {
        self.clock + std::time::Duration::from_nanos(ns)
    }

    /// Messages the workers took off their queues just before the last hand-over:
    /// for a udp-stream receiver, the datagrams that were waiting to be read
    /// when the engine asked.
    pub fn settled(&self) -> u64 {
        self.latency.iter().map(|s| s.settled.load(Relaxed)).sum()
    }

    /// Bytes sitting in this end's socket queues: written but not yet
    /// acknowledged, plus received but not yet read.
    pub fn queued_bytes(&self) -> u64 {
        self.flows
            .iter()
            .map(|f| {
                plumb_sys::sock::outq(f).unwrap_or(0) as u64
                    + plumb_sys::sock::inq(f).unwrap_or(0) as u64
            })
            .sum()
    }

    /// The test's long-lived TCP flows, for a reader beside the workers;
    /// None where there are none.
    pub fn tcp_flows(&self) -> Option<Arc<Vec<TcpStream>>> {
        match self.config.workload {
            // The one setup flow sits idle; the test's connections are gone
            // by the time anyone could ask them, or are not TCP at all.
            Workload::Crr(_) | Workload::Udp(_) => None,
            Workload::Stream(_) | Workload::Rr(_) => Some(self.flows.clone()),
        }
    }

    /// The server's port that the test's TCP connections are made to, as
    /// this end sees it: the local port of the server's flows, the peer
    /// port of the client's; None for UDP, whose flows are datagrams.
    pub fn server_port(&self) -> Option<u16> {
        if matches!(self.config.workload, Workload::Udp(_)) {
            return None;
        }
        let flow = self.flows.first()?;
        match self.config.role {
            Role::Server => flow.local_addr(),
            Role::Client => flow.peer_addr(),
        }
        .ok()
        .map(|a| a.port())
    }

    /// Whether this end's flows are on a loopback address, where no
    /// packet of theirs crosses a device of its own; None where it has
    /// no long-lived socket to tell by (crr).
    pub fn on_loopback(&self) -> Option<bool> {
        let tcp = self.flows.first().and_then(|f| f.local_addr().ok());
        let udp = self.udp_socks.first().and_then(|s| s.local_addr().ok());
        tcp.or(udp).map(|a| a.ip().is_loopback())
    }

    /// TCP_INFO of every flow, in flow order; a flow whose socket no longer
    /// answers is left out.
    pub fn tcp_info(&self) -> Vec<TcpInfo> {
        let Some(flows) = self.tcp_flows() else {
            return Vec::new();
        };
        flows
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                plumb_sys::sock::tcp_info(f).ok().map(|mut t| {
                    t.flow = i as u32;
                    t
                })
            })
            .collect()
    }

    /// A handle on the MSG_ZEROCOPY counts that outlives [`Engine::stop`],
    /// whose workers read the last completions before they return.
    pub fn final_counts(&self) -> FinalCounts {
        FinalCounts {
            mode: self.config.zerocopy_sends(),
            rx_mapped: self.config.receives_mapped(),
            counters: self.counters.clone(),
        }
    }

    /// The window opens: a udp-stream sender marks what it sends from now
    /// on as sent inside it.
    pub fn mark_window_open(&self) {
        self.in_window.store(true, Release);
    }

    /// From now on a failing flow is the peer tearing down, not a problem,
    /// and a udp-stream sender no longer marks its datagrams: the client
    /// calls this before it tells the server to stop, so that every marked
    /// datagram left before the server's last count.
    pub fn mark_window_closed(&self) {
        self.in_window.store(false, Release);
        self.window_closed.store(true, Relaxed);
    }

    /// Raises stop, nudges each worker until it has returned, and joins it.
    fn end_workers(&mut self) -> Vec<std::thread::Result<std::io::Result<Vec<FlowError>>>> {
        self.stop.store(true, Relaxed);
        for (n, w) in self.nudges.iter().zip(&self.workers) {
            n.nudge(w);
        }
        self.workers
            .drain(..)
            .zip(&self.nudges)
            .map(|(w, n)| {
                // One that does not return in time is waited for all the
                // same: its flows close only once it has let them go.
                n.until(&w, HAND_OVER_GUARD, || w.is_finished());
                w.join()
            })
            .collect()
    }

    /// Stops the workers, closes the flows, and returns the flows that failed.
    pub fn stop(mut self) -> Result<Vec<FlowError>, EngineError> {
        self.halt()
    }

    /// Stops the workers and returns the flows that failed, but keeps the
    /// flows open until the engine is dropped: a part of a run that stops
    /// inside the window leaves its peer nothing to read as a failure
    /// before it too has closed its window. Once halted, an engine has no
    /// workers left, and halting or stopping it again finds nothing.
    pub fn halt(&mut self) -> Result<Vec<FlowError>, EngineError> {
        let mut errors = Vec::new();
        for (i, r) in self.end_workers().into_iter().enumerate() {
            match r {
                Ok(Ok(e)) => errors.extend(e),
                Ok(Err(e)) => {
                    return Err(EngineError::Worker {
                        worker: i as u32,
                        error: plain_io(&e),
                    })
                }
                Err(_) => {
                    return Err(EngineError::Worker {
                        worker: i as u32,
                        error: "panicked".into(),
                    })
                }
            }
        }
        errors.sort_by_key(|e| e.flow);
        Ok(errors)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.end_workers();
        }
    }
}
