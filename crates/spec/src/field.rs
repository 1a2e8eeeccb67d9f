//! The vocabulary of a spec: every field a user can set, named once with
//! its flag of `plumb run`, its key in an experiment file, the label the
//! one-line summary gives it and its bounds. Argument parsing, experiment
//! files, validation, server limits, socket option errors and read-back all
//! name a field through this table.

pub use crate::sockopt::Proto;
use crate::sockopt::SockOpt;
use std::fmt;

/// Where a value came from decides how a field is named back to the user:
/// `--msg-size` on the command line, `msg_size` in an experiment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    Flags,
    Keys,
}

impl Names {
    pub fn of(self, field: Field) -> &'static str {
        match self {
            Names::Flags => field.flag(),
            Names::Keys => field.key(),
        }
    }
}

macro_rules! fields {
    ($( $(#[doc = $doc:literal])* $name:ident = $key:literal, $long:literal, $label:literal,
        $shown:ident, $proto:ident, $keyed:ident; )*) => {
        /// A settable field of a spec.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Field {
            $( $(#[doc = $doc])* $name, )*
            /// An option of the socket option table (`sockopt.rs`).
            Sock(SockOpt),
        }

        /// The fields of this table, without the socket option table's.
        const OWN: &[Field] = &[$(Field::$name),*];

        impl Field {
            /// The key in an experiment file: `msg_size`.
            pub const fn key(self) -> &'static str {
                match self { $(Field::$name => $key,)* Field::Sock(o) => o.key() }
            }

            /// The long flag of `plumb run` without its dashes: `msg-size`.
            pub const fn long(self) -> &'static str {
                match self { $(Field::$name => $long,)* Field::Sock(o) => o.long() }
            }

            /// The flag as typed: `--msg-size`.
            pub const fn flag(self) -> &'static str {
                match self { $(Field::$name => concat!("--", $long),)* Field::Sock(o) => o.flag() }
            }

            /// What the one-line summary and reports call it: `sndbuf`.
            pub const fn label(self) -> &'static str {
                match self { $(Field::$name => $label,)* Field::Sock(o) => o.label() }
            }

            /// Where the one-line summary shows it.
            pub const fn shown(self) -> Shown {
                match self { $(Field::$name => Shown::$shown,)* Field::Sock(_) => Shown::Listed }
            }

            /// Which protocols take it.
            pub const fn proto(self) -> Proto {
                match self { $(Field::$name => Proto::$proto,)* Field::Sock(o) => o.desc().proto }
            }

            /// Whether it is in every spec key or only where it is set.
            pub const fn keyed(self) -> Keyed {
                match self { $(Field::$name => Keyed::$keyed,)* Field::Sock(_) => Keyed::WhenSet }
            }
        }
    };
}

/// Every field: this table's, with the socket option table's after the
/// pacing rate.
const ALL: [Field; OWN.len() + SockOpt::ALL.len()] = {
    let mut all = [Field::Workload; OWN.len() + SockOpt::ALL.len()];
    let (mut i, mut at) = (0, 0);
    while i < OWN.len() {
        all[at] = OWN[i];
        at += 1;
        if matches!(OWN[i], Field::PacingRate) {
            let mut j = 0;
            while j < SockOpt::ALL.len() {
                all[at] = Field::Sock(SockOpt::ALL[j]);
                at += 1;
                j += 1;
            }
        }
        i += 1;
    }
    all
};

/// Where the one-line summary of a spec (`Spec::summary`) shows a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// In its first part (`stream send 1 flow x 128K, ipv4, 10s`), or not
    /// at all for a field that only sets others or the warm-up, which
    /// changes when the window opens, not what it measures.
    Headline,
    /// After it, where it differs from the workload's default.
    Listed,
    /// In the headline of request/response workloads, listed for others.
    HeadlineOfRr,
}

/// How a field enters the spec key (docs/json.md, "Spec keys").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyed {
    /// Written in every spec since spec keys began.
    Always,
    /// Left out of the spec while it holds its default, so that the keys
    /// of specs that do not set it stay what they were before it existed:
    /// every field added from now on.
    WhenSet,
}

