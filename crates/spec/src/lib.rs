//! What to run: the spec of one test point (workload, direction, flows, sizes,
//! socket options, timing, CPUs, address family), the parsers for the values
//! users type ("8K", "10G", "500ms", "0-3,6"), validation with errors that name
//! the offending field, and the spec key that matches the same point across
//! labels. No I/O happens here.
#![deny(unsafe_code)]

pub mod auto;
pub mod bottleneck;
pub mod build;
pub mod cpulist;
pub mod experiment;
pub mod field;
pub mod label;
pub mod load;
pub mod part;
pub mod point;
mod show;
pub mod sockopt;
pub mod units;
mod validate;

pub use build::{build, BuildError};
pub use field::{Field, Keyed, Names, Proto, Shown};
pub use label::{check_label, LabelError};
pub use part::Part;
pub use sockopt::{SockOpt, SockOptValues};
pub use validate::SpecError;

pub use cpulist::{CpuList, CpuListError};
pub use units::{
    parse_confidence, parse_count, parse_delay_us, parse_duration, parse_iterations,
    parse_loss_ppm, parse_micros, parse_rate, parse_size, BufSize, UnitError,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// The traffic pattern of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Bulk TCP transfer in `msg_size` writes.
    Stream,
    /// TCP request/response on long-lived flows (netperf TCP_RR).
    Rr,
    /// A new TCP connection per transaction (netperf TCP_CRR).
    Crr,
    /// A stream of UDP datagrams from the client; loss and reordering
    /// counted at the receiver (netperf UDP_STREAM, iperf3 -u).
    UdpStream,
    /// UDP request/response; a lost datagram times out and the flow goes on
    /// (netperf UDP_RR, which stalls instead).
    UdpRr,
}

impl Workload {
    pub fn is_udp(self) -> bool {
        matches!(self, Workload::UdpStream | Workload::UdpRr)
    }

    /// The directions the workload runs in, its default first: a stream
    /// goes either way or both, a UDP stream either way; request/response
    /// has none but the requests' from the client.
    pub fn directions(self) -> &'static [Direction] {
        match self {
            Workload::Stream => &[Direction::Send, Direction::Recv, Direction::Both],
            Workload::UdpStream => &[Direction::Send, Direction::Recv],
            Workload::Rr | Workload::Crr | Workload::UdpRr => &[Direction::Send],
        }
    }

    /// What the peers call the workload in a direction of its own, for the
    /// help of `--direction`.
    pub fn direction_as(self, d: Direction) -> Option<&'static str> {
        match (self, d) {
            (Workload::Stream, Direction::Send) => Some("netperf TCP_STREAM"),
            (Workload::Stream, Direction::Recv) => Some("netperf TCP_MAERTS, iperf3 -R"),
            (Workload::UdpStream, Direction::Send) => Some("netperf UDP_STREAM, iperf3 -u"),
            (Workload::UdpStream, Direction::Recv) => Some("iperf3 -u -R"),
            _ => None,
        }
    }
}

/// Bytes of plumb's own header at the start of every UDP datagram: a tag
/// from the test's cookie, the flow index and a sequence number. A datagram
/// cannot be smaller.
pub const UDP_HEADER: u64 = 16;
/// Bytes of a udp-rr answer with room for the server's stamp after the
/// header (when it read the request, in ns on its CLOCK_MONOTONIC), from
/// which a client on the same kernel splits each latency into its two ways.
pub const UDP_STAMPED: u64 = UDP_HEADER + 8;
/// The largest UDP payload over IPv4.
pub const UDP_MAX: u64 = 65507;
/// How long a udp-rr client waits for a response by default.
pub const UDP_RR_TIMEOUT_MS: u64 = 200;

/// Which way the data goes, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The client sends, the server receives (netperf TCP_STREAM).
    Send,
    /// The server sends, the client receives (netperf TCP_MAERTS, iperf3 -R).
    Recv,
    /// Both ends send and receive on every flow at once.
    Both,
}

impl Direction {
    /// The direction's name with which way the data goes.
    pub fn said(self) -> String {
        let how = match self {
            Direction::Send => "client to server",
            Direction::Recv => "server to client",
            Direction::Both => "both ways on every flow",
        };
        format!("{self} ({how})")
    }

    /// What this end does on each flow: (sends, receives).
    pub fn activity(self, server: bool) -> (bool, bool) {
        match (self, server) {
            (Direction::Both, _) => (true, true),
            (Direction::Send, false) | (Direction::Recv, true) => (true, false),
            (Direction::Send, true) | (Direction::Recv, false) => (false, true),
        }
    }

