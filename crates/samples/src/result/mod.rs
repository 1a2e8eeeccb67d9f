//! What a run produced: per end (client and server) the byte counts, interval
//! samples, CPU and kernel accounting and per-flow TCP_INFO, and what is derived
//! from putting both ends side by side.

use crate::cpu::{CpuTimes, ProcessCpu, SoftirqCounts};
use plumb_spec::Spec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod end;
mod kernel;
pub use end::*;
pub use kernel::*;

/// Identifies the JSON document `plumb run --json` prints; bumped on any
/// incompatible change (schemas/run.v1.schema.json describes version 1).
pub const RUN_SCHEMA: &str = "plumb.run/1";

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
    /// A run of parts with connect probes and loads carrying self probes
    /// (`plumb run load`): each loaded stretch's responsiveness in round
    /// trips a minute, draft-ietf-ippm-responsiveness-06's arithmetic on
    /// plumb's probes: the foreign probe is half a TCP connect and a
    /// 1-byte exchange, the self probe a mark answered on a loaded flow; no
    /// TLS or HTTP, so not networkQuality's figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub responsiveness: Vec<crate::rpm::LoadedResponsiveness>,
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
            responsiveness: Vec::new(),
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
