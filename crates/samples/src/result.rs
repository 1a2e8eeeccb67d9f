//! What a run produced: per end (client and server) the byte counts, interval
//! samples, CPU and kernel accounting and per-flow TCP_INFO, and what is derived
//! from putting both ends side by side.

use crate::cpu::{CpuTimes, ProcessCpu, SoftirqCounts};
use plumb_spec::Spec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Identifies the JSON document `plumb run --json` prints; bumped on any
/// incompatible change (schemas/run.v1.schema.json describes version 1).
pub const RUN_SCHEMA: &str = "plumb.run/1";

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    // The default only so that an end's record can take defaults for
    // what it does not set; every end names its role.
    #[default]
    Client,
    Server,
}

impl Role {
    /// `client`, `server`: how every output names an end.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// One interval of one end's measurement window (normally one second).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IntervalSample {
    /// Seconds from the start of the window to the end of this interval.
    pub t_s: f64,
    /// Length of this interval in seconds (the last one may be short).
    pub dt_s: f64,
    /// Bytes this end wrote over all flows during this interval.
    pub bytes_sent: u64,
    /// Bytes this end read over all flows during this interval.
    pub bytes_received: u64,
    /// Transactions completed in this interval (request/response workloads).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub transactions: u64,
    /// 99th percentile latency of the transactions completed in this
    /// interval, in microseconds (client end of request/response workloads).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub p99_us: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Bytes one flow moved during the window at one end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowTotals {
    /// Flow index, from 0.
    pub flow: u32,
    /// Bytes written on this flow during the window.
    pub bytes_sent: u64,
    /// Bytes read from this flow during the window.
    pub bytes_received: u64,
    /// Transactions completed during the window: 0 for a request/response
    /// flow that completed none, absent where the workload has none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transactions: Option<u64>,
}

/// Transaction latency over a window, from a histogram with 3 significant
/// digits of precision. Times in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Latency {
    /// Transactions timed.
    pub count: u64,
    /// Mean.
    #[schemars(range(min = 0))]
    pub mean_us: f64,
    /// Smallest.
    #[schemars(range(min = 0))]
    pub min_us: f64,
    /// Median.
    #[schemars(range(min = 0))]
    pub p50_us: f64,
    /// 90th percentile.
    #[schemars(range(min = 0))]
    pub p90_us: f64,
    /// 99th percentile.
    #[schemars(range(min = 0))]
    pub p99_us: f64,
    /// 99.9th percentile.
    #[schemars(range(min = 0))]
    pub p999_us: f64,
    /// 99.99th percentile.
    #[schemars(range(min = 0))]
    pub p9999_us: f64,
    /// Largest.
    #[schemars(range(min = 0))]
    pub max_us: f64,
    /// The histogram itself: `[value_ns, count]` for each non-empty bucket,
    /// value being the highest equivalent value of the bucket. Enough to
    /// merge iterations or runs and read any percentile again.
    pub buckets: Vec<[u64; 2]>,
}

/// A subset of `struct tcp_info` for one flow at the end of the window. Fields
/// the running kernel does not return (it may return a shorter struct) are
/// absent rather than zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TcpInfo {
    /// Flow index, from 0.
    pub flow: u32,
    /// TCP state as the kernel numbers it (tcpi_state; 1 is ESTABLISHED).
    pub state: u8,
    /// Smoothed round-trip time, in microseconds (tcpi_rtt).
    pub rtt_us: u32,
    /// Round-trip time variation, in microseconds (tcpi_rttvar).
    pub rttvar_us: u32,
    /// Sending maximum segment size, in bytes (tcpi_snd_mss).
    pub snd_mss: u32,
    /// Receiving maximum segment size as estimated by the kernel, in bytes
    /// (tcpi_rcv_mss).
    pub rcv_mss: u32,
    /// Congestion window, in segments (tcpi_snd_cwnd).
    pub snd_cwnd: u32,
    /// The slow-start threshold, in segments; [`INITIAL_SSTHRESH`] until
    /// the flow first leaves slow start.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub snd_ssthresh: Option<u32>,
    /// Retransmission timeouts not yet recovered from (tcpi_retransmits).
    pub retransmits: u8,
    /// Segments retransmitted over the life of the connection
    /// (tcpi_total_retrans).
    pub total_retrans: u32,
    /// Current pacing rate, in bits per second (the kernel's tcpi_pacing_rate
    /// counts bytes per second). Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pacing_rate_bps: Option<u64>,
    /// Pacing rate limit set by SO_MAX_PACING_RATE, in bits per second (the
    /// kernel's tcpi_max_pacing_rate counts bytes per second). Absent when the
    /// kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_pacing_rate_bps: Option<u64>,
    /// Bytes acknowledged by the peer over the life of the connection
    /// (tcpi_bytes_acked). Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_acked: Option<u64>,
    /// Bytes received over the life of the connection (tcpi_bytes_received).
    /// Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_received: Option<u64>,
    /// Most recent delivery rate estimate, in bits per second (the kernel's
    /// tcpi_delivery_rate counts bytes per second). Absent when the kernel does
    /// not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery_rate_bps: Option<u64>,
    /// Time the connection had data to send, in microseconds (tcpi_busy_time).
    /// Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busy_time_us: Option<u64>,
    /// Time sending was limited by the peer's receive window, in microseconds
    /// (tcpi_rwnd_limited). Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rwnd_limited_us: Option<u64>,
    /// Time sending was limited by the send buffer, in microseconds
    /// (tcpi_sndbuf_limited). Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes retransmitted over the life of the connection
    /// (tcpi_bytes_retrans). Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_retrans: Option<u64>,
    /// Segments delivered to the peer, retransmissions included
    /// (tcpi_delivered). Absent when the kernel does not return it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivered: Option<u32>,
}

/// The slow-start threshold of a flow that has not left its first slow
/// start (TCP_INFINITE_SSTHRESH).
pub const INITIAL_SSTHRESH: u32 = 0x7fff_ffff;

/// Distribution of per-flow TCP_INFO figures, so that thousands of flows read
/// as one line each.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TcpInfoSummary {
    /// Flows that answered TCP_INFO.
    pub flows: u32,
    /// Each figure as [min, median, p99, max] over the flows.
    #[schemars(inner(range(min = 0)))]
    pub rtt_us: [f64; 4],
    /// Congestion window in segments.
    #[schemars(inner(range(min = 0)))]
    pub snd_cwnd: [f64; 4],
    /// Retransmitted segments per flow.
    #[schemars(inner(range(min = 0)))]
    pub total_retrans: [f64; 4],
    /// Sum of total_retrans over all flows.
    pub retrans_sum: u64,
}

/// Per-flow TCP_INFO is kept up to this many flows; beyond, only the
/// distribution is, so that a 30000-flow record stays readable.
pub const TCP_INFO_PER_FLOW_MAX: usize = 64;

impl TcpInfoSummary {
    pub fn of(infos: &[TcpInfo]) -> Option<TcpInfoSummary> {
        if infos.is_empty() {
            return None;
        }
        let dist = |f: &dyn Fn(&TcpInfo) -> f64| spread(infos.iter().map(f).collect());
        Some(TcpInfoSummary {
            flows: infos.len() as u32,
            rtt_us: dist(&|t| t.rtt_us as f64),
            snd_cwnd: dist(&|t| t.snd_cwnd as f64),
            total_retrans: dist(&|t| t.total_retrans as f64),
            retrans_sum: infos.iter().map(|t| t.total_retrans as u64).sum(),
        })
    }
}

