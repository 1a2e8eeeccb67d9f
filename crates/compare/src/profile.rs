//! Which functions' CPU time per unit of work changed between the two
//! sides of a point, per end: each function's self and total time per GB
//! (or per transaction) in every iteration, the Mann-Whitney test per
//! function and the Benjamini-Hochberg control over all the functions
//! tested at once.

use plumb_samples::{Iteration, Metric, Profile, Role};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A function is tested where it took at least this share of the end's
/// sampled time on either side: below it a handful of samples decide.
pub const MIN_SHARE: f64 = 0.01;
/// The false discovery rate the verdicts keep.
pub const FDR: f64 = 0.05;
/// A change smaller than this is called the same even when significant.
pub const MIN_CHANGE: f64 = 0.05;

/// Where a function's time is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// With the function innermost.
    #[serde(rename = "self")]
    Own,
    /// With the function anywhere on the stack.
    Total,
}

impl Part {
    pub fn name(self) -> &'static str {
        match self {
            Part::Own => "self",
            Part::Total => "total",
        }
    }
}

/// What became of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Move {
    Grew,
    Shrank,
    /// Its own test finds a change of [`MIN_CHANGE`] or more (the interval
    /// beside it leaves 0 out), but the control over all the end's
    /// functions does not let it stand: more iterations would tell.
    Unsure,
    /// Its interval holds 0, or it moved by less than [`MIN_CHANGE`].
    Same,
    /// Too few profiled iterations on a side for the test ever to find a
    /// change: 3 or fewer (with 3 against 4 the smallest p is 0.057).
    Untested,
}

impl Move {
    /// Where a function stands in the list: the moves the control lets
    /// stand (grew, shrank) first, then the unsure, then the rest.
    pub fn order(self) -> u8 {
        match self {
            Move::Grew | Move::Shrank => 0,
            Move::Unsure => 1,
            Move::Same | Move::Untested => 2,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Move::Grew => "grew",
            Move::Shrank => "shrank",
            Move::Unsure => "unsure",
            Move::Same => "same",
            Move::Untested => "too few",
        }
    }
}

/// One function's change on one end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionChange {
    pub function: String,
    pub part: Part,
    /// Mean over the iterations, in the end's unit.
    pub a: f64,
    pub b: f64,
    /// (b - a) / a; None where a is 0.
    pub change: Option<f64>,
    /// The interval of the shift b - a at 95 %, in the unit: Hodges and
    /// Lehmann's with Moses's bounds, the rank test of `p` turned around, so
    /// that it leaves 0 out where that test finds a change. None with too
    /// few iterations for any (3 or fewer a side).
    pub interval: Option<(f64, f64)>,
    pub p: f64,
    /// Benjamini-Hochberg adjusted p over every function of this end.
    pub q: f64,
    pub verdict: Move,
}

/// The profiles of one end compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndProfiles {
    pub end: Role,
    /// `ms/GB` or `µs/tx`.
    pub unit: &'static str,
    /// The sampling event of each side (`cycles`, `cpu-clock`).
    pub event_a: String,
    pub event_b: String,
    /// Profiled iterations on each side.
    pub n_a: usize,
    pub n_b: usize,
    /// Samples lost to full rings on each side.
    pub lost_a: u64,
    pub lost_b: u64,
    /// How the many tests are controlled, in words.
    pub control: String,
    /// Every function tested: those that grew or shrank first, then the
    /// rest, each group largest absolute change first.
    pub functions: Vec<FunctionChange>,
    /// Each side's stacks over all its profiled iterations, folded
    /// (`a;b;c`), in the unit: what a flame graph draws.
    #[serde(skip)]
    pub stacks_a: Vec<(String, f64)>,
    #[serde(skip)]
    pub stacks_b: Vec<(String, f64)>,
}

/// The stacks of one end over iterations, per unit of work of them all.
pub fn folded(its: &[&Iteration], end: Role, metric: Metric) -> Vec<(String, f64)> {
    let (_, scale) = metric.profile_unit();
    let mut work = 0.0;
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for it in its {
        let Some(p) = end_profile(it, end) else {
            continue;
        };
        work += metric.work(it);
        for (names, s) in p.named_stacks() {
            *out.entry(names.join(";")).or_default() += s;
        }
    }
    if work <= 0.0 {
        return Vec::new();
    }
    out.into_iter()
        .map(|(k, v)| (k, v / work * scale))
        .collect()
}

