//! The messages of the control protocol. Every frame carries the protocol
//! version beside its type, so that a peer of another version is told so
//! instead of misreading fields.
//!
//! A test goes: hello → welcome → [auth → auth_ok] → setup → ready (data port and cookie) →
//! the client connects its flows → start → started → (warm-up) → mark (the
//! window opens) → stop (the window closes) → results. Either side may send
//! `error` at any point and close. Both sides keep to it through
//! [`crate::order::Order`].

use plumb_samples::{EndResult, Environment, RunRecord};
use plumb_spec::Spec;
use serde::{Deserialize, Serialize};

/// 2: a udp-stream sender marks the datagrams it sends inside its window
/// (the sequence number's top bit), which a server of version 1 would read
/// as a jump of 2^63.
pub const PROTOCOL_VERSION: u32 = 2;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frame {
    pub version: u32,
    #[serde(flatten)]
    pub message: Message,
}

impl Frame {
    pub fn new(message: Message) -> Frame {
        Frame {
            version: PROTOCOL_VERSION,
            message,
        }
    }
}

/// Where the server wants the data flows (the `ready` message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    pub data_port: u16,
    /// The cookie each data flow must open with.
    pub cookie: String,
    pub threads: u32,
    /// What each asked knob did on the server's host: `sysctl:x: a -> b`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knobs: Vec<String>,
    /// A run of parts: where each part's flows connect, in the spec's
    /// order (the cookie is the session's). A server that leaves it out
    /// serves no parts, and the client says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_ports: Vec<u16>,
    /// The server's kernel boot: a client on the same one shares its
    /// clock, and splits its udp-rr latencies into their two ways from
    /// the server's stamps. An older server leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client → server, first frame. `nonce` is what the server signs when
    /// it proves it holds the pre-shared key.
    Hello {
        software: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        nonce: String,
    },
    /// Server → client. `nonce` is what an authenticating client will sign;
    /// `auth` says whether the server requires it.
    Welcome {
        software: String,
        nonce: String,
        auth: bool,
    },
    /// Client → server: HMAC-SHA256 under the pre-shared key over both
    /// nonces (see `auth`), in hex.
    Auth { proof: String },
    /// Server → client: the key was right; the server's own proof, over the
    /// same nonces under another label, so the client knows it too.
    AuthOk { proof: String },
    /// Client → server: the spec of the test, seen from the client, and the
    /// host knobs (`KNOB=VALUE`) the server end is asked to set for it.
    Setup {
        spec: Box<Spec>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        knobs: Vec<String>,
        /// What the server's end reads beyond the defaults (`--profile`,
        /// `--tcp-probe`), in the message's own fields as before.
        #[serde(flatten)]
        observe: plumb_samples::Observe,
    },
    /// Server → client: where to connect the data flows and the cookie each
    /// must open with.
    Ready(Ready),
    /// Client → server, once every flow is connected: start the traffic.
    Start,
    /// Server → client: its workers are running.
    Started,
    /// Client → server: the measurement window opens now.
    Mark,
    /// Client → server: the window closes now; send results.
    Stop,
    /// Server → client: what the server's end measured, and the
    /// environment of its host (or namespace) when it captures one.
    Results {
        end: Box<EndResult>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        env: Option<Box<Environment>>,
        /// A run of parts: each part's figures of the server's end, in
        /// the spec's order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<EndResult>,
    },
    /// Either way: the test cannot go on.
    Error { code: String, message: String },
    /// Guest → host, over the guest's serial port rather than a session
    /// (`--kernel`): a run made inside the guest, and its environment.
    Guest {
        record: Box<RunRecord>,
        env: Box<Environment>,
        /// The median round trip of the guest's idle probe on the run's
        /// path just before it, where the run's transactions compare.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idle_rtt_us: Option<f64>,
    },
    /// Guest → host, as each iteration of a guest's run ends: its run's
    /// place in the job, the iteration, its figure and the mean so far
    /// (in the workload's metric), so the host can show progress and
    /// watch itself iteration by iteration.
    GuestIteration {
        run: u32,
        iteration: u32,
        value: f64,
        mean: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        half_width: Option<f64>,
    },
}

impl Message {
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Welcome { .. } => "welcome",
            Message::Auth { .. } => "auth",
            Message::AuthOk { .. } => "auth_ok",
            Message::Setup { .. } => "setup",
            Message::Ready(_) => "ready",
            Message::Start => "start",
            Message::Started => "started",
            Message::Mark => "mark",
            Message::Stop => "stop",
            Message::Results { .. } => "results",
            Message::Error { .. } => "error",
            Message::Guest { .. } => "guest",
            Message::GuestIteration { .. } => "guest_iteration",
        }
    }

    pub fn error(code: &str, message: impl Into<String>) -> Message {
        Message::Error {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

pub fn software() -> String {
    format!("plumb {}", env!("CARGO_PKG_VERSION"))
}