    /// The client's and the server's `T` of a one-way transfer, as
    /// (sender's, receiver's): the client sends unless this is recv.
    pub fn sender_first<T>(self, client: T, server: T) -> (T, T) {
        match self {
            Direction::Recv => (server, client),
            Direction::Send | Direction::Both => (client, server),
        }
    }

    /// The client's and the server's `T` as (the senders', the receivers'),
    /// the client's first where both ends do both.
    pub fn ends<T: Copy>(self, client: T, server: T) -> (Vec<T>, Vec<T>) {
        match self {
            Direction::Send => (vec![client], vec![server]),
            Direction::Recv => (vec![server], vec![client]),
            Direction::Both => (vec![client, server], vec![client, server]),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    V4,
    V6,
}

/// Socket options applied to every data socket, on both ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct SocketOpts {
    /// SO_SNDBUF; Auto leaves the size to the kernel (autotuning for TCP).
    pub sndbuf: BufSize,
    /// SO_RCVBUF, as `sndbuf`.
    pub rcvbuf: BufSize,
    /// TCP_NODELAY: segments go out without waiting to fill (no Nagle).
    pub nodelay: bool,
    /// TCP_CORK: partial segments wait until the cork is pulled or 200 ms.
    pub cork: bool,
    /// TCP_MAXSEG asked before connecting.
    pub mss: Option<u32>,
    /// TCP_CONGESTION name (cubic, bbr, reno, ...).
    pub cc: Option<String>,
    /// SO_MAX_PACING_RATE per flow, in bits per second.
    pub pacing_rate_bps: Option<u64>,
    /// The options of the socket option table that are set.
    #[serde(flatten, default)]
    pub table: SockOptValues,
}

/// How the sending end of a stream hands its data to the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ZeroCopy {
    /// write(): the kernel copies every byte from user space.
    #[default]
    None,
    /// send(MSG_ZEROCOPY) with SO_ZEROCOPY: pages pinned, buffers reused only
    /// after the kernel's completion notification.
    Msg,
    /// sendfile() from an in-memory file of the message size (iperf3 -Z).
    Sendfile,
    /// splice() from that file into a pipe and from the pipe to the socket.
    Splice,
    /// IORING_OP_SEND_ZC through the io_uring engine (`io = "uring"`), with
    /// the kernel's report of which sends it copied after all.
    Uring,
}

impl ZeroCopy {
    pub fn is_none(&self) -> bool {
        *self == ZeroCopy::None
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// How the engine's workers move the flows' data: readiness from epoll and
/// a system call per read or write, or io_uring, where the kernel takes
/// batches of operations from a ring and receives land in buffers it picks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Io {
    #[default]
    Epoll,
    Uring,
}

impl Io {
    pub fn is_epoll(&self) -> bool {
        *self == Io::Epoll
    }
}

/// How the receiving end of a stream takes its data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RxMode {
    /// read() into a user buffer.
    #[default]
    Copy,
    /// recv(MSG_TRUNC): the kernel drops the data without copying it to user
    /// space (iperf3 --skip-rx-copy).
    Skip,
    /// TCP_ZEROCOPY_RECEIVE: received pages mapped into user space.
    Zerocopy,
}

impl RxMode {
    pub fn is_copy(&self) -> bool {
        *self == RxMode::Copy
    }
}

/// Request/response parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct RrSpec {
    /// Bytes per request.
    #[schemars(range(min = 1))]
    pub req_size: u64,
    /// Bytes per response.
    #[schemars(range(min = 1))]
    pub resp_size: u64,
    /// Requests outstanding per flow (netperf's -b); 1 is a closed loop.
    #[schemars(range(min = 1))]
    pub pipeline: u32,
    /// Sizes of the writes one request is sent in; empty means one write.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    #[schemars(inner(range(min = 1)))]
    pub req_writes: Vec<u64>,
    /// Sizes of the writes a response is sent in (absent: one write).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    #[schemars(inner(range(min = 1)))]
    pub resp_writes: Vec<u64>,
    /// How crr closes each connection; None for rr.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub close: Option<Close>,
    /// Open loop: transactions per second over all flows, issued on a fixed
    /// schedule whatever the responses do; latency counts from the planned
    /// send time. None is a closed loop.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 1))]
    pub rate: Option<u64>,
    /// udp-rr: how long a request waits for its response before it counts
    /// as lost and the flow sends the next one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
}

