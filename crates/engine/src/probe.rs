//! Kernel event sources, each read at the measurement window's edges (a
//! probe): what it reads, the difference it makes of two readings, and
//! the parts of the end's record it writes. What each part holds and how
//! two flow groups' parts merge is declared beside the record, in
//! `plumb_samples::figure`; a new probe is its reader here, its
//! declaration there, and its line in `figure::Probe::ALL` (the match in
//! [`reader`] then asks for it).

use crate::profile::{Profiler, Sampling};
use crate::Engine;
use plumb_samples::figure::Probe as Id;
use plumb_samples::TcpSeries;
use plumb_samples::{
    CpuTimes, EndResult, InterfaceCounts, IntervalSample, IrqCounts, IrqCpu, PathQueue, ProcessCpu,
    QdiscCounts, SchedTimes, SoftirqCounts, SoftnetCounts, ThreadCpu, PATH_THREAD,
};
use plumb_sys::proc::{Interrupts, NetDevRow, SoftirqRow, StatCpu, TaskSnapshot};
use plumb_sys::process::Rusage;
use plumb_sys::qdisc::QdiscRow;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A kernel event source read at the window's edges.
pub trait Probe {
    /// Reads the source as the window opens.
    fn open(&mut self, engine: &Engine);
    /// Reads it as the window closes and writes its parts of `out`.
    fn close(&mut self, engine: &Engine, out: &mut EndResult);
    /// Reads, as this end marks its window closed and before the peer
    /// hears of it, what the peer's teardown would change before
    /// [`Probe::close`]: most sources have nothing to read here.
    fn closing(&mut self, _: &Engine) {}
    /// Tells what samples over the window to stop, as the window closes
    /// and before any probe's [`Probe::close`]: a sampler's last sample is
    /// then the close's, however long the probes before it take to close.
    fn window_closed(&mut self) {}
    /// Reads, as each interval of the window ends, what the source keeps
    /// interval by interval into its sample: most keep nothing.
    fn interval(&mut self, _: &Engine, _: &mut IntervalSample) {}
}

/// A source whose figures are what changed between two readings.
trait Edges {
    type Reading;
    fn read(&self, engine: &Engine) -> Self::Reading;
    fn record(
        &self,
        open: Self::Reading,
        close: Self::Reading,
        engine: &Engine,
        out: &mut EndResult,
    );
}

struct AtEdges<S: Edges> {
    source: S,
    open: Option<S::Reading>,
}

impl<S: Edges> Probe for AtEdges<S> {
    fn open(&mut self, engine: &Engine) {
        self.open = Some(self.source.read(engine));
    }

    fn close(&mut self, engine: &Engine, out: &mut EndResult) {
        let close = self.source.read(engine);
        // A window that never opened (a stop in the warm-up) is one instant.
        let open = match self.open.take() {
            Some(o) => o,
            None => self.source.read(engine),
        };
        self.source.record(open, close, engine, out);
    }
}

fn edges<S: Edges + 'static>(source: S) -> Box<dyn Probe> {
    Box::new(AtEdges { source, open: None })
}

/// The reader of a probe that every end runs; `None` for one an end runs
/// only when asked (the profile, made by [`profiler`], every ACK, by
/// `crate::acks`, and the path's queues, by [`path_queues`]).
pub fn reader(id: Id, engine: &Engine) -> Option<Box<dyn Probe>> {
    Some(match id {
        Id::Process => edges(ProcessProbe),
        Id::Cpu => edges(CpuProbe),
        Id::Softirqs => edges(SoftirqProbe),
        Id::Snmp => edges(SnmpProbe),
        Id::Softnet => edges(SoftnetProbe),
        Id::Interfaces => edges(InterfaceProbe),
        Id::Qdiscs => edges(QdiscProbe),
        Id::Interrupts => edges(InterruptsProbe),
        Id::Sockstat => Box::new(SockstatProbe::default()),
        Id::Tracepoints => Box::new(TracepointProbe::new(engine)),
        Id::TcpInfo => Box::new(TcpInfoProbe::default()),
        Id::TcpSeries => Box::new(TcpSeriesProbe::default()),
        Id::NicQueues => Box::new(NicQueueProbe::default()),
        Id::Acks | Id::Profile | Id::PathQueues => return None,
    })
}

/// Every probe an end runs by default, in the declared order, less those
/// [`PROBES_OFF`] names.
pub fn defaults(engine: &Engine) -> Vec<Box<dyn Probe>> {
    let off = probes_off().unwrap_or_default();
    Id::ALL
        .into_iter()
        .filter(|id| !off.contains(id))
        .filter_map(|id| reader(id, engine))
        .collect()
}

/// The probes of a part of a run beside the main one: those of its own
/// flows ([`Id::reads_flows`]); the host's and the process's are read
/// once, by the main part.
pub fn of_flows(engine: &Engine) -> Vec<Box<dyn Probe>> {
    let off = probes_off().unwrap_or_default();
    Id::ALL
        .into_iter()
        .filter(|id| id.reads_flows() && !off.contains(id))
        .filter_map(|id| reader(id, engine))
        .collect()
}

/// The environment variable that turns default probes off, by name and
/// comma-separated (`tcp_series,tracepoints`), for a benchmark of what
/// they cost; an end started by this process inherits it.
pub const PROBES_OFF: &str = "PLUMB_PROBES_OFF";

/// The probes [`PROBES_OFF`] turns off, or the name it gives that is no
/// probe's.
pub fn probes_off() -> Result<Vec<Id>, String> {
    let Ok(list) = std::env::var(PROBES_OFF) else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            Id::ALL
                .into_iter()
                .find(|id| id.name() == n)
                .ok_or_else(|| {
                    let names: Vec<&str> = Id::ALL.iter().map(|id| id.name()).collect();
                    format!(
                        "{PROBES_OFF}: no probe is named {n:?} (the probes: {})",
                        names.join(", ")
                    )
                })
        })
        .collect()
}

/// The profile of an end's window: samplers opened before it (so that
/// opening them costs the window nothing), started as it opens.
pub fn profiler(p: Profiler) -> Box<dyn Probe> {
    Box::new(ProfileProbe::Ready(p))
}

enum ProfileProbe {
    Ready(Profiler),
    Sampling(Sampling),
    /// Starting the samplers failed; the end says so with its figures.
    Failed(String),
    Done,
}

