//! What explains a change beside the verdict, per end: CPU seconds per unit
//! of work (the budget), the events that cost them (migrations, softnet
//! drops and squeezes, interface drops), and which CPUs took each device's
//! interrupts on either side.

use crate::limits::{direction, ShareVerdict};
use plumb_samples::figure::{self, Merge};
use plumb_samples::{EndResult, Iteration, Role};
use serde::Serialize;
use std::collections::BTreeMap;

/// One line of a budget: a figure per unit of work on each side.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetLine {
    /// `client`, `server` (the processes or their namespaces), `client
    /// host`, `server host` (every CPU of the machine that end ran on), or
    /// `host` when both ends ran on one machine.
    pub end: String,
    /// For a process's CPU time `user`, `system` or `run-queue wait` (its
    /// threads runnable but not on a CPU); for a host's `softirq`, `irq`
    /// and `other processes` (its busy time outside interrupts less that of
    /// the test's ends that ran on it: a neighbour's compile, not the test);
    /// for events
    /// `migrations`, `softnet dropped`, `time_squeeze`, `interface drops`.
    pub part: String,
    pub a: f64,
    pub b: f64,
    /// b / a - 1; absent when a is 0.
    pub change: Option<f64>,
    /// Welch's p of the iterations' figures; absent with fewer than 2
    /// iterations on a side or none of spread on either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Whether B's figure is more or less than A's, iteration by
    /// iteration, at the method's level.
    pub verdict: ShareVerdict,
}

pub(crate) type Figures = BTreeMap<(String, String), f64>;

/// Each iteration's work (GB received, or millions of transactions) and
/// its figures as counted, not yet divided by it: [`lines`] makes of them
/// both the sides' figures per unit of work and each iteration's.
type Worked = Vec<(f64, Figures)>;

fn per_work(
    its: &[&Iteration],
    transactional: bool,
    each: impl Fn(&Iteration, &mut dyn FnMut(&str, &str, f64)),
) -> Worked {
    its.iter()
        .map(|i| {
            let work = if transactional {
                i.client.transactions as f64 / 1e6
            } else {
                i.transfer.received_bytes as f64 / 1e9
            };
            let mut raw = Figures::new();
            each(i, &mut |end: &str, part: &str, v: f64| {
                *raw.entry((end.to_string(), part.to_string()))
                    .or_insert(0.0) += v;
            });
            (work, raw)
        })
        .collect()
}

/// Figures summed over iterations and divided by the work they did, so
/// that long and short windows weigh by what they moved; none without work.
fn over_work(worked: &[(f64, Figures)]) -> Figures {
    let work: f64 = worked.iter().map(|w| w.0).sum();
    let mut out = Figures::new();
    if work > 0.0 {
        for (key, v) in worked.iter().flat_map(|w| &w.1) {
            *out.entry(key.clone()).or_insert(0.0) += v / work;
        }
    }
    out
}

/// The ends of an iteration whose host-wide figures count, under the name
/// they count as. The record does not say whether the server was embedded;
/// both ends reporting one host name means they read the same /proc/stat
/// and softnet_stat (loopback, or veth namespaces on one machine), and that
/// host counts once, as the run's own derived host figures do.
fn hosts(i: &Iteration) -> Vec<(&EndResult, String)> {
    if i.client.hostname == i.server.hostname {
        vec![(&i.client, "host".to_string())]
    } else {
        [&i.client, &i.server]
            .into_iter()
            .map(|e| (e, format!("{} host", e.role.name())))
            .collect()
    }
}

/// CPU seconds per GB received, or CPU microseconds per transaction.
pub(crate) fn cpu(its: &[&Iteration], transactional: bool) -> Worked {
    per_work(its, transactional, |i, add| {
        for end in [&i.client, &i.server] {
            let who = end.role.name();
            add(who, "user", end.process.user_s);
            add(who, "system", end.process.system_s);
            // Time the end's threads were ready to run but waited for a
            // CPU: what a crowded or badly pinned end pays on top.
            if let Some(sched) = &end.process.sched {
                add(who, "run-queue wait", sched.wait_s);
            }
        }
        for (end, host) in hosts(i) {
            let sum = |f: fn(&plumb_samples::CpuTimes) -> f64| end.cpus.iter().map(f).sum();
            // The ends' own time is in their lines: the host's is the rest,
            // a few ticks' noise either way, never below nothing.
            let (busy, own) = busy_and_own(i, end);
            add(&host, OTHER, (busy - own).max(0.0));
            add(&host, "irq", sum(|c| c.irq_s));
            add(&host, "softirq", sum(|c| c.softirq_s));
        }
    })
}