impl Default for RrSpec {
    fn default() -> Self {
        RrSpec {
            req_size: 1,
            resp_size: 1,
            pipeline: 1,
            req_writes: Vec::new(),
            resp_writes: Vec::new(),
            close: None,
            rate: None,
            timeout_ms: None,
        }
    }
}

/// How each crr connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Close {
    /// The client closes with SO_LINGER 0: a reset, no TIME_WAIT (as neper
    /// does).
    Rst,
    /// The client closes first, normally; it keeps a TIME_WAIT socket per
    /// connection.
    Fin,
    /// The server closes right after its response and the client once it
    /// has read the end (netperf's TCP_CRR, an HTTP/1.0 server): the
    /// TIME_WAIT is the server's, and no end waits for the other's close.
    #[serde(rename = "server-fin")]
    ServerFin,
}

/// A spec field whose value is one of a few names. Each name is written
/// once, in [`Choice::NAMES`]: Display, experiment files and the command
/// line read them from there.
pub trait Choice: Copy + PartialEq + 'static {
    /// Every value with its names; a value's first name is the one shown,
    /// any later ones are accepted too.
    const NAMES: &'static [(&'static str, Self)];

    fn name(self) -> &'static str {
        let named = Self::NAMES.iter().find(|(_, v)| *v == self);
        named.expect("every value has a name").0
    }

    /// The names shown, one per value: aliases are accepted but not offered.
    fn shown() -> impl Iterator<Item = (&'static str, Self)> {
        Self::NAMES
            .iter()
            .copied()
            .filter(|(name, v)| v.name() == *name)
    }
}

macro_rules! choices {
    ($($ty:ident: $($name:literal => $value:ident),+;)+) => {$(
        impl Choice for $ty {
            const NAMES: &'static [(&'static str, $ty)] = &[$(($name, $ty::$value)),+];
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    )+};
}

choices! {
    Workload: "stream" => Stream, "rr" => Rr, "crr" => Crr, "udp-stream" => UdpStream,
        "udp-rr" => UdpRr, "udp_stream" => UdpStream, "udp_rr" => UdpRr;
    Direction: "send" => Send, "recv" => Recv, "both" => Both;
    Family: "ipv4" => V4, "4" => V4, "v4" => V4, "ipv6" => V6, "6" => V6, "v6" => V6;
    ZeroCopy: "none" => None, "msg" => Msg, "sendfile" => Sendfile, "splice" => Splice,
        "uring" => Uring;
    Io: "epoll" => Epoll, "uring" => Uring, "io_uring" => Uring;
    RxMode: "copy" => Copy, "skip" => Skip, "zerocopy" => Zerocopy;
    Close: "rst" => Rst, "fin" => Fin, "server-fin" => ServerFin;
    Emulator: "netem" => Netem, "plumb" => Plumb;
}

/// Resolves `8,rest` against a message of `size` bytes into write sizes that
/// add up to it: `[8, 1000]` for 1008. Empty input means one write.
pub fn parse_writes(field: Field, text: &str, size: u64) -> Result<Vec<u64>, SpecError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    // A malformed write is named before any sum of the others is judged.
    if let Some(Err(e)) = parts
        .iter()
        .filter(|p| !p.eq_ignore_ascii_case("rest"))
        .map(|p| units::parse_size(p))
        .find(Result::is_err)
    {
        return Err(SpecError::new(field, e.to_string()));
    }
    let mut out = Vec::with_capacity(parts.len());
    let mut total = 0u64;
    for (i, part) in parts.iter().enumerate() {
        if part.eq_ignore_ascii_case("rest") {
            if i + 1 != parts.len() {
                return Err(SpecError::new(field, "'rest' may only be the last write"));
            }
            if total >= size {
                return Err(SpecError::new(
                    field,
                    format!("the writes before 'rest' already make {total} of {size} bytes"),
                ));
            }
            out.push(size - total);
            total = size;
        } else {
            let n = units::parse_size(part).map_err(|e| SpecError::new(field, e.to_string()))?;
            if n == 0 {
                return Err(SpecError::new(field, format!("write {} is empty", i + 1)));
            }
            // Checked: a hostile list can add past u64 and wrap to `size`.
            total = total.checked_add(n).filter(|t| *t <= size).ok_or_else(|| {
                SpecError::new(
                    field,
                    format!("the writes add up to more than a message of {size} bytes"),
                )
            })?;
            out.push(n);
        }
    }
    if total != size {
        return Err(SpecError::new(
            field,
            format!("the writes add up to {total} bytes but a message is {size}; end with 'rest'"),
        ));
    }
    Ok(out)
}