/// Values as [min, median, p99, max]; zeros for none.
pub fn spread(mut v: Vec<f64>) -> [f64; 4] {
    if v.is_empty() {
        return [0.0; 4];
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    [v[0], at(0.5), at(0.99), v[v.len() - 1]]
}

/// The segments an end's own flows took over a window, as their sockets
/// saw them (tcp:tcp_probe, `--tcp-probe`), filtered in the kernel by the
/// server's port as [`FlowEvents`] are: on a sending end the ACKs, with
/// its send-side state at each; on a receiving one, the data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AckSamples {
    /// The filter the ACKs were sampled with (`dport == 5201`).
    pub filter: String,
    /// Segments the kernel counted, and those whose record was read
    /// (fewer where a CPU's ring overflowed between two reads).
    pub counted: u64,
    /// Segments whose record was read: fewer where a CPU's ring overflowed
    /// between two reads.
    pub read: u64,
    /// Of the records read, a uniform sample of at most
    /// [`ACK_SAMPLES_KEPT`] gives each figure as [min, median, p99, max]:
    /// the smoothed RTT (µs), the congestion window (segments), the
    /// peer's advertised window and the bytes in flight (snd_nxt less
    /// snd_una), at each segment.
    pub kept: u64,
    /// Smoothed RTT at each segment, us: [min, median, p99, max].
    pub srtt_us: [f64; 4],
    /// Congestion window at each segment, segments: [min, median, p99, max].
    pub cwnd: [f64; 4],
    /// The peer's advertised window at each segment, bytes: [min, median, p99,
    /// max].
    pub snd_wnd: [f64; 4],
    /// snd_nxt less snd_una at each segment, bytes: [min, median, p99, max].
    pub in_flight_bytes: [f64; 4],
    /// CPU seconds of the thread that read the rings.
    #[schemars(range(min = 0))]
    pub sampler_cpu_s: f64,
}

/// What an end is asked to read beyond the probes every end runs: each
/// costs more than the defaults, so the user asks for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Observe {
    /// The CPUs' time by function over the window (`--profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::ProfileAsk>,
    /// Every ACK of the end's own flows (`--tcp-probe`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tcp_probe: bool,
}

/// The ACKs kept for the distributions, a uniform sample of those read:
/// enough for a p99 within a fraction of a percent, 32 bytes each.
pub const ACK_SAMPLES_KEPT: usize = 100_000;

/// Whether a socket option was applied as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OptionStatus {
    /// Set and read back.
    Applied,
    /// Left to the kernel's default; `granted` is what the kernel chose.
    Default,
    /// The kernel does not support it here; the run went on without it.
    Unsupported,
}

/// A socket option: what was asked and what the kernel granted, read back from
/// the first flow (and checked to be the same on every flow).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OptionRecord {
    /// Option name: sndbuf, rcvbuf, nodelay, cork, mss, cc or pacing_rate.
    pub name: String,
    /// What the spec asked, as text ("auto", "8K", "on", "default", "none",
    /// "1000000000 bit/s", ...).
    pub asked: String,
    /// What the kernel reports, as text (buffer sizes in bytes, "on"/"off", a
    /// congestion control name, "N bit/s" or "unlimited"); "unreadable: ..."
    /// when it could not be read.
    pub granted: String,
    /// Whether the option was applied as asked.
    pub status: OptionStatus,
    /// A remark on the value, e.g. that the kernel doubles buffer sizes. Absent
    /// when there is none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// Read back again as the window closed, where that differs from
    /// `granted`: a buffer the kernel autotuned over the run. Absent in
    /// older records and where nothing changed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub at_close: Option<String>,
}

/// Deltas of /proc/net/snmp and /proc/net/netstat counters over the window,
/// keyed `Group.Name` (e.g. `Tcp.RetransSegs`, `TcpExt.DelayedACKs`). Only
/// counters that moved are kept.
pub type KernelCounters = BTreeMap<String, i64>;

/// Everything one end (client or server) measured over one window. What a
/// record does not set takes its default: nothing measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EndResult {
    /// Which end this is.
    pub role: Role,
    /// Host name of the machine this end ran on.
    pub hostname: String,
    /// Kernel release of that machine (as uname -r).
    pub kernel: String,
    /// Number of online CPUs on that machine (0 when it could not be read).
    pub online_cpus: u32,
    /// Worker threads this end ran.
    pub threads: u32,
    /// CPUs the worker threads were pinned to, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pinned_cpus: Option<String>,
    /// Length of this end's measurement window, in seconds.
    pub window_s: f64,
    /// Bytes this end wrote over all flows during the window.
    pub bytes_sent: u64,
    /// Bytes this end read over all flows during the window.
    pub bytes_received: u64,
    /// Bytes queued in this end's sockets (send queue not yet acknowledged plus
    /// receive queue not yet read) at the start and at the end of the window.
    pub queued_start_bytes: u64,
    /// Bytes queued in this end's sockets (send queue not yet acknowledged plus
    /// receive queue not yet read) at the end of the window.
    pub queued_end_bytes: u64,
    /// The window cut into intervals (normally one second each), in order.
    pub intervals: Vec<IntervalSample>,
    /// Bytes each flow moved during the window at this end, in flow order.
    pub flows: Vec<FlowTotals>,
    /// CPU use of this end's process over the window.
    pub process: ProcessCpu,
    /// Time each CPU of the host spent in each state over the window (deltas of
    /// /proc/stat).
    pub cpus: Vec<CpuTimes>,
    /// Network softirqs raised on each CPU of the host over the window (deltas
    /// of /proc/softirqs).
    pub softirqs: Vec<SoftirqCounts>,
    /// Deltas of /proc/net/snmp and /proc/net/netstat counters over the window,
    /// keyed `Group.Name` (e.g. `Tcp.RetransSegs`, `TcpExt.DelayedACKs`). Only
    /// counters that moved are kept; a gauge such as Tcp.CurrEstab may move
    /// down, so values can be negative.
    pub counters: KernelCounters,
    /// TCP_INFO per flow; left empty above `TCP_INFO_PER_FLOW_MAX` flows,
    /// where `tcp_info_summary` stands for it.
    pub tcp_info: Vec<TcpInfo>,
    /// Distribution of the per-flow TCP_INFO figures over all flows.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp_info_summary: Option<TcpInfoSummary>,
    /// Each socket option: what was asked and what the kernel granted, read
    /// back from the first flow.
    pub socket_options: Vec<OptionRecord>,
    /// Problems that did not stop the run (a flow reset after the window, ...).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub warnings: Vec<String>,
    /// This end's figures never arrived: it was lost during the test (its
    /// process or host went away). Its counts are missing, not zero, and so
    /// is every figure derived from them.
    #[serde(skip_serializing_if = "is_false", default)]
    pub lost: bool,
    /// The build of the plumb that measured this end (`plumb --version`);
    /// absent in records made before it was kept, and for a lost end.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub build: Option<String>,
    /// Transactions completed during the window (request/response workloads).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub transactions: u64,
    /// Latency of the transactions this end timed (the client).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency: Option<Latency>,
    /// Datagram accounting of the UDP workloads.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub udp: Option<UdpTotals>,
    /// MSG_ZEROCOPY accounting of a sending end, over the whole test.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub zerocopy: Option<ZeroCopyTotals>,
    /// TCP_ZEROCOPY_RECEIVE accounting of a receiving end, whole test.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rx_zerocopy: Option<RxZeroCopyTotals>,
    /// Whether this end's kernel accounts interrupt and softirq time
    /// precisely (CONFIG_IRQ_TIME_ACCOUNTING) or charges whole ticks to what
    /// they interrupted, which makes small softirq differences noise; None
    /// where its config could not be read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub irq_time_accounting: Option<bool>,
    /// Per CPU, the packet processing of the window, for the CPUs where
    /// anything moved.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub softnet: Vec<crate::SoftnetCounts>,
    /// The interfaces of this end's network namespace whose counters moved
    /// in the window.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub interfaces: Vec<InterfaceCounts>,
    /// The root queueing disciplines of this end's network namespace that
    /// moved packets or held some in the window (`tc -s qdisc show`, read
    /// over rtnetlink): where a bottleneck's queue builds and drops.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub qdiscs: Vec<QdiscCounts>,
    /// The architecture's own interrupts on this end's host over the
    /// window, by their /proc/interrupts name (x86: `LOC` local timer,
    /// `RES` rescheduling and `CAL` function-call IPIs, `TLB` shootdowns),
    /// summed over the CPUs: those that moved. A pacing timer or a
    /// cross-CPU wake-up costs the CPU that takes it, more so in a guest.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    #[schemars(extend("additionalProperties" = {"type": "integer", "minimum": 1}))]
    pub interrupts: BTreeMap<String, u64>,
    /// CPU seconds of plumb's delay line over this end's window: a thread
    /// of this process that is the path, not the end, so its time is set
    /// apart from the process's. Absent without one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub path_cpu_s: Option<f64>,
    /// Where this end's CPU time went, function by function (`--profile`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub profile: Option<crate::Profile>,
    /// Sockets and protocol memory in use in this end's network namespace
    /// as the window closed (/proc/net/sockstat); absent in records made
    /// before it was read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sockstat: Option<Sockstat>,
    /// What limited this end's flows while they sent, over the window;
    /// absent where no flow of the end sent data in it, or the kernel
    /// keeps no such accounting (before 4.10).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub limited: Option<SenderLimits>,
    /// Segments this end's flows retransmitted over the window (their
    /// tcpi_total_retrans at the close less at the opening); absent in
    /// records made before it was kept, and for workloads without
    /// long-lived TCP flows.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub window_retransmits: Option<u64>,
    /// The kernel's tracepoints counted over the window on every CPU of
    /// this end's host; absent in records made before they were counted.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tracepoints: Option<Tracepoints>,
    /// The kernel's events of this end's own flows over the window; absent
    /// in records made before they were counted, and for UDP.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub flow_events: Option<FlowEvents>,
    /// Every ACK of this end's own flows over the window, where asked
    /// (`--tcp-probe`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub acks: Option<AckSamples>,
    /// This end's flows' TCP state sampled over the window; absent in
    /// records made before it was sampled, and for workloads without
    /// long-lived TCP flows.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp_series: Option<crate::TcpSeries>,
}