impl Probe for ProfileProbe {
    fn open(&mut self, _: &Engine) {
        if let ProfileProbe::Ready(p) = std::mem::replace(self, ProfileProbe::Done) {
            *self = match p.start() {
                Ok(s) => ProfileProbe::Sampling(s),
                Err(e) => ProfileProbe::Failed(e),
            };
        }
    }

    fn close(&mut self, _: &Engine, out: &mut EndResult) {
        match std::mem::replace(self, ProfileProbe::Done) {
            ProfileProbe::Sampling(s) => match s.finish() {
                Ok(p) => out.profile = Some(p),
                Err(e) => out.warnings.push(e),
            },
            ProfileProbe::Failed(e) => out.warnings.push(e),
            ProfileProbe::Ready(_) | ProfileProbe::Done => {}
        }
    }
}

/// The tracepoints every end counts: TCP's retransmissions and resets,
/// and packets the kernel dropped (skb:kfree_skb, whatever the reason).
pub const TRACEPOINTS: [&str; 4] = [
    "tcp:tcp_retransmit_skb",
    "skb:kfree_skb",
    "tcp:tcp_send_reset",
    "tcp:tcp_receive_reset",
];

/// Why this host's tracepoints cannot be counted here, naming the first
/// that cannot and what to change; None when every one can.
pub fn tracepoint_refusal() -> Option<String> {
    refusal(&TRACEPOINTS)
}

/// Why one of `names` cannot be counted here, naming the first that
/// cannot and what to change; None when every one can.
pub(crate) fn refusal(names: &[&str]) -> Option<String> {
    let cpus = plumb_sys::proc::online_cpus()
        .map(|c| c.cpus().to_vec())
        .unwrap_or_default();
    let first = cpus.first().copied().unwrap_or(0);
    names
        .iter()
        .zip(plumb_sys::trace::ids(names))
        .find_map(|(name, id)| {
            let why = match id {
                Err(why) => why,
                Ok(id) => match plumb_sys::trace::Counter::open(id, &[first]) {
                    Ok(_) => return None,
                    Err(e) => format!(
                        "perf_event_open: {}; run as root (or with CAP_PERFMON) or set \
                         kernel.perf_event_paranoid=-1",
                        plumb_sys::plain_io(&e)
                    ),
                },
            };
            Some(format!("{name} cannot be counted here: {why}"))
        })
}

/// Counting events opened as the end is made, before its window, on every
/// online CPU; read at the window's edges. The drops' reasons come from a
/// sampler of skb:kfree_skb's raw records beside its counter.
struct TracepointProbe {
    counters: Vec<(&'static str, plumb_sys::trace::Counter)>,
    unavailable: BTreeMap<String, String>,
    open: Vec<u64>,
    reasons: Option<(plumb_sys::trace::RawSampler, plumb_sys::trace::RawField)>,
    /// The drops' reasons read since the window opened, and how many.
    reasons_read: (BTreeMap<String, u64>, u64),
    /// The sampler's throttles and lost records as the window opened: the
    /// warm-up's are not the window's.
    reasons_missed_open: (u64, u64),
    own: Option<OwnFlows>,
}

/// The tracepoints counted for an end's own flows, where their records
/// carry the socket's ports.
pub const FLOW_TRACEPOINTS: [&str; 4] = [
    "tcp:tcp_retransmit_skb",
    "tcp:tcp_send_reset",
    "tcp:tcp_receive_reset",
    RCVBUF_GROW,
];

/// The event of a receive buffer tuned (6.18), sampled for the buffer and
/// window as they stood, and those fields.
const RCVBUF_GROW: &str = "tcp:tcp_rcvbuf_grow";
const RCVBUF_FIELDS: [&str; 4] = ["rcvbuf", "window_clamp", "rcv_wnd", "scaling_ratio"];

/// Pages of each CPU's ring of tunings: at most one a round trip per flow,
/// a hundred bytes each.
const GROW_RING_PAGES: usize = 16;

/// The filter that keeps the events of an end's own sockets: a record's
/// `sport` is its socket's local port, so the server's are those from its
/// port and the client's those to it.
pub(crate) fn own_filter(role: plumb_samples::Role, server_port: u16) -> String {
    match role {
        plumb_samples::Role::Server => format!("sport == {server_port}"),
        plumb_samples::Role::Client => format!("dport == {server_port}"),
    }
}

/// An end's own flows' events, counted with [`own_filter`], and the
/// receive buffer's tunings sampled with it.
struct OwnFlows {
    filter: String,
    counters: Vec<(&'static str, plumb_sys::trace::Counter)>,
    unavailable: BTreeMap<String, String>,
    open: Vec<u64>,
    grow: Option<(
        plumb_sys::trace::RawSampler,
        Vec<plumb_sys::trace::RawField>,
    )>,
}

impl OwnFlows {
    fn new(filter: String, cpus: &[u32]) -> OwnFlows {
        let mut own = OwnFlows {
            filter,
            counters: Vec::new(),
            unavailable: BTreeMap::new(),
            open: Vec::new(),
            grow: None,
        };
        let refused = |e: std::io::Error| format!("perf_event_open: {}", plumb_sys::plain_io(&e));
        let ids = plumb_sys::trace::ids(&FLOW_TRACEPOINTS);
        for (name, id) in FLOW_TRACEPOINTS.iter().zip(ids) {
            // A record without the ports cannot be told apart by flow.
            let opened = id.and_then(|id| {
                plumb_sys::trace::raw_fields(name, &["sport", "dport"])
                    .map_err(|_| "its records carry no ports here".to_string())?;
                plumb_sys::trace::Counter::filtered(id, cpus, &own.filter)
                    .map(|c| (id, c))
                    .map_err(refused)
            });
            match opened {
                Ok((id, c)) => {
                    own.counters.push((*name, c));
                    if *name == RCVBUF_GROW {
                        let sampled =
                            plumb_sys::trace::raw_fields(name, &RCVBUF_FIELDS).and_then(|f| {
                                plumb_sys::trace::RawSampler::filtered(
                                    id,
                                    cpus,
                                    GROW_RING_PAGES,
                                    &own.filter,
                                )
                                .map(|s| (s, f))
                                .map_err(refused)
                            });
                        match sampled {
                            Ok(g) => own.grow = Some(g),
                            Err(why) => {
                                own.unavailable.insert(format!("{name} fields"), why);
                            }
                        }
                    }
                }
                Err(why) => {
                    own.unavailable.insert(name.to_string(), why);
                }
            }
        }
        own
    }