pub fn end_profile(it: &Iteration, end: Role) -> Option<&Profile> {
    match end {
        Role::Client => it.client.profile.as_ref(),
        Role::Server => it.server.profile.as_ref(),
    }
}

/// One profiled iteration of an end: its attributed time and each
/// function's (self, total), in the unit.
type IterationTimes = (f64, BTreeMap<String, (f64, f64)>);

/// Per profiled iteration, each function's (self, total) in the unit.
fn per_iteration(its: &[&Iteration], end: Role, metric: Metric) -> Vec<IterationTimes> {
    let (_, scale) = metric.profile_unit();
    its.iter()
        .filter_map(|it| {
            let p = end_profile(it, end)?;
            let work = metric.work(it);
            if work <= 0.0 {
                return None;
            }
            let f = p
                .functions()
                .into_iter()
                .map(|(name, t)| (name, (t.self_s / work * scale, t.total_s / work * scale)))
                .collect();
            Some((p.end_s() / work * scale, f))
        })
        .collect()
}

/// Both ends' function changes from the iterations of each side; an end
/// profiled on neither side is left out.
pub fn compare(ia: &[&Iteration], ib: &[&Iteration], metric: Metric) -> Vec<EndProfiles> {
    [Role::Client, Role::Server]
        .into_iter()
        .filter_map(|end| compare_end(ia, ib, metric, end))
        .collect()
}

