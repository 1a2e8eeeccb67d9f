//! Running an experiment's points: the order of each round (shuffled with
//! the stored seed, interleaved, or sequential), and the putting together
//! of one point's iterations, made one at a time in different rounds, into
//! one run record.

use crate::{confidence, Repeat};
use plumb_samples::RunRecord;
use plumb_spec::experiment::Order;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The order a round visits `pending` (indexes of points, in file order):
/// as given for interleaved and sequential, a Fisher-Yates shuffle drawn
/// from (seed, round) for random, so the same seed gives the same schedule.
pub fn round_order(order: Order, pending: &[usize], seed: u64, round: u32) -> Vec<usize> {
    let mut v = pending.to_vec();
    if order == Order::Random {
        let mut state = seed ^ (round as u64).wrapping_mul(0xA24B_AED4_963E_E407);
        for i in (1..v.len()).rev() {
            let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
    v
}

/// One point's iterations, each from its own one-iteration run, as one
/// record: iterations renumbered, the confidence recomputed over all.
pub fn merge(parts: &[RunRecord], repeat: &Repeat) -> Option<RunRecord> {
    let first = parts.first()?;
    let mut rec = first.clone();
    rec.iterations = parts
        .iter()
        .flat_map(|p| p.iterations.iter().cloned())
        .collect();
    for (i, it) in rec.iterations.iter_mut().enumerate() {
        it.index = i as u32;
    }
    rec.complete = parts.iter().all(|p| p.complete);
    let values: Vec<f64> = rec
        .iterations
        .iter()
        .filter(|i| crate::derive::counts(&rec.spec, i))
        .map(|i| i.derived.metric())
        .collect();
    let mut conf = confidence(&values, repeat);
    if rec.spec.is_transactional() {
        conf.metric = "tps".into();
    }
    rec.confidence = Some(conf);
    Some(rec)
}

/// Whether a point with these iterations needs no more.
pub fn point_done(rec: &RunRecord, repeat: &Repeat) -> bool {
    let n = rec.iterations.len() as u32;
    n >= repeat.max || (n >= repeat.min && rec.confidence.as_ref().is_some_and(|c| c.reached))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_rounds_are_permutations_reproducible_from_the_seed() {
        let pending: Vec<usize> = (0..20).collect();
        let a = round_order(Order::Random, &pending, 42, 0);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, pending);
        assert_ne!(
            a, pending,
            "20 points shuffled in place is vanishingly unlikely"
        );
        assert_eq!(a, round_order(Order::Random, &pending, 42, 0));
        assert_ne!(a, round_order(Order::Random, &pending, 42, 1));
        assert_ne!(a, round_order(Order::Random, &pending, 43, 0));
        assert_eq!(round_order(Order::Interleaved, &pending, 42, 3), pending);
    }
}
