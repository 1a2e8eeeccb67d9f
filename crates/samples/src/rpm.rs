//! Responsiveness in round trips per minute (RPM), after
//! draft-ietf-ippm-responsiveness-06, from the probes of a load run (see
//! [`crate::load`]). The draft weighs a working latency of half its
//! "foreign" probes (a TCP handshake, a TLS handshake and an HTTP exchange
//! on new connections, each a round trip, averaged) and half its "self"
//! probes (an HTTP exchange on a loaded connection), each the trimmed mean
//! of its kind, and gives 60000 over it in ms. plumb's foreign probe is
//! the connect probe (crr: a handshake and a 1-byte exchange, two round
//! trips, so half its time is one), without TLS; its self probe is the
//! mark answered on a loaded flow, without HTTP. The figure follows the
//! draft's arithmetic on plumb's own probes: it is not networkQuality's.

use crate::load::{probes, stretches, Stretch, SELF};
use crate::Iteration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the record says of how its responsiveness was had.
pub const METHOD: &str = "draft-ietf-ippm-responsiveness-06's arithmetic on plumb's probes: \
    foreign = half a TCP connect and 1-byte exchange (a round trip), self = a mark answered \
    on a loaded flow; no TLS, no HTTP, so not networkQuality's figure";
/// The part whose probes are the foreign ones (`plumb run load`'s).
const FOREIGN: &str = plumb_spec::load::CONNECT_PROBE;

/// The draft's trimmed mean keeps the lowest 95 % of the values (TMP).
pub const KEPT: f64 = 0.95;
/// Its moving average spans 4 intervals of a second (MAD)...
pub const SPAN: usize = 4;
/// ...and a measurement is stable when the last 4 moving averages lie
/// within 5 % of their mean (SDT, as a standard deviation over the mean).
pub const TOLERANCE: f64 = 0.05;
/// Round trips in one foreign probe: a handshake and an exchange.
pub const FOREIGN_ROUND_TRIPS: f64 = 2.0;

/// One stretch's responsiveness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Responsiveness {
    /// The foreign probes' trimmed mean per round trip, and the self
    /// probes', in ms.
    pub foreign_ms: f64,
    pub self_ms: f64,
    pub rpm: f64,
    pub stability: Stability,
}

/// Whether the draft's stability rule held over the stretch's seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Stability {
    Stable,
    /// The last moving averages spread this much (standard deviation over
    /// mean): the figure moved while it was taken.
    Unstable {
        moved: f64,
    },
    /// Only this many seconds had both kinds of probe; the rule needs
    /// `2 × SPAN - 1` (7).
    TooShort {
        seconds: usize,
    },
}

/// A loaded stretch's responsiveness as the record keeps it, one per
/// stretch of an iteration in which loads ran and both the connect probes
/// and the self probes timed any. How it is had: [`METHOD`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadedResponsiveness {
    /// The stretch, in seconds after the window opened, and the loads
    /// that ran in it.
    pub start_s: f64,
    pub stop_s: f64,
    pub running: Vec<String>,
    #[serde(flatten)]
    pub figure: Responsiveness,
}

/// The responsiveness of a stretch of `it`, from its connect probes and
/// its self probes, where it has both.
pub fn of(it: &Iteration, stretch: &Stretch) -> Option<Responsiveness> {
    let probes = probes(it);
    let index = |name: &str| probes.iter().position(|p| p.name() == name);
    responsiveness(stretch, index(FOREIGN)?, index(SELF)?)
}

/// Every loaded stretch's responsiveness in `it`, as the record keeps it.
pub fn loaded(it: &Iteration) -> Vec<LoadedResponsiveness> {
    (stretches(it).into_iter())
        .filter(|s| !s.running.is_empty())
        .filter_map(|s| {
            Some(LoadedResponsiveness {
                figure: of(it, &s)?,
                start_s: s.start_s,
                stop_s: s.stop_s,
                running: s.running,
            })
        })
        .collect()
}

impl Stability {
    /// How the summary says it.
    pub fn describe(&self) -> String {
        match self {
            Stability::Stable => "stable".into(),
            Stability::Unstable { moved } => format!("unstable, moved {:.0} %", moved * 100.0),
            Stability::TooShort { seconds } => {
                format!("{seconds} s, needs {} to judge", 2 * SPAN - 1)
            }
        }
    }
}

/// The trimmed mean of `[value_ns, count]` buckets in ms: the mean of the
/// lowest [`KEPT`] of the values (at least one).
pub fn trimmed_mean_ms(buckets: &[[u64; 2]]) -> Option<f64> {
    let mut b: Vec<[u64; 2]> = buckets.iter().copied().filter(|b| b[1] > 0).collect();
    b.sort_unstable_by_key(|b| b[0]);
    let count: u64 = b.iter().map(|b| b[1]).sum();
    if count == 0 {
        return None;
    }
    let mut keep = ((count as f64 * KEPT).floor() as u64).max(1);
    let (mut sum, kept) = (0.0, keep);
    for [v, n] in b {
        let take = n.min(keep);
        sum += v as f64 * take as f64;
        keep -= take;
        if keep == 0 {
            break;
        }
    }
    Some(sum / kept as f64 / 1e6)
}