fn compare_end(
    ia: &[&Iteration],
    ib: &[&Iteration],
    metric: Metric,
    end: Role,
) -> Option<EndProfiles> {
    let a = per_iteration(ia, end, metric);
    let b = per_iteration(ib, end, metric);
    if a.is_empty() && b.is_empty() {
        return None;
    }
    let first = |its: &[&Iteration]| {
        its.iter()
            .find_map(|i| end_profile(i, end))
            .map(|p| p.event.clone())
            .unwrap_or_default()
    };
    let lost = |its: &[&Iteration]| -> u64 {
        its.iter()
            .filter_map(|i| end_profile(i, end))
            .map(|p| p.lost)
            .sum()
    };
    // The functions worth a test: a share of the end's time on a side.
    let mut names = BTreeSet::new();
    for side in [&a, &b] {
        let total: f64 = side.iter().map(|s| s.0).sum();
        let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
        for (_, f) in side.iter() {
            for (n, t) in f {
                *sums.entry(n).or_default() += t.1;
            }
        }
        for (n, s) in sums {
            if total > 0.0 && s / total >= MIN_SHARE {
                names.insert(n.to_string());
            }
        }
    }
    let values = |side: &[IterationTimes], n: &str, part: Part| -> Vec<f64> {
        side.iter()
            .map(|(_, f)| {
                f.get(n).map_or(0.0, |t| match part {
                    Part::Own => t.0,
                    Part::Total => t.1,
                })
            })
            .collect()
    };
    // Whether the exact test can give a p below the rate at these sizes:
    // its smallest p is that of two samples that do not overlap.
    let callable = {
        let (xa, xb): (Vec<f64>, Vec<f64>) = (
            (0..a.len()).map(|i| i as f64).collect(),
            (a.len()..a.len() + b.len()).map(|i| i as f64).collect(),
        );
        plumb_stats::mann_whitney(&xa, &xb).is_some_and(|p| p < FDR)
    };
    let mut rows = Vec::new();
    for n in &names {
        for part in [Part::Own, Part::Total] {
            let (xa, xb) = (values(&a, n, part), values(&b, n, part));
            let ma = plumb_stats::mean(&xa);
            let mb = plumb_stats::mean(&xb);
            if ma == 0.0 && mb == 0.0 {
                continue;
            }
            // Ranks, not means: a function's time per iteration is skewed
            // and its spread differs between sides (one may be all zeros).
            let tested = callable
                .then(|| plumb_stats::mann_whitney(&xa, &xb))
                .flatten();
            let interval = plumb_stats::hodges_lehmann(&xa, &xb, 0.95).map(|s| (s.lo, s.hi));
            rows.push(FunctionChange {
                function: n.clone(),
                part,
                a: ma,
                b: mb,
                change: (ma > 0.0).then(|| (mb - ma) / ma),
                interval,
                p: tested.unwrap_or(1.0),
                q: 1.0,
                verdict: if tested.is_some() {
                    Move::Same
                } else {
                    Move::Untested
                },
            });
        }
    }
    // Self and total times are two questions, each its own family.
    for part in [Part::Own, Part::Total] {
        let family: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].part == part).collect();
        let ps: Vec<f64> = family.iter().map(|&i| rows[i].p).collect();
        for (&i, q) in family.iter().zip(plumb_stats::benjamini_hochberg(&ps)) {
            let r = &mut rows[i];
            r.q = q;
            let big = r.change.is_none_or(|c| c.abs() >= MIN_CHANGE);
            let shifted = r.interval.is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0);
            if r.verdict == Move::Untested || !big {
                continue;
            }
            r.verdict = match (q < FDR, shifted) {
                (true, _) if r.b > r.a => Move::Grew,
                (true, _) => Move::Shrank,
                (false, true) => Move::Unsure,
                (false, false) => Move::Same,
            };
        }
    }
    let tests = names.len();
    // A list cut to its top rows must not hide a small significant move
    // behind a larger one that is noise, nor an unsure one behind the same.
    rows.sort_by(|x, y| {
        x.verdict
            .order()
            .cmp(&y.verdict.order())
            .then_with(|| (y.b - y.a).abs().total_cmp(&(x.b - x.a).abs()))
            .then_with(|| x.function.cmp(&y.function))
            .then(x.part.cmp(&y.part))
    });
    Some(EndProfiles {
        end,
        unit: metric.profile_unit().0,
        event_a: first(ia),
        event_b: first(ib),
        n_a: a.len(),
        n_b: b.len(),
        lost_a: lost(ia),
        lost_b: lost(ib),
        control: format!(
            "Mann-Whitney U per function over iterations (4 or more a side can find a change, and with a hundred functions tested it takes 8 or so); \
             Benjamini-Hochberg at a false discovery rate of {:.0} % \
             over the self times of this end's {} functions, and apart over their total times; \
             changes under {:.0} % are the same; unsure: the function's own interval leaves 0 out, the control does not let it stand",
            FDR * 100.0,
            tests,
            MIN_CHANGE * 100.0
        ),
        functions: rows,
        stacks_a: folded(ia, end, metric),
        stacks_b: folded(ib, end, metric),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Iterations of 1 GB each whose server spent `copy[i]` ms in
    /// `_copy_to_iter` under `tcp_recvmsg`, and 50 ms in `tcp_recvmsg`
    /// itself.
    fn iterations(copy: &[u64]) -> Vec<Iteration> {
        with_lock_wait(copy, &vec![0; copy.len()])
    }

    /// The same, the server also spinning `wait[i]` ms on a lock under
    /// `tcp_recvmsg`.
    fn with_lock_wait(copy: &[u64], wait: &[u64]) -> Vec<Iteration> {
        let r = plumb_samples::testing::example();
        copy.iter()
            .zip(wait)
            .map(|(&c, &w)| {
                let mut it = r.iterations[0].clone();
                it.transfer.received_bytes = 1_000_000_000;
                let ms = 1_000_000;
                let mut stacks = vec![(vec!["tcp_recvmsg".to_string()], 50 * ms)];
                for (leaf, t) in [("_copy_to_iter", c), ("queued_spin_lock_slowpath", w)] {
                    if t > 0 {
                        stacks.push((vec!["tcp_recvmsg".to_string(), leaf.to_string()], t * ms));
                    }
                }
                let mut header = Profile::empty("cpu-clock", 997);
                header.process_s = (50 + c + w) as f64 / 1e3;
                it.server.profile = Some(Profile::from_stacks(stacks, header));
                it
            })
            .collect()
    }

    /// The row of function `f`'s `part` on end `e`.
    fn row_of(e: &EndProfiles, f: &str, part: Part) -> FunctionChange {
        e.functions
            .iter()
            .find(|r| r.function == f && r.part == part)
            .unwrap()
            .clone()
    }

    #[test]
    fn a_small_significant_move_is_listed_before_a_larger_one_that_is_noise() {
        // The copy loses 4 ms/GB every time; the lock wait gains 30 ms/GB
        // on average, but scattered over both sides' ranges.
        let a = with_lock_wait(&[5, 6, 5, 4, 6, 5, 5, 4], &[10, 90, 5, 80, 20, 70, 15, 60]);
        let b = with_lock_wait(
            &[1, 2, 1, 1, 2, 1, 1, 2],
            &[100, 5, 95, 10, 85, 15, 90, 140],
        );
        let ra: Vec<&Iteration> = a.iter().collect();
        let rb: Vec<&Iteration> = b.iter().collect();
        let e = &compare(&ra, &rb, Metric::Throughput)[0];
        let order: Vec<(&str, Part, Move)> = e
            .functions
            .iter()
            .map(|f| (f.function.as_str(), f.part, f.verdict))
            .collect();
        let lock = e
            .functions
            .iter()
            .find(|f| f.function == "queued_spin_lock_slowpath")
            .unwrap();
        assert!(
            lock.b - lock.a > 20.0 && lock.verdict == Move::Same,
            "{lock:?}"
        );
        assert_eq!(
            order[0],
            ("_copy_to_iter", Part::Own, Move::Shrank),
            "{order:?}"
        );
        let first_still = order.iter().position(|o| o.2.order() != 0).unwrap();
        assert!(
            order[first_still..].iter().all(|o| o.2.order() != 0),
            "{order:?}"
        );
    }

    #[test]
    fn a_function_that_vanished_shrank_and_its_unchanged_caller_did_not() {
        let a = iterations(&[40, 55, 38, 61, 47, 52, 44, 58]);
        let b = iterations(&[0; 8]);
        let ra: Vec<&Iteration> = a.iter().collect();
        let rb: Vec<&Iteration> = b.iter().collect();
        let ends = compare(&ra, &rb, Metric::Throughput);
        // Only the server was profiled.
        assert_eq!(ends.len(), 1);
        let e = &ends[0];
        assert_eq!((e.end, e.unit, e.n_a, e.n_b), (Role::Server, "ms/GB", 8, 8));
        let row = |f: &str, part: Part| row_of(e, f, part);
        let copy = row("_copy_to_iter", Part::Own);
        assert!((copy.a - 49.375).abs() < 1e-9, "{}", copy.a);
        assert_eq!(copy.b, 0.0);
        assert_eq!(copy.change, Some(-1.0));
        let (lo, hi) = copy.interval.unwrap();
        assert!(hi < 0.0 && lo < hi, "{copy:?}");
        assert!(copy.q < FDR && copy.q >= copy.p, "{copy:?}");
        assert_eq!(copy.verdict, Move::Shrank);
        // The caller's own time did not move; its total lost the copy.
        let own = row("tcp_recvmsg", Part::Own);
        assert_eq!((own.a, own.b), (50.0, 50.0));
        assert_eq!(own.verdict, Move::Same);
        assert_eq!(row("tcp_recvmsg", Part::Total).verdict, Move::Shrank);
        // The largest moves come first (ties by name), the still last.
        assert_eq!(e.functions[0].function, "_copy_to_iter");
        assert_eq!(e.functions.last().unwrap().function, "tcp_recvmsg");
        assert_eq!(e.functions.last().unwrap().part, Part::Own);
        // Three iterations a side cannot reach significance with ranks,
        // and say so rather than calling every function the same.
        let ends = compare(&ra[..3], &rb[..3], Metric::Throughput);
        assert!(ends[0]
            .functions
            .iter()
            .all(|r| r.verdict == Move::Untested));
        assert_eq!(Move::Untested.word(), "too few");
    }

    #[test]
    fn a_move_its_own_test_finds_and_the_control_does_not_is_unsure_not_the_same() {
        // Four a side: the copy's ranks all apart give p 0.021, which the
        // control over the end's three self times (the caller's and a
        // lock's did not move) triples past 0.05; its interval leaves 0
        // out all the same.
        let a = with_lock_wait(&[40, 55, 38, 61], &[20; 4]);
        let b = with_lock_wait(&[0; 4], &[20; 4]);
        let ra: Vec<&Iteration> = a.iter().collect();
        let rb: Vec<&Iteration> = b.iter().collect();
        let e = &compare(&ra, &rb, Metric::Throughput)[0];
        let row = |f: &str, part: Part| row_of(e, f, part);
        let copy = row("_copy_to_iter", Part::Own);
        let (lo, hi) = copy.interval.unwrap();
        assert!(hi < 0.0 && lo < hi, "{copy:?}");
        assert!(copy.p < FDR && copy.q >= FDR, "{copy:?}");
        assert_eq!(copy.verdict, Move::Unsure);
        // Two of the three total times moved alike: 0.021 times 3/2 stands.
        assert_eq!(row("tcp_recvmsg", Part::Total).verdict, Move::Shrank);
        assert_eq!(row("tcp_recvmsg", Part::Own).verdict, Move::Same);
        // Called moves first, then the unsure, then the rest.
        let ranks: Vec<u8> = e.functions.iter().map(|f| f.verdict.order()).collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
        assert!(ranks.contains(&1), "{ranks:?}");
    }
}