    fn read(&self) -> Vec<u64> {
        self.counters
            .iter()
            .map(|(_, c)| c.read().unwrap_or(0))
            .collect()
    }

    /// The tunings sampled since the last call.
    fn growths(&mut self) -> Option<plumb_samples::RcvbufGrowth> {
        let (sampler, fields) = self.grow.as_mut()?;
        let mut g = plumb_samples::RcvbufGrowth::default();
        sampler.drain(&mut |raw| {
            let v: Vec<u64> = fields.iter().map(|f| f.value(raw).unwrap_or(0)).collect();
            g.read += 1;
            g.rcvbuf_sum += v[0];
            g.window_clamp_sum += v[1];
            g.rcv_wnd_sum += v[2];
            g.scaling_ratio_sum += v[3];
        });
        Some(g)
    }

    // The counts are read before the ring is emptied at the open and after
    // it at the close, so that a tuning that fires between the two is
    // counted and not sampled rather than sampled and not counted: the
    // samples are a part of the counted events.
    fn open(&mut self) {
        self.open = self.read();
        self.growths();
    }

    fn close(&mut self) -> plumb_samples::FlowEvents {
        let rcvbuf_grow = self.growths();
        let close = self.read();
        plumb_samples::FlowEvents {
            filter: self.filter.clone(),
            counts: counted(&self.counters, &close, &self.open),
            unavailable: self.unavailable.clone(),
            rcvbuf_grow,
        }
    }
}

/// Each counter's events between two readings, by its tracepoint's name.
fn counted(
    counters: &[(&'static str, plumb_sys::trace::Counter)],
    close: &[u64],
    open: &[u64],
) -> BTreeMap<String, u64> {
    counters
        .iter()
        .zip(close.iter().zip(open))
        .map(|((name, _), (b, a))| (name.to_string(), b.saturating_sub(*a)))
        .collect()
}

/// The tracepoint whose records carry a drop's reason, and the field.
const DROPS: (&str, &str) = ("skb:kfree_skb", "reason");

/// Pages of each CPU's ring of drop records: room for about 8000 drops a
/// CPU between the window's edges; beyond, the reasons are scaled.
const DROP_RING_PAGES: usize = 128;

impl TracepointProbe {
    fn new(engine: &Engine) -> TracepointProbe {
        let cpus = plumb_sys::proc::online_cpus()
            .map(|c| c.cpus().to_vec())
            .unwrap_or_default();
        let mut counters = Vec::new();
        let mut unavailable = BTreeMap::new();
        let mut reasons = None;
        let refused = |e: std::io::Error| format!("perf_event_open: {}", plumb_sys::plain_io(&e));
        for (name, id) in TRACEPOINTS.iter().zip(plumb_sys::trace::ids(&TRACEPOINTS)) {
            match id.and_then(|id| {
                plumb_sys::trace::Counter::open(id, &cpus)
                    .map(|c| (id, c))
                    .map_err(refused)
            }) {
                Ok((id, c)) => {
                    counters.push((*name, c));
                    if *name == DROPS.0 {
                        // Paused until the window opens: the warm-up's
                        // records, and those its floods lose, are not the
                        // window's.
                        let sampled = plumb_sys::trace::raw_field(DROPS.0, DROPS.1).and_then(|f| {
                            plumb_sys::trace::RawSampler::open(id, &cpus, DROP_RING_PAGES)
                                .and_then(|s| s.pause().map(|()| (s, f)))
                                .map_err(refused)
                        });
                        match sampled {
                            Ok(r) => reasons = Some(r),
                            Err(why) => {
                                unavailable.insert(format!("{} {}", DROPS.0, DROPS.1), why);
                            }
                        }
                    }
                }
                Err(why) => {
                    unavailable.insert(name.to_string(), why);
                }
            }
        }
        // Without the host's counters, the flows' would be refused too.
        let own = (!counters.is_empty())
            .then(|| engine.server_port())
            .flatten()
            .map(|port| OwnFlows::new(own_filter(engine.config().role, port), &cpus));
        TracepointProbe {
            counters,
            unavailable,
            open: Vec::new(),
            reasons,
            reasons_read: Default::default(),
            reasons_missed_open: (0, 0),
            own,
        }
    }

    /// The reasons of the drops sampled since the last call, added to the
    /// window's (`reasons_read`).
    fn drop_reasons(&mut self) -> BTreeMap<String, u64> {
        let mut by = BTreeMap::new();
        let mut read = 0;
        if let Some((sampler, field)) = &mut self.reasons {
            let mut values: BTreeMap<u64, u64> = BTreeMap::new();
            sampler.drain(&mut |raw| {
                if let Some(v) = field.value(raw) {
                    *values.entry(v).or_default() += 1;
                }
            });
            for (v, n) in values {
                read += n;
                by.insert(field.name(v), n);
            }
        }
        for (reason, n) in &by {
            *self.reasons_read.0.entry(reason.clone()).or_default() += n;
        }
        self.reasons_read.1 += read;
        by
    }

    fn read(&self) -> Vec<u64> {
        self.counters
            .iter()
            .map(|(_, c)| c.read().unwrap_or(0))
            .collect()
    }
}

/// Closing a tracepoint's perf events waits for the kernel's RCU grace
/// periods, tens of milliseconds each: they are closed on a thread of
/// their own, so that no end waits on it between its window and the next.
impl Drop for TracepointProbe {
    fn drop(&mut self) {
        close_later((
            std::mem::take(&mut self.counters),
            self.reasons.take(),
            self.own.take(),
        ));
    }
}

/// Closes tracepoint `events` on a thread of their own (see above); where
/// no thread can be had, here.
pub(crate) fn close_later<T: Send + 'static>(events: T) {
    let closing = std::thread::Builder::new()
        .name("plumb-trace-close".into())
        .spawn(move || drop(events));
    drop(closing);
}

impl TracepointProbe {
    /// The drops' sampler's throttles and lost records so far.
    fn reasons_missed(&self) -> (u64, u64) {
        self.reasons
            .as_ref()
            .map_or((0, 0), |(s, _)| (s.throttled(), s.lost()))
    }
}

impl Probe for TracepointProbe {
    fn open(&mut self, _: &Engine) {
        // What was dropped before the window is not the window's. The
        // count is read before the records are drained, and after them at
        // the close, so that every reason read is of a drop counted.
        self.open = self.read();
        self.drop_reasons();
        self.reasons_read = Default::default();
        self.reasons_missed_open = self.reasons_missed();
        if let Some((s, _)) = &self.reasons {
            let _ = s.resume();
        }
        if let Some(own) = &mut self.own {
            own.open();
        }
    }

    fn interval(&mut self, _: &Engine, s: &mut IntervalSample) {
        s.drop_reasons = self.drop_reasons();
    }

    fn close(&mut self, _: &Engine, out: &mut EndResult) {
        // Read after the last interval's sample, as the window closes: the
        // last interval's, so that the intervals hold every reason read.
        let last = self.drop_reasons();
        if let Some(s) = out.intervals.last_mut() {
            for (reason, n) in last {
                *s.drop_reasons.entry(reason).or_default() += n;
            }
        }
        let (reasons, read) = std::mem::take(&mut self.reasons_read);
        let close = self.read();
        let counts = counted(&self.counters, &close, &self.open);
        out.flow_events = self.own.as_mut().map(OwnFlows::close);
        let dropped = counts.get(DROPS.0).copied().unwrap_or(0);
        let (drop_reasons, drop_reasons_as_read) =
            plumb_samples::Tracepoints::reasons(reasons, dropped);
        let (throttled, lost) = self.reasons_missed();
        let (throttled, lost) = (
            throttled.saturating_sub(self.reasons_missed_open.0),
            lost.saturating_sub(self.reasons_missed_open.1),
        );
        // The kernel tells of the records a full ring could not take only
        // in the next record it writes, so the window's last losses are not
        // told yet when it closes: with no throttling (which stops the
        // sampler, not the count), every drop counted and not read was lost.
        let lost = if throttled == 0 && self.reasons.is_some() {
            lost.max(dropped.saturating_sub(read))
        } else {
            lost
        };
        out.tracepoints = Some(plumb_samples::Tracepoints {
            drop_reasons,
            drop_reasons_read: self.reasons.is_some().then_some(read),
            drop_reasons_throttled: throttled,
            drop_reasons_lost: lost,
            drop_reasons_as_read,
            counts,
            unavailable: self.unavailable.clone(),
        });
    }
}

/// Sockets and protocol memory are levels: the closing reading is kept.
/// They are read as the window is marked closed: once the peer hears of
/// it, it closes its flows, and the flows of this end that it ends leave
/// the count before the probes are read.
#[derive(Default)]
struct SockstatProbe {
    at_closing: Option<plumb_samples::Sockstat>,
}

impl Probe for SockstatProbe {
    fn open(&mut self, _: &Engine) {}

    fn closing(&mut self, _: &Engine) {
        self.at_closing = plumb_sys::proc::read_sockstat().ok();
    }

    fn close(&mut self, _: &Engine, out: &mut EndResult) {
        out.sockstat = self
            .at_closing
            .take()
            .or_else(|| plumb_sys::proc::read_sockstat().ok());
    }
}

/// TCP_INFO of every flow as the window closes (above
/// `TCP_INFO_PER_FLOW_MAX` flows only their distribution is kept), and
/// what limited the flows that sent, from their counters at both edges.
#[derive(Default)]
struct TcpInfoProbe {
    /// Each flow's (busy, rwnd-limited, sndbuf-limited) µs as the window
    /// opened.
    open: BTreeMap<u32, [u64; 3]>,
    /// Each flow's retransmitted segments, congestion window and whether
    /// it was still in its first slow start, as the window opened.
    at_open: BTreeMap<u32, (u32, u32, bool)>,
}

fn chrono(t: &plumb_samples::TcpInfo) -> Option<[u64; 3]> {
    Some([t.busy_time_us?, t.rwnd_limited_us?, t.sndbuf_limited_us?])
}

impl Probe for TcpInfoProbe {
    fn open(&mut self, engine: &Engine) {
        let infos = engine.tcp_info();
        self.open = infos
            .iter()
            .filter_map(|t| Some((t.flow, chrono(t)?)))
            .collect();
        self.at_open = infos
            .iter()
            .map(|t| {
                let slow_start = t.snd_ssthresh == Some(plumb_samples::INITIAL_SSTHRESH);
                (t.flow, (t.total_retrans, t.snd_cwnd, slow_start))
            })
            .collect();
    }

    fn close(&mut self, engine: &Engine, out: &mut EndResult) {
        let mut infos = engine.tcp_info();
        if let Some(first) = engine.tcp_flows().as_deref().and_then(|f| f.first()) {
            crate::setup::read_back_at_close(first, &mut out.socket_options);
        }
        let mut limits = plumb_samples::SenderLimits::default();
        for t in &infos {
            let (Some(b), Some(a)) = (chrono(t), self.open.get(&t.flow)) else {
                continue;
            };
            let d = |i: usize| b[i].saturating_sub(a[i]) as f64 / 1e6;
            if d(0) > 0.0 {
                limits.flows += 1;
                limits.busy_s += d(0);
                limits.rwnd_limited_s += d(1);
                limits.sndbuf_limited_s += d(2);
                let opened = self.at_open.get(&t.flow);
                if opened.is_some_and(|&(_, cwnd, slow)| slow && t.snd_cwnd > 2 * cwnd) {
                    limits.slow_start_flows += 1;
                }
            }
        }
        out.limited = (limits.flows > 0).then_some(limits);
        // A flow the opening did not see (none do) counts from zero.
        out.window_retransmits = (!infos.is_empty()).then(|| {
            infos
                .iter()
                .map(|t| {
                    let before = self.at_open.get(&t.flow).map_or(0, |o| o.0);
                    u64::from(t.total_retrans.saturating_sub(before))
                })
                .sum()
        });
        out.tcp_info_summary = plumb_samples::TcpInfoSummary::of(&infos);
        if infos.len() > plumb_samples::TCP_INFO_PER_FLOW_MAX {
            infos.clear();
        }
        out.tcp_info = infos;
    }
}

/// TCP_INFO of the flows sampled over the window by a thread of its own
/// (`plumb-tcp`, so its CPU shows among the end's threads), from the
/// opening to the close.
#[derive(Default)]
struct TcpSeriesProbe {
    sampler: Option<Sampler<TcpSeries>>,
}

impl Probe for TcpSeriesProbe {
    fn open(&mut self, engine: &Engine) {
        let Some(flows) = engine.tcp_flows().filter(|f| !f.is_empty()) else {
            return;
        };
        self.sampler = Sampler::start("plumb-tcp", move |stop| sample_tcp(&flows, stop));
    }

    fn window_closed(&mut self) {
        if let Some(sampler) = &self.sampler {
            sampler.halt();
        }
    }

    fn close(&mut self, _: &Engine, out: &mut EndResult) {
        out.tcp_series = self.sampler.take().and_then(Sampler::stop);
    }
}

/// Samples every flow at the period until told to stop, then once more:
/// the first sample is the window's opening, the last its close. The
/// period doubles where a long window's samples are thinned.
fn sample_tcp(flows: &[std::net::TcpStream], stop: &mpsc::Receiver<()>) -> TcpSeries {
    let period_ms = plumb_samples::tcp::sample_period_ms(flows.len());
    let mut series = plumb_samples::tcp::SeriesBuilder::new(flows.len(), period_ms);
    let opened = Instant::now();
    every_period(stop, || {
        let states: Vec<_> = flows
            .iter()
            .map(|f| plumb_sys::sock::tcp_state(f).ok())
            .collect();
        let t_ms = opened.elapsed().as_millis().min(u128::from(u32::MAX)) as u32;
        series.push(t_ms, &states);
        Duration::from_millis(u64::from(series.period_ms()))
    });
    let cost = plumb_sys::process::rusage_thread();
    series.finish((cost.user_ns + cost.system_ns) as f64 / 1e9)
}

/// A thread of its own that samples over the window until told to stop,
/// and then hands over what it made.
pub(crate) struct Sampler<T>(mpsc::Sender<()>, JoinHandle<T>);

impl<T: Send + 'static> Sampler<T> {
    /// Starts `sample` on a thread named `name` (so that its CPU shows
    /// among the end's threads); None where no thread can be had.
    pub(crate) fn start(
        name: &str,
        sample: impl FnOnce(&mpsc::Receiver<()>) -> T + Send + 'static,
    ) -> Option<Sampler<T>> {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || sample(&stopped));
        thread.ok().map(|t| Sampler(stop, t))
    }