/// One test point. Two specs with the same key measured the same thing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Spec {
    /// The traffic pattern of the test.
    pub workload: Workload,
    /// Which way the data goes, seen from the client.
    pub direction: Direction,
    /// Number of TCP connections (flows) carrying data.
    pub flows: u32,
    /// Worker threads on each end.
    pub threads: u32,
    /// Size of each write, in bytes.
    pub msg_size: u64,
    /// Socket options applied to every data socket, on both ends.
    pub socket: SocketOpts,
    /// Address family of the data connections.
    pub family: Family,
    /// Length of the measurement window asked for, in milliseconds.
    pub duration_ms: u64,
    /// Length of the warm-up before the window, in milliseconds.
    pub warmup_ms: u64,
    /// CPUs the client's worker threads are pinned to, written as the kernel
    /// writes CPU lists ("0-3,6"); null when not pinned.
    pub client_cpus: Option<CpuList>,
    /// CPUs the server's worker threads are pinned to, written as the kernel
    /// writes CPU lists ("0-3,6"); null when not pinned.
    pub server_cpus: Option<CpuList>,
    /// Present for request/response workloads. Left out of stream specs so
    /// their keys stay what they were.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rr: Option<RrSpec>,
    /// Stream senders: how data reaches the kernel. Left out when plain
    /// writes, so the keys of older specs stay what they were.
    #[serde(skip_serializing_if = "ZeroCopy::is_none", default)]
    pub zerocopy: ZeroCopy,
    /// Stream receivers: how data leaves the kernel.
    #[serde(skip_serializing_if = "RxMode::is_copy", default)]
    pub rx: RxMode,
    /// Stream receivers: the most bytes one read takes, where less than a
    /// message (a read never runs into the next message either); absent
    /// for whole messages.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 1, max = 67108864))]
    pub read_size: Option<u64>,
    /// Self probes a second over the flows of a stream, each timed by the
    /// client on a loaded connection from its planned time to its answer
    /// (docs/json.md, "Self probes"); absent for none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 1, max = 1000))]
    pub self_probes: Option<u32>,
    /// The engine's I/O: absent for epoll, so the keys of older specs stay
    /// what they were.
    #[serde(skip_serializing_if = "Io::is_epoll", default)]
    pub io: Io,
    /// Whether `io` was chosen by `--io auto`'s rule ([`auto`]) rather
    /// than asked for; absent where it was asked, and in records made
    /// before the rule. Not part of the key: the engine is.
    #[serde(skip_serializing_if = "is_false", default)]
    pub io_auto: bool,
    /// Where the two ends run: absent for this host's loopback (so the keys
    /// of loopback specs stay what they were).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub topology: Option<Topology>,
    /// The host of a server plumb did not start on this host (`--server`),
    /// as the user named it, without its port: absent for the embedded
    /// server. Another path between the ends is another test point, so it
    /// is part of the spec key; the port is not (it is where the server
    /// listens, not what the traffic crosses).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_host: Option<String>,
    /// The machine both ends run in, where it is not this host: a virtual
    /// machine with its accelerator, vCPUs and memory. Part of the key, so
    /// history never mixes a host's runs with an emulator's, while two
    /// kernels booted alike match; absent for this host, so the keys of
    /// host specs stay what they were. The kernel is not here: it is what
    /// a comparison's two sides differ in.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub machine: Option<Machine>,
    /// The run's other workloads, each beside this spec's own (`part.rs`):
    /// absent for a run of one, so its key stays what it was.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub parts: Vec<Part>,
}

/// A virtual machine the ends run in (`--kernel`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Machine {
    /// `tcg` (QEMU's emulation) or `kvm`.
    #[schemars(extend("enum" = ["tcg", "kvm"]))]
    pub accel: String,
    /// Virtual CPUs of each guest.
    #[schemars(range(min = 1))]
    pub vcpus: u32,
    /// Memory of each guest, in MiB.
    #[schemars(range(min = 1))]
    pub memory_mib: u32,
    /// `virtio-net` when each end ran in a guest of its own, the two
    /// joined by that link; absent when both ends shared one guest.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(extend("enum" = ["virtio-net"]))]
    pub link: Option<String>,
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let each = match &self.link {
            Some(link) => {
                write!(f, "in two VMs joined by {link}: ")?;
                " each"
            }
            None => {
                write!(f, "in a VM: ")?;
                ""
            }
        };
        write!(
            f,
            "{}, {} vCPU{}, {} MiB{each}",
            self.accel,
            self.vcpus,
            if self.vcpus == 1 { "" } else { "s" },
            self.memory_mib
        )
    }
}