/// The events of an end's own flows over a window, from the tracepoints
/// whose records carry the socket's ports, counted with a filter on this
/// end's side of them: the server's port as the source on the server, as
/// the destination on the client. Events whose records carry no ports
/// (skb:kfree_skb, and tcp:tcp_send_reset since 6.10) are host-wide only,
/// in [`Tracepoints`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowEvents {
    /// The filter the events were counted with (`dport == 5201`).
    pub filter: String,
    /// Events by tracepoint (`tcp:tcp_retransmit_skb`).
    pub counts: BTreeMap<String, u64>,
    /// Tracepoints that could not be counted for the flows, with why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub unavailable: BTreeMap<String, String>,
    /// The flows' receive buffers each time the kernel tuned them
    /// (tcp:tcp_rcvbuf_grow, 6.18 and later).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rcvbuf_grow: Option<RcvbufGrowth>,
}

/// The receive buffer's tunings a window's samples read (each time a
/// round trip's data outgrew the space the receiver had measured, whether
/// the kernel could grow the buffer or the application had locked it), as
/// sums over them (a mean is the sum over `read`): the buffer, the window clamp
/// and the advertised window as they stood, and the scaling ratio (in
/// 256ths: the share of the buffer's memory the kernel expects to be
/// payload).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RcvbufGrowth {
    /// Tunings read; fewer than counted where a ring overflowed.
    pub read: u64,
    /// The receive buffers as they stood, bytes, summed.
    pub rcvbuf_sum: u64,
    /// The window clamps, bytes, summed.
    pub window_clamp_sum: u64,
    /// The advertised windows, bytes, summed.
    pub rcv_wnd_sum: u64,
    /// The scaling ratios in 256ths (the share of the buffer's memory the
    /// kernel expects to be payload), summed.
    pub scaling_ratio_sum: u64,
}

impl RcvbufGrowth {
    /// The means at each tuning: buffer, window clamp and advertised
    /// window in bytes, and the scaling ratio as a share; None when none
    /// was read.
    pub fn means(&self) -> Option<(f64, f64, f64, f64)> {
        let n = self.read as f64;
        (self.read > 0).then(|| {
            (
                self.rcvbuf_sum as f64 / n,
                self.window_clamp_sum as f64 / n,
                self.rcv_wnd_sum as f64 / n,
                self.scaling_ratio_sum as f64 / n / 256.0,
            )
        })
    }
}

/// Tracepoints counted over a window, host-wide, and those that could not
/// be, each with why (missing from the records' counts, never zero).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tracepoints {
    /// Events by tracepoint (`tcp:tcp_retransmit_skb`).
    pub counts: BTreeMap<String, u64>,
    /// Tracepoints that could not be counted here, each with why: missing,
    /// never zero.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub unavailable: BTreeMap<String, String>,
    /// Packets dropped (skb:kfree_skb) by the kernel's reason, named from
    /// its format file; where the reasons read are not those of every drop
    /// counted, an estimate scaled to the count (see `drop_reasons_read`):
    /// its sum is the count, never more.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub drop_reasons: BTreeMap<String, u64>,
    /// The drops whose reason was read: fewer than counted where the
    /// sampler's rings overflowed (or more, by those dropped between the
    /// count's reading and the records'), and `drop_reasons` is then an
    /// estimate.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub drop_reasons_read: Option<u64>,
    /// Where `drop_reasons` is an estimate, the reasons as read, which it
    /// was scaled from. Absent in older records and where every drop's
    /// reason was read.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub drop_reasons_as_read: BTreeMap<String, u64>,
}

impl Tracepoints {
    /// Drops by reason from the reasons `read`, scaled to the `counted`
    /// where their sum is not the count: each reason's exact share rounded
    /// down, and the drops left over by the rounding given to the reasons
    /// with the largest remainders, so that the estimate adds up to the
    /// count exactly and no reason takes more than its share rounded up.
    pub fn scale_reasons(read: &BTreeMap<String, u64>, counted: u64) -> BTreeMap<String, u64> {
        let n: u128 = read.values().map(|&v| u128::from(v)).sum();
        if n == 0 || n == u128::from(counted) {
            return read.clone();
        }
        // In integers: v * counted / n with its remainder, exact at any size.
        let share = |v: u64| {
            let p = u128::from(v) * u128::from(counted);
            ((p / n) as u64, p % n)
        };
        let mut scaled: BTreeMap<String, u64> =
            read.iter().map(|(k, &v)| (k.clone(), share(v).0)).collect();
        let left = counted - scaled.values().sum::<u64>();
        let mut by_remainder: Vec<(&String, u128)> =
            read.iter().map(|(k, &v)| (k, share(v).1)).collect();
        by_remainder.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (k, _) in by_remainder.into_iter().take(left as usize) {
            *scaled.get_mut(k).expect("every reason read is scaled") += 1;
        }
        scaled
    }

    /// The record's figures from the reasons read and the drops counted:
    /// the reasons as read where they are every drop, else the estimate
    /// with the reasons read beside it.
    pub fn reasons(
        read: BTreeMap<String, u64>,
        counted: u64,
    ) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
        let estimate = Tracepoints::scale_reasons(&read, counted);
        match estimate == read {
            true => (read, BTreeMap::new()),
            false => (estimate, read),
        }
    }
}

