//! plumb's own delay line, for `--topology veth` where the kernel has no
//! netem (or `--emulator plumb`): the two namespaces are joined by a TUN
//! device in each instead of a veth pair, and one thread of the client's
//! process (`plumb-path`, never counted as either end's) moves every packet
//! from one device to the other. Each direction holds its packets until
//! their release time (arrival, the wait behind the link rate, the one-way
//! delay), drops a share of them at the loss rate drawn from a seeded
//! generator, and drops at the tail when the link's queue is full. Packets
//! are neither reordered nor marked: a direction is one FIFO, since every
//! packet waits the same delay behind a link that sends in arrival order.
//!
//! [`Direction`] is the law of one direction, a state machine over times
//! and lengths tested in memory; [`DelayLine`] is its I/O.

use plumb_samples::{Iteration, PathCounts, PathResult};
use plumb_spec::{Spec, Topology};
use plumb_stats::Rng;
use plumb_sys::proc::monotonic_ns;
use plumb_sys::tun::{Tun, MAX_PACKET, VNET_HDR_LEN};
use rustix::event::{epoll, eventfd, EventfdFlags};
use rustix::time::{
    timerfd_create, timerfd_settime, ClockId, Itimerspec, TimerfdClockId, TimerfdFlags,
    TimerfdTimerFlags, Timespec,
};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The name of the delay line's thread: the meter sets its CPU apart from
/// the end's by this name.
pub use plumb_samples::PATH_THREAD;

/// More than this many bytes held in one direction (a path of 100 Gbit/s
/// and 80 ms) is a runaway sender, not a path: its packets are dropped as
/// a full queue would.
const MOST_HELD: u64 = 1 << 30;
/// How long before a release the thread wakes, to wait the rest out on
/// the CPU: more than a timer's usual lateness, little enough that packets
/// arriving meanwhile are not held up long.
const EARLY_NS: u64 = 200_000;
/// Buffers kept for reuse once their packets are written.
const POOL: usize = 4096;
/// A link that carried this share of its rate over the window was full: a
/// sender it holds back keeps its queue from running dry, and the window's
/// edges cost a little.
const LINK_FULL: f64 = 0.9;

/// The warning for an iteration whose delay line was busy nearly all its
/// window, when that may be what bounded the run (`client_device`: the
/// client's end of the path, whose counters carry the line's traffic).
/// None when the spec's link
/// rate is the bound: the line waits out the last EARLY_NS before each
/// release on the CPU, so a full link, whose packets leave closer together
/// than that, keeps it busy however much room it has to spare.
pub fn busy_warning(spec: &Spec, it: &Iteration, client_device: &str) -> Option<String> {
    let cpu = it.client.path_cpu_s.filter(|c| *c >= 0.9 * it.window_s)?;
    let rate = match &spec.topology {
        Some(Topology::Veth(v)) => v.link_rate_bps,
        _ => None,
    };
    // The client's device counts the IP bytes of each way through the line,
    // as the link's law does.
    let carried = it
        .client
        .interfaces
        .iter()
        .find(|i| i.name == client_device)
        .map(|i| i.counters.tx_bytes.max(i.counters.rx_bytes));
    if let (Some(rate), Some(bytes)) = (rate, carried) {
        if bytes as f64 * 8.0 >= LINK_FULL * rate as f64 * it.window_s {
            return None;
        }
    }
    Some(format!(
        "plumb's delay line was busy {:.0} % of the window: the path, not the ends, \
         may bound this run (see BENCHMARKS.md for its ceiling)",
        100.0 * cpu / it.window_s
    ))
}

/// What the path does to every packet, the same each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathLaw {
    pub delay_ns: u64,
    pub loss_ppm: u32,
    /// The bottleneck's rate, in bit/s; None for no bottleneck.
    pub rate_bps: Option<u64>,
    /// The bottleneck's buffer, in bytes: a packet that would find more
    /// than this waiting ahead of it (itself included) is dropped.
    pub queue_bytes: u64,
    pub seed: u64,
}

/// What becomes of an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Written to the other device at this time (ns, CLOCK_MONOTONIC).
    Release(u64),
    Lost,
    QueueFull,
}

/// One direction of the path.
#[derive(Debug)]
pub struct Direction {
    law: PathLaw,
    rng: Rng,
    /// When the bottleneck will have sent everything it took (ns).
    link_free: u64,
    /// Packets waiting, oldest first, with their release times.
    held: VecDeque<(u64, Vec<u8>)>,
    held_bytes: u64,
}