/// The budget part of a host's CPU time that the test's ends did not spend.
pub const OTHER: &str = "other processes";

/// The CPU seconds of a host over an iteration's window: its busy time
/// outside interrupts, and the part the test's ends spent on it. The ends'
/// figures are exact; the host's user and system ticks alone can fall below
/// them on a tickless kernel, which would hide a neighbour.
fn busy_and_own(i: &Iteration, end: &EndResult) -> (f64, f64) {
    let busy = end.cpus.iter().map(|c| c.task_s()).sum();
    let own = [&i.client, &i.server]
        .into_iter()
        .filter(|e| e.hostname == end.hostname)
        .map(|e| e.process.user_s + e.process.system_s)
        .sum();
    (busy, own)
}

/// Per host: the CPUs its other processes kept busy on average over the
/// windows, and the CPUs the test's own processes did.
fn others_busy(its: &[&Iteration]) -> BTreeMap<String, (f64, f64)> {
    let mut sums: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for i in its {
        for (end, host) in hosts(i) {
            let (busy, own) = busy_and_own(i, end);
            let s = sums.entry(host).or_default();
            s.0 += (busy - own).max(0.0);
            s.1 += own;
            s.2 += i.window_s;
        }
    }
    sums.into_iter()
        .filter(|(_, s)| s.2 > 0.0)
        .map(|(host, (other, own, window))| (host, (other / window, own / window)))
        .collect()
}

/// Where a host's other processes were busier on one side than on the
/// other: a neighbour's compile on one side moves every CPU figure of that
/// side without any setting having changed. Measured in CPUs kept busy on
/// average over the windows, not per unit of work, so that a steady
/// neighbour on both sides reads the same whatever the rates; said where
/// one side's other processes kept at least a quarter of a CPU more busy
/// on average (far beyond the few ticks either side of the subtraction).
/// One line a host, naming the busier side.
pub fn busier_neighbours(a: &[&Iteration], b: &[&Iteration]) -> Vec<String> {
    let (oa, ob) = (others_busy(a), others_busy(b));
    oa.iter()
        .filter_map(|(host, &(other_a, own_a))| {
            let &(other_b, own_b) = ob.get(host)?;
            let (side, more, less, own) = if other_b > other_a {
                ("B", other_b, other_a, own_b)
            } else {
                ("A", other_a, other_b, own_a)
            };
            (more - less >= 0.25).then(|| {
                format!(
                    "other processes on the {host} were busier under {side}: they kept {more:.2} \
                     CPUs busy against {less:.2}, beside the test's own {own:.2}; the CPU \
                     figures of that side count them"
                )
            })
        })
        .collect()
}

/// Events per GB received, or per million transactions, as the probes
/// declare them (`plumb_samples::figure`): the end's threads moved between
/// CPUs, packets its host's backlogs dropped, NET_RX rounds that ran out of
/// budget, packets its interfaces dropped. A figure of the process counts
/// per end, one of the host once per host, one of the network namespace
/// once per namespace.
pub(crate) fn events(its: &[&Iteration], transactional: bool) -> Worked {
    per_work(its, transactional, |i, add| {
        let json = |e: &EndResult| serde_json::to_value(e).unwrap_or_default();
        let ends = [(&i.client, json(&i.client)), (&i.server, json(&i.server))];
        let hosts = hosts(i);
        for (part, f, name) in figure::events() {
            for (end, record) in &ends {
                let counts_as = match part.merge {
                    Merge::OncePerHost => hosts
                        .iter()
                        .find(|(h, _)| h.role == end.role)
                        .map(|(_, name)| name.clone()),
                    // Ends in one namespace see the same interfaces: those
                    // count once, as the client's.
                    Merge::OncePerNamespace => (!end.lost
                        && !i.shared_with_client(end.role, part.merge))
                    .then(|| end.role.name().to_string()),
                    Merge::Sum
                    | Merge::OncePerEnd
                    | Merge::PerGroup
                    | Merge::PerFlow
                    | Merge::Distribution => (!end.lost).then(|| end.role.name().to_string()),
                };
                let value = figure::part_of(record, part.key).unwrap_or(&serde_json::Value::Null);
                let value = figure::figure_value(value, f.path);
                if let (Some(who), Some(v)) = (counts_as, value) {
                    add(&who, name, v);
                }
            }
        }
        // The drops by the kernel's reason, host-wide as their count.
        for (end, who) in &hosts {
            for (reason, n) in end.tracepoints.iter().flat_map(|t| &t.drop_reasons) {
                add(who, &format!("{DROPPED_FOR}{reason}"), *n as f64);
            }
        }
    })
}

