//! The measurement window of one end. Opening it snapshots the flow counters
//! first (closest to the moment the peer is told), then the process, thread,
//! per-CPU, softirq and protocol counters; closing it does the same and turns
//! the differences into an [`EndResult`]. Between the edges it yields one
//! [`IntervalSample`] per tick.

use crate::{Counts, Engine};
use plumb_samples::{
    CpuTimes, EndResult, FlowTotals, InterfaceCounts, IntervalSample, IrqCounts, IrqCpu,
    OptionRecord, ProcessCpu, Role, SchedTimes, SoftirqCounts, SoftnetCounts, ThreadCpu,
    PATH_THREAD,
};
use plumb_sys::proc::{Interrupts, NetDevRow, SoftirqRow, StatCpu, TaskSnapshot};
use plumb_sys::process::Rusage;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a per-second sample waits for the workers' latencies: what a
/// worker hands over late goes into the next sample. The edges of the
/// window wait for every worker instead: on a loaded host one may be off its
/// CPU for a while, and the window's latencies must hold exactly its
/// transactions.
const TICK_WAIT: Duration = Duration::from_millis(50);

/// Where interval samples go as they are taken (a live display, a log).
pub trait SampleSink {
    fn interval(&mut self, role: Role, sample: &IntervalSample);
}

/// A sink that drops everything.
pub struct NoSink;
impl SampleSink for NoSink {
    fn interval(&mut self, _: Role, _: &IntervalSample) {}
}

struct HostSnapshot {
    rusage: Rusage,
    tasks: Vec<TaskSnapshot>,
    stat: Vec<StatCpu>,
    softirqs: Vec<SoftirqRow>,
    net: BTreeMap<String, i64>,
    softnet: Vec<SoftnetCounts>,
    net_dev: Vec<NetDevRow>,
    interrupts: Interrupts,
    /// Each interface's driver statistics, where the driver names any and
    /// they could be read.
    driver: BTreeMap<String, Vec<(String, u64)>>,
}

impl HostSnapshot {
    fn take() -> HostSnapshot {
        let net_dev = plumb_sys::proc::read_net_dev().unwrap_or_default();
        let sock = plumb_sys::ethtool::socket().ok();
        let driver = net_dev
            .iter()
            .filter_map(|d| {
                let stats = plumb_sys::ethtool::driver_stats(sock.as_ref()?, &d.name).ok()?;
                Some((d.name.clone(), stats))
            })
            .collect();
        HostSnapshot {
            rusage: plumb_sys::process::rusage_self(),
            tasks: plumb_sys::proc::read_tasks(None).unwrap_or_default(),
            stat: plumb_sys::proc::read_stat().unwrap_or_default(),
            softirqs: plumb_sys::proc::read_softirqs().unwrap_or_default(),
            net: plumb_sys::proc::read_net_counters().unwrap_or_default(),
            softnet: plumb_sys::proc::read_softnet().unwrap_or_default(),
            net_dev,
            interrupts: plumb_sys::proc::read_interrupts().unwrap_or_default(),
            driver,
        }
    }
}

/// An open measurement window on one end.
pub struct Meter {
    role: Role,
    opened: Instant,
    start: Counts,
    queued_start: u64,
    host: HostSnapshot,
    last_t: Instant,
    last: Counts,
    samples: Vec<IntervalSample>,
    /// Latencies of the window so far, when this end times transactions.
    latency: Option<hdrhistogram::Histogram<u64>>,
}

