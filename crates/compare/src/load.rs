//! Latency under load on both sides: for each probe of a run of parts and
//! each stretch of its window in which the same loads ran (see
//! `plumb_samples::load`), the probes' median in every iteration, its mean
//! and interval over the iterations, and whether B's lies above (worse) or
//! below A's. The headline of such a run is the probes' rate, which their
//! schedule fixes; this is where two kernels, qdiscs or congestion
//! controls differ.

use crate::limits::{direction, ShareVerdict};
use plumb_samples::load::{medians_ms, probes, stretches, Stretch};
use plumb_samples::Iteration;
use plumb_stats::benjamini_hochberg;
use serde::Serialize;

/// One probe's median in one stretch on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct LoadLine {
    /// `run` for the run's own workload, else the part's name.
    pub probe: String,
    /// The stretch, as side A's first iteration cut it: seconds into the
    /// window and the loads that ran ("nothing" where none did).
    pub seconds: String,
    pub running: String,
    pub a: Median,
    pub b: Median,
    /// Fieller's interval of B's mean over A's, which leaves 1 out exactly
    /// where the verdict is `more` or `less` on Welch's test; absent where
    /// that test is (`ratio_hi` infinite, null in JSON, where A's mean is
    /// not told from 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<(f64, f64)>,
    /// Welch's p of the difference; absent with fewer than 2 iterations on
    /// a side or no spread on either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Benjamini-Hochberg's q of `p_value` among the point's lines: a run
    /// of three probes in five stretches asks fifteen questions at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub q_value: Option<f64>,
    pub verdict: LoadVerdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadVerdict {
    /// B's probes waited longer, beyond the test's level among all the
    /// point's lines.
    Higher,
    Lower,
    /// The ratio's interval leaves 1 out, but not once the other lines are
    /// counted (its q is above the level's).
    Unsure,
    NoDifference,
    /// Fewer than 2 iterations on a side.
    TooFew,
}

impl LoadVerdict {
    pub fn name(self) -> &'static str {
        match self {
            LoadVerdict::Higher => "higher",
            LoadVerdict::Lower => "lower",
            LoadVerdict::Unsure => "unsure",
            LoadVerdict::NoDifference => "no difference",
            LoadVerdict::TooFew => "too few",
        }
    }
}

/// The mean over a side's iterations of the probes' median in a stretch,
/// in ms, with its interval, kept at or above 0 as a latency is.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Median {
    pub mean_ms: f64,
    pub lo_ms: f64,
    pub hi_ms: f64,
    pub n: usize,
}

fn median(xs: &[f64], level: f64) -> Median {
    let mean = plumb_stats::mean(xs);
    let (lo, hi) = plumb_stats::t_interval(xs, level).map_or((mean, mean), |i| (i.lo, i.hi));
    Median {
        mean_ms: mean,
        lo_ms: lo.max(0.0),
        hi_ms: hi,
        n: xs.len(),
    }
}

/// The lines of every probe and stretch both sides measured.
pub(crate) fn lines(a: &[&Iteration], b: &[&Iteration], level: f64) -> Vec<LoadLine> {
    let Some(first) = a.first() else {
        return Vec::new();
    };
    let cut = stretches(first);
    let each =
        |its: &[&Iteration]| -> Vec<Vec<Stretch>> { its.iter().map(|it| stretches(it)).collect() };
    let (ea, eb) = (each(a), each(b));
    let mut out = Vec::new();
    for (i, probe) in probes(first).iter().enumerate() {
        for (k, s) in cut.iter().enumerate() {
            let (xa, xb) = (medians_ms(&ea, i, k), medians_ms(&eb, i, k));
            if xa.is_empty() || xb.is_empty() {
                continue;
            }
            let (p_value, verdict) = direction(&xa, &xb, level);
            let verdict = match verdict {
                ShareVerdict::More => LoadVerdict::Higher,
                ShareVerdict::Less => LoadVerdict::Lower,
                ShareVerdict::NoDifference => LoadVerdict::NoDifference,
                ShareVerdict::TooFew => LoadVerdict::TooFew,
            };
            out.push(LoadLine {
                probe: probe.name().to_string(),
                seconds: format!("{:.1}-{:.1}", s.start_s, s.stop_s),
                running: s.running_label(),
                a: median(&xa, level),
                b: median(&xb, level),
                ratio: plumb_stats::fieller_ratio(&xa, &xb, level).map(|r| (r.lo, r.hi)),
                p_value,
                q_value: None,
                verdict,
            });
        }
    }
    corrected(&mut out, level);
    out
}