    /// Tells it to take its last sample now; [`Sampler::stop`] collects it.
    pub(crate) fn halt(&self) {
        // Told twice, a sampler that has returned has dropped its end.
        let _ = self.0.send(());
    }

    /// Tells it to stop and waits for what it made; None where it panicked.
    pub(crate) fn stop(self) -> Option<T> {
        let _ = self.0.send(());
        self.1.join().ok()
    }
}

/// Calls `sample` now, then at each period it returns until told to
/// `stop`, then once more: the first call reads the window's opening, the
/// last its close. A sampler that fell behind starts its period again, not
/// a burst.
fn every_period(stop: &mpsc::Receiver<()>, mut sample: impl FnMut() -> Duration) {
    let mut next = Instant::now();
    loop {
        let period = sample();
        next = (next + period).max(Instant::now());
        let wait = stop.recv_timeout(next.saturating_duration_since(Instant::now()));
        if !matches!(wait, Err(mpsc::RecvTimeoutError::Timeout)) {
            sample();
            return;
        }
    }
}

fn ticks_per_sec() -> f64 {
    plumb_sys::proc::clock_ticks_per_sec().max(1) as f64
}

struct ProcessProbe;

struct ProcessReading {
    rusage: Rusage,
    tasks: Vec<TaskSnapshot>,
}

impl Edges for ProcessProbe {
    type Reading = ProcessReading;

