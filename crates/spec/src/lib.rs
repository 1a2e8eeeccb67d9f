//! What to run: the spec of one test point (workload, direction, flows, sizes,
//! socket options, timing, CPUs, address family), the parsers for the values
//! users type ("8K", "10G", "500ms", "0-3,6"), validation with errors that name
//! the offending field, and the spec key that matches the same point across
//! labels. No I/O happens here.
#![deny(unsafe_code)]

pub mod cpulist;
pub mod units;

pub use cpulist::{CpuList, CpuListError};
pub use units::{parse_duration, parse_rate, parse_size, BufSize, UnitError};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// The traffic pattern of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Bulk TCP transfer in `msg_size` writes.
    Stream,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Stream => "stream",
        })
    }
}

/// Which way the data goes, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// What this end does on each flow: (sends, receives).
    pub fn activity(self, server: bool) -> (bool, bool) {
        match (self, server) {
            (Direction::Both, _) => (true, true),
            (Direction::Send, false) | (Direction::Recv, true) => (true, false),
            (Direction::Send, true) | (Direction::Recv, false) => (false, true),
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Send => "send",
            Direction::Recv => "recv",
            Direction::Both => "both",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    V4,
    V6,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        })
    }
}

/// Socket options applied to every data socket, on both ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SocketOpts {
    pub sndbuf: BufSize,
    pub rcvbuf: BufSize,
    pub nodelay: bool,
    pub cork: bool,
    /// TCP_MAXSEG asked before connecting.
    pub mss: Option<u32>,
    /// TCP_CONGESTION name (cubic, bbr, reno, ...).
    pub cc: Option<String>,
    /// SO_MAX_PACING_RATE per flow, in bits per second.
    pub pacing_rate_bps: Option<u64>,
}

/// One test point. Two specs with the same key measured the same thing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Spec {
    pub workload: Workload,
    pub direction: Direction,
    pub flows: u32,
    /// Worker threads on each end.
    pub threads: u32,
    pub msg_size: u64,
    pub socket: SocketOpts,
    pub family: Family,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    pub client_cpus: Option<CpuList>,
    pub server_cpus: Option<CpuList>,
}

/// Limits that keep a spec meaningful; the server enforces its own on top.
pub const MAX_FLOWS: u32 = 1_000_000;
pub const MAX_MSG_SIZE: u64 = 64 << 20;
pub const MAX_BUF: u64 = 1 << 30;

/// A spec field whose value cannot be run, with the flag that set it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct SpecError {
    pub flag: &'static str,
    pub message: String,
}

impl SpecError {
    pub fn new(flag: &'static str, message: impl Into<String>) -> Self {
        SpecError {
            flag,
            message: message.into(),
        }
    }
}

impl Spec {
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
        }
    }

    /// Checks ranges and consistency; names the flag of the first bad field.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(SpecError::new(
                "--flows",
                format!("must be between 1 and {MAX_FLOWS}, got {}", self.flows),
            ));
        }
        if self.threads == 0 {
            return Err(SpecError::new("--threads", "must be at least 1"));
        }
        if self.threads > self.flows {
            return Err(SpecError::new(
                "--threads",
                format!(
                    "{} threads for {} flows would leave threads idle; use at most {}",
                    self.threads, self.flows, self.flows
                ),
            ));
        }
        if self.msg_size == 0 || self.msg_size > MAX_MSG_SIZE {
            return Err(SpecError::new(
                "--msg-size",
                format!(
                    "must be between 1 byte and 64M, got {}",
                    units::show_size(self.msg_size)
                ),
            ));
        }
        for (flag, b) in [
            ("--sndbuf", self.socket.sndbuf),
            ("--rcvbuf", self.socket.rcvbuf),
        ] {
            if let BufSize::Bytes(n) = b {
                if n == 0 || n > MAX_BUF {
                    return Err(SpecError::new(
                        flag,
                        format!("must be 'auto' or between 1 byte and 1G, got {n}"),
                    ));
                }
            }
        }
        if let Some(m) = self.socket.mss {
            // The kernel clamps TCP_MAXSEG to [88, 32767]; outside that range a
            // request can only mean a typo.
            if !(88..=65535).contains(&m) {
                return Err(SpecError::new(
                    "--mss",
                    format!("must be between 88 and 65535 bytes, got {m}"),
                ));
            }
        }
        if let Some(cc) = &self.socket.cc {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(SpecError::new(
                    "--cc",
                    format!("'{cc}' is not a congestion control name (like cubic or bbr)"),
                ));
            }
        }
        if let Some(r) = self.socket.pacing_rate_bps {
            if r < 8 {
                return Err(SpecError::new(
                    "--pacing-rate",
                    "must be at least 8 bit/s (the kernel paces in bytes per second)",
                ));
            }
        }
        if self.duration_ms == 0 {
            return Err(SpecError::new("--duration", "must be longer than zero"));
        }
        if self.duration_ms > 24 * 3600 * 1000 {
            return Err(SpecError::new("--duration", "must be at most 24h"));
        }
        if self.warmup_ms > 3600 * 1000 {
            return Err(SpecError::new("--warmup", "must be at most 1h"));
        }
        Ok(())
    }

    /// A stable hash of the canonical form of the spec. The label is not part of
    /// a spec, so the same point measured under two labels has the same key.
    pub fn key(&self) -> String {
        // serde_json writes struct fields in declaration order and this type
        // holds no maps, so the encoding is canonical.
        let canon = serde_json::to_vec(self).expect("a spec always serialises");
        let digest = Sha256::digest(&canon);
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// One line that says what runs: `stream send 1 flow x 128K, ipv4, 10s`.
    pub fn summary(&self) -> String {
        let flows = if self.flows == 1 {
            "1 flow".to_string()
        } else {
            format!("{} flows", self.flows)
        };
        format!(
            "{} {} {} x {}, {} thread{}, {}, {}s",
            self.workload,
            self.direction,
            flows,
            units::show_size(self.msg_size),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.family,
            self.duration_ms as f64 / 1000.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn validation_names_the_flag() {
        let mut s = Spec::stream();
        s.flows = 0;
        assert_eq!(s.validate().unwrap_err().flag, "--flows");
        let mut s = Spec::stream();
        s.threads = 4;
        assert_eq!(s.validate().unwrap_err().flag, "--threads");
        let mut s = Spec::stream();
        s.socket.cc = Some("no such".into());
        assert_eq!(s.validate().unwrap_err().flag, "--cc");
        let mut s = Spec::stream();
        s.socket.mss = Some(10);
        assert_eq!(s.validate().unwrap_err().flag, "--mss");
        assert!(Spec::stream().validate().is_ok());
    }

    #[test]
    fn direction_activity_mirrors() {
        assert_eq!(Direction::Send.activity(false), (true, false));
        assert_eq!(Direction::Send.activity(true), (false, true));
        assert_eq!(Direction::Recv.activity(false), (false, true));
        assert_eq!(Direction::Recv.activity(true), (true, false));
        assert_eq!(Direction::Both.activity(true), (true, true));
    }
}