impl Direction {
    /// A direction whose losses are drawn from `seed` (each direction of a
    /// path its own), by the seeded generator the statistics use, so the
    /// same seed drops the same packets on every host.
    pub fn new(law: PathLaw, seed: u64) -> Direction {
        Direction {
            law,
            rng: Rng::new(seed),
            link_free: 0,
            held: VecDeque::new(),
            held_bytes: 0,
        }
    }

    /// The fate of a packet of `len` bytes on the wire arriving at `now`.
    pub fn fate(&mut self, now: u64, len: u64) -> Fate {
        let ppm = self.law.loss_ppm;
        if ppm > 0 && self.rng.below(1_000_000) < ppm as usize {
            return Fate::Lost;
        }
        if self.held_bytes + len > MOST_HELD {
            return Fate::QueueFull;
        }
        let departs = match self.law.rate_bps {
            None => now,
            Some(rate) => {
                let start = self.link_free.max(now);
                // Bytes the link has yet to send when this one arrives.
                let ahead = ((start - now) as u128 * rate as u128 / 8_000_000_000) as u64;
                if ahead + len > self.law.queue_bytes {
                    return Fate::QueueFull;
                }
                let sending = (len as u128 * 8_000_000_000 / rate as u128) as u64;
                self.link_free = start + sending;
                self.link_free
            }
        };
        Fate::Release(departs + self.law.delay_ns)
    }

    fn hold(&mut self, release: u64, packet: Vec<u8>) {
        self.held_bytes += packet.len() as u64;
        self.held.push_back((release, packet));
    }

    /// The oldest packet, when its time has come by `now`.
    fn due(&mut self, now: u64) -> Option<Vec<u8>> {
        if self.held.front()?.0 > now {
            return None;
        }
        let (_, p) = self.held.pop_front()?;
        self.held_bytes -= p.len() as u64;
        Some(p)
    }

    fn next_release(&self) -> Option<u64> {
        self.held.front().map(|(t, _)| *t)
    }
}

/// Counts of one direction, written by the path's thread only.
#[derive(Debug, Default)]
struct Counters {
    packets: AtomicU64,
    bytes: AtomicU64,
    lost: AtomicU64,
    queue_drops: AtomicU64,
    refused: AtomicU64,
}

impl Counters {
    fn read(&self) -> PathCounts {
        PathCounts {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            lost: self.lost.load(Relaxed),
            queue_drops: self.queue_drops.load(Relaxed),
            refused: self.refused.load(Relaxed),
        }
    }
}

/// What one direction's link has taken and not yet finished sending, as
/// a qdisc's backlog: each packet's departure (when the link is done with
/// it, ns) and bytes, oldest first. The path's thread adds to it; it and
/// a reader take off what has left.
#[derive(Debug, Default)]
struct LinkQueue(Mutex<VecDeque<(u64, u64)>>);

impl LinkQueue {
    /// The queue at `now`, what has left by then taken off.
    fn left_by(&self, now: u64) -> std::sync::MutexGuard<'_, VecDeque<(u64, u64)>> {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        while q.front().is_some_and(|&(departs, _)| departs <= now) {
            q.pop_front();
        }
        q
    }

    /// What is still to send at `now`: (bytes, packets).
    fn at(&self, now: u64) -> (u64, u64) {
        let q = self.left_by(now);
        (q.iter().map(|&(_, len)| len).sum(), q.len() as u64)
    }

    /// The link took a packet of `len` bytes at `now`, to send by `departs`.
    fn took(&self, now: u64, departs: u64, len: u64) {
        self.left_by(now).push_back((departs, len));
    }
}

/// The running delay line: its thread, the devices it joins, and how to
/// stop it.
pub struct DelayLine {
    stop: Arc<OwnedFd>,
    thread: Option<JoinHandle<io::Result<f64>>>,
    counts: Arc<[Counters; 2]>,
    queues: Arc<[LinkQueue; 2]>,
    law: PathLaw,
}