/// Two network namespaces joined by a veth pair, the client in one and the
/// server in the other, with the path's MTU and netem delay and loss.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Veth {
    /// The veth pair's MTU, where it was set (`--mtu`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mtu: Option<u32>,
    /// One-way delay netem adds on each end, in microseconds (the round
    /// trip gains twice this).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delay_us: Option<u64>,
    /// Loss netem applies on each end, in parts per million.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub loss_ppm: Option<u32>,
    /// The bottleneck each way, in bit/s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link_rate_bps: Option<u64>,
    /// The bottleneck's buffer each way, in bytes (default: one
    /// bandwidth-delay product, at least 64 KiB).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub queue_bytes: Option<u64>,
    /// What emulates delay, loss and rate: as asked, or as chosen for the
    /// run (netem where the kernel has it, else plumb's delay line).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub emulator: Option<Emulator>,
    /// The CPUs plumb's delay line runs on (any when absent).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_cpus: Option<CpuList>,
    /// The queueing discipline at the bottleneck, each way (`--qdisc`,
    /// `KIND [PARAMETER VALUE]...`): set on a router namespace between the
    /// two ends, under an HTB shaper at the link rate where there is one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub qdisc: Option<String>,
}

/// What emulates the path of `--topology veth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Emulator {
    /// The kernel's netem qdisc on each end of a veth pair.
    Netem,
    /// plumb's own delay line between a TUN device in each namespace.
    Plumb,
}

impl Veth {
    /// Whether the path delays, drops or limits anything that an emulator
    /// does: a router's qdisc, where there is one, limits the rate.
    pub fn emulated(&self) -> bool {
        self.delay_us.is_some()
            || self.loss_ppm.is_some()
            || (self.link_rate_bps.is_some() && self.qdisc.is_none())
    }