/// The lines a p was tested for are one family: each gets its q, and a
/// difference told by its own p but not by its q is unsure.
fn corrected(lines: &mut [LoadLine], level: f64) {
    let tested: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].p_value.is_some())
        .collect();
    let ps: Vec<f64> = tested.iter().filter_map(|&i| lines[i].p_value).collect();
    for (&i, q) in tested.iter().zip(benjamini_hochberg(&ps)) {
        let l = &mut lines[i];
        l.q_value = Some(q);
        if matches!(l.verdict, LoadVerdict::Higher | LoadVerdict::Lower) && q >= 1.0 - level {
            l.verdict = LoadVerdict::Unsure;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use plumb_samples::IntervalSample;

    /// Four seconds of probes, a load in the middle two, the probes
    /// waiting `loaded_ms` while it ran (give or take `jitter_ms`) and
    /// 0.1 ms otherwise.
    pub(crate) fn loaded(loaded_ms: f64, jitter_ms: f64) -> Iteration {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        // The run's own workload is paced transactions.
        it.derived.tps = Some(20.0);
        it.client.window_s = 4.0;
        it.client.intervals = (1..=4)
            .map(|s| IntervalSample {
                t_s: s as f64,
                dt_s: 1.0,
                buckets: vec![[
                    if s == 2 || s == 3 {
                        ((loaded_ms + jitter_ms * s as f64) * 1e6) as u64
                    } else {
                        100_000
                    },
                    20,
                ]],
                ..Default::default()
            })
            .collect();
        it.parts = vec![plumb_samples::testing::part(&it, "download", 1.0, 2.0)];
        it
    }

    #[test]
    fn a_deeper_queue_under_load_is_more_latency_and_idle_is_the_same() {
        let a: Vec<Iteration> = [0.0, 0.5, 1.0].map(|j| loaded(10.0, j)).to_vec();
        let b: Vec<Iteration> = [0.0, 0.5, 1.0].map(|j| loaded(80.0, j)).to_vec();
        let (ra, rb): (Vec<&Iteration>, Vec<&Iteration>) = (a.iter().collect(), b.iter().collect());
        let l = lines(&ra, &rb, 0.95);
        let cut: Vec<(&str, &str, &str)> = l
            .iter()
            .map(|x| (x.probe.as_str(), x.seconds.as_str(), x.running.as_str()))
            .collect();
        assert_eq!(
            cut,
            [
                ("run", "0.0-1.0", "nothing"),
                ("run", "1.0-3.0", "download"),
                ("run", "3.0-4.0", "nothing"),
            ]
        );
        assert_eq!(l[1].verdict, LoadVerdict::Higher, "{:?}", l[1]);
        let (lo, hi) = l[1].ratio.unwrap();
        assert!(lo > 1.0 && lo < 8.0 && hi > 8.0, "{:?}", l[1]);
        assert!(l[1].a.mean_ms < 12.0 && l[1].b.mean_ms > 80.0, "{:?}", l[1]);
        assert!(l[1].a.lo_ms >= 0.0 && l[1].a.lo_ms <= l[1].a.mean_ms);
        // Idle, the probes waited alike: no spread, same means.
        assert_eq!(l[0].verdict, LoadVerdict::NoDifference, "{:?}", l[0]);
        // The other way round, lower; one iteration a side, too few.
        assert_eq!(lines(&rb, &ra, 0.95)[1].verdict, LoadVerdict::Lower);
        assert_eq!(lines(&ra[..1], &rb, 0.95)[1].verdict, LoadVerdict::TooFew);
        // A difference its own p tells but its q among the lines does not
        // is unsure (its interval still leaves 1 out); one both tell stays.
        let mut two = vec![l[1].clone(), l[1].clone(), l[1].clone()];
        for (line, p) in two.iter_mut().zip([0.04, 0.001, 0.9]) {
            line.p_value = Some(p);
        }
        two[2].verdict = LoadVerdict::NoDifference;
        corrected(&mut two, 0.95);
        let got: Vec<(LoadVerdict, f64)> = two
            .iter()
            .map(|x| (x.verdict, x.q_value.unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (LoadVerdict::Unsure, 0.06),
                (LoadVerdict::Higher, 0.003),
                (LoadVerdict::NoDifference, 0.9)
            ]
        );
        // A run without loads has no stretches, and no lines.
        let mut plain = a[0].clone();
        plain.parts.clear();
        assert!(lines(&[&plain], &[&plain], 0.95).is_empty());
    }
}