impl DelayLine {
    /// Starts moving packets between `client` and `server` (the devices
    /// of the two namespaces) under `law`, on the CPUs of `cpus` when
    /// given.
    pub fn start(
        client: Tun,
        server: Tun,
        law: PathLaw,
        cpus: Option<Vec<u32>>,
    ) -> io::Result<DelayLine> {
        let stop = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        let counts: Arc<[Counters; 2]> = Arc::default();
        let queues: Arc<[LinkQueue; 2]> = Arc::default();
        let (s, c, q) = (stop.clone(), counts.clone(), queues.clone());
        let thread = std::thread::Builder::new()
            .name(PATH_THREAD.to_string())
            .spawn(move || {
                if let Some(cpus) = cpus {
                    plumb_sys::affinity::pin_current_thread_to(&cpus)?;
                }
                forward([client, server], law, &s, &c, &q)
            })?;
        Ok(DelayLine {
            stop,
            thread: Some(thread),
            counts,
            queues,
            law,
        })
    }

    /// The line's link each way as a qdisc would report it, client to
    /// server first: what it sent (as it released it), dropped with its
    /// queue full, and holds to send now. None without a link rate: then
    /// nothing queues.
    pub fn queue_reader(&self) -> Option<plumb_engine::probe::PathReader> {
        self.law.rate_bps?;
        let (counts, queues) = (self.counts.clone(), self.queues.clone());
        Some(Arc::new(move || {
            let now = monotonic_ns();
            (0..2)
                .map(|k| {
                    let c = counts[k].read();
                    let (backlog_bytes, qlen) = queues[k].at(now);
                    Some(plumb_sys::qdisc::QdiscRow {
                        kind: plumb_samples::DELAY_LINE.to_string(),
                        stats: plumb_samples::QdiscStats {
                            bytes: c.bytes,
                            packets: c.packets,
                            drops: c.queue_drops,
                            qlen,
                            backlog_bytes,
                            ..Default::default()
                        },
                        ..Default::default()
                    })
                })
                .collect()
        }))
    }

    /// The counts so far, client to server first.
    pub fn counts(&self) -> [PathCounts; 2] {
        [self.counts[0].read(), self.counts[1].read()]
    }

    /// Stops the thread; what it did over its life.
    pub fn stop(mut self) -> Result<PathResult, String> {
        self.finish()
    }