/// TCP's own accounting of a sender's time (tcpi_busy_time,
/// tcpi_rwnd_limited, tcpi_sndbuf_limited), over the window: the
/// differences of each flow's counters between the window's edges, summed
/// over the flows that sent in it. The kernel keeps them in jiffies (1 to
/// 10 ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SenderLimits {
    /// Flows that sent data in the window.
    #[schemars(range(min = 1))]
    pub flows: u32,
    /// Seconds the flows had data to send, summed over them.
    #[schemars(range(min = 0))]
    pub busy_s: f64,
    /// Of those, seconds the receiver's advertised window held them back.
    #[schemars(range(min = 0))]
    pub rwnd_limited_s: f64,
    /// Seconds their own send buffer held them back.
    #[schemars(range(min = 0))]
    pub sndbuf_limited_s: f64,
    /// Of the flows, those still in their first slow start as the window
    /// opened whose congestion window then more than doubled in it: the
    /// warm-up was too short for them.
    #[serde(default)]
    pub slow_start_flows: u32,
}

impl SenderLimits {
    /// Shares of the busy time: (receive window, send buffer, neither);
    /// None without busy time.
    pub fn shares(&self) -> Option<(f64, f64, f64)> {
        crate::tcp::shares(self.busy_s, self.rwnd_limited_s, self.sndbuf_limited_s)
    }
}

/// /proc/net/sockstat at one moment: levels, not counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Sockstat {
    /// Sockets of every family allocated in the namespace.
    pub sockets_used: u64,
    /// TCP sockets in use (not closed, not in TIME_WAIT), orphaned (closed
    /// by their process, still sending), in TIME_WAIT, and allocated.
    pub tcp_inuse: u64,
    /// TCP sockets closed by their process and still sending.
    pub tcp_orphan: u64,
    /// TCP sockets in TIME_WAIT.
    pub tcp_tw: u64,
    /// TCP sockets allocated.
    pub tcp_alloc: u64,
    /// Pages of memory TCP holds for socket buffers, host-wide: what
    /// net.ipv4.tcp_mem's thresholds are compared with.
    pub tcp_mem_pages: u64,
    /// UDP sockets in use in the namespace.
    pub udp_inuse: u64,
    /// Pages UDP holds, compared with net.ipv4.udp_mem.
    pub udp_mem_pages: u64,
}

impl EndResult {
    /// An end that measured nothing: what a lost end, or a test of the
    /// messages that carry an end, starts from.
    pub fn empty(role: Role, threads: u32) -> EndResult {
        EndResult {
            role,
            threads,
            ..EndResult::default()
        }
    }
}

/// An interface's counters (/proc/net/dev): since it came up, or over a
/// window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetDevCounters {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors the driver counted.
    pub rx_errors: u64,
    /// Received packets dropped before they reached the stack (no buffer, a
    /// full backlog, a filter).
    pub rx_dropped: u64,
    /// Receive FIFO overruns.
    pub rx_fifo: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Transmit errors the driver counted.
    pub tx_errors: u64,
    /// Packets dropped on the way out (a full queue, no carrier).
    pub tx_dropped: u64,
    /// Transmit FIFO underruns.
    pub tx_fifo: u64,
}

impl NetDevCounters {
    /// What was counted since `earlier` (a counter that went back, as a
    /// device that was reset does, counts from zero).
    pub fn since(&self, earlier: &NetDevCounters) -> NetDevCounters {
        let d = |x: u64, y: u64| if x >= y { x - y } else { x };
        NetDevCounters {
            rx_bytes: d(self.rx_bytes, earlier.rx_bytes),
            rx_packets: d(self.rx_packets, earlier.rx_packets),
            rx_errors: d(self.rx_errors, earlier.rx_errors),
            rx_dropped: d(self.rx_dropped, earlier.rx_dropped),
            rx_fifo: d(self.rx_fifo, earlier.rx_fifo),
            tx_bytes: d(self.tx_bytes, earlier.tx_bytes),
            tx_packets: d(self.tx_packets, earlier.tx_packets),
            tx_errors: d(self.tx_errors, earlier.tx_errors),
            tx_dropped: d(self.tx_dropped, earlier.tx_dropped),
            tx_fifo: d(self.tx_fifo, earlier.tx_fifo),
        }
    }

    /// Whether a packet, an error or a drop was counted.
    pub fn moved(&self) -> bool {
        *self
            != NetDevCounters {
                rx_bytes: self.rx_bytes,
                tx_bytes: self.tx_bytes,
                ..Default::default()
            }
    }
}

/// A root queueing discipline over a window, in the end's network
/// namespace: what it sent, dropped and held back, and what it held as
/// the window closed. A classful one's figures cover its children's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QdiscCounts {
    /// The interface it is the root of.
    pub interface: String,
    /// Its kind, as tc names it (pfifo, tbf, fq_codel, netem, noqueue).
    pub kind: String,
    /// Its handle as tc writes it (`8001:`).
    pub handle: String,
    /// Bytes and packets it sent.
    pub bytes: u64,
    pub packets: u64,
    /// Packets it dropped: its queue was full, or its algorithm chose to.
    pub drops: u64,
    /// Times a packet waited because the qdisc was over its limit (a
    /// shaper's rate).
    pub overlimits: u64,
    /// Packets the device gave back to it to send again.
    pub requeues: u64,
    /// Packets and bytes it held as the window closed.
    pub qlen: u64,
    pub backlog_bytes: u64,
}

/// One interface over a window, in the end's network namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InterfaceCounts {
    /// Interface name.
    pub name: String,
    #[serde(flatten)]
    pub counters: NetDevCounters,
    /// No device of its own (lo, veth, a bridge, a TUN device), so no IRQs
    /// of its own: its packets are processed in softirqs of the CPUs that
    /// send them.
    #[serde(default)]
    pub virtual_device: bool,
    /// The device's IRQs that fired in the window, with the CPUs that took
    /// them.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub irqs: Vec<IrqCounts>,
    /// How many statistics the driver names (what `ethtool -S` lists): 0
    /// for one that names none (lo); absent where they could not be read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub driver_counters: Option<u32>,
    /// The driver's statistics that moved in the window, by the driver's
    /// names (per queue where it names queues). A gauge can go down.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub driver: BTreeMap<String, i64>,
}

/// One IRQ of an interface's device over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IrqCounts {
    /// The IRQ's number.
    pub irq: u32,
    /// Its handler's name as /proc/interrupts gives it (e.g. eth0-TxRx-3).
    pub name: String,
    /// The interrupts each CPU took, for the CPUs that took any.
    pub cpus: Vec<IrqCpu>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IrqCpu {
    /// CPU number.
    pub cpu: u32,
    /// Interrupts this CPU took over the window.
    pub count: u64,
}

/// Adds each count of `$o` to `$into`. The pattern names every field of
/// the type (those after `;` are not counts and are left alone) and has no
/// `..`, so a count added to the type cannot be left out of its merge.
macro_rules! add_counts {
    ($into:ident += $o:ident as $ty:ident { $($count:ident),* $(; $($other:ident),*)? }) => {{
        let $ty { $($count,)* $($($other: _,)*)? } = $o;
        $( $into.$count += $count; )*
    }};
}

/// What TCP_ZEROCOPY_RECEIVE did on one receiving end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RxZeroCopyTotals {
    /// Bytes whose pages were mapped into user space.
    pub mapped_bytes: u64,
    /// Bytes the kernel could not map, read by copying.
    pub copied_bytes: u64,
}

impl RxZeroCopyTotals {
    /// Adds another process's counts of the same end (a flow group).
    pub fn merge(&mut self, o: &RxZeroCopyTotals) {
        add_counts!(self += o as RxZeroCopyTotals { mapped_bytes, copied_bytes });
    }
}

