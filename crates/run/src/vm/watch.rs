//! The host while a guest measures: under TCG the guest's figures follow
//! the CPU the emulator gets, so what other processes took of the host in
//! each iteration is kept beside them, and a run whose host was busy with
//! others beyond [`OTHERS_BOUND_PERCENT`] is marked suspect. So is one
//! whose round trips took far longer than the same guest's idle round
//! trip just before the run ([`RTT_FACTOR`]): a host that starved the
//! guest in bursts shows there even where its average load did not.

use plumb_samples::RunRecord;
use plumb_spec::{Spec, Workload};
use plumb_sys::proc;
use std::time::Instant;

/// The most of the host's CPU time (percent of all its CPUs) that other
/// processes may take while an iteration runs before its run is suspect.
/// An idle host's daemons take well under 1 %; a single busy process on a
/// 2-CPU host takes up to 50 %.
pub const OTHERS_BOUND_PERCENT: f64 = 15.0;

/// The CPU time other processes have taken, at one moment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Snapshot {
    at: Instant,
    cpus: u64,
    /// User and system ticks of every process but plumb, its children
    /// (each guest's QEMU) and the kernel's threads, with those of the
    /// children each has reaped: a build's short-lived compilers count in
    /// their make once gone.
    others: u64,
}

/// A process's own and reaped children's user and system ticks, its pid
/// and its parent's.
fn ticks_of(pid: &str) -> Option<(u64, u32, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let s = proc::parse_task_stat(&text).ok()?;
    let ticks = s.utime_ticks + s.stime_ticks + s.cutime_ticks + s.cstime_ticks;
    Some((ticks, pid.parse().ok()?, s.ppid))
}

/// Ticks of every process that is neither plumb, nor a child of it, nor a
/// kernel thread (kthreadd's children: writeback, softirq and the like
/// follow the host's own I/O, and interrupts, not a process's load).
fn others() -> u64 {
    const KTHREADD: u32 = 2;
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| ticks_of(e.file_name().to_str()?))
        .filter(|&(_, pid, ppid)| pid != me && ppid != me && pid != KTHREADD && ppid != KTHREADD)
        .map(|(ticks, _, _)| ticks)
        .sum()
}

impl Snapshot {
    pub(super) fn take() -> Option<Snapshot> {
        let cpus = proc::read_stat().ok()?.len() as u64;
        Some(Snapshot {
            at: Instant::now(),
            cpus,
            others: others(),
        })
    }

    /// What processes other than plumb and its guests took of the host since
    /// `earlier`, in percent of all its CPUs' time.
    pub(super) fn others_since(&self, earlier: &Snapshot) -> f64 {
        let elapsed = self.at.duration_since(earlier.at).as_secs_f64();
        others_percent(
            self.others.saturating_sub(earlier.others),
            self.cpus,
            elapsed * proc::clock_ticks_per_sec() as f64,
        )
    }
}

/// Other processes' ticks as a percent of `cpus` CPUs over
/// `elapsed_ticks`, at most all of them (the processes and the clock are
/// read a moment apart).
pub fn others_percent(others: u64, cpus: u64, elapsed_ticks: f64) -> f64 {
    if cpus == 0 || elapsed_ticks <= 0.0 {
        return 0.0;
    }
    (100.0 * others as f64 / (cpus as f64 * elapsed_ticks)).min(100.0)
}

/// A run's median round trip may take this many times the idle probe's,
/// plus [`RTT_SLACK_US`], before the run is suspect: a closed loop of a few
/// small transactions takes about one round trip each when nothing else
/// holds the guest back. Under TCG the round trip itself wanders: on a
/// quiet 2-CPU host a 1-byte rr's median ran from 1.5 to 13 ms an
/// iteration against idle probes of 2 to 11 ms, which this bound leaves
/// alone, while a 2 ms path measured at 45.8 ms is caught.
pub const RTT_FACTOR: f64 = 4.0;
pub const RTT_SLACK_US: f64 = 20_000.0;

/// The idle probe a guest makes on a run's path just before the run: one
/// flow of 1-byte TCP transactions, briefly.
pub fn idle_probe(spec: &Spec) -> Spec {
    let mut probe = Spec::rr();
    probe.family = spec.family;
    probe.topology = spec.topology.clone();
    probe.socket.nodelay = true;
    probe.duration_ms = 300;
    probe.warmup_ms = 100;
    probe
}

/// Whether a run's transactions are round trips the idle probe can be held
/// against: a closed loop of small request/response on at most as many
/// flows as the guest has vCPUs. (A stream's RTT grows with the queue it
/// fills, and a crr transaction is a connection too.)
pub fn rtt_comparable(spec: &Spec, vcpus: u32) -> bool {
    let Some(rr) = &spec.rr else { return false };
    matches!(spec.workload, Workload::Rr | Workload::UdpRr)
        && spec.flows <= vcpus.max(1)
        && rr.pipeline == 1
        && rr.rate.is_none()
        && rr.req_size <= 1024
        && rr.resp_size <= 1024
}