impl Meter {
    /// Opens the window now.
    pub fn open(engine: &Engine) -> Meter {
        // What was timed during the warm-up is dropped here.
        // The window opens as the workers hand their counts over (with their
        // latencies, where they time transactions), so the counts read below
        // are those of that moment, and the clock is read once they have: a
        // udp-stream receiver first reads what its socket holds, which takes
        // as long as the queue is deep, and the datagrams it reads meanwhile
        // are counted before this edge, so the window's length must not
        // include that time (a worker that is slow to answer otherwise moves
        // no data meanwhile, save the batch it is in).
        engine.mark_window_open();
        let latency = engine
            .collect_latency(None)
            .map(|_| crate::latency::new_histogram());
        let opened = Instant::now();
        let start = engine.counts();
        let queued_start = engine.queued_bytes();
        let host = HostSnapshot::take();
        Meter {
            role: engine.config().role,
            opened,
            last_t: opened,
            last: start.clone(),
            start,
            queued_start,
            host,
            samples: Vec::new(),
            latency,
        }
    }

    /// Moves the latencies recorded since the last call into the window's
    /// histogram and returns their 99th percentile in microseconds.
    fn take_latency(&mut self, h: Option<&hdrhistogram::Histogram<u64>>) -> Option<f64> {
        let window = self.latency.as_mut()?;
        let h = h?;
        let _ = window.add(h);
        (!h.is_empty()).then(|| h.value_at_quantile(0.99) as f64 / 1000.0)
    }

    pub fn elapsed_s(&self) -> f64 {
        self.opened.elapsed().as_secs_f64()
    }

    /// Closes the current interval and starts the next.
    pub fn tick(&mut self, engine: &Engine, sink: &mut dyn SampleSink) {
        // Latencies first: the transactions counted are those handed over,
        // and the clock is read once they are, as at the opening.
        let timed = engine.collect_latency(Some(TICK_WAIT));
        let now = Instant::now();
        let c = engine.counts();
        let p99_us = self.take_latency(timed.as_ref());
        let s = IntervalSample {
            t_s: (now - self.opened).as_secs_f64(),
            dt_s: (now - self.last_t).as_secs_f64(),
            bytes_sent: c.sent() - self.last.sent(),
            bytes_received: c.received() - self.last.received(),
            transactions: c.transactions() - self.last.transactions(),
            p99_us,
        };
        sink.interval(self.role, &s);
        self.samples.push(s);
        self.last = c;
        self.last_t = now;
    }