/// What the kernel did with one end's MSG_ZEROCOPY sends, counted over the
/// whole test (warm-up and the completions drained at the end included),
/// so that the counts balance: every send is completed or outstanding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ZeroCopyTotals {
    /// Successful send(MSG_ZEROCOPY) calls.
    pub sends: u64,
    /// Sends whose completion was read from the error queue.
    pub completions: u64,
    /// Completions the kernel flagged SO_EE_CODE_ZEROCOPY_COPIED: the data
    /// was copied after all. completions - copied were really zero-copy.
    pub copied: u64,
    /// Sends with no completion read when the flows closed.
    pub outstanding: u64,
    /// Of the completions, those read while the test was stopping, and how
    /// many of them were flagged copied. Most are data the kernel freed
    /// unsent when the peer reset the flow: it reports them as not copied
    /// though they never left, so they say nothing about zero-copy.
    #[serde(default)]
    pub at_close: u64,
    /// Of at_close, those flagged copied.
    #[serde(default)]
    pub copied_at_close: u64,
    /// Sends refused with ENOBUFS: net.core.optmem_max bounds the
    /// zero-copy sends a socket may have outstanding.
    pub enobufs: u64,
    /// Sends made as plain copies because ENOBUFS came with nothing
    /// outstanding to wait for.
    pub fallback_copies: u64,
    /// net.core.optmem_max on this end, bytes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub optmem_max: Option<u64>,
}

impl ZeroCopyTotals {
    /// Adds another process's counts of the same end (a flow group); the
    /// sysctl is the host's, the same for both.
    pub fn merge(&mut self, o: &ZeroCopyTotals) {
        add_counts!(self += o as ZeroCopyTotals {
            sends, completions, copied, outstanding, at_close, copied_at_close, enobufs,
            fallback_copies; optmem_max
        });
    }

    /// Completions the kernel did not have to copy.
    pub fn zero_copied(&self) -> u64 {
        self.completions.saturating_sub(self.copied)
    }

    /// Completions read while the flows ran, and how many of them the
    /// kernel flagged copied.
    pub fn running(&self) -> (u64, u64) {
        (
            self.completions.saturating_sub(self.at_close),
            self.copied.saturating_sub(self.copied_at_close),
        )
    }

    /// (Nearly) every completion read while the flows ran was flagged
    /// copied: the mode measured only its overhead. Loopback flags a few
    /// sends in ten thousand as not copied, so 99 % counts as all.
    pub fn all_copied(&self) -> bool {
        let (done, copied) = self.running();
        done > 0 && copied * 100 >= done * 99
    }
}

/// Datagrams one end counted over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UdpTotals {
    /// Datagrams this end sent.
    pub packets_sent: u64,
    /// Datagrams this end received with the test's tag.
    pub packets_received: u64,
    /// Receiver of a stream: sequence numbers skipped and never seen later.
    pub lost: u64,
    /// Receiver of a stream: datagrams that arrived after a later one.
    pub reordered: u64,
    /// Receiver of a stream: of the datagrams received, those still queued
    /// on its sockets as the window closed, read and counted before its
    /// counts were taken (they arrived in the window).
    #[serde(default)]
    pub queued_at_close: u64,
    /// udp-rr client: requests whose response did not come within the
    /// timeout; each was counted and the flow went on.
    pub timeouts: u64,
    /// udp-rr client: responses that came after their request had timed out.
    pub late_responses: u64,
    /// Datagrams without this test's tag, or too short to carry it: dropped
    /// and not counted anywhere else.
    pub strays: u64,
    /// Stream sender: datagrams it sent inside its own window, each marked
    /// so in its header.
    #[serde(default)]
    pub window_sent: u64,
    /// Stream receiver: of the datagrams the sender marked as sent inside
    /// its window, those that arrived, whenever they came: the sender's
    /// `window_sent` less these were lost, exactly, however far apart the
    /// two ends' windows opened and closed.
    #[serde(default)]
    pub window_received: u64,
}

impl UdpTotals {
    /// Adds another process's counts of the same end (a flow group).
    pub fn merge(&mut self, o: &UdpTotals) {
        add_counts!(self += o as UdpTotals {
            packets_sent, packets_received, lost, reordered, queued_at_close, timeouts,
            late_responses, strays, window_sent, window_received
        });
    }
}

/// Bytes accounted by the sender and by the receiver for the same window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transfer {
    /// Bytes written by the sending end(s) during the window.
    pub sent_bytes: u64,
    /// Bytes read by the receiving end(s) during the window.
    pub received_bytes: u64,
    /// sent - received.
    pub difference_bytes: i64,
    /// Bytes in flight (queued in sockets at either end) at the window edges:
    /// what the two counts may legitimately differ by.
    pub in_flight_start_bytes: u64,
    /// Bytes in flight (queued in sockets at either end) at the end of the
    /// window.
    pub in_flight_end_bytes: u64,
}

/// Softirq share of one pinned CPU: softirq time / all time of that CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SoftirqShare {
    /// CPU number.
    pub cpu: u32,
    /// The end whose threads were pinned to this CPU.
    pub role: Role,
    /// Seconds this CPU spent in softirq over the window.
    pub softirq_s: f64,
    /// Seconds this CPU was busy over the window (user, nice, system, irq,
    /// softirq).
    pub busy_s: f64,
    /// softirq_s divided by all time of this CPU over the window (idle
    /// included): a fraction from 0 to 1.
    pub share: f64,
}

/// Figures computed from both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Derived {
    /// Receiver's bytes over the window, in bits per second (goodput).
    pub throughput_bps: f64,
    /// Lowest and highest per-interval throughput at the receiver.
    pub interval_min_bps: f64,
    /// Highest per-interval throughput at the receiver, in bits per second
    /// (intervals shorter than 0.5 s are left out).
    pub interval_max_bps: f64,
    /// CPU seconds per GB (10^9 bytes) received: the client process, the server
    /// process, and every CPU of the host (busy time), as netperf's service
    /// demand but per GB.
    pub client_cpu_s_per_gb: f64,
    /// CPU seconds (user + system) of the server process per GB (10^9 bytes)
    /// received.
    pub server_cpu_s_per_gb: f64,
    /// Busy CPU seconds of every CPU of the host (both hosts when the server is
    /// remote) per GB (10^9 bytes) received, as netperf's service demand but
    /// per GB.
    pub host_cpu_s_per_gb: f64,
    /// Host busy CPU seconds over the window, and the part of it in softirq.
    pub host_busy_s: f64,
    /// The part of host_busy_s spent in softirq, in CPU seconds.
    pub host_softirq_s: f64,
    /// Softirq share of each pinned CPU (client_cpus and server_cpus of the
    /// spec); empty when nothing is pinned.
    pub softirq_shares: Vec<SoftirqShare>,
    /// Sum of TCP retransmissions over all flows at the sending end(s).
    pub retransmits: u64,
    /// Request/response workloads: transactions per second completed by the
    /// client, and CPU seconds per transaction of the client process, the
    /// server process and the host (busy time).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub tps: Option<f64>,
    /// CPU seconds of the client process per transaction.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub client_cpu_s_per_tx: Option<f64>,
    /// CPU seconds of the server process per transaction.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub server_cpu_s_per_tx: Option<f64>,
    /// Busy CPU seconds of the host per transaction.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub host_cpu_s_per_tx: Option<f64>,
    /// Jain's fairness index over the per-flow transaction counts (1 = all
    /// flows got the same share).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub fairness: Option<f64>,
    /// udp-stream: datagrams per second received by the server, and the
    /// fraction lost (lost / (received + lost)).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub pps: Option<f64>,
    /// udp-stream: the share of the datagrams the sender sent inside its window
    /// that never reached the receiver, (client window_sent - server
    /// window_received) / client window_sent; in records without those counts,
    /// lost / (received + lost) from the receiver's sequence numbers over its
    /// own window.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0, max = 1))]
    pub loss: Option<f64>,
    /// udp-rr: the fraction of requests that timed out.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0, max = 1))]
    pub timeout_ratio: Option<f64>,
    /// The window's length in the senders' round trips (their flows'
    /// median smoothed RTT as it closed).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub window_rtts: Option<f64>,
}

