//! Every ACK of an end's own flows over the window (`--tcp-probe`): the
//! kernel's tcp:tcp_probe, filtered by the server's port as the flows'
//! events are, its raw records read by a thread of its own (`plumb-acks`,
//! so its CPU shows among the end's threads) often enough that the rings
//! do not fill between two reads.

use crate::probe::{own_filter, Probe, Sampler};
use crate::Engine;
use plumb_samples::{AckSamples, EndResult, ACK_SAMPLES_KEPT};
use plumb_sys::trace::{Counter, RawField, RawSampler};
use std::sync::mpsc;
use std::time::Duration;

const TCP_PROBE: &str = "tcp:tcp_probe";

/// The fields read of each record: the smoothed RTT (µs, the kernel's
/// srtt_us already shifted), the congestion window, the peer's window,
/// and the sequence numbers whose difference is the data in flight.
const FIELDS: [&str; 5] = ["srtt", "snd_cwnd", "snd_wnd", "snd_nxt", "snd_una"];

/// Pages of each CPU's ring: 1 MiB, about 9000 records, read every
/// [`READ_EVERY`]: room for 450000 ACKs a second on each CPU.
const RING_PAGES: usize = 256;
const READ_EVERY: Duration = Duration::from_millis(20);

/// The event opened for an end's flows, not yet read.
pub struct Opened {
    filter: String,
    counter: Counter,
    sampler: RawSampler,
    fields: Vec<RawField>,
}

/// Opens tcp:tcp_probe for `engine`'s own flows, before the window; or
/// says why it cannot be, naming the flag.
pub fn open(engine: &Engine) -> Result<Opened, String> {
    let why = |e: String| format!("--tcp-probe: {e}");
    let port = engine
        .server_port()
        .ok_or_else(|| why("a UDP test has no TCP flows to probe".into()))?;
    let filter = own_filter(engine.config().role, port);
    let cpus = plumb_sys::proc::online_cpus()
        .map(|c| c.cpus().to_vec())
        .map_err(|e| why(format!("the online CPUs: {}", plumb_sys::plain_io(&e))))?;
    let id = plumb_sys::trace::ids(&[TCP_PROBE])
        .remove(0)
        .map_err(|e| why(format!("{TCP_PROBE}: {e}")))?;
    let fields = plumb_sys::trace::raw_fields(TCP_PROBE, &FIELDS).map_err(why)?;
    let refused = |e: std::io::Error| {
        why(format!(
            "{TCP_PROBE}: perf_event_open: {}; run as root (or with CAP_PERFMON)",
            plumb_sys::plain_io(&e)
        ))
    };
    Ok(Opened {
        counter: Counter::filtered(id, &cpus, &filter).map_err(refused)?,
        sampler: RawSampler::filtered(id, &cpus, RING_PAGES, &filter).map_err(refused)?,
        fields,
        filter,
    })
}

/// Why tcp:tcp_probe cannot be read here, naming what to change; None
/// where it can.
pub fn refusal() -> Option<String> {
    crate::probe::refusal(&[TCP_PROBE])
}

/// The probe that reads `opened` over the window.
pub fn probe(opened: Opened) -> Box<dyn Probe> {
    Box::new(AckProbe::Ready(opened))
}

enum AckProbe {
    Ready(Opened),
    Reading {
        reader: Sampler<(Opened, Kept, f64)>,
        counted_at_open: u64,
    },
    Done,
}

impl Probe for AckProbe {
    fn open(&mut self, _: &Engine) {
        let AckProbe::Ready(mut opened) = std::mem::replace(self, AckProbe::Done) else {
            return;
        };
        // What came before the window is not the window's.
        opened.sampler.drain(&mut |_| {});
        let counted_at_open = opened.counter.read().unwrap_or(0);
        let reader = Sampler::start("plumb-acks", move |stop| read_until_stopped(opened, stop));
        if let Some(reader) = reader {
            *self = AckProbe::Reading {
                reader,
                counted_at_open,
            };
        }
    }

    fn window_closed(&mut self) {
        if let AckProbe::Reading { reader, .. } = self {
            reader.halt();
        }
    }

    fn close(&mut self, _: &Engine, out: &mut EndResult) {
        let AckProbe::Reading {
            reader,
            counted_at_open,
        } = std::mem::replace(self, AckProbe::Done)
        else {
            return;
        };
        let Some((opened, kept, sampler_cpu_s)) = reader.stop() else {
            return;
        };
        let counted = opened
            .counter
            .read()
            .unwrap_or(0)
            .saturating_sub(counted_at_open);
        let figure = |i: usize| plumb_samples::spread(kept.rows.iter().map(|r| r[i]).collect());
        out.acks = Some(AckSamples {
            filter: opened.filter.clone(),
            counted,
            read: kept.seen,
            kept: kept.rows.len() as u64,
            srtt_us: figure(0),
            cwnd: figure(1),
            snd_wnd: figure(2),
            in_flight_bytes: figure(3),
            sampler_cpu_s,
        });
        crate::probe::close_later(opened);
    }
}

/// Reads the rings every [`READ_EVERY`] until told to stop, then once
/// more; gives back the event, what it kept and the CPU seconds it cost.
fn read_until_stopped(mut opened: Opened, stop: &mpsc::Receiver<()>) -> (Opened, Kept, f64) {
    let mut kept = Kept::new();
    loop {
        let stopped = !matches!(
            stop.recv_timeout(READ_EVERY),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        let fields = &opened.fields;
        opened.sampler.drain(&mut |raw| {
            let v = |i: usize| fields[i].value(raw).unwrap_or(0) as u32;
            kept.push([
                f64::from(v(0)),
                f64::from(v(1)),
                f64::from(v(2)),
                f64::from(v(3).wrapping_sub(v(4))),
            ]);
        });
        if stopped {
            break;
        }
    }
    let cost = plumb_sys::process::rusage_thread();
    (opened, kept, (cost.user_ns + cost.system_ns) as f64 / 1e9)
}

/// A uniform sample of at most [`ACK_SAMPLES_KEPT`] of the ACKs read
/// (reservoir sampling), so that a long window's distributions cost a
/// bounded memory.
struct Kept {
    seen: u64,
    rows: Vec<[f64; 4]>,
    rng: u64,
}

impl Kept {
    fn new() -> Kept {
        Kept {
            seen: 0,
            rows: Vec::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn push(&mut self, row: [f64; 4]) {
        self.seen += 1;
        if self.rows.len() < ACK_SAMPLES_KEPT {
            self.rows.push(row);
            return;
        }
        // xorshift64: the sample needs no more than a fair draw.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let j = self.rng % self.seen;
        if let Some(slot) = self.rows.get_mut(j as usize) {
            *slot = row;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_sample_is_bounded_and_uniform() {
        let mut k = Kept::new();
        let n = 3 * ACK_SAMPLES_KEPT as u64;
        for i in 0..n {
            k.push([i as f64, 0.0, 0.0, 0.0]);
        }
        assert_eq!(k.seen, n);
        assert_eq!(k.rows.len(), ACK_SAMPLES_KEPT);
        // A uniform sample of 0..n has its median near n / 2, and as many
        // from each third.
        let [_, median, _, max] = plumb_samples::spread(k.rows.iter().map(|r| r[0]).collect());
        assert!((median / n as f64 - 0.5).abs() < 0.02, "{median} of {n}");
        assert!(max > 0.99 * n as f64);
        let first = k.rows.iter().filter(|r| r[0] < n as f64 / 3.0).count();
        let third = ACK_SAMPLES_KEPT / 3;
        assert!(first.abs_diff(third) < third / 20, "{first} of {third}");
    }
}
