//! One end's record of a window: its identity, its own counts (bytes,
//! transactions, latency, datagrams, zero-copy sends), its flows, its
//! socket options, and the parts its probes write.

use super::*;

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
    /// The latencies of the interval's transactions as [`Latency::buckets`]
    /// holds them, on the client end of an open loop (`--rate`), whose
    /// transactions are paced probes: what the latency of each stretch of
    /// a run of parts is read from.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub buckets: Vec<[u64; 2]>,
    /// The same transactions one by one, in the order planned: each one's
    /// planned send time in ns after the window opened (negative for one
    /// planned before it) and its latency in ns, on the client end of an
    /// open loop of at most 1000 a second (the probes of a load run).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub each: Vec<[i64; 2]>,
    /// The same transactions' one-way delay toward the server (request
    /// sent, or planned, to the server's read) as [`Latency::buckets`]
    /// holds them, where the server stamped its answers on a clock this
    /// end shares (udp-rr with both ends on one kernel: one host, its
    /// namespaces, one guest). The two ways of a transaction add up to its
    /// latency.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub to_server_buckets: Vec<[u64; 2]>,
    /// Their one-way delay toward the client (the server's read to the
    /// answer's), as `to_server_buckets`.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub to_client_buckets: Vec<[u64; 2]>,
    /// udp-rr client: requests whose response had not come within the
    /// timeout, counted in the interval their time ran out (lost, or
    /// answered late).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub timeouts: u64,
    /// Packets the kernel dropped in the interval, host-wide, by reason as
    /// read from skb:kfree_skb's records (as `tracepoints.drop_reasons_as_read`;
    /// not scaled), on the main part's ends where the tracepoint could be
    /// sampled: where in the window, and so in which phase of a load run,
    /// the drops of the window's `tracepoints.drop_reasons` fell.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub drop_reasons: BTreeMap<String, u64>,
}

pub(super) fn is_zero(n: &u64) -> bool {
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
    /// The path's bottleneck each way over the window, where a router
    /// between the ends holds it (`--qdisc`): read by the client end.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub path_queues: Vec<PathQueue>,
    /// The byte queue limits of this end's NICs' transmit queues over the
    /// window, sampled at a fixed period: the bytes each driver had handed
    /// its device and not seen sent. Only queues that held any; absent
    /// where the end has no NIC (a veth, lo) or its driver keeps no such
    /// limits.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub nic_queues: Vec<NicQueue>,
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
