//! What `plumb doctor` found on a host: each setting that matters for network
//! benchmarking with its value, why it matters, what to do about it, and
//! which environment facts plumb records for it with every run; plus what
//! else kept the CPUs busy during a short sample.

use serde::{Deserialize, Serialize};

pub const AUDIT_SCHEMA: &str = "plumb.doctor/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Set as a benchmark wants it.
    Ok,
    /// Likely to limit or disturb a test.
    Warn,
    /// Worth knowing; neither right nor wrong.
    Info,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Info => "info",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Short name of the check, e.g. `rmem_max`.
    pub check: String,
    pub status: Status,
    /// The value found, as the host states it.
    pub value: String,
    pub why: String,
    /// What to change, when something should be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
    /// The environment facts that carry this setting in every stored run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_as: Vec<String>,
}

/// A process other than plumb that used CPU during the sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BusyProcess {
    pub pid: u32,
    pub name: String,
    /// Percent of one CPU over the sample.
    pub cpu_percent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    pub schema: String,
    pub interfaces: Vec<String>,
    pub sample_s: f64,
    /// Steal time over the sample, percent of all CPUs' time.
    pub steal_percent: f64,
    /// Busy time of all CPUs over the sample, percent of all CPUs' time.
    pub busy_percent: f64,
    /// Processes that used at least 2 % of a CPU, busiest first.
    pub busy_processes: Vec<BusyProcess>,
    pub findings: Vec<Finding>,
    /// Why a comparison made on this host now would not be trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub too_noisy: Option<String>,
}

impl Audit {
    pub fn warnings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.status == Status::Warn)
            .count()
    }
}