/// The trimmed means of the foreign probes per round trip and of the self
/// probes, in ms.
fn trimmed_ms(foreign: &[[u64; 2]], inside: &[[u64; 2]]) -> Option<(f64, f64)> {
    Some((
        trimmed_mean_ms(foreign)? / FOREIGN_ROUND_TRIPS,
        trimmed_mean_ms(inside)?,
    ))
}

/// The working latency the draft weighs: half a foreign round trip and half
/// a self probe, in ms.
fn working_ms((foreign, inside): (f64, f64)) -> f64 {
    0.5 * foreign + 0.5 * inside
}

/// The responsiveness of `stretch` from its probe `foreign` and its self
/// probe `inside` (indices of [`crate::load::probes`]), where both timed
/// any.
pub fn responsiveness(stretch: &Stretch, foreign: usize, inside: usize) -> Option<Responsiveness> {
    let (f, s) = (stretch.seconds.get(foreign)?, stretch.seconds.get(inside)?);
    let (foreign_ms, self_ms) = trimmed_ms(&f.concat(), &s.concat())?;
    let each: Vec<f64> = f
        .iter()
        .zip(s)
        .filter_map(|(f, s)| trimmed_ms(f, s).map(working_ms))
        .collect();
    Some(Responsiveness {
        foreign_ms,
        self_ms,
        rpm: 60_000.0 / working_ms((foreign_ms, self_ms)),
        stability: stability(&each),
    })
}

/// The draft's rule over each second's working latency: the moving
/// averages of [`SPAN`] seconds, the last [`SPAN`] of them within
/// [`TOLERANCE`] of their mean.
pub fn stability(each: &[f64]) -> Stability {
    if each.len() < 2 * SPAN - 1 {
        return Stability::TooShort {
            seconds: each.len(),
        };
    }
    let moving: Vec<f64> = each
        .windows(SPAN)
        .map(|w| w.iter().sum::<f64>() / SPAN as f64)
        .collect();
    let last = &moving[moving.len() - SPAN..];
    let mean = last.iter().sum::<f64>() / SPAN as f64;
    let var = last.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / SPAN as f64;
    let spread = var.sqrt() / mean;
    if spread <= TOLERANCE {
        Stability::Stable
    } else {
        Stability::Unstable { moved: spread }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trimmed_mean_leaves_out_the_highest_five_percent() {
        // 95 probes of 10 ms and 5 of a second: the seconds go.
        let b = [[10_000_000, 95], [1_000_000_000, 5]];
        assert_eq!(trimmed_mean_ms(&b), Some(10.0));
        // 90 of 10 ms and 10 of 20 ms: 5 of the 20 ms ones stay.
        let b = [[20_000_000, 10], [10_000_000, 90]];
        let tm = trimmed_mean_ms(&b).unwrap();
        assert!((tm - (900.0 + 100.0) / 95.0).abs() < 1e-9, "{tm}");
        assert_eq!(trimmed_mean_ms(&[[5_000_000, 1]]), Some(5.0));
        assert_eq!(trimmed_mean_ms(&[]), None);
    }

    fn stretch(foreign_ms: &[f64], self_ms: &[f64]) -> Stretch {
        let second = |ms: f64| vec![[(ms * 1e6) as u64, 20]];
        Stretch {
            start_s: 0.0,
            stop_s: foreign_ms.len() as f64,
            running: vec!["download".into()],
            latency: Vec::new(),
            seconds: vec![
                foreign_ms.iter().map(|&x| second(x)).collect(),
                self_ms.iter().map(|&x| second(x)).collect(),
            ],
        }
    }

    #[test]
    fn rpm_weighs_a_foreign_round_trip_and_a_self_probe_half_each() {
        // Connects of 100 ms are 50 ms a round trip; with self probes of
        // 150 ms the working latency is 100 ms: 600 round trips a minute.
        let r = responsiveness(&stretch(&[100.0; 8], &[150.0; 8]), 0, 1).unwrap();
        assert_eq!((r.foreign_ms, r.self_ms), (50.0, 150.0));
        assert!((r.rpm - 600.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.stability, Stability::Stable);
        // Five seconds cannot show four moving averages of four.
        let r = responsiveness(&stretch(&[100.0; 5], &[150.0; 5]), 0, 1).unwrap();
        assert_eq!(r.stability, Stability::TooShort { seconds: 5 });
        // A queue still filling: the working latency climbs each second.
        let rising: Vec<f64> = (1..=8).map(|k| 50.0 * k as f64).collect();
        let r = responsiveness(&stretch(&rising, &rising), 0, 1).unwrap();
        assert!(
            matches!(r.stability, Stability::Unstable { moved } if moved > TOLERANCE),
            "{r:?}"
        );
        // No self probes, no figure.
        assert!(responsiveness(&stretch(&[100.0; 8], &[]), 0, 1).is_none());
    }
}