/// Why a run whose median round trip in some iteration took far longer
/// than the idle probe's is not to be trusted, or None.
pub fn rtt_suspect(record: &RunRecord, idle_us: f64) -> Option<String> {
    if idle_us <= 0.0 {
        return None;
    }
    let bound = idle_us * RTT_FACTOR + RTT_SLACK_US;
    record
        .iterations
        .iter()
        .filter_map(|it| Some((it.index, it.client.latency.as_ref()?.p50_us)))
        .filter(|&(_, p50)| p50 > bound)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(index, p50)| {
            format!(
                "the guest's median round trip took {:.2} ms in iteration {} against {:.2} ms \
                 on the same path idle just before the run: the host held the guest back",
                p50 / 1000.0,
                index + 1,
                idle_us / 1000.0
            )
        })
}

/// Why a run whose iterations saw the host this busy with others is not to
/// be trusted, or None.
pub fn suspect(others: &[f64]) -> Option<String> {
    let (worst_at, worst) = others
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let over = others.iter().filter(|&&p| p > OTHERS_BOUND_PERCENT).count();
    (over > 0).then(|| {
        format!(
            "other processes took {worst:.1} % of the host's CPU time in iteration {} \
             (over {OTHERS_BOUND_PERCENT:.0} % in {over} of {} iterations): the guest \
             measured the host's load as well as its kernel",
            worst_at + 1,
            others.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn others_are_a_share_of_all_the_cpus_time() {
        // 2 CPUs over 10 s at 100 ticks a second: 2000 ticks of capacity.
        assert_eq!(others_percent(0, 2, 1000.0), 0.0);
        assert!((others_percent(900, 2, 1000.0) - 45.0).abs() < 1e-9);
        assert_eq!(others_percent(2500, 2, 1000.0), 100.0);
        assert_eq!(others_percent(10, 0, 1000.0), 0.0);
    }

    #[test]
    fn a_process_of_this_host_and_its_reaped_children_are_counted() {
        // This test process: its own ticks read, itself left out.
        let me = std::process::id().to_string();
        let (_, pid, ppid) = ticks_of(&me).unwrap();
        assert_eq!(pid.to_string(), me);
        assert!(ppid > 0);
        // A child that spins, then is reaped: its ticks move to this
        // process's cutime, which a watcher from elsewhere counts.
        let before = ticks_of(&me).unwrap().0;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        child.wait().unwrap();
        assert!(ticks_of(&me).unwrap().0 > before);
    }

    #[test]
    fn round_trips_far_beyond_the_idle_probes_are_suspect() {
        let mut r = plumb_samples::testing::example();
        let it = r.iterations[0].clone();
        r.iterations = [2100.0, 45_800.0, 2300.0]
            .iter()
            .enumerate()
            .map(|(k, p50)| {
                let mut i = it.clone();
                i.index = k as u32;
                i.client.latency = Some(plumb_samples::Latency {
                    p50_us: *p50,
                    ..Default::default()
                });
                i
            })
            .collect();
        // 2 ms idle on a 2 ms path: 45.8 ms in the second iteration.
        let why = rtt_suspect(&r, 2050.0).unwrap();
        // A quiet TCG host's wandering: 12 ms against 2 ms idle.
        let mut quiet = r.clone();
        quiet.iterations.truncate(1);
        if let Some(l) = quiet.iterations[0].client.latency.as_mut() {
            l.p50_us = 12_130.0;
        }
        assert_eq!(rtt_suspect(&quiet, 2055.0), None);
        assert!(why.contains("45.80 ms in iteration 2"), "{why}");
        // Idle as slow as the window: the host was as busy before as during,
        // which the CPU bound catches; the round trips agree.
        assert_eq!(rtt_suspect(&r, 40_000.0), None);
        assert_eq!(rtt_suspect(&r, 0.0), None);
    }

    #[test]
    fn only_a_closed_loop_of_small_transactions_is_held_against_the_probe() {
        assert!(rtt_comparable(&Spec::rr(), 2));
        assert!(rtt_comparable(&Spec::udp_rr(), 2));
        assert!(!rtt_comparable(&Spec::stream(), 2));
        assert!(!rtt_comparable(&Spec::crr(), 2));
        let mut many = Spec::rr();
        many.flows = 8;
        assert!(!rtt_comparable(&many, 2));
        let probe = idle_probe(&many);
        assert_eq!((probe.flows, probe.workload), (1, Workload::Rr));
    }

    #[test]
    fn a_run_is_suspect_only_beyond_the_bound() {
        assert_eq!(suspect(&[]), None);
        assert_eq!(suspect(&[0.4, 2.0, 14.9]), None);
        let why = suspect(&[0.4, 48.2, 30.0]).unwrap();
        assert!(why.contains("48.2 %"), "{why}");
        assert!(why.contains("iteration 2"), "{why}");
        assert!(why.contains("in 2 of 3 iterations"), "{why}");
    }
}