/// A window shorter than this many round trips holds too few for a rate,
/// a congestion window or a share of time to settle in it.
pub const WINDOW_RTTS_MIN: f64 = 50.0;

/// One execution of a spec with its measurement window on both ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Iteration {
    /// Position of this iteration in the run, from 0.
    pub index: u32,
    /// False when the window was cut short (Ctrl-C, a lost peer).
    pub complete: bool,
    /// Warm-up before the window, in seconds.
    pub warmup_s: f64,
    /// Length of the measurement window as the client measured it, in seconds.
    pub window_s: f64,
    /// Bytes accounted by the sender and by the receiver for the same window.
    pub transfer: Transfer,
    /// Figures computed from both ends.
    pub derived: Derived,
    /// What the client end measured (its `role` is "client").
    pub client: EndResult,
    /// What the server end measured (its `role` is "server").
    pub server: EndResult,
    /// A run of parts: each other part's figures, in the spec's order.
    /// The main part's are the iteration's own, and so are the host's and
    /// each process's (CPU, softirqs, the kernel's counters), which are
    /// taken once for every part together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartIteration>,
}

/// One part of a run of parts in an iteration: its flows' figures on each
/// end, measured from its start to the window's close.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PartIteration {
    /// The part's name, as the spec's `parts` give it.
    pub name: String,
    /// When its traffic started, in seconds after the window opened (0 for
    /// a part that started with the main one, before the warm-up).
    #[schemars(range(min = 0))]
    pub start_s: f64,
    /// Its own window, from its start to its stop or the run's close, in
    /// seconds.
    pub window_s: f64,
    /// Bytes the part's senders and receivers accounted over its own window.
    pub transfer: Transfer,
    /// Its rates, latency and retransmissions; the CPU figures are the
    /// iteration's, for every part together, and are 0 here.
    pub derived: Derived,
    /// What the client end measured of the part's flows.
    pub client: EndResult,
    /// What the server end measured of the part's flows.
    pub server: EndResult,
}

impl PartIteration {
    /// The part as an iteration of its own, of `of` (the iteration it is a
    /// part of): what reports and comparisons read of one part.
    pub fn as_iteration(&self, of: &Iteration) -> Iteration {
        Iteration {
            index: of.index,
            complete: of.complete,
            warmup_s: of.warmup_s,
            window_s: self.window_s,
            transfer: self.transfer.clone(),
            derived: self.derived.clone(),
            client: self.client.clone(),
            server: self.server.clone(),
            parts: Vec::new(),
        }
    }
}

/// The document `plumb run --json` prints and the store keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunRecord {
    /// Identifies this document and its version.
    #[schemars(extend("const" = RUN_SCHEMA))]
    pub schema: String,
    /// The run's globally unique id (a random UUID), kept through export,
    /// import and copy from store to store. Absent in records made before
    /// it was given; a store gives one to each run it holds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(pattern(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"))]
    pub uuid: Option<String>,
    /// Version of the plumb binary that made the run.
    pub plumb_version: String,
    /// RFC 3339 wall-clock time the run started.
    #[schemars(extend("format" = "date-time"))]
    pub started_at: String,
    /// Label the run was made under (names a build or configuration being
    /// compared).
    pub label: String,
    /// The test point that ran.
    pub spec: Spec,
    /// Stable hash of the canonical form of `spec` (16 lowercase hex digits).
    /// The label is not part of it, so the same test point measured under two
    /// labels has the same key.
    #[schemars(pattern(r"^[0-9a-f]{16}$"))]
    pub spec_key: String,
    /// False when the run was cut short (Ctrl-C, a lost peer).
    pub complete: bool,
    /// One entry per execution of the spec, in order.
    pub iterations: Vec<Iteration>,
    /// How the number of iterations was decided and how sure the mean is.
    /// Absent in records made before repetition existed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub confidence: Option<Confidence>,
    /// The client's build string (`plumb --version`). Absent in records
    /// made before builds were recorded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub build: Option<String>,
    /// The server end: where it was, how it was started, its build.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub peer: Option<Peer>,
    /// What each `--server-knob` did on the server end's host or namespace
    /// (`knob sysctl:net.core.rmem_max: 212992 -> 8388608`), as it said at
    /// the first session.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    #[schemars(length(min = 1), inner(pattern(r"^knob ")))]
    pub server_knobs: Vec<String>,
    /// Both ends' environment as the run captured it: the client's facts,
    /// and the server end's under `server.` where it ran on another host or
    /// in a namespace of its own. The store keeps it beside the record
    /// (deduplicated by hash), so the record's JSON does not carry it.
    #[serde(skip)]
    pub environment: Option<crate::Environment>,
    /// What emulated the path of `--topology veth` with a delay, loss or
    /// link rate, and what it did over the run.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<PathResult>,
    /// The virtual machine the run was made in (`--kernel`): how it was
    /// booted, and from which image.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vm: Option<VmInfo>,
    /// Why the run's figures are not to be trusted: the host disturbed
    /// the guest that measured them beyond the stated bound. `check` and
    /// `bisect` answer "cannot tell" for a suspect run.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub suspect: Option<String>,
}

/// How a run's virtual machine was made and booted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VmInfo {
    /// `tcg` or `kvm`.
    #[schemars(extend("enum" = ["tcg", "kvm"]))]
    pub accel: String,
    /// Virtual CPUs of the guest.
    #[schemars(range(min = 1))]
    pub vcpus: u32,
    /// Memory of the guest, in MiB.
    #[schemars(range(min = 1))]
    pub memory_mib: u32,
    /// `qemu-system-x86_64 --version`'s first line.
    pub qemu: String,
    /// The file the kernel came from (an image, a package or a build
    /// directory), by name, and its SHA-256 (of the image booted).
    pub image: String,
    /// SHA-256 of the kernel image booted.
    #[schemars(pattern(r"^[0-9a-f]{64}$"))]
    pub image_sha256: String,
    /// The guest's kernel release.
    pub release: String,
    /// Seconds from starting QEMU to the guest's first word from plumb.
    #[schemars(range(min = 0))]
    pub boot_s: f64,
    /// The host that ran QEMU.
    pub host: String,
    /// The modules loaded into the guest, in load order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub modules: Vec<String>,
    /// Where the guest's console was kept.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub console: Option<String>,
    /// How the accelerator was chosen where it was not asked for by name:
    /// KVM failed here before (the answer this host gave, remembered), or
    /// failed at this boot.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub accel_note: Option<String>,
    /// The share of the host's CPU time (percent of all its CPUs) that
    /// processes other than QEMU and plumb took while each iteration ran.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    #[schemars(inner(range(min = 0)))]
    pub host_others_percent: Vec<f64>,
    /// The median round trip (µs) of the guest's idle probe on the run's
    /// path just before the run, where its transactions compare with one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub idle_rtt_us: Option<f64>,
}

impl RunRecord {
    /// What a reader of a guest's figures must know beside them: that TCG
    /// measured the emulator as well as the kernel, how the accelerator
    /// was chosen, and why the run is suspect.
    pub fn emulation_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(vm) = &self.vm {
            if vm.accel == "tcg" {
                notes.push(TCG_NOTE.to_string());
            }
            if let Some(n) = &vm.accel_note {
                notes.push(format!("accelerator: {n}"));
            }
            if let Some(idle) = vm.idle_rtt_us {
                notes.push(format!(
                    "idle: the same guest's round trip on this path just before the run took {:.2} ms",
                    idle / 1000.0
                ));
            }
            if let Some(max) = vm.host_others_percent.iter().copied().reduce(f64::max) {
                notes.push(format!(
                    "host: other processes took at most {max:.1} % of the host's CPU time in an iteration"
                ));
            }
        }
        if let Some(why) = &self.suspect {
            notes.push(format!("suspect: {why}"));
        }
        notes
    }
}

