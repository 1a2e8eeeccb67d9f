//! CPU accounting: system-wide per-CPU times, per-process and per-thread use,
//! softirq counts, and the CPU lists used for pinning.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Seconds one CPU spent in each state over a window (deltas of /proc/stat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuTimes {
    /// CPU number.
    pub cpu: u32,
    /// Seconds in user mode.
    pub user_s: f64,
    /// Seconds in user mode at low priority (nice).
    pub nice_s: f64,
    /// Seconds in the kernel.
    pub system_s: f64,
    /// Seconds idle.
    pub idle_s: f64,
    /// Seconds idle waiting for I/O.
    pub iowait_s: f64,
    /// Seconds servicing hardware interrupts.
    pub irq_s: f64,
    /// Seconds servicing softirqs.
    pub softirq_s: f64,
    /// Seconds stolen by a hypervisor.
    pub steal_s: f64,
    /// Seconds between the two readings of /proc/stat; None in records made
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub span_s: Option<f64>,
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
    ///
    /// A tickless kernel without IRQ time accounting counts the busy states
    /// by sampling at its tick, while idle and iowait come from its idle
    /// clock, exact: a CPU that sleeps and wakes thousands of times a second
    /// loses ticks, busy ones among them (half of a 1-byte rr's busy time
    /// has been seen lost). The span less idle, iowait and steal keeps that
    /// time; where the idle time is itself counted in ticks, the two agree.
    pub fn busy_s(&self) -> f64 {
        let ticked = self.user_s + self.nice_s + self.system_s + self.irq_s + self.softirq_s;
        match self.span_s {
            Some(span) => ticked.max(span - self.idle_s - self.iowait_s - self.steal_s),
            None => ticked,
        }
    }

    /// Busy time outside interrupts: user, nice and system, and the busy
    /// time the ticks missed (see [`CpuTimes::busy_s`]), which a CPU spends
    /// mostly in the task it woke for.
    pub fn task_s(&self) -> f64 {
        self.busy_s() - self.irq_s - self.softirq_s
    }
}

/// Per-thread CPU use over a window, from /proc/self/task/TID.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadCpu {
    /// Thread id.
    pub tid: u32,
    /// Thread name (comm).
    pub name: String,
    /// CPU seconds the thread spent in user mode over the window.
    pub user_s: f64,
    /// CPU seconds the thread spent in the kernel over the window.
    pub system_s: f64,
    /// Voluntary context switches over the window.
    pub voluntary_csw: u64,
    /// Involuntary context switches over the window.
    pub involuntary_csw: u64,
    /// The CPUs the thread may run on (Cpus_allowed_list), e.g. "0" or "0-3".
    pub cpus_allowed: String,
    /// The CPU it last ran on at the end of the window.
    pub last_cpu: u32,
    /// What the scheduler accounted to it over the window; None where the
    /// kernel keeps no per-task scheduler statistics.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sched: Option<SchedTimes>,
}

/// What the scheduler accounted to a thread, or to a process's threads
/// together, over a window (/proc/PID/task/TID/schedstat and sched).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SchedTimes {
    /// Seconds on a CPU.
    #[schemars(range(min = 0))]
    pub run_s: f64,
    /// Seconds runnable but waiting on a run queue for a CPU.
    #[schemars(range(min = 0))]
    pub wait_s: f64,
    /// Times it was put on a CPU.
    pub timeslices: u64,
    /// Moves from one CPU to another; None where the kernel does not expose
    /// them (no /proc/PID/task/TID/sched).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub migrations: Option<u64>,
}

impl SchedTimes {
    /// The sum of the threads' accounting; None when no thread has any.
    pub fn sum<'a>(threads: impl IntoIterator<Item = &'a SchedTimes>) -> Option<SchedTimes> {
        threads.into_iter().copied().reduce(|a, t| SchedTimes {
            run_s: a.run_s + t.run_s,
            wait_s: a.wait_s + t.wait_s,
            timeslices: a.timeslices + t.timeslices,
            migrations: a.migrations.zip(t.migrations).map(|(x, y)| x + y),
        })
    }
}