    /// Closes the window now and returns what this end measured.
    pub fn close(
        mut self,
        engine: &Engine,
        sink: &mut dyn SampleSink,
        options: Vec<OptionRecord>,
    ) -> EndResult {
        // As at the opening: the counts are those handed over with the
        // latencies, so the transactions are exactly those timed, and the
        // clock is read once they are handed over.
        let timed = engine.collect_latency(None);
        let end_t = Instant::now();
        let end = engine.counts();
        let tail_p99 = self.take_latency(timed.as_ref());
        let queued_end = engine.queued_bytes();
        let host = HostSnapshot::take();
        engine.mark_window_closed();
        let mut tcp_info = engine.tcp_info();
        let tcp_info_summary = plumb_samples::TcpInfoSummary::of(&tcp_info);
        if tcp_info.len() > plumb_samples::TCP_INFO_PER_FLOW_MAX {
            tcp_info.clear();
        }
        let window_s = (end_t - self.opened).as_secs_f64();

        // The last partial interval, when it holds anything worth a sample.
        let tail = (end_t - self.last_t).as_secs_f64();
        if tail > 0.05 || self.samples.is_empty() {
            let s = IntervalSample {
                t_s: window_s,
                dt_s: tail,
                bytes_sent: end.sent() - self.last.sent(),
                bytes_received: end.received() - self.last.received(),
                transactions: end.transactions() - self.last.transactions(),
                p99_us: tail_p99,
            };
            sink.interval(self.role, &s);
            self.samples.push(s);
        }

        let transactional = engine.config().workload.transactional();
        let flows = end
            .flows
            .iter()
            .zip(&self.start.flows)
            .enumerate()
            .map(|(i, (e, s))| FlowTotals {
                flow: i as u32,
                bytes_sent: e.0 - s.0,
                bytes_received: e.1 - s.1,
                transactions: transactional.then(|| {
                    end.transactions.get(i).copied().unwrap_or(0)
                        - self.start.transactions.get(i).copied().unwrap_or(0)
                }),
            })
            .collect();

        let tick = plumb_sys::proc::clock_ticks_per_sec().max(1) as f64;
        // A worker that ended in the window counts as it was when it ended.
        let mut host = host;
        for t in engine.exited_workers() {
            let was = |tasks: &[TaskSnapshot]| tasks.iter().any(|o| o.tid == t.tid);
            if was(&self.host.tasks) && !was(&host.tasks) {
                host.tasks.push(t);
            }
        }
        let (process, path_cpu_s) = process_cpu(&self.host, &host, tick, engine);
        let cpus = cpu_deltas(&self.host.stat, &host.stat, tick);
        let softirqs = softirq_deltas(&self.host.softirqs, &host.softirqs);
        let counters = counter_deltas(&self.host.net, &host.net);

        EndResult {
            role: self.role,
            hostname: plumb_sys::proc::hostname(),
            kernel: plumb_sys::proc::kernel_release(),
            online_cpus: plumb_sys::proc::online_cpus()
                .map(|c| c.len() as u32)
                .unwrap_or(0),
            threads: engine.threads(),
            pinned_cpus: engine.config().cpus.as_ref().map(|c| c.to_string()),
            window_s,
            bytes_sent: end.sent() - self.start.sent(),
            bytes_received: end.received() - self.start.received(),
            queued_start_bytes: self.queued_start,
            queued_end_bytes: queued_end,
            intervals: self.samples,
            flows,
            process,
            cpus,
            softirqs,
            counters,
            tcp_info,
            tcp_info_summary,
            socket_options: options,
            warnings: Vec::new(),
            lost: false,
            build: plumb_sys::build().map(str::to_string),
            transactions: end.transactions() - self.start.transactions(),
            latency: self
                .latency
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(crate::latency::summarize),
            udp: engine.config().udp().map(|_| {
                let (a, b) = (&self.start.udp, &end.udp);
                plumb_samples::UdpTotals {
                    packets_sent: b.packets_sent - a.packets_sent,
                    packets_received: b.packets_received - a.packets_received,
                    lost: b.lost.saturating_sub(a.lost),
                    reordered: b.reordered - a.reordered,
                    queued_at_close: engine.settled(),
                    timeouts: b.timeouts - a.timeouts,
                    late_responses: b.late_responses - a.late_responses,
                    strays: b.strays - a.strays,
                    // Marked only inside the sender's window, so the totals
                    // are the window's; the receiver's include what came
                    // before its own window opened.
                    window_sent: b.window_sent,
                    window_received: b.window_received,
                }
            }),
            zerocopy: None,
            rx_zerocopy: None,
            irq_time_accounting: plumb_sys::proc::irq_time_accounting(),
            softnet: softnet_deltas(&self.host.softnet, &host.softnet),
            interfaces: interface_deltas(&self.host, &host),
            path_cpu_s,
            profile: None,
        }
    }
}

/// The scheduler's accounting of one thread over the window, where the
/// kernel keeps it at both ends of the window.
fn sched_delta(a: Option<&TaskSnapshot>, b: &TaskSnapshot) -> Option<SchedTimes> {
    let (s0, s1) = match a {
        Some(a) => (a.schedstat?, b.schedstat?),
        // A thread born in the window: all of its accounting is in it.
        None => (Default::default(), b.schedstat?),
    };
    let ns = |x: u64, y: u64| x.saturating_sub(y) as f64 / 1e9;
    Some(SchedTimes {
        run_s: ns(s1.run_ns, s0.run_ns),
        wait_s: ns(s1.wait_ns, s0.wait_ns),
        timeslices: s1.timeslices.saturating_sub(s0.timeslices),
        migrations: match a {
            Some(a) => a
                .migrations
                .zip(b.migrations)
                .map(|(x, y)| y.saturating_sub(x)),
            None => b.migrations,
        },
    })
}