    fn read(&self, _: &Engine) -> ProcessReading {
        ProcessReading {
            rusage: plumb_sys::process::rusage_self(),
            tasks: plumb_sys::proc::read_tasks(None).unwrap_or_default(),
        }
    }

    fn record(
        &self,
        a: ProcessReading,
        mut b: ProcessReading,
        engine: &Engine,
        out: &mut EndResult,
    ) {
        // A worker that ended in the window counts as it was when it ended,
        // also where the window's close read it as it was exiting: its stat
        // read, its schedstat gone a moment later.
        for t in engine.exited_workers() {
            if !a.tasks.iter().any(|o| o.tid == t.tid) {
                continue;
            }
            match b.tasks.iter_mut().find(|o| o.tid == t.tid) {
                None => b.tasks.push(t),
                Some(o) if o.schedstat.is_none() && t.schedstat.is_some() => *o = t,
                Some(_) => {}
            }
        }
        let (process, path_cpu_s) = process_cpu(&a, &b, ticks_per_sec(), engine);
        out.process = process;
        out.path_cpu_s = path_cpu_s;
    }
}

struct CpuProbe;

impl Edges for CpuProbe {
    /// The states and when they were read: the span between the readings
    /// gives the busy time the ticks miss (see [`CpuTimes::busy_s`]).
    type Reading = (Instant, Vec<StatCpu>);

    fn read(&self, _: &Engine) -> Self::Reading {
        let at = Instant::now();
        (at, plumb_sys::proc::read_stat().unwrap_or_default())
    }

    fn record(&self, a: Self::Reading, b: Self::Reading, _: &Engine, out: &mut EndResult) {
        let span = b.0.saturating_duration_since(a.0).as_secs_f64();
        out.cpus = cpu_deltas(&a.1, &b.1, ticks_per_sec(), span);
        out.irq_time_accounting = plumb_sys::proc::irq_time_accounting();
    }
}

struct SoftirqProbe;

impl Edges for SoftirqProbe {
    type Reading = Vec<SoftirqRow>;

    fn read(&self, _: &Engine) -> Vec<SoftirqRow> {
        plumb_sys::proc::read_softirqs().unwrap_or_default()
    }

    fn record(&self, a: Vec<SoftirqRow>, b: Vec<SoftirqRow>, _: &Engine, out: &mut EndResult) {
        out.softirqs = softirq_deltas(&a, &b);
    }
}

struct SnmpProbe;

impl Edges for SnmpProbe {
    type Reading = BTreeMap<String, i64>;

    fn read(&self, _: &Engine) -> BTreeMap<String, i64> {
        plumb_sys::proc::read_net_counters().unwrap_or_default()
    }

    fn record(&self, a: Self::Reading, b: Self::Reading, _: &Engine, out: &mut EndResult) {
        out.counters = counter_deltas(&a, &b);
    }
}

struct SoftnetProbe;

impl Edges for SoftnetProbe {
    type Reading = Vec<SoftnetCounts>;

    fn read(&self, _: &Engine) -> Vec<SoftnetCounts> {
        plumb_sys::proc::read_softnet().unwrap_or_default()
    }