    /// The bottleneck's buffer: as asked, or one bandwidth-delay product
    /// (the round trip at the link rate), at least 64 KiB.
    pub fn queue_or_default(&self) -> u64 {
        self.queue_bytes.unwrap_or_else(|| {
            let rtt_us = 2 * self.delay_us.unwrap_or(0);
            let bdp = self.link_rate_bps.unwrap_or(0) as u128 * rtt_us as u128 / 8_000_000;
            (bdp as u64).max(64 << 10)
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    Veth(Veth),
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Topology::Veth(v) = self;
        write!(f, "veth")?;
        if let Some(m) = v.mtu {
            write!(f, " mtu {m}")?;
        }
        if let Some(d) = v.delay_us {
            write!(f, " delay {}ms", d as f64 / 1000.0)?;
        }
        if let Some(l) = v.loss_ppm {
            write!(f, " loss {}%", l as f64 / 10_000.0)?;
        }
        if let Some(r) = v.link_rate_bps {
            write!(f, " rate {}", units::show_rate(r))?;
        }
        if let Some(q) = v.queue_bytes {
            write!(f, " queue {}", units::show_size(q))?;
        }
        if let Some(e) = v.emulator {
            write!(f, " via {e}")?;
        }
        if let Some(c) = &v.path_cpus {
            write!(f, " on cpus {c}")?;
        }
        if let Some(q) = &v.qdisc {
            write!(f, " qdisc {q}")?;
        }
        Ok(())
    }
}

impl Spec {
    /// The spec of `workload` with its defaults: what `plumb run WORKLOAD`
    /// runs without flags. Threads are left at 1; [`build()`] sets them.
    pub fn defaults(workload: Workload) -> Spec {
        match workload {
            Workload::Stream => Spec::stream(),
            Workload::Rr => Spec::rr(),
            Workload::Crr => Spec::crr(),
            Workload::UdpStream => Spec::udp_stream(),
            Workload::UdpRr => Spec::udp_rr(),
        }
    }

    /// A stream spec with the defaults of `plumb run stream`.
    pub fn stream() -> Spec {
        Spec {
            workload: Workload::Stream,
            direction: Direction::Send,
            flows: 1,
            threads: 1,
            msg_size: 128 * 1024,
            socket: SocketOpts::default(),
            family: Family::V4,
            duration_ms: 10_000,
            warmup_ms: 1_000,
            client_cpus: None,
            server_cpus: None,
            rr: None,
            topology: None,
            server_host: None,
            machine: None,
            parts: Vec::new(),
            zerocopy: ZeroCopy::None,
            rx: RxMode::Copy,
            read_size: None,
            self_probes: None,
            io: Io::Epoll,
            io_auto: false,
        }
    }

    /// An rr spec with the defaults of `plumb run rr`.
    pub fn rr() -> Spec {
        Spec {
            workload: Workload::Rr,
            msg_size: 1,
            rr: Some(RrSpec::default()),
            ..Spec::stream()
        }
    }

    /// A crr spec with the defaults of `plumb run crr`.
    pub fn crr() -> Spec {
        let mut s = Spec::rr();
        s.workload = Workload::Crr;
        if let Some(rr) = s.rr.as_mut() {
            rr.close = Some(Close::Rst);
        }
        s
    }

    /// A udp-stream spec with the defaults of `plumb run udp-stream`: the
    /// largest datagram that fits a 1500-byte Ethernet MTU over IPv4.
    pub fn udp_stream() -> Spec {
        Spec {
            workload: Workload::UdpStream,
            msg_size: 1472,
            ..Spec::stream()
        }
    }

    /// A udp-rr spec with the defaults of `plumb run udp-rr`.
    pub fn udp_rr() -> Spec {
        Spec {
            workload: Workload::UdpRr,
            msg_size: UDP_HEADER,
            rr: Some(RrSpec {
                req_size: UDP_HEADER,
                resp_size: UDP_HEADER,
                timeout_ms: Some(UDP_RR_TIMEOUT_MS),
                ..RrSpec::default()
            }),
            ..Spec::stream()
        }
    }

    /// TCP flows connected and announced with the cookie before the test
    /// starts: every flow for stream and rr; one for crr, whose transactions
    /// make their own connections, and for the UDP workloads, whose
    /// datagrams carry a tag of the cookie instead.
    pub fn setup_flows(&self) -> u32 {
        if self.workload == Workload::Crr || self.workload.is_udp() {
            1
        } else {
            self.flows
        }
    }

    /// A udp-stream whose server sends (`--direction recv`): the client's
    /// flows announce themselves before the server can.
    pub fn udp_from_server(&self) -> bool {
        self.workload == Workload::UdpStream && self.direction == Direction::Recv
    }

    /// Transactions rather than bytes are what this workload measures.
    pub fn is_transactional(&self) -> bool {
        self.rr.is_some()
    }

    /// The spec of a stored run, to run again as it ran: its engine kept,
    /// whatever `--io auto`'s rule would choose on this host, so that a
    /// comparison with it never sets one engine against the other.
    pub fn as_it_ran(&self) -> Spec {
        let mut spec = Spec {
            io_auto: false,
            ..self.clone()
        };
        for p in &mut spec.parts {
            p.spec.io_auto = false;
        }
        spec
    }

    /// A stable hash of the canonical form of the spec. The label is not part of
    /// a spec, so the same point measured under two labels has the same key.
    pub fn key(&self) -> String {
        // serde_json writes struct fields in declaration order and this type
        // holds no maps, so the encoding is canonical. How the engine was
        // chosen is not the test point; the engine is.
        let keyed = self.as_it_ran();
        let canon = serde_json::to_vec(&keyed).expect("a spec always serialises");
        let digest = Sha256::digest(&canon);
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_that_add_past_u64_are_refused() {
        assert!(parse_writes(Field::ReqWrites, "18446744073709551615,2", 1).is_err());
        let mut s = Spec::rr();
        if let Some(rr) = s.rr.as_mut() {
            rr.req_writes = vec![u64::MAX, 2];
        }
        assert!(s.validate().is_err());
    }

    #[test]
    fn key_is_stable_and_sensitive() {
        let a = Spec::stream();
        let mut b = Spec::stream();
        assert_eq!(a.key(), b.key());
        assert_eq!(a.key().len(), 16);
        b.socket.sndbuf = BufSize::Bytes(8192);
        assert_ne!(a.key(), b.key());
    }

    #[test]
    fn the_ring_engine_is_another_test_point_for_what_it_runs() {
        for mut s in [
            Spec::stream(),
            Spec::rr(),
            Spec::crr(),
            Spec::udp_stream(),
            Spec::udp_rr(),
        ] {
            let key = s.key();
            s.io = Io::Uring;
            assert!(s.validate().is_ok(), "{s:?}");
            assert_ne!(s.key(), key);
        }
        let mut s = Spec::stream();
        s.zerocopy = ZeroCopy::Uring;
        assert_eq!(s.validate().unwrap_err().field, Field::ZeroCopy);
        s.io = Io::Uring;
        assert!(s.validate().is_ok());
        // TCP_ZEROCOPY_RECEIVE has no ring operation, and runs beside it.
        s.zerocopy = ZeroCopy::None;
        s.rx = RxMode::Zerocopy;
        assert!(s.validate().is_ok());
    }

    #[test]
    fn a_guest_is_another_test_point_and_its_kernel_is_not_in_the_key() {
        let host = Spec::stream();
        let key = host.key();
        let mut guest = Spec::stream();
        guest.machine = Some(Machine {
            accel: "tcg".into(),
            vcpus: 2,
            memory_mib: 1024,
            link: None,
        });
        assert_ne!(guest.key(), key);
        let mut kvm = guest.clone();
        kvm.machine.as_mut().unwrap().accel = "kvm".into();
        assert_ne!(kvm.key(), guest.key());
        let mut pair = guest.clone();
        pair.machine.as_mut().unwrap().link = Some("virtio-net".into());
        assert_ne!(pair.key(), guest.key());
        assert!(
            guest
                .summary()
                .ends_with(", in a VM: tcg, 2 vCPUs, 1024 MiB"),
            "{}",
            guest.summary()
        );
        assert!(pair
            .summary()
            .contains("in two VMs joined by virtio-net: tcg, 2 vCPUs, 1024 MiB each"));
        // Records made on a host keep their keys.
        assert!(!serde_json::to_string(&host).unwrap().contains("machine"));
    }

    #[test]
    fn a_remote_server_is_another_test_point_than_loopback() {
        let local = Spec::stream();
        let mut remote = Spec::stream();
        remote.server_host = Some("hostb".into());
        assert_ne!(local.key(), remote.key());
        assert!(
            remote.summary().contains(", to hostb"),
            "{}",
            remote.summary()
        );
        // Records made before the field keep their keys.
        assert!(!serde_json::to_string(&local)
            .unwrap()
            .contains("server_host"));
    }

    #[test]
    fn writes_resolve_rest_and_name_the_flag() {
        assert_eq!(
            parse_writes(Field::RespWrites, "8,rest", 1008).unwrap(),
            vec![8, 1000]
        );
        assert_eq!(
            parse_writes(Field::RespWrites, "", 1008).unwrap(),
            Vec::<u64>::new()
        );
        assert_eq!(
            parse_writes(Field::ReqWrites, "1,2,3", 6).unwrap(),
            vec![1, 2, 3]
        );
        let e = parse_writes(Field::RespWrites, "8,100", 1008).unwrap_err();
        assert_eq!(e.flag(), "--resp-writes");
        assert!(e.message.contains("rest"), "{e}");
        assert!(parse_writes(Field::RespWrites, "rest,8", 1008).is_err());
        assert!(parse_writes(Field::RespWrites, "2000,rest", 1008).is_err());
        assert!(parse_writes(Field::RespWrites, "0,rest", 1008).is_err());
        assert!(parse_writes(Field::RespWrites, "x,rest", 1008).is_err());
        // The malformed write is named, not the sum the others make.
        let e = parse_writes(Field::RespWrites, "8,banana", 1).unwrap_err();
        assert!(e.message.contains("'banana'"), "{e}");
    }

    #[test]
    fn stream_keys_do_not_see_the_rr_field() {
        let json = serde_json::to_string(&Spec::stream()).unwrap();
        assert!(!json.contains("rr"), "{json}");
        let mut r = Spec::rr();
        assert!(r.validate().is_ok());
        assert_ne!(r.key(), Spec::stream().key());
        r.rr.as_mut().unwrap().pipeline = 0;
        assert_eq!(r.validate().unwrap_err().flag(), "--pipeline");
        assert!(
            Spec::rr().summary().starts_with("rr 1 flow 1/1"),
            "{}",
            Spec::rr().summary()
        );
    }

    #[test]
    fn zero_copy_modes_keep_old_keys_and_only_stream_takes_them() {
        let plain = serde_json::to_string(&Spec::stream()).unwrap();
        assert!(
            !plain.contains("zerocopy") && !plain.contains("\"rx\""),
            "{plain}"
        );
        let mut z = Spec::stream();
        z.zerocopy = ZeroCopy::Msg;
        z.rx = RxMode::Skip;
        assert_ne!(z.key(), Spec::stream().key());
        assert!(z.validate().is_ok());
        assert!(
            z.summary().contains(", zerocopy msg, rx skip"),
            "{}",
            z.summary()
        );
        let back: Spec = serde_json::from_str(&serde_json::to_string(&z).unwrap()).unwrap();
        assert_eq!(back, z);
        let old: Spec = serde_json::from_str(&plain).unwrap();
        assert_eq!(old, Spec::stream());
        let mut r = Spec::rr();
        r.zerocopy = ZeroCopy::Sendfile;
        assert_eq!(r.validate().unwrap_err().flag(), "--zerocopy");
        let mut r = Spec::udp_stream();
        r.rx = RxMode::Skip;
        assert_eq!(r.validate().unwrap_err().flag(), "--rx");
    }

    #[test]
    fn a_read_size_keeps_old_keys_and_is_refused_where_it_cannot_hold() {
        let mut s = Spec::stream();
        s.read_size = Some(8 << 10);
        assert!(s.validate().is_ok());
        assert_ne!(s.key(), Spec::stream().key());
        assert!(s.summary().contains("read size 8K"), "{}", s.summary());
        let back: Spec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let refused = |f: fn(&mut Spec)| {
            let mut s = Spec::stream();
            s.read_size = Some(8 << 10);
            f(&mut s);
            let e = s.validate().unwrap_err();
            assert_eq!(e.flag(), "--read-size", "{e:?}");
            e.message
        };
        assert!(refused(|s| s.msg_size = 4 << 10).contains("4K"));
        refused(|s| s.rx = RxMode::Zerocopy);
        refused(|s| s.read_size = Some(0));
        // The ring's receive buffers take the size asked, however small.
        s.io = Io::Uring;
        s.read_size = Some(256);
        assert!(s.validate().is_ok());
        let mut rr = Spec::rr();
        rr.read_size = Some(1);
        assert_eq!(rr.validate().unwrap_err().flag(), "--read-size");
        let mut udp = Spec::udp_stream();
        udp.read_size = Some(512);
        assert_eq!(udp.validate().unwrap_err().flag(), "--read-size");
    }

    #[test]
    fn rcvlowat_keeps_old_keys_and_is_refused_above_a_transaction_message() {
        let mut s = Spec::stream();
        s.socket.table.set(SockOpt::RcvLowat, Some(128 << 10));
        assert!(s.validate().is_ok());
        assert_ne!(s.key(), Spec::stream().key());
        assert!(s.summary().contains("rcvlowat 128K"), "{}", s.summary());
        let mut rr = Spec::rr();
        let r = rr.rr.as_mut().unwrap();
        (r.req_size, r.resp_size) = (100, 4 << 10);
        rr.socket.table.set(SockOpt::RcvLowat, Some(100));
        assert!(rr.validate().is_ok());
        rr.socket.table.set(SockOpt::RcvLowat, Some(101));
        let e = rr.validate().unwrap_err();
        assert_eq!(e.flag(), "--rcvlowat", "{e:?}");
        assert!(e.message.contains("at most 100"), "{}", e.message);
    }

    #[test]
    fn the_option_table_writes_a_spec_as_its_own_fields_did() {
        // The form of specs stored while notsent_lowat and rcvlowat were
        // fields of their own, which their keys hash.
        let mut s = Spec::stream();
        s.socket.table.set(SockOpt::RcvLowat, Some(128 << 10));
        s.socket.table.set(SockOpt::NotsentLowat, Some(16 << 10));
        let text = serde_json::to_string(&s.socket).unwrap();
        assert!(
            text.ends_with(r#""pacing_rate_bps":null,"notsent_lowat":16384,"rcvlowat":131072}"#),
            "{text}"
        );
        let back: Spec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.key(), s.key());
    }

    #[test]
    fn direction_activity_mirrors() {
        assert_eq!(Direction::Send.activity(false), (true, false));
        assert_eq!(Direction::Send.activity(true), (false, true));
        assert_eq!(Direction::Recv.activity(false), (false, true));
        assert_eq!(Direction::Recv.activity(true), (true, false));
        assert_eq!(Direction::Recv.sender_first("c", "s"), ("s", "c"));
        assert_eq!(Direction::Send.sender_first("c", "s"), ("c", "s"));
        assert_eq!(Direction::Both.activity(true), (true, true));
    }
}