/// The process's CPU over the window, and apart from it the delay line's
/// when this process runs one.
fn process_cpu(
    a: &HostSnapshot,
    b: &HostSnapshot,
    tick: f64,
    engine: &Engine,
) -> (ProcessCpu, Option<f64>) {
    let ns = |x: u64| x as f64 / 1e9;
    let threads: Vec<ThreadCpu> = b
        .tasks
        .iter()
        .map(|t| {
            let before = a.tasks.iter().find(|o| o.tid == t.tid);
            let (u0, s0, v0, i0) = before
                .map(|o| {
                    (
                        o.utime_ticks,
                        o.stime_ticks,
                        o.voluntary_csw,
                        o.involuntary_csw,
                    )
                })
                .unwrap_or_default();
            ThreadCpu {
                tid: t.tid,
                name: t.name.clone(),
                user_s: t.utime_ticks.saturating_sub(u0) as f64 / tick,
                system_s: t.stime_ticks.saturating_sub(s0) as f64 / tick,
                voluntary_csw: t.voluntary_csw.saturating_sub(v0),
                involuntary_csw: t.involuntary_csw.saturating_sub(i0),
                cpus_allowed: t.cpus_allowed_list.clone(),
                last_cpu: t.last_cpu,
                sched: sched_delta(before, t),
            }
        })
        .collect();
    // The delay line's thread is the path, not this end: its time is set
    // apart (at the threads' tick resolution, against the process's
    // nanoseconds).
    let (path, threads): (Vec<ThreadCpu>, Vec<ThreadCpu>) =
        threads.into_iter().partition(|t| t.name == PATH_THREAD);
    let path_user: f64 = path.iter().map(|t| t.user_s).sum();
    let path_system: f64 = path.iter().map(|t| t.system_s).sum();
    // Every other thread counts towards the process; only the workers and
    // the threads that used CPU are listed.
    let sched = SchedTimes::sum(threads.iter().filter_map(|t| t.sched.as_ref()));
    let threads = threads
        .into_iter()
        .filter(|t| t.name.starts_with(engine.worker_name_prefix()) || t.user_s + t.system_s > 0.0)
        .collect();
    let cpu = ProcessCpu {
        pid: std::process::id(),
        user_s: (ns(b.rusage.user_ns.saturating_sub(a.rusage.user_ns)) - path_user).max(0.0),
        system_s: (ns(b.rusage.system_ns.saturating_sub(a.rusage.system_ns)) - path_system)
            .max(0.0),
        voluntary_csw: b
            .rusage
            .voluntary_csw
            .saturating_sub(a.rusage.voluntary_csw),
        involuntary_csw: b
            .rusage
            .involuntary_csw
            .saturating_sub(a.rusage.involuntary_csw),
        rss_bytes: plumb_sys::proc::rss_bytes(None).unwrap_or(0),
        threads,
        sched,
    };
    (cpu, (!path.is_empty()).then_some(path_user + path_system))
}

fn cpu_deltas(a: &[StatCpu], b: &[StatCpu], tick: f64) -> Vec<CpuTimes> {
    b.iter()
        .filter_map(|e| {
            let s = a.iter().find(|s| s.cpu == e.cpu)?;
            let d = |x: u64, y: u64| x.saturating_sub(y) as f64 / tick;
            Some(CpuTimes {
                cpu: e.cpu,
                user_s: d(e.user, s.user),
                nice_s: d(e.nice, s.nice),
                system_s: d(e.system, s.system),
                idle_s: d(e.idle, s.idle),
                iowait_s: d(e.iowait, s.iowait),
                irq_s: d(e.irq, s.irq),
                softirq_s: d(e.softirq, s.softirq),
                steal_s: d(e.steal, s.steal),
            })
        })
        .collect()
}

fn softirq_deltas(a: &[SoftirqRow], b: &[SoftirqRow]) -> Vec<SoftirqCounts> {
    b.iter()
        .filter_map(|e| {
            let s = a.iter().find(|s| s.cpu == e.cpu)?;
            Some(SoftirqCounts {
                cpu: e.cpu,
                net_rx: e.net_rx.saturating_sub(s.net_rx),
                net_tx: e.net_tx.saturating_sub(s.net_tx),
            })
        })
        .collect()
}