    fn record(&self, a: Self::Reading, b: Self::Reading, _: &Engine, out: &mut EndResult) {
        out.softnet = softnet_deltas(&a, &b);
    }
}

struct InterfaceProbe;

struct InterfaceReading {
    net_dev: Vec<NetDevRow>,
    interrupts: Interrupts,
    /// Each interface's driver statistics, where the driver names any and
    /// they could be read.
    driver: BTreeMap<String, Vec<(String, u64)>>,
}

impl Edges for InterfaceProbe {
    type Reading = InterfaceReading;

    fn read(&self, _: &Engine) -> InterfaceReading {
        let net_dev = plumb_sys::proc::read_net_dev().unwrap_or_default();
        let sock = plumb_sys::ethtool::socket().ok();
        let driver = net_dev
            .iter()
            .filter_map(|d| {
                let stats = plumb_sys::ethtool::driver_stats(sock.as_ref()?, &d.name).ok()?;
                Some((d.name.clone(), stats))
            })
            .collect();
        InterfaceReading {
            net_dev,
            interrupts: plumb_sys::proc::read_interrupts().unwrap_or_default(),
            driver,
        }
    }

    fn record(&self, a: Self::Reading, b: Self::Reading, _: &Engine, out: &mut EndResult) {
        out.interfaces = interface_deltas(&a, &b);
    }
}

struct QdiscProbe;

impl Edges for QdiscProbe {
    /// Each root qdisc with its interface's name.
    type Reading = Vec<(String, QdiscRow)>;

    fn read(&self, _: &Engine) -> Self::Reading {
        plumb_sys::qdisc::read_roots().unwrap_or_default()
    }

    fn record(&self, a: Self::Reading, b: Self::Reading, _: &Engine, out: &mut EndResult) {
        out.qdiscs = qdisc_deltas(&a, &b);
    }
}

/// The root qdiscs that sent, dropped or held packets between two
/// readings; one made in the window (a new handle) counts from zero.
fn qdisc_deltas(a: &[(String, QdiscRow)], b: &[(String, QdiscRow)]) -> Vec<QdiscCounts> {
    b.iter()
        .filter_map(|(name, e)| {
            let open = a
                .iter()
                .find(|(n, s)| n == name && s.major == e.major)
                .map(|(_, s)| s);
            let stats = e.since(open);
            stats.moved().then(|| QdiscCounts {
                interface: name.clone(),
                kind: e.kind.clone(),
                handle: format!("{:x}:", e.major),
                stats,
            })
        })
        .collect()
}

/// The period at which the path's queues are sampled.
pub const PATH_QUEUE_PERIOD_MS: u32 = 100;

/// One way of the path's bottleneck: the interface of the router that
/// holds it, and where its packets go (`to_server`, `to_client`).
pub struct PathWay {
    pub interface: String,
    pub toward: &'static str,
}

/// A reader of a path's own queues, each way in the order of its
/// [`PathWay`]s, as the root qdiscs they stand for would be read: plumb's
/// delay line, whose queues are its own.
pub type PathReader = std::sync::Arc<dyn Fn() -> Vec<Option<QdiscRow>> + Send + Sync>;

/// Where the path's bottleneck is read.
#[derive(Clone)]
pub enum PathSource {
    /// The root qdiscs of the router's namespace (`--qdisc`), by its
    /// interfaces' names.
    Router(String),
    /// A path's own queues.
    Own(PathReader),
}

/// The path's bottleneck each way, from `source`: read from a thread of
/// its own as the window opens, every [`PATH_QUEUE_PERIOD_MS`], and as it
/// closes.
pub fn path_queues(source: PathSource, ways: Vec<PathWay>) -> Box<dyn Probe> {
    Box::new(PathQueueProbe {
        source,
        ways: std::sync::Arc::new(ways),
        sampler: None,
    })
}

struct PathQueueProbe {
    source: PathSource,
    ways: std::sync::Arc<Vec<PathWay>>,
    sampler: Option<Sampler<Vec<PathQueue>>>,
}

impl Probe for PathQueueProbe {
    fn open(&mut self, _: &Engine) {
        let (source, ways) = (self.source.clone(), self.ways.clone());
        self.sampler = Sampler::start("plumb-path", move |stop| sample_path(&source, &ways, stop));
    }

    fn window_closed(&mut self) {
        if let Some(sampler) = &self.sampler {
            sampler.halt();
        }
    }

    fn close(&mut self, _: &Engine, out: &mut EndResult) {
        if let Some(sampler) = self.sampler.take() {
            out.path_queues = sampler.stop().unwrap_or_default();
        }
    }
}

fn sample_path(source: &PathSource, ways: &[PathWay], stop: &mpsc::Receiver<()>) -> Vec<PathQueue> {
    let _inside = match source {
        PathSource::Router(netns) => match plumb_sys::knob::enter_netns(netns) {
            Ok(inside) => Some(inside),
            Err(_) => return Vec::new(),
        },
        PathSource::Own(_) => None,
    };
    let read = || -> Vec<Option<QdiscRow>> {
        match source {
            PathSource::Router(_) => {
                let roots = plumb_sys::qdisc::read_roots().unwrap_or_default();
                ways.iter()
                    .map(|w| {
                        roots
                            .iter()
                            .find(|(name, _)| *name == w.interface)
                            .map(|(_, r)| r.clone())
                    })
                    .collect()
            }
            PathSource::Own(reader) => reader(),
        }
    };
    let mut first: Option<Vec<Option<QdiscRow>>> = None;
    let mut last: Vec<Option<QdiscRow>> = vec![None; ways.len()];
    let mut series: Vec<Vec<u64>> = vec![Vec::new(); ways.len()];
    let mut samples: Vec<Vec<plumb_samples::QueueSample>> = vec![Vec::new(); ways.len()];
    let mut peak_qlen = vec![0u64; ways.len()];
    every_period(stop, || {
        let mut now = read();
        now.resize(ways.len(), None);
        let open = first.get_or_insert_with(|| now.clone());
        for (i, row) in now.iter().enumerate() {
            let s = row
                .as_ref()
                .map(|r| r.since(open.get(i).and_then(Option::as_ref)))
                .unwrap_or_default();
            series[i].push(s.backlog_bytes);
            samples[i].push(s.into());
            peak_qlen[i] = peak_qlen[i].max(s.qlen);
        }
        last = now;
        Duration::from_millis(u64::from(PATH_QUEUE_PERIOD_MS))
    });
    let first = first.unwrap_or_default();
    ways.iter()
        .enumerate()
        .filter_map(|(i, w)| {
            let close = last[i].as_ref()?;
            Some(PathQueue {
                toward: w.toward.to_string(),
                interface: w.interface.clone(),
                kind: close.kind.clone(),
                stats: close.since(first.get(i).and_then(Option::as_ref)),
                peak_backlog_bytes: series[i].iter().copied().max().unwrap_or(0),
                peak_qlen: peak_qlen[i],
                period_ms: PATH_QUEUE_PERIOD_MS,
                backlog_series: std::mem::take(&mut series[i]),
                samples: std::mem::take(&mut samples[i]),
            })
        })
        .collect()
}

/// The byte queue limits of the NICs of this end's namespace, read from
/// a thread of its own (made on the end's thread, so in its namespace) as
/// the window opens, every [`PATH_QUEUE_PERIOD_MS`], and as it closes.
#[derive(Default)]
struct NicQueueProbe {
    sampler: Option<Sampler<Vec<plumb_samples::NicQueue>>>,
}

impl Probe for NicQueueProbe {
    fn open(&mut self, engine: &Engine) {
        // Loopback traffic crosses no NIC: another's traffic on one would
        // be no part of the run's.
        if engine.on_loopback() == Some(true) {
            return;
        }
        // The namespace's own devices: sysfs may show another's.
        let names: Vec<String> = plumb_sys::proc::read_net_dev()
            .map(|rows| rows.into_iter().map(|r| r.name).collect())
            .unwrap_or_default();
        if plumb_sys::bql::read(&names).is_empty() {
            return;
        }
        self.sampler = Sampler::start("plumb-bql", move |stop| sample_nic_queues(&names, stop));
    }

