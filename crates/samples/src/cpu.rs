//! CPU accounting: system-wide per-CPU times, per-process and per-thread use,
//! softirq counts, and the CPU lists used for pinning.

use serde::{Deserialize, Serialize};

/// Seconds one CPU spent in each state over a window (deltas of /proc/stat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub cpu: u32,
    pub user_s: f64,
    pub nice_s: f64,
    pub system_s: f64,
    pub idle_s: f64,
    pub iowait_s: f64,
    pub irq_s: f64,
    pub softirq_s: f64,
    pub steal_s: f64,
}

impl CpuTimes {
    pub fn total_s(&self) -> f64 {
        self.user_s
            + self.nice_s
            + self.system_s
            + self.idle_s
            + self.iowait_s
            + self.irq_s
            + self.softirq_s
            + self.steal_s
    }

    /// Time doing work for someone on this machine: everything but idle, iowait
    /// and time stolen by a hypervisor.
    pub fn busy_s(&self) -> f64 {
        self.user_s + self.nice_s + self.system_s + self.irq_s + self.softirq_s
    }
}

/// Per-thread CPU use over a window, from /proc/self/task/TID.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    pub tid: u32,
    pub name: String,
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_csw: u64,
    pub involuntary_csw: u64,
    /// The CPUs the thread may run on (Cpus_allowed_list), e.g. "0" or "0-3".
    pub cpus_allowed: String,
    /// The CPU it last ran on at the end of the window.
    pub last_cpu: u32,
}

/// A process's CPU use over a window: getrusage deltas plus its threads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    pub pid: u32,
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_csw: u64,
    pub involuntary_csw: u64,
    /// Resident set size at the end of the window.
    pub rss_bytes: u64,
    pub threads: Vec<ThreadCpu>,
}

impl ProcessCpu {
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

/// Softirq counts raised per CPU over a window (deltas of /proc/softirqs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftirqCounts {
    pub cpu: u32,
    pub net_rx: u64,
    pub net_tx: u64,
}