/// A process's CPU use over a window: getrusage deltas plus its threads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessCpu {
    /// Process id.
    pub pid: u32,
    /// CPU seconds the process spent in user mode over the window.
    pub user_s: f64,
    /// CPU seconds the process spent in the kernel over the window.
    pub system_s: f64,
    /// Voluntary context switches over the window.
    pub voluntary_csw: u64,
    /// Involuntary context switches over the window.
    pub involuntary_csw: u64,
    /// Resident set size at the end of the window.
    pub rss_bytes: u64,
    /// Per-thread CPU use: the worker threads, and any other thread that used
    /// CPU in the window.
    pub threads: Vec<ThreadCpu>,
    /// The scheduler's accounting of all the process's threads together.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sched: Option<SchedTimes>,
}

impl ProcessCpu {
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

/// Softirq counts raised per CPU over a window (deltas of /proc/softirqs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SoftirqCounts {
    /// CPU number.
    pub cpu: u32,
    /// NET_RX softirqs raised on this CPU (a count).
    pub net_rx: u64,
    /// NET_TX softirqs raised on this CPU (a count).
    pub net_tx: u64,
}

/// One CPU's packet processing (/proc/net/softnet_stat): since boot, or
/// over a window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SoftnetCounts {
    /// CPU number.
    pub cpu: u32,
    /// Packets taken off the CPU's backlog and device queues.
    pub processed: u64,
    /// Packets dropped for a full backlog (net.core.netdev_max_backlog).
    pub dropped: u64,
    /// NET_RX rounds that ended with work left (out of budget or time).
    pub time_squeeze: u64,
    /// Packets other CPUs steered here by RPS.
    pub received_rps: u64,
    /// Packets dropped by the per-flow limit.
    pub flow_limit_count: u64,
}

impl SoftnetCounts {
    /// The CPUs' counts added up (the `cpu` of the sum means nothing).
    pub fn total(rows: &[SoftnetCounts]) -> SoftnetCounts {
        rows.iter()
            .fold(SoftnetCounts::default(), |a, r| a.combine(r, |x, y| x + y))
    }

    /// What was counted since `earlier`, of the same CPU.
    pub fn since(&self, earlier: &SoftnetCounts) -> SoftnetCounts {
        self.combine(earlier, u64::saturating_sub)
    }

    /// Whether anything was counted.
    pub fn moved(&self) -> bool {
        *self
            != SoftnetCounts {
                cpu: self.cpu,
                ..Default::default()
            }
    }

    /// `f` of each counter of `self` and `o`, on `self`'s CPU.
    fn combine(&self, o: &SoftnetCounts, f: impl Fn(u64, u64) -> u64) -> SoftnetCounts {
        SoftnetCounts {
            cpu: self.cpu,
            processed: f(self.processed, o.processed),
            dropped: f(self.dropped, o.dropped),
            time_squeeze: f(self.time_squeeze, o.time_squeeze),
            received_rps: f(self.received_rps, o.received_rps),
            flow_limit_count: f(self.flow_limit_count, o.flow_limit_count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(span_s: Option<f64>) -> CpuTimes {
        CpuTimes {
            cpu: 1,
            user_s: 0.25,
            system_s: 0.5,
            softirq_s: 0.25,
            idle_s: 0.5,
            iowait_s: 0.25,
            steal_s: 0.125,
            span_s,
            ..CpuTimes::default()
        }
    }

    #[test]
    fn busy_time_is_the_span_less_idle_where_the_ticks_lost_some() {
        // 1 s busy in ticks, 0.875 s idle, iowait and steal, of a 2.5 s span:
        // 0.625 s of busy time went unticked.
        assert_eq!(times(Some(2.5)).busy_s(), 1.625);
        assert_eq!(times(None).busy_s(), 1.0);
        // Idle counted in ticks as well: the states fill the span, give or
        // take a tick, and the busy ticks stand.
        assert_eq!(times(Some(1.75)).busy_s(), 1.0);
    }

    #[test]
    fn the_unticked_busy_time_counts_outside_interrupts() {
        // Of the 1.625 s busy, 0.25 s is softirq: the rest, the 0.625 s the
        // ticks missed among it, is the tasks' time.
        assert_eq!(times(Some(2.5)).task_s(), 1.375);
        assert_eq!(times(None).task_s(), 0.75);
    }
}