/// The CPUs whose packet processing moved.
fn softnet_deltas(a: &[SoftnetCounts], b: &[SoftnetCounts]) -> Vec<SoftnetCounts> {
    b.iter()
        .filter_map(|e| Some(e.since(a.iter().find(|s| s.cpu == e.cpu)?)))
        .filter(SoftnetCounts::moved)
        .collect()
}

/// The interfaces whose counters moved: those that carried the test's
/// traffic, and whatever else this namespace sent or received meanwhile.
fn interface_deltas(a: &HostSnapshot, b: &HostSnapshot) -> Vec<InterfaceCounts> {
    b.net_dev
        .iter()
        .filter_map(|e| {
            // An interface that came up in the window counts from zero.
            let before = a.net_dev.iter().find(|s| s.name == e.name);
            let counters = e
                .counters
                .since(&before.map(|s| s.counters).unwrap_or_default());
            if !counters.moved() {
                return None;
            }
            let c = InterfaceCounts {
                name: e.name.clone(),
                counters,
                virtual_device: false,
                irqs: Vec::new(),
                driver_counters: b.driver.get(&e.name).map(|s| s.len() as u32),
                driver: driver_deltas(a.driver.get(&e.name), b.driver.get(&e.name)),
            };
            Some(match plumb_sys::proc::net_device(&e.name) {
                None => InterfaceCounts {
                    virtual_device: true,
                    ..c
                },
                Some(dev) => InterfaceCounts {
                    irqs: irq_deltas(
                        &a.interrupts,
                        &b.interrupts,
                        &plumb_sys::proc::irqs_of(&e.name, &dev, &b.interrupts),
                    ),
                    ..c
                },
            })
        })
        .collect()
}

/// The driver statistics of one interface that moved between two readings
/// (from zero for an interface that came up in the window; a name the
/// driver gives twice is summed).
fn driver_deltas(
    a: Option<&Vec<(String, u64)>>,
    b: Option<&Vec<(String, u64)>>,
) -> BTreeMap<String, i64> {
    let sum = |stats: Option<&Vec<(String, u64)>>| {
        let mut m: BTreeMap<String, i64> = BTreeMap::new();
        for (name, v) in stats.into_iter().flatten() {
            let e = m.entry(name.clone()).or_default();
            *e = e.wrapping_add(*v as i64);
        }
        m
    };
    let Some(b) = b else {
        return BTreeMap::new();
    };
    counter_deltas(&sum(a), &sum(Some(b)))
}

/// The interrupts each CPU took over the window on each of `irqs`, for the
/// IRQs that fired.
fn irq_deltas(a: &Interrupts, b: &Interrupts, irqs: &[u32]) -> Vec<IrqCounts> {
    irqs.iter()
        .filter_map(|irq| {
            let e = b.lines.iter().find(|l| l.irq == *irq)?;
            let s = a.lines.iter().find(|l| l.irq == *irq);
            let cpus: Vec<IrqCpu> = b
                .cpus
                .iter()
                .zip(&e.counts)
                .enumerate()
                .filter_map(|(k, (&cpu, &n))| {
                    let before = s.and_then(|s| s.counts.get(k)).copied().unwrap_or(0);
                    let count = n.saturating_sub(before);
                    (count > 0).then_some(IrqCpu { cpu, count })
                })
                .collect();
            (!cpus.is_empty()).then(|| IrqCounts {
                irq: *irq,
                name: e
                    .desc
                    .split_ascii_whitespace()
                    .last()
                    .unwrap_or_default()
                    .to_string(),
                cpus,
            })
        })
        .collect()
}

/// Only counters that moved are kept: the full set is several hundred names
/// and almost all are still.
fn counter_deltas(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    b.iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(*a.get(k).unwrap_or(&0));
            (d != 0).then(|| (k.clone(), d))
        })
        .collect()
}