    fn window_closed(&mut self) {
        if let Some(sampler) = &self.sampler {
            sampler.halt();
        }
    }

    fn close(&mut self, _: &Engine, out: &mut EndResult) {
        if let Some(sampler) = self.sampler.take() {
            out.nic_queues = sampler.stop().unwrap_or_default();
        }
    }
}

fn sample_nic_queues(names: &[String], stop: &mpsc::Receiver<()>) -> Vec<plumb_samples::NicQueue> {
    let mut queues: Vec<plumb_samples::NicQueue> = Vec::new();
    every_period(stop, || {
        for q in plumb_sys::bql::read(names) {
            let at = match queues
                .iter()
                .position(|n| n.interface == q.interface && n.queue == q.queue)
            {
                Some(at) => at,
                None => {
                    queues.push(plumb_samples::NicQueue {
                        interface: q.interface.clone(),
                        queue: q.queue,
                        period_ms: PATH_QUEUE_PERIOD_MS,
                        ..Default::default()
                    });
                    queues.len() - 1
                }
            };
            let n = &mut queues[at];
            n.inflight_series.push(q.inflight);
            n.peak_inflight_bytes = n.peak_inflight_bytes.max(q.inflight);
            n.limit_bytes = q.limit;
        }
        Duration::from_millis(u64::from(PATH_QUEUE_PERIOD_MS))
    });
    queues.retain(|q| q.peak_inflight_bytes > 0);
    queues
}

struct InterruptsProbe;

impl Edges for InterruptsProbe {
    type Reading = Interrupts;

    fn read(&self, _: &Engine) -> Interrupts {
        plumb_sys::proc::read_interrupts().unwrap_or_default()
    }