/// What TCG figures are, in one line.
pub const TCG_NOTE: &str = "tcg: the guest ran under QEMU's emulator, so its figures measure the \
     emulator as well as the kernel, and follow the host's load; compare them only with \
     figures taken under TCG on the same host";

/// The name of the thread of plumb's delay line in the client's process.
pub const PATH_THREAD: &str = "plumb-path";

/// The emulated path of a run, over the whole run (warm-ups and set-up
/// included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PathResult {
    /// `netem` (the kernel's qdisc) or `plumb` (plumb's own delay line).
    #[schemars(extend("enum" = ["netem", "plumb"]))]
    pub emulator: String,
    /// The seed of the delay line's losses.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub seed: Option<u64>,
    /// CPU seconds of the delay line's thread.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub cpu_s: Option<f64>,
    /// What the path did to the packets going to the server.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub to_server: Option<PathCounts>,
    /// What the path did to the packets going to the client.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub to_client: Option<PathCounts>,
}

/// One direction of plumb's delay line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PathCounts {
    /// Packets passed on, and their bytes (IP headers included).
    pub packets: u64,
    /// Their bytes, IP headers included.
    pub bytes: u64,
    /// Packets dropped at the loss rate.
    pub lost: u64,
    /// Packets dropped at the tail of the link's full queue.
    pub queue_drops: u64,
    /// Packets the far device refused while it was not up (as the path
    /// was set up or taken down).
    #[serde(default)]
    pub refused: u64,
}

/// How the server end of a run came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServerStart {
    /// A child of the client on this host (no --server).
    Embedded,
    /// A `plumb serve` someone started (--server HOST[:PORT]).
    Manual,
    /// Started by the client over ssh (--server ssh://).
    Ssh,
}

/// The server end of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Peer {
    /// How the server came to be: `embedded` (a child of the client on the same
    /// host), `manual` (a `plumb serve` started by someone, --server
    /// HOST[:PORT]), or `ssh` (started by the client over ssh, --server
    /// ssh://).
    pub started: ServerStart,
    /// --server as the user gave it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server: Option<String>,
    /// The control address the client connected to.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub address: Option<String>,
    /// The server's build string, when it is known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub build: Option<String>,
    /// The hash that names the server's executable (16 hex digits), for a
    /// server started over ssh.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(pattern(r"^[0-9a-f]{16}$"))]
    pub build_id: Option<String>,
    /// Both ends ran on one host in one network namespace (the embedded
    /// server without a topology): one environment stands for both.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    #[schemars(extend("const" = true))]
    pub same_host: bool,
}

/// Repeat-until-confident bookkeeping of a run, and what the iterations'
/// spread says about the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Confidence {
    /// The metric the target applies to (`throughput_bps`, later `tps`).
    pub metric: String,
    /// Confidence level of the interval, e.g. 0.95.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub level: f64,
    /// Target relative half-width of the interval of the mean, e.g. 0.025.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub target: f64,
    /// Iterations the run makes at least (MIN of `--iterations MIN..MAX`).
    #[schemars(range(min = 1))]
    pub min_iterations: u32,
    /// Iterations the run makes at most (MAX of `--iterations MIN..MAX`).
    #[schemars(range(min = 1))]
    pub max_iterations: u32,
    /// Mean of the metric over the complete iterations.
    pub mean: f64,
    /// Half-width of the Student-t interval of the mean; absent below 2 iterations.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub half_width: Option<f64>,
    /// `half_width / mean`; absent below 2 iterations.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 0))]
    pub relative_half_width: Option<f64>,
    /// True when the interval met the target.
    pub reached: bool,
    /// Indices of iterations whose metric is an outlier by the median
    /// absolute deviation. They are flagged, never dropped.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub outliers: Vec<u32>,
    /// Present when the iterations sit in two distinct levels.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bimodal: Option<Bimodal>,
}

/// Two levels found among the iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bimodal {
    /// The mean of the iterations of the lower level, in the run's metric.
    pub low_mean: f64,
    /// The mean of the iterations of the higher level, in the run's metric.
    pub high_mean: f64,
    /// Iterations in the lower level.
    #[schemars(range(min = 1))]
    pub low_n: u32,
    /// Iterations in the higher level.
    #[schemars(range(min = 1))]
    pub high_n: u32,
}

impl Confidence {
    /// The sentence every output carries when the target was missed, e.g.
    /// "confidence not reached: ±7.9 % after 10 iterations".
    pub fn shortfall(&self, iterations: usize) -> Option<String> {
        if self.reached {
            return None;
        }
        Some(match self.relative_half_width {
            Some(w) => format!(
                "confidence not reached: ±{:.1} % after {iterations} iterations (target ±{:.1} % at {:.0} %)",
                w * 100.0,
                self.target * 100.0,
                self.level * 100.0
            ),
            None => format!(
                "confidence not reached: {iterations} iteration{} cannot give an interval",
                if iterations == 1 { "" } else { "s" }
            ),
        })
    }
}

impl RunRecord {
    /// The run's headline metric, one value per complete iteration:
    /// transactions per second for request/response, else throughput.
    pub fn metric_values(&self) -> Vec<f64> {
        self.iterations
            .iter()
            .filter(|i| i.complete)
            .map(|i| i.derived.metric())
            .collect()
    }

    /// The headline metric.
    pub fn metric(&self) -> crate::Metric {
        crate::Metric::of(&self.spec)
    }

    /// The part's name where this record is one of [`RunRecord::part_views`]
    /// (its key `RUN_KEY/NAME`); None for a run as it was stored.
    pub fn part_name(&self) -> Option<&str> {
        self.spec_key.split_once('/').map(|(_, name)| name)
    }

    /// Each other part of a run of parts as a run of its own: the part's
    /// spec as it ran, its figures in each iteration, and the key
    /// `RUN_KEY/NAME`, by which the same part of the same run pairs with
    /// its namesake elsewhere. The host's and the processes' figures are
    /// the run's, not a part's.
    pub fn part_views(&self) -> Vec<RunRecord> {
        (self.spec.parts.iter())
            .filter_map(|p| self.part_view(&p.name))
            .collect()
    }

    /// Part `name` as a run of its own, as [`RunRecord::part_views`] gives
    /// each; None where the run has no such part.
    pub fn part_view(&self, name: &str) -> Option<RunRecord> {
        let p = self.spec.parts.iter().find(|p| p.name == name)?;
        let iterations = self
            .iterations
            .iter()
            .filter_map(|it| {
                let part = it.parts.iter().find(|x| x.name == p.name)?;
                Some(part.as_iteration(it))
            })
            .collect();
        let mut spec = self.spec.part_spec(p);
        // Its own length, from its start to its stop or the window's
        // close, as its figures are over; its key is the run's and its
        // name, so this moves no key.
        spec.duration_ms = (p.stop_ms.unwrap_or(spec.duration_ms)).saturating_sub(p.start_ms);
        Some(RunRecord {
            spec,
            spec_key: format!("{}/{}", self.spec_key, p.name),
            iterations,
            // How sure the run is holds for its main part's metric.
            confidence: None,
            ..self.clone()
        })
    }
}

