//! The measurement window of one end. Opening it snapshots the flow counters
//! first (closest to the moment the peer is told), then reads each probe
//! (the kernel's event sources, `probe.rs`); closing it does the same and
//! turns the differences into an [`EndResult`]. Between the edges it yields
//! one [`IntervalSample`] per tick.

use crate::probe::Probe;
use crate::{Counts, Engine, Timed};
use plumb_samples::{EndResult, FlowTotals, IntervalSample, OptionRecord, Role};
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
    /// A second of part `part` of a run of parts, its time counted from the
    /// run's window as the main part's is.
    fn part_interval(&mut self, _part: &str, _role: Role, _sample: &IntervalSample) {}
}

/// The sink of a part's seconds: each goes on to `inner` named by the part
/// and placed on the run's window, the part having started `offset_s` into
/// it.
pub struct PartSink<'a> {
    pub part: &'a str,
    pub offset_s: f64,
    pub inner: &'a mut dyn SampleSink,
}

impl SampleSink for PartSink<'_> {
    fn interval(&mut self, role: Role, sample: &IntervalSample) {
        let placed = IntervalSample {
            t_s: sample.t_s + self.offset_s,
            ..sample.clone()
        };
        self.inner.part_interval(self.part, role, &placed);
    }
}

/// A sink that drops everything.
pub struct NoSink;
impl SampleSink for NoSink {
    fn interval(&mut self, _: Role, _: &IntervalSample) {}
}

/// An open measurement window on one end.
pub struct Meter {
    role: Role,
    opened: Instant,
    start: Counts,
    queued_start: u64,
    probes: Vec<Box<dyn Probe>>,
    last_t: Instant,
    last: Counts,
    samples: Vec<IntervalSample>,
    /// Latencies of the window so far, when this end times transactions.
    latency: Option<hdrhistogram::Histogram<u64>>,
    /// Whether each interval keeps its latencies' buckets: an open loop's
    /// paced transactions are few.
    interval_buckets: bool,
}

impl Meter {
    /// Opens the window now, reading `probes` at its edges.
    pub fn open(engine: &Engine, probes: Vec<Box<dyn Probe>>) -> Meter {
        Meter::open_inner(engine, probes, None)
    }

    /// Opens the window of an engine that started at `started`, inside
    /// the run's window (a part that starts later): all it did is inside,
    /// so its counts, timings and clock run from its start, and what the
    /// flows wrote before the edge below is counted as sent.
    pub fn open_from_start(
        engine: &Engine,
        probes: Vec<Box<dyn Probe>>,
        started: Instant,
    ) -> Meter {
        Meter::open_inner(engine, probes, Some(started))
    }

    fn open_inner(
        engine: &Engine,
        mut probes: Vec<Box<dyn Probe>>,
        started: Option<Instant>,
    ) -> Meter {
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
        let crate::HandOver {
            timed,
            counts: mut start,
            at: opened,
        } = engine.hand_over(None);
        let mut queued_start = engine.queued_bytes();
        // A part's start: what it timed before this edge is the window's,
        // in no interval's buckets, and so in no interval's transactions
        // kept one by one either.
        let (opened, latency) = match started {
            None => (opened, timed.map(|_| crate::latency::new_histogram())),
            Some(at) => {
                start = start.zeroed();
                queued_start = 0;
                (at, timed.map(|t| t.hist))
            }
        };
        for p in &mut probes {
            p.open(engine);
        }
        Meter {
            role: engine.config().role,
            opened,
            last_t: opened,
            last: start.clone(),
            start,
            queued_start,
            probes,
            samples: Vec::new(),
            latency,
            interval_buckets: engine.config().open_loop(),
        }
    }

    /// Moves the latencies recorded since the last call into the window's
    /// histogram and gives the interval's part of a sample: their 99th
    /// percentile in microseconds, and its buckets and transactions one by
    /// one where it keeps them.
    fn take_latency(&mut self, engine: &Engine, timed: Option<Timed>) -> Taken {
        let (Some(window), Some(t)) = (self.latency.as_mut(), timed) else {
            return Taken::default();
        };
        let _ = window.add(&t.hist);
        let each = since(engine, self.opened, &t.each);
        if t.hist.is_empty() {
            return Taken {
                each,
                ..Taken::default()
            };
        }
        let keep = |h: &hdrhistogram::Histogram<u64>| match self.interval_buckets {
            true => crate::latency::buckets(h),
            false => Vec::new(),
        };
        let [to_server, to_client] = match t.ways.as_deref() {
            Some([up, down]) => [keep(up), keep(down)],
            None => [Vec::new(), Vec::new()],
        };
        Taken {
            p99_us: Some(t.hist.value_at_quantile(0.99) as f64 / 1000.0),
            buckets: keep(&t.hist),
            each,
            to_server,
            to_client,
        }
    }