fields! {
    /// stream, rr, crr, udp-stream or udp-rr (the subcommand of `plumb run`).
    Workload = "workload", "workload", "workload", Headline, Any, Always;
    Direction = "direction", "direction", "direction", Headline, Any, Always;
    Flows = "flows", "flows", "flows", Headline, Any, Always;
    Threads = "threads", "threads", "threads", Headline, Any, Always;
    MsgSize = "msg_size", "msg-size", "message", Headline, Any, Always;
    ReqSize = "req_size", "req-size", "request", Headline, Any, Always;
    RespSize = "resp_size", "resp-size", "response", Headline, Any, Always;
    Pipeline = "pipeline", "pipeline", "pipeline", Headline, Any, Always;
    /// Open-loop transactions per second.
    Rate = "rate", "rate", "open loop", Headline, Any, WhenSet;
    ReqWrites = "req_writes", "req-writes", "request writes", Headline, Any, WhenSet;
    RespWrites = "resp_writes", "resp-writes", "response writes", Headline, Any, WhenSet;
    /// A request written as a header then a payload (experiment files).
    ReqHeader = "req_header", "req-header", "request header", Headline, Any, WhenSet;
    ReqPayload = "req_payload", "req-payload", "request payload", Headline, Any, WhenSet;
    RespHeader = "resp_header", "resp-header", "response header", Headline, Any, WhenSet;
    RespPayload = "resp_payload", "resp-payload", "response payload", Headline, Any, WhenSet;
    Close = "close", "close", "close", Headline, Any, WhenSet;
    Timeout = "timeout", "timeout", "timeout", Headline, Any, WhenSet;
    Sndbuf = "sndbuf", "sndbuf", "sndbuf", Listed, Any, Always;
    Rcvbuf = "rcvbuf", "rcvbuf", "rcvbuf", Listed, Any, Always;
    /// Both socket buffers at once (experiment files).
    Buffers = "buffers", "buffers", "buffers", Headline, Any, Always;
    Nodelay = "nodelay", "nodelay", "nodelay", HeadlineOfRr, Tcp, Always;
    Cork = "cork", "cork", "cork", Listed, Tcp, Always;
    Mss = "mss", "mss", "mss", Listed, Tcp, Always;
    Cc = "cc", "cc", "cc", Listed, Tcp, Always;
    PacingRate = "pacing_rate", "pacing-rate", "pacing", Listed, Tcp, Always;
    ZeroCopy = "zerocopy", "zerocopy", "zerocopy", Headline, Any, WhenSet;
    Rx = "rx", "rx", "rx", Headline, Any, WhenSet;
    /// The most bytes one read of a stream takes (netperf -M).
    ReadSize = "read_size", "read-size", "read size", Listed, Tcp, WhenSet;
    /// Self probes a second inside a stream's flows.
    SelfProbes = "self_probes", "self-probes", "self probes", Listed, Tcp, WhenSet;
    /// The engine's I/O: epoll or io_uring.
    Io = "io", "io", "io", Headline, Any, WhenSet;
    /// ipv4 or ipv6 (`-4`, `-6` on the command line).
    Family = "family", "family", "family", Headline, Any, Always;
    Duration = "duration", "duration", "window", Headline, Any, Always;
    Warmup = "warmup", "warmup", "warmup", Headline, Any, Always;
    ClientCpus = "client_cpus", "client-cpus", "client cpus", Listed, Any, Always;
    ServerCpus = "server_cpus", "server-cpus", "server cpus", Listed, Any, Always;
    Topology = "topology", "topology", "topology", Headline, Any, WhenSet;
    Mtu = "mtu", "mtu", "mtu", Headline, Any, WhenSet;
    Delay = "delay", "delay", "delay", Headline, Any, WhenSet;
    Loss = "loss", "loss", "loss", Headline, Any, WhenSet;
    /// The bottleneck of the emulated path, in bit/s.
    LinkRate = "link_rate", "link-rate", "link rate", Headline, Any, WhenSet;
    /// The bottleneck's buffer, in bytes.
    Queue = "queue", "queue", "queue", Headline, Any, WhenSet;
    /// What emulates the path: netem or plumb's own delay line.
    Emulator = "emulator", "emulator", "emulator", Headline, Any, WhenSet;
    /// The CPUs plumb's delay line runs on.
    PathCpus = "path_cpus", "path-cpus", "path cpus", Headline, Any, WhenSet;
    /// The queueing discipline at the bottleneck, each way, on a router
    /// between the ends.
    Qdisc = "qdisc", "qdisc", "qdisc", Headline, Any, WhenSet;
    /// Another workload in the run, beside the spec's own (`part.rs`).
    Part = "part", "part", "part", Headline, Any, WhenSet;
}

impl Field {
    /// Every field, in the order `plumb run --help` and the summary list
    /// them.
    pub const ALL: &'static [Field] = &ALL;

    /// The field an experiment key names.
    pub fn from_key(key: &str) -> Option<Field> {
        Field::ALL.iter().copied().find(|f| f.key() == key)
    }

    /// The smallest and largest value a numeric field takes, in the unit
    /// the spec stores it in (bytes, milliseconds, microseconds, bit/s);
    /// None for fields bounded otherwise or not at all.
    pub const fn bounds(self) -> Option<(u64, u64)> {
        Some(match self {
            Field::Flows => (1, 1_000_000),
            Field::Threads => (1, 4096),
            Field::MsgSize | Field::ReqSize | Field::RespSize | Field::ReadSize => (1, 64 << 20),
            Field::Sndbuf | Field::Rcvbuf | Field::Buffers => (1, 1 << 30),
            Field::Pipeline => (1, 1024),
            Field::Rate => (1, 100_000_000),
            // The responsiveness method's budget is 100 probes a second
            // for the whole test; ten times that leaves room to look.
            Field::SelfProbes => (1, 1000),
            Field::Timeout => (1, 60_000),
            // The kernel clamps TCP_MAXSEG to [88, 32767]; outside this
            // range a request can only mean a typo.
            Field::Mss => (88, 65535),
            // The kernel paces in bytes per second.
            Field::PacingRate => (8, u64::MAX),
            Field::Sock(o) => o.desc().bounds,
            Field::Duration => (1, 24 * 3600 * 1000),
            Field::Warmup => (0, 3600 * 1000),
            Field::Mtu => (68, 65535),
            Field::Delay => (0, crate::units::MAX_DELAY_US),
            Field::LinkRate => (1000, 1_000_000_000_000),
            Field::Queue => (1500, 1 << 30),
            _ => return None,
        })
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flag())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_has_one_key_and_one_flag() {
        let mut keys: Vec<&str> = Field::ALL.iter().map(|f| f.key()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), Field::ALL.len());
        for f in Field::ALL {
            assert_eq!(f.key().replace('_', "-"), f.long(), "{f:?}");
            assert_eq!(Field::from_key(f.key()), Some(*f));
        }
        assert_eq!(Field::Sndbuf.flag(), "--sndbuf");
        assert_eq!(Field::PacingRate.key(), "pacing_rate");
    }
}