impl Iteration {
    /// Whether `end`'s value of a part merged by `merge` is the client's
    /// too, and so counts once, as the client's: both ends read one host's
    /// /proc (one host name) for a part of the host, or sat in one network
    /// namespace (one host, the same interfaces) for one of the namespace.
    pub fn shared_with_client(&self, end: Role, merge: crate::figure::Merge) -> bool {
        use crate::figure::Merge;
        let (c, s) = (&self.client, &self.server);
        let names = |e: &EndResult| -> Vec<String> {
            e.interfaces.iter().map(|i| i.name.clone()).collect()
        };
        end == Role::Server
            && c.hostname == s.hostname
            && match merge {
                Merge::OncePerHost => true,
                Merge::OncePerNamespace => names(c) == names(s),
                Merge::Sum
                | Merge::OncePerEnd
                | Merge::PerGroup
                | Merge::PerFlow
                | Merge::Distribution => false,
            }
    }
}

impl Derived {
    /// Transactions per second where the workload has transactions, else
    /// throughput in bits per second.
    pub fn metric(&self) -> f64 {
        self.tps.unwrap_or(self.throughput_bps)
    }
}

impl Iteration {
    /// What makes this iteration's window too short for its path, if
    /// anything: too few round trips, or senders still in their first
    /// slow start as it opened.
    pub fn short_window(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(n) = self.derived.window_rtts.filter(|n| *n < WINDOW_RTTS_MIN) {
            out.push(format!(
                "the window held {n:.0} round trips, fewer than {WINDOW_RTTS_MIN:.0}: a longer --duration"
            ));
        }
        for end in [&self.client, &self.server] {
            let Some(l) = end.limited.filter(|l| l.slow_start_flows > 0) else {
                continue;
            };
            out.push(format!(
                "{} of the {}'s {} sending flows were still in slow start as the window opened: a longer --warmup",
                l.slow_start_flows, end.role, l.flows
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn drop_reasons_read_from_a_part_are_scaled_to_the_count() {
        use super::Tracepoints;
        let read = [
            ("SOCKET_RCVBUFF".to_string(), 900),
            ("NO_SOCKET".to_string(), 100),
        ]
        .into();
        let all = Tracepoints::scale_reasons(&read, 10_003);
        // 9002.7 and 1000.3: the larger remainder takes the drop left over.
        assert_eq!(all["NO_SOCKET"], 1000);
        assert_eq!(all["SOCKET_RCVBUFF"], 9003);
        assert_eq!(all.values().sum::<u64>(), 10_003);
        // Every drop read: as read.
        assert_eq!(Tracepoints::scale_reasons(&read, 1000), read);
        assert!(Tracepoints::scale_reasons(&Default::default(), 5).is_empty());
    }

    #[test]
    fn an_estimate_never_exceeds_the_drops_counted() {
        use super::Tracepoints;
        // Reasons read of more drops than the window counted (records of
        // drops after the count was read): the estimate comes down to the
        // count rather than staying above it.
        let read: std::collections::BTreeMap<String, u64> = [
            ("TCP_OLD_DATA".to_string(), 127_880),
            ("TCP_OLD_SEQUENCE".to_string(), 812),
        ]
        .into();
        let all = Tracepoints::scale_reasons(&read, 123_945);
        assert_eq!(all.values().sum::<u64>(), 123_945, "{all:?}");
        assert!(all["TCP_OLD_DATA"] <= 123_945, "{all:?}");
        assert_eq!(all["TCP_OLD_DATA"], 123_163, "{all:?}");
        // Fewer read than counted, shares rounding up alike (each 1/3 of
        // 125 -> 41.67): rounding each would give 126.
        let read: std::collections::BTreeMap<String, u64> = [
            ("TCP_OLD_DATA".to_string(), 20),
            ("TCP_OLD_SEQUENCE".to_string(), 20),
            ("NO_SOCKET".to_string(), 20),
        ]
        .into();
        let all = Tracepoints::scale_reasons(&read, 125);
        assert_eq!(all.values().sum::<u64>(), 125, "{all:?}");
        assert!(all.values().all(|&v| v == 41 || v == 42), "{all:?}");
        // Many small reasons, each a share below one drop.
        let read: std::collections::BTreeMap<String, u64> =
            (0..50).map(|i| (format!("R{i:02}"), 1)).collect();
        let all = Tracepoints::scale_reasons(&read, 7);
        assert_eq!(all.values().sum::<u64>(), 7, "{all:?}");
        assert!(all.values().all(|&v| v <= 1), "{all:?}");
        // Counts too large for f64 to hold exactly still add up.
        let read: std::collections::BTreeMap<String, u64> = [
            ("A".to_string(), u64::MAX / 3),
            ("B".to_string(), u64::MAX / 3),
        ]
        .into();
        let all = Tracepoints::scale_reasons(&read, u64::MAX - 1);
        assert_eq!(all["A"] + all["B"], u64::MAX - 1);
    }

    #[test]
    fn the_reasons_as_read_are_kept_beside_an_estimate_only() {
        use super::Tracepoints;
        let read: std::collections::BTreeMap<String, u64> = [
            ("TCP_OLD_DATA".to_string(), 60),
            ("TCP_OLD_SEQUENCE".to_string(), 38),
        ]
        .into();
        let (estimate, as_read) = Tracepoints::reasons(read.clone(), 126);
        assert_eq!(as_read, read);
        assert_eq!(estimate["TCP_OLD_DATA"], 77);
        assert_eq!(estimate["TCP_OLD_SEQUENCE"], 49);
        let (all, as_read) = Tracepoints::reasons(read.clone(), 98);
        assert_eq!((all, as_read.is_empty()), (read, true));
    }

    use super::*;

    #[test]
    fn a_part_seen_as_a_run_is_as_long_as_its_own_window() {
        let mut rec = crate::testing::example();
        rec.spec.duration_ms = 5000;
        let part = |name: &str, start_ms, stop_ms| plumb_spec::Part {
            name: name.into(),
            start_ms,
            stop_ms,
            spec: rec.spec.clone(),
        };
        rec.spec.parts = vec![part("mid", 1000, Some(3000)), part("rest", 2000, None)];
        let view = |name| rec.part_view(name).unwrap();
        assert_eq!(view("mid").spec.duration_ms, 2000);
        assert!(
            view("mid").spec.summary().contains(", 2s,"),
            "{}",
            view("mid").spec.summary()
        );
        assert_eq!(view("rest").spec.duration_ms, 3000);
        assert_eq!(view("rest").spec_key, format!("{}/rest", rec.spec_key));
    }

    #[test]
    fn a_senders_shares_add_up_to_its_busy_time_and_stay_in_range() {
        let l = |busy_s, rwnd_limited_s, sndbuf_limited_s| SenderLimits {
            flows: 1,
            busy_s,
            rwnd_limited_s,
            sndbuf_limited_s,
            slow_start_flows: 0,
        };
        assert_eq!(l(2.0, 1.0, 0.5).shares(), Some((0.5, 0.25, 0.25)));
        // Jiffies rounded apart can make the parts exceed the whole.
        assert_eq!(l(1.0, 0.75, 0.5).shares(), Some((0.75, 0.25, 0.0)));
        assert_eq!(l(0.0, 0.0, 0.0).shares(), None);
    }

    #[test]
    fn a_short_window_names_what_made_it_short() {
        let mut it = crate::testing::example().iterations[0].clone();
        it.derived.window_rtts = Some(400.0);
        it.client.limited = None;
        it.server.limited = None;
        assert!(it.short_window().is_empty());
        it.derived.window_rtts = Some(20.4);
        it.client.limited = Some(SenderLimits {
            flows: 4,
            busy_s: 4.0,
            slow_start_flows: 3,
            ..Default::default()
        });
        let w = it.short_window();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("20 round trips, fewer than 50"), "{w:?}");
        assert!(
            w[1].starts_with("3 of the client's 4 sending flows"),
            "{w:?}"
        );
    }
}