    /// The interval from the last sample to `now`, in which the counts
    /// went from the last sample's to `c` and the workers timed `taken`,
    /// with what the probes keep interval by interval.
    fn interval(
        &mut self,
        engine: &Engine,
        now: Instant,
        c: &Counts,
        taken: Taken,
    ) -> IntervalSample {
        let mut s = IntervalSample {
            t_s: (now - self.opened).as_secs_f64(),
            dt_s: (now - self.last_t).as_secs_f64(),
            bytes_sent: c.sent() - self.last.sent(),
            bytes_received: c.received() - self.last.received(),
            transactions: c.transactions() - self.last.transactions(),
            p99_us: taken.p99_us,
            buckets: taken.buckets,
            each: taken.each,
            to_server_buckets: taken.to_server,
            to_client_buckets: taken.to_client,
            timeouts: c.udp.timeouts - self.last.udp.timeouts,
            ..Default::default()
        };
        for p in &mut self.probes {
            p.interval(engine, &mut s);
        }
        s
    }

    pub fn elapsed_s(&self) -> f64 {
        self.opened.elapsed().as_secs_f64()
    }

    /// Closes the current interval and starts the next.
    pub fn tick(&mut self, engine: &Engine, sink: &mut dyn SampleSink) {
        // Latencies first: the transactions counted are those handed over,
        // and the clock is read once they are, as at the opening.
        let crate::HandOver {
            timed,
            counts: c,
            at: now,
        } = engine.hand_over(Some(TICK_WAIT));
        let taken = self.take_latency(engine, timed);
        let s = self.interval(engine, now, &c, taken);
        sink.interval(self.role, &s);
        self.samples.push(s);
        self.last = c;
        self.last_t = now;
    }

    /// Lets the probes read what the peer's teardown would change, as the
    /// window is marked closed (see [`crate::probe::Probe::closing`]).
    pub fn closing(&mut self, engine: &Engine) {
        for p in &mut self.probes {
            p.closing(engine);
        }
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
        let crate::HandOver {
            timed,
            counts: end,
            at: end_t,
        } = engine.hand_over(None);
        for p in &mut self.probes {
            p.window_closed();
        }
        let tail_taken = self.take_latency(engine, timed);
        let queued_end = engine.queued_bytes();
        let window_s = (end_t - self.opened).as_secs_f64();

        // The last partial interval, when it holds anything worth a sample.
        let tail = (end_t - self.last_t).as_secs_f64();
        if tail > 0.05 || self.samples.is_empty() {
            let s = self.interval(engine, end_t, &end, tail_taken);
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

        let mut out = EndResult {
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
            ..EndResult::empty(self.role, engine.threads())
        };
        // The counts are taken: a flow failing from here on is the peer
        // tearing down, however long the probes take to read.
        engine.mark_window_closed();
        for p in &mut self.probes {
            p.close(engine, &mut out);
        }
        out
    }
}

/// An interval's latencies as a sample holds them (see
/// [`Meter::take_latency`]).
#[derive(Default)]
struct Taken {
    p99_us: Option<f64>,
    buckets: Vec<[u64; 2]>,
    each: Vec<[i64; 2]>,
    /// The latencies' ways that have them: to the server, and back.
    to_server: Vec<[u64; 2]>,
    to_client: Vec<[u64; 2]>,
}

/// Transactions kept one by one (planned on the engine's clock), their
/// planned times in ns after `opened`.
fn since(engine: &Engine, opened: Instant, each: &[[u64; 2]]) -> Vec<[i64; 2]> {
    each.iter()
        .map(|&[planned, ns]| {
            let at = engine.instant_of(planned);
            let after = match at.checked_duration_since(opened) {
                Some(d) => d.as_nanos() as i64,
                None => -(opened.duration_since(at).as_nanos() as i64),
            };
            [after, ns as i64]
        })
        .collect()
}