    fn record(&self, a: Interrupts, b: Interrupts, _: &Engine, out: &mut EndResult) {
        out.interrupts = b.named_since(&a);
    }
}

/// The scheduler's accounting of one thread over the window, where the
/// kernel keeps it at both ends of the window.
fn sched_delta(a: Option<&TaskSnapshot>, b: &TaskSnapshot) -> Option<SchedTimes> {
    let (s0, s1) = match a {
        Some(a) => (a.schedstat?, b.schedstat?),
        // A thread born in the window: all of its accounting is in it.
        None => (Default::default(), b.schedstat?),
    };
    let ns = |x: u64, y: u64| x.saturating_sub(y) as f64 / 1e9;
    Some(SchedTimes {
        run_s: ns(s1.run_ns, s0.run_ns),
        wait_s: ns(s1.wait_ns, s0.wait_ns),
        timeslices: s1.timeslices.saturating_sub(s0.timeslices),
        migrations: match a {
            Some(a) => a
                .migrations
                .zip(b.migrations)
                .map(|(x, y)| y.saturating_sub(x)),
            None => b.migrations,
        },
    })
}

/// The process's CPU over the window, and apart from it the delay line's
/// when this process runs one.
fn process_cpu(
    a: &ProcessReading,
    b: &ProcessReading,
    tick: f64,
    engine: &Engine,
) -> (ProcessCpu, Option<f64>) {
    let ns = |x: u64| x as f64 / 1e9;
    let threads: Vec<ThreadCpu> = b
        .tasks
        .iter()
        .map(|t| {
            let before = a.tasks.iter().find(|o| o.tid == t.tid);
            let (u0, s0, v0, i0) = before
                .map(|o| {
                    (
                        o.utime_ticks,
                        o.stime_ticks,
                        o.voluntary_csw,
                        o.involuntary_csw,
                    )
                })
                .unwrap_or_default();
            ThreadCpu {
                tid: t.tid,
                name: t.name.clone(),
                user_s: t.utime_ticks.saturating_sub(u0) as f64 / tick,
                system_s: t.stime_ticks.saturating_sub(s0) as f64 / tick,
                voluntary_csw: t.voluntary_csw.saturating_sub(v0),
                involuntary_csw: t.involuntary_csw.saturating_sub(i0),
                cpus_allowed: t.cpus_allowed_list.clone(),
                last_cpu: t.last_cpu,
                sched: sched_delta(before, t),
            }
        })
        .collect();
    // The delay line's thread is the path, not this end: its time is set
    // apart (at the threads' tick resolution, against the process's
    // nanoseconds).
    let (path, threads): (Vec<ThreadCpu>, Vec<ThreadCpu>) =
        threads.into_iter().partition(|t| t.name == PATH_THREAD);
    let path_user: f64 = path.iter().map(|t| t.user_s).sum();
    let path_system: f64 = path.iter().map(|t| t.system_s).sum();
    // Every other thread counts towards the process; only the workers and
    // the threads that used CPU are listed.
    let sched = SchedTimes::sum(threads.iter().filter_map(|t| t.sched.as_ref()));
    let threads = threads
        .into_iter()
        .filter(|t| t.name.starts_with(engine.worker_name_prefix()) || t.user_s + t.system_s > 0.0)
        .collect();
    let cpu = ProcessCpu {
        pid: std::process::id(),
        user_s: (ns(b.rusage.user_ns.saturating_sub(a.rusage.user_ns)) - path_user).max(0.0),
        system_s: (ns(b.rusage.system_ns.saturating_sub(a.rusage.system_ns)) - path_system)
            .max(0.0),
        voluntary_csw: b
            .rusage
            .voluntary_csw
            .saturating_sub(a.rusage.voluntary_csw),
        involuntary_csw: b
            .rusage
            .involuntary_csw
            .saturating_sub(a.rusage.involuntary_csw),
        rss_bytes: plumb_sys::proc::rss_bytes(None).unwrap_or(0),
        threads,
        sched,
    };
    (cpu, (!path.is_empty()).then_some(path_user + path_system))
}

/// Each CPU's times between two readings of /proc/stat, `a` and then `b`,
/// taken `span_s` seconds apart; `tick` is the ticks of a second.
pub fn cpu_deltas(a: &[StatCpu], b: &[StatCpu], tick: f64, span_s: f64) -> Vec<CpuTimes> {
    b.iter()
        .filter_map(|e| {
            let s = a.iter().find(|s| s.cpu == e.cpu)?;
            let d = |x: u64, y: u64| x.saturating_sub(y) as f64 / tick;
            Some(CpuTimes {
                cpu: e.cpu,
                user_s: d(e.user, s.user),
                nice_s: d(e.nice, s.nice),
                system_s: d(e.system, s.system),
                idle_s: d(e.idle, s.idle),
                iowait_s: d(e.iowait, s.iowait),
                irq_s: d(e.irq, s.irq),
                softirq_s: d(e.softirq, s.softirq),
                steal_s: d(e.steal, s.steal),
                span_s: Some(span_s),
            })
        })
        .collect()
}

fn softirq_deltas(a: &[SoftirqRow], b: &[SoftirqRow]) -> Vec<SoftirqCounts> {
    b.iter()
        .filter_map(|e| {
            let s = a.iter().find(|s| s.cpu == e.cpu)?;
            Some(SoftirqCounts {
                cpu: e.cpu,
                net_rx: e.net_rx.saturating_sub(s.net_rx),
                net_tx: e.net_tx.saturating_sub(s.net_tx),
            })
        })
        .collect()
}

/// The CPUs whose packet processing moved.
fn softnet_deltas(a: &[SoftnetCounts], b: &[SoftnetCounts]) -> Vec<SoftnetCounts> {
    b.iter()
        .filter_map(|e| Some(e.since(a.iter().find(|s| s.cpu == e.cpu)?)))
        .filter(SoftnetCounts::moved)
        .collect()
}

/// The interfaces whose counters moved: those that carried the test's
/// traffic, and whatever else this namespace sent or received meanwhile.
fn interface_deltas(a: &InterfaceReading, b: &InterfaceReading) -> Vec<InterfaceCounts> {
    b.net_dev
        .iter()
        .filter_map(|e| {
            // An interface that came up in the window counts from zero.
            let before = a.net_dev.iter().find(|s| s.name == e.name);
            let counters = e
                .counters
                .since(&before.map(|s| s.counters).unwrap_or_default());
            if !counters.moved() {
                return None;
            }
            let c = InterfaceCounts {
                name: e.name.clone(),
                counters,
                virtual_device: false,
                irqs: Vec::new(),
                driver_counters: b.driver.get(&e.name).map(|s| s.len() as u32),
                driver: driver_deltas(a.driver.get(&e.name), b.driver.get(&e.name)),
            };
            Some(match plumb_sys::proc::net_device(&e.name) {
                None => InterfaceCounts {
                    virtual_device: true,
                    ..c
                },
                Some(dev) => InterfaceCounts {
                    irqs: irq_deltas(
                        &a.interrupts,
                        &b.interrupts,
                        &plumb_sys::proc::irqs_of(&e.name, &dev, &b.interrupts),
                    ),
                    ..c
                },
            })
        })
        .collect()
}

/// The driver statistics of one interface that moved between two readings
/// (from zero for an interface that came up in the window; a name the
/// driver gives twice is summed).
fn driver_deltas(
    a: Option<&Vec<(String, u64)>>,
    b: Option<&Vec<(String, u64)>>,
) -> BTreeMap<String, i64> {
    let sum = |stats: Option<&Vec<(String, u64)>>| {
        let mut m: BTreeMap<String, i64> = BTreeMap::new();
        for (name, v) in stats.into_iter().flatten() {
            let e = m.entry(name.clone()).or_default();
            *e = e.wrapping_add(*v as i64);
        }
        m
    };
    let Some(b) = b else {
        return BTreeMap::new();
    };
    counter_deltas(&sum(a), &sum(Some(b)))
}

/// The interrupts each CPU took over the window on each of `irqs`, for the
/// IRQs that fired.
fn irq_deltas(a: &Interrupts, b: &Interrupts, irqs: &[u32]) -> Vec<IrqCounts> {
    irqs.iter()
        .filter_map(|irq| {
            let e = b.lines.iter().find(|l| l.irq == *irq)?;
            let s = a.lines.iter().find(|l| l.irq == *irq);
            let cpus: Vec<IrqCpu> = b
                .cpus
                .iter()
                .zip(&e.counts)
                .enumerate()
                .filter_map(|(k, (&cpu, &n))| {
                    let before = s.and_then(|s| s.counts.get(k)).copied().unwrap_or(0);
                    let count = n.saturating_sub(before);
                    (count > 0).then_some(IrqCpu { cpu, count })
                })
                .collect();
            (!cpus.is_empty()).then(|| IrqCounts {
                irq: *irq,
                name: e
                    .desc
                    .split_ascii_whitespace()
                    .last()
                    .unwrap_or_default()
                    .to_string(),
                cpus,
            })
        })
        .collect()
}

/// Only counters that moved are kept: the full set is several hundred names
/// and almost all are still.
fn counter_deltas(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    b.iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(*a.get(k).unwrap_or(&0));
            (d != 0).then(|| (k.clone(), d))
        })
        .collect()
}