    fn finish(&mut self) -> Result<PathResult, String> {
        let Some(thread) = self.thread.take() else {
            return Err("the delay line was stopped already".into());
        };
        let _ = rustix::io::write(&*self.stop, &1u64.to_ne_bytes());
        let cpu_s = match thread.join() {
            Ok(Ok(cpu)) => cpu,
            Ok(Err(e)) => return Err(format!("the delay line failed: {e}")),
            Err(_) => return Err("the delay line's thread panicked".into()),
        };
        let [to_server, to_client] = self.counts();
        Ok(PathResult {
            emulator: "plumb".into(),
            seed: Some(self.law.seed),
            cpu_s: Some(cpu_s),
            to_server: Some(to_server),
            to_client: Some(to_client),
        })
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}

/// The thread: reads whatever either device has, holds it, writes what is
/// due, and sleeps on a timer set to the next release. Returns its own CPU
/// seconds.
fn forward(
    tuns: [Tun; 2],
    law: PathLaw,
    stop: &OwnedFd,
    counts: &[Counters; 2],
    queues: &[LinkQueue; 2],
) -> io::Result<f64> {
    const STOP: u64 = 2;
    const TIMER: u64 = 3;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    for (k, t) in tuns.iter().enumerate() {
        epoll::add(
            &ep,
            t.as_fd(),
            epoll::EventData::new_u64(k as u64),
            epoll::EventFlags::IN,
        )?;
    }
    epoll::add(
        &ep,
        stop,
        epoll::EventData::new_u64(STOP),
        epoll::EventFlags::IN,
    )?;
    let timer = timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
    )?;
    epoll::add(
        &ep,
        &timer,
        epoll::EventData::new_u64(TIMER),
        epoll::EventFlags::IN,
    )?;
    // Each direction its own draws, so that the two do not share losses.
    let mut dirs = [
        Direction::new(law, law.seed),
        Direction::new(law, law.seed ^ 0x9e37_79b9_7f4a_7c15),
    ];
    let mut scratch = vec![0u8; MAX_PACKET];
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(8);
    let mut armed: Option<u64> = None;
    loop {
        events.clear();
        match epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let mut ready = [false; 2];
        for ev in &events {
            match ev.data.u64() {
                STOP => {
                    let t = rustix::time::clock_gettime(ClockId::ThreadCPUTime);
                    return Ok(t.tv_sec as f64 + t.tv_nsec as f64 / 1e9);
                }
                TIMER => {
                    let mut b = [0u8; 8];
                    let _ = rustix::io::read(&timer, &mut b);
                    armed = None;
                }
                k => ready[k as usize] = true,
            }
        }
        for k in 0..2 {
            // A bounded burst per device, so that one busy direction does
            // not starve the other's releases.
            for _ in 0..256 {
                if !ready[k] {
                    break;
                }
                let n = match tuns[k].read(&mut scratch) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                let wire = n.saturating_sub(VNET_HDR_LEN) as u64;
                let c = &counts[k];
                let now = monotonic_ns();
                match dirs[k].fate(now, wire) {
                    Fate::Lost => {
                        c.lost.fetch_add(1, Relaxed);
                    }
                    Fate::QueueFull => {
                        c.queue_drops.fetch_add(1, Relaxed);
                    }
                    Fate::Release(at) => {
                        if law.rate_bps.is_some() {
                            queues[k].took(now, at - law.delay_ns, wire);
                        }
                        let mut p = pool.pop().unwrap_or_default();
                        p.clear();
                        p.extend_from_slice(&scratch[..n]);
                        dirs[k].hold(at, p);
                    }
                }
            }
        }
        let mut now = monotonic_ns();
        // The timer wakes this thread EARLY before a release: a wake-up is
        // late by tens to hundreds of microseconds on a busy host, so the
        // last stretch is waited out here instead.
        while let Some(next) = dirs.iter().filter_map(Direction::next_release).min() {
            if next <= now || next - now > EARLY_NS {
                break;
            }
            std::hint::spin_loop();
            now = monotonic_ns();
        }
        for k in 0..2 {
            while let Some(p) = dirs[k].due(now) {
                let c = &counts[k];
                // A write fails only while the far device is not up: a
                // packet sent as the first device came up, before the
                // second did, or one as the run ends.
                match tuns[1 - k].write(&p) {
                    Ok(_) => {
                        c.packets.fetch_add(1, Relaxed);
                        c.bytes
                            .fetch_add(p.len().saturating_sub(VNET_HDR_LEN) as u64, Relaxed);
                    }
                    Err(_) => {
                        c.refused.fetch_add(1, Relaxed);
                    }
                }
                if pool.len() < POOL {
                    pool.push(p);
                }
            }
        }
        let next = dirs.iter().filter_map(Direction::next_release).min();
        if next != armed {
            if let Some(at) = next {
                let at = at.saturating_sub(EARLY_NS);
                let when = Timespec {
                    tv_sec: (at / 1_000_000_000) as _,
                    tv_nsec: (at % 1_000_000_000) as _,
                };
                let zero = Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                timerfd_settime(
                    &timer,
                    TimerfdTimerFlags::ABSTIME,
                    &Itimerspec {
                        it_interval: zero,
                        it_value: when,
                    },
                )?;
            }
            armed = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn law(delay_ns: u64, loss_ppm: u32, rate_bps: Option<u64>, queue_bytes: u64) -> PathLaw {
        PathLaw {
            delay_ns,
            loss_ppm,
            rate_bps,
            queue_bytes,
            seed: 7,
        }
    }

    #[test]
    fn a_packet_waits_the_delay_and_nothing_else_without_a_link_rate() {
        let mut d = Direction::new(law(5_000_000, 0, None, 0), 1);
        assert_eq!(d.fate(100, 1500), Fate::Release(5_000_100));
        assert_eq!(d.fate(100, 65_000), Fate::Release(5_000_100));
    }

    #[test]
    fn a_link_sends_in_turn_at_its_rate_and_drops_at_the_tail_of_a_full_queue() {
        // 1 Gbit/s: 1500 bytes take 12 us; a queue of 3000 bytes.
        let mut d = Direction::new(law(1_000, 0, Some(1_000_000_000), 3000), 1);
        assert_eq!(d.fate(0, 1500), Fate::Release(12_000 + 1_000));
        assert_eq!(d.fate(0, 1500), Fate::Release(24_000 + 1_000));
        // 3000 bytes still to send when the third arrives: no room.
        assert_eq!(d.fate(0, 1500), Fate::QueueFull);
        // Half of one sent: 750 + 1500 ahead with it, room again.
        assert_eq!(d.fate(18_000, 750), Fate::Release(30_000 + 1_000));
        // An idle link starts at once.
        assert_eq!(d.fate(1_000_000, 1500), Fate::Release(1_012_000 + 1_000));
    }

    #[test]
    fn losses_are_a_binomial_share_and_the_seed_repeats_them() {
        let n = 200_000u64;
        let draw = |seed| {
            let mut d = Direction::new(law(0, 10_000, None, 0), seed);
            (0..n)
                .map(|t| d.fate(t, 100) == Fate::Lost)
                .collect::<Vec<_>>()
        };
        let a = draw(3);
        let lost = a.iter().filter(|&&l| l).count() as f64;
        // 1 %: mean 2000, sd about 44.5; 5 sd either way.
        assert!((lost - 2000.0).abs() < 5.0 * 44.5, "{lost}");
        assert_eq!(a, draw(3));
        assert_ne!(a, draw(4));
    }

    #[test]
    fn a_busy_line_warns_unless_the_link_rate_it_was_asked_for_is_full() {
        use crate::topology::CLIENT_IF;
        use plumb_samples::{EndResult, InterfaceCounts, Role};
        use plumb_spec::Veth;
        // 1 s window; the client's device carried `tx` bytes toward the
        // server, and the line's thread ran `cpu` seconds of it.
        let iteration = |cpu: f64, tx: u64| {
            let mut client = EndResult::empty(Role::Client, 1);
            client.path_cpu_s = Some(cpu);
            let mut dev = InterfaceCounts {
                name: CLIENT_IF.into(),
                ..Default::default()
            };
            dev.counters.tx_bytes = tx;
            client.interfaces.push(dev);
            Iteration {
                index: 0,
                complete: true,
                warmup_s: 0.0,
                window_s: 1.0,
                transfer: Default::default(),
                derived: Default::default(),
                client,
                server: EndResult::empty(Role::Server, 1),
                parts: Vec::new(),
                responsiveness: Vec::new(),
            }
        };
        let spec = |link_rate_bps| {
            let mut s = Spec::stream();
            s.topology = Some(Topology::Veth(Veth {
                link_rate_bps,
                ..Veth::default()
            }));
            s
        };
        let gbit = Some(1_000_000_000);
        // 1 Gbit/s asked and 0.95 of it carried: the link is the bound.
        assert_eq!(
            busy_warning(&spec(gbit), &iteration(0.99, 118_750_000), CLIENT_IF),
            None
        );
        // Half of it carried: something else held the run back.
        let w = busy_warning(&spec(gbit), &iteration(0.99, 62_500_000), CLIENT_IF).unwrap();
        assert!(w.contains("busy 99 %") && w.contains("may bound"), "{w}");
        // No link rate: a busy line may be the bound whatever it carried.
        assert!(busy_warning(&spec(None), &iteration(0.99, 118_750_000), CLIENT_IF).is_some());
        // A line with time to spare says nothing.
        assert_eq!(
            busy_warning(&spec(None), &iteration(0.5, 0), CLIENT_IF),
            None
        );
    }

    /// The link's queue as a qdisc's backlog: a packet counts from when
    /// the link takes it until it has left, whoever reads.
    #[test]
    fn the_links_queue_holds_each_packet_until_it_has_left() {
        let q = LinkQueue::default();
        assert_eq!(q.at(0), (0, 0));
        q.took(0, 100, 1500);
        q.took(10, 200, 1000);
        assert_eq!(q.at(50), (2500, 2));
        assert_eq!(q.at(100), (1000, 1), "the first has left at 100");
        q.took(150, 300, 500);
        assert_eq!(q.at(199), (1500, 2));
        assert_eq!(q.at(300), (0, 0));
    }

    #[test]
    fn held_packets_leave_in_order_when_due() {
        let mut d = Direction::new(law(10, 0, None, 0), 1);
        for (t, b) in [(0u64, 1u8), (5, 2), (6, 3)] {
            let Fate::Release(at) = d.fate(t, 1) else {
                panic!()
            };
            d.hold(at, vec![b]);
        }
        assert_eq!(d.next_release(), Some(10));
        assert_eq!(d.due(9), None);
        assert_eq!(d.due(15), Some(vec![1]));
        assert_eq!(d.due(15), Some(vec![2]));
        assert_eq!(d.due(15), None);
        assert_eq!(d.due(16), Some(vec![3]));
        assert_eq!(d.held_bytes, 0);
    }
}