/// How the comparison names the drops for one reason: `dropped for
/// SOCKET_RCVBUFF`.
pub const DROPPED_FOR: &str = "dropped for ";

/// A reason one side's drops had and the other's did not is none there:
/// both sides get every reason either had.
fn align_reasons(a: &mut Figures, b: &mut Figures) {
    let reasons = |f: &Figures| -> Vec<(String, String)> {
        f.keys()
            .filter(|(_, part)| part.starts_with(DROPPED_FOR))
            .cloned()
            .collect()
    };
    for k in reasons(a) {
        b.entry(k).or_insert(0.0);
    }
    for k in reasons(b) {
        a.entry(k).or_insert(0.0);
    }
}

/// The lines of `figures` (the CPU budget, or the events) that both sides
/// have, with their change over all iterations, and whether B's differ
/// from A's iteration by iteration at `level`. `keep` drops lines that
/// say nothing (events that neither side counted).
pub(crate) fn lines(
    a: &[&Iteration],
    b: &[&Iteration],
    transactional: bool,
    level: f64,
    figures: fn(&[&Iteration], bool) -> Worked,
    keep: impl Fn(f64, f64) -> bool,
) -> Vec<BudgetLine> {
    let (wa, wb) = (figures(a, transactional), figures(b, transactional));
    let (mut fa, mut fb) = (over_work(&wa), over_work(&wb));
    align_reasons(&mut fa, &mut fb);
    let each = |worked: &Worked| -> Vec<Figures> {
        worked
            .iter()
            .map(|w| over_work(std::slice::from_ref(w)))
            .collect()
    };
    let (each_a, each_b) = (each(&wa), each(&wb));
    // A drop reason an iteration did not see was none there; another
    // figure it lacks it did not measure.
    let of = |each: &[Figures], key: &(String, String)| -> Vec<f64> {
        each.iter()
            .filter_map(|f| match f.get(key) {
                Some(v) => Some(*v),
                None if key.1.starts_with(DROPPED_FOR) && !f.is_empty() => Some(0.0),
                None => None,
            })
            .collect()
    };
    fa.iter()
        .filter_map(|(key, &va)| {
            let vb = *fb.get(key)?;
            if !keep(va, vb) {
                return None;
            }
            let (p_value, verdict) = direction(&of(&each_a, key), &of(&each_b, key), level);
            Some(BudgetLine {
                end: key.0.clone(),
                part: key.1.clone(),
                a: va,
                b: vb,
                change: (va > 0.0).then(|| vb / va - 1.0),
                p_value,
                verdict,
            })
        })
        .collect()
}

/// The interrupts each CPU took from each end's interfaces, over a side's
/// iterations: (end, interface) -> CPU -> interrupts.
fn irq_cpus(its: &[&Iteration]) -> BTreeMap<(Role, String), BTreeMap<u32, u64>> {
    let mut out: BTreeMap<(Role, String), BTreeMap<u32, u64>> = BTreeMap::new();
    for i in its {
        for (end, _) in hosts(i) {
            for n in &end.interfaces {
                for q in &n.irqs {
                    for c in &q.cpus {
                        *out.entry((end.role, n.name.clone()))
                            .or_default()
                            .entry(c.cpu)
                            .or_default() += c.count;
                    }
                }
            }
        }
    }
    out
}

/// The CPU that took most of a device's interrupts, and its share of them.
fn main_cpu(cpus: &BTreeMap<u32, u64>) -> Option<(u32, f64)> {
    let total: u64 = cpus.values().sum();
    let (&cpu, &n) = cpus.iter().max_by_key(|(_, &n)| n)?;
    (total > 0).then(|| (cpu, n as f64 / total as f64))
}

/// "server: IRQs of eth0 moved from CPU 1 (92 %) to CPU 0 (88 %)", for
/// each interface whose interrupts a different CPU took most of on the two
/// sides.
pub(crate) fn irq_moves(a: &[&Iteration], b: &[&Iteration]) -> Vec<String> {
    let (ca, cb) = (irq_cpus(a), irq_cpus(b));
    ca.iter()
        .filter_map(|((role, name), cpus)| {
            let (from, share_a) = main_cpu(cpus)?;
            let (to, share_b) = main_cpu(cb.get(&(*role, name.clone()))?)?;
            (from != to).then(|| {
                format!(
                    "{role}: IRQs of {name} moved from CPU {from} ({:.0} %) to CPU {to} ({:.0} %)",
                    share_a * 100.0,
                    share_b * 100.0
                )
            })
        })
        .collect()
}
