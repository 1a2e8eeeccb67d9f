//! Transaction latency: one HDR histogram per worker thread. A worker records
//! into a histogram only it touches; once per interval the meter bumps an
//! epoch and each worker adds what it recorded into its slot, which the meter
//! then takes. The slot's lock is taken once per interval, never per
//! transaction.

use hdrhistogram::Histogram;
use plumb_samples::Latency;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Nanoseconds, 3 significant digits, up to an hour.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Histograms of one-way delay: to the server, then back to the client.
pub type Ways = [Histogram<u64>; 2];

/// Empty [`Ways`].
pub(crate) fn new_ways() -> Box<Ways> {
    Box::new([new_histogram(), new_histogram()])
}

/// Adds `from` into `into`, made where there is none yet.
pub(crate) fn add_ways(into: &mut Option<Box<Ways>>, from: &Ways) {
    let into = into.get_or_insert_with(new_ways);
    for (h, f) in into.iter_mut().zip(from) {
        let _ = h.add(f);
    }
}

/// One worker's hand-over: its latencies, when its end times transactions,
/// and the epoch it last handed its counts over in.
pub(crate) struct LatencySlot {
    pub hist: Mutex<Histogram<u64>>,
    /// The last epoch this worker has flushed for; [`FINAL`] once it has
    /// flushed for the last time.
    pub seen: AtomicU64,
    /// Messages the worker took off its queue just before its last
    /// hand-over (see [`crate::flow::Handler::settle`]).
    pub settled: AtomicU64,
    /// Each transaction's planned time and latency, where the end keeps
    /// them (see [`crate::Timed`]).
    pub each: Mutex<Vec<[u64; 2]>>,
    /// The two ways of the latencies that have them (see
    /// [`Ways`]), made with the first handed over.
    pub ways: Mutex<Option<Box<Ways>>>,
}

/// The epoch a worker's last flush marks its slot with: caught up with any.
pub(crate) const FINAL: u64 = u64::MAX;

impl LatencySlot {
    pub fn new() -> LatencySlot {
        LatencySlot {
            hist: Mutex::new(new_histogram()),
            seen: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            each: Mutex::new(Vec::new()),
            ways: Mutex::new(None),
        }
    }

    /// Called by the worker: hands its counts over (`counts`) and moves
    /// its local histogram (if it times anything) and the transactions it
    /// keeps one by one into the slot, all under the slot's lock, which the
    /// engine holds as it reads them (see [`crate::Engine::hand_over`]),
    /// and marks the epoch handed over.
    pub fn flush(
        &self,
        counts: impl FnOnce(),
        local: Option<&mut Histogram<u64>>,
        each: &mut Vec<[u64; 2]>,
        ways: Option<&mut Ways>,
        epoch: u64,
        settled: u64,
    ) {
        let mut h = self.hist.lock().unwrap_or_else(|e| e.into_inner());
        counts();
        if let Some(local) = local.filter(|l| !l.is_empty()) {
            let _ = h.add(&*local);
            local.reset();
        }
        if !each.is_empty() {
            (self.each.lock().unwrap_or_else(|e| e.into_inner())).append(each);
        }
        if let Some(local) = ways.filter(|w| !w[0].is_empty()) {
            add_ways(
                &mut self.ways.lock().unwrap_or_else(|e| e.into_inner()),
                local,
            );
            local.iter_mut().for_each(Histogram::reset);
        }
        self.settled.store(settled, Ordering::Relaxed);
        drop(h);
        self.seen.store(epoch, Ordering::Release);
    }
}

/// Whether a worker's slot has caught up with the engine's epoch.
pub(crate) fn caught_up(slot: &LatencySlot, epoch: u64) -> bool {
    slot.seen.load(Ordering::Acquire) >= epoch
}

/// The summary `plumb` reports, from a histogram of nanoseconds.
pub fn summarize(h: &Histogram<u64>) -> Latency {
    let us = |ns: u64| ns as f64 / 1000.0;
    Latency {
        count: h.len(),
        mean_us: h.mean() / 1000.0,
        min_us: us(h.min()),
        p50_us: us(h.value_at_quantile(0.50)),
        p90_us: us(h.value_at_quantile(0.90)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        p9999_us: us(h.value_at_quantile(0.9999)),
        max_us: us(h.max()),
        buckets: buckets(h),
    }
}

/// `[value_ns, count]` of each bucket that holds any, the value the
/// highest of the bucket.
pub fn buckets(h: &Histogram<u64>) -> Vec<[u64; 2]> {
    h.iter_recorded()
        .map(|v| {
            [
                h.highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            ]
        })
        .collect()
}

/// Rebuilds a histogram from the buckets of a [`Latency`], e.g. to merge the
/// iterations of a run.
pub fn from_buckets(l: &Latency) -> Histogram<u64> {
    let mut h = new_histogram();
    for [v, n] in &l.buckets {
        let _ = h.record_n(*v, *n);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Percentiles against sorting the same values: within the histogram's
    /// 3 significant digits.
    #[test]
    fn percentiles_match_a_brute_force_computation() {
        let mut values: Vec<u64> = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // A long-tailed mix: mostly ~20 us, some ~40 ms stalls.
            let v = if x % 100 < 3 {
                40_000_000 + x % 2_000_000
            } else {
                15_000 + x % 10_000
            };
            values.push(v);
        }
        let mut h = new_histogram();
        for &v in &values {
            h.record(v).unwrap();
        }
        let l = summarize(&h);
        values.sort_unstable();
        let exact = |q: f64| {
            let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
            values[rank - 1] as f64 / 1000.0
        };
        for (q, got) in [
            (0.5, l.p50_us),
            (0.9, l.p90_us),
            (0.99, l.p99_us),
            (0.999, l.p999_us),
            (0.9999, l.p9999_us),
        ] {
            let want = exact(q);
            assert!(
                (got - want).abs() <= want * 0.001 + 0.001,
                "q {q}: histogram {got} us, exact {want} us"
            );
        }
        let mean = values.iter().sum::<u64>() as f64 / values.len() as f64 / 1000.0;
        assert!(
            (l.mean_us - mean).abs() <= mean * 0.001,
            "{} vs {mean}",
            l.mean_us
        );
        assert_eq!(l.count, values.len() as u64);
        let back = summarize(&from_buckets(&l));
        assert_eq!(back.p99_us, l.p99_us);
        assert_eq!(back.count, l.count);
    }
}
