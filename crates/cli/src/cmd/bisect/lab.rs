//! `plumb bisect --lab-class CLASS`: a bisection over images whose steps
//! are spread over a lab's agents (docs/lab.md). Each step tests several
//! images of the range at once, spread evenly over it; each image is a job
//! set of its own that boots the good image and it in turn on one agent,
//! so every comparison is made on one machine, and is judged against the
//! good image's runs of that same job. The answers narrow the range as one
//! at a time would, and the end is the same table and exit status.

use super::{first_bad, not_bad, Bench, Step};
use crate::args::kernel_arg;
use crate::Failure;
use plumb_compare::{Bisect, Side};
use plumb_store::lab::{Lab, NewSet};
use plumb_store::{Location, RunId, Store};
use std::time::Duration;

/// The lab's queue and its store of runs, on --db.
pub(super) fn open(a: &crate::args::BisectArgs) -> Result<(Lab, Store), Failure> {
    let url = super::super::lab::lab_url(&a.db)?;
    let lab = Lab::open(&url).map_err(super::super::db::store_err)?;
    let store =
        Store::open_location(&Location::Postgres(url)).map_err(super::super::db::store_err)?;
    Ok((lab, store))
}

/// Submits a set of one job of every point that boots the good kernel and
/// then `candidate` on one agent, round by round: the set's id.
pub(super) fn submit_beside(
    lab: &mut Lab,
    bench: &Bench,
    class: &str,
    file: &str,
    good: (&str, &str),
    candidate: (&str, &str),
) -> Result<i64, Failure> {
    let plan = &bench.plan;
    let kernels = [
        format!("{}={}", good.0, good.1),
        format!("{}={}", candidate.0, candidate.1),
    ];
    lab.submit(&NewSet {
        experiment: &plan.experiment.name,
        label: candidate.0,
        class,
        file,
        quick: bench.a.quick,
        seed: plan.seed(None),
        kernels: &kernels,
        submitted_by: &super::super::lab::submitter(),
        jobs: vec![plan.points.iter().map(|p| p.id.to_string()).collect()],
        max_attempts: 2,
    })
    .map_err(super::super::db::store_err)
}

pub(super) fn images(bench: Bench, class: &str) -> Result<i32, Failure> {
    let a = bench.a;
    let (mut lab, store) = open(a)?;
    let guests = bench.guests()?;
    let paths: Vec<String> = std::iter::once(&a.good)
        .chain(&a.between)
        .chain(std::iter::once(&a.bad))
        .map(|s| kernel_arg(s).1.display().to_string())
        .collect();
    let parallel = match a.parallel {
        Some(n) => n as usize,
        None => super::super::lab::live(&lab.agents().map_err(super::super::db::store_err)?, class)
            .max(1),
    };
    let file = points_file(a)?;
    let good_label = guests[0].label();
    let n = guests.len();
    let mut steps: Vec<Option<Step>> = (0..n).map(|_| None).collect();
    steps[0] = Some(Step::reference());
    let mut order = 1;
    // Tests the images `at` at once: their steps, in `at`'s order.
    let mut round = |at: &[usize], lab: &mut Lab| -> Result<Vec<Step>, Failure> {
        let mut sets = Vec::new();
        for &i in at {
            order += 1;
            let id = submit_beside(
                lab,
                &bench,
                class,
                &file,
                (&good_label, &paths[0]),
                (&guests[i].label(), &paths[i]),
            )?;
            eprintln!(
                "step {order}: {} ({}), beside the good image: set {id}",
                guests[i].source,
                guests[i].label()
            );
            sets.push((id, i, order));
        }
        let mut answers = Vec::new();
        for (id, i, order) in sets {
            let measured = measured(lab, &store, id, &good_label, &guests[i].label())?;
            answers.push(match measured {
                Ok((good, candidate)) => bench.judge(&good, Ok(candidate), order)?,
                Err(why) => Step {
                    order,
                    answer: Bisect::Skip,
                    said: why,
                    emulated: false,
                    more: None,
                },
            });
        }
        Ok(answers)
    };

    // The bad image first, with as many images of the range as there are
    // agents to spare.
    let (mut lo, mut hi) = (0, n - 1);
    let mut at = vec![n - 1];
    at.extend(spread(&steps, lo, hi, parallel.saturating_sub(1)));
    let mut answers = round(&at, &mut lab)?.into_iter();
    let bad = answers.next().expect("the bad image's step");
    let bad_answer = bad.answer;
    steps[n - 1] = Some(bad);
    if bad_answer != Bisect::Bad {
        return Err(not_bad(a, &guests, &steps));
    }
    for (&i, s) in at[1..].iter().zip(answers) {
        steps[i] = Some(s);
    }
    loop {
        (lo, hi) = narrowed(&steps, lo, hi);
        let at = spread(&steps, lo, hi, parallel);
        if at.is_empty() {
            break;
        }
        for (&i, s) in at.iter().zip(round(&at, &mut lab)?) {
            steps[i] = Some(s);
        }
    }
    Ok(first_bad(&guests, &steps, lo, hi))
}

/// The experiment file as the sets hold it.
pub(super) fn points_file(a: &crate::args::BisectArgs) -> Result<String, Failure> {
    std::fs::read_to_string(&a.points)
        .map_err(|e| Failure::usage(format!("--points {}: {e}", a.points.display())))
}

/// Up to `k` untested images strictly between `lo` and `hi`, spread evenly
/// over the range: those nearest its k-sections.
fn spread(steps: &[Option<Step>], lo: usize, hi: usize, k: usize) -> Vec<usize> {
    let mut picked: Vec<usize> = Vec::new();
    for j in 1..=k {
        let target = lo + (hi - lo) * j / (k + 1);
        let next = (lo + 1..hi)
            .filter(|i| steps[*i].is_none() && !picked.contains(i))
            .min_by_key(|i| i.abs_diff(target));
        if let Some(i) = next {
            picked.push(i);
        }
    }
    picked.sort_unstable();
    picked
}

/// The range once its answers are in: up to the first bad image, from the
/// last good one before it. A skip narrows nothing.
fn narrowed(steps: &[Option<Step>], lo: usize, hi: usize) -> (usize, usize) {
    let answer = |i: usize| steps[i].as_ref().map(|s| s.answer);
    let hi = (lo + 1..hi)
        .find(|&i| answer(i) == Some(Bisect::Bad))
        .unwrap_or(hi);
    let lo = (lo + 1..hi)
        .rev()
        .find(|&i| answer(i) == Some(Bisect::Good))
        .unwrap_or(lo);
    (lo, hi)
}

/// Waits for set `id`, then its job's runs as the good side and the
/// candidate's; why not, where the job failed.
pub(super) fn measured(
    lab: &mut Lab,
    store: &Store,
    id: i64,
    good: &str,
    candidate: &str,
) -> Result<Result<(Side, Side), String>, Failure> {
    let set = loop {
        let mut sets = lab
            .status(Some(id), 1)
            .map_err(super::super::db::store_err)?;
        let set = sets.pop().expect("a set just submitted");
        if set.settled() {
            break set;
        }
        if crate::interrupt_flag().load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Failure {
                code: crate::exit::INTERRUPTED,
                message: format!("interrupted while set {id} ran; it stays in the lab's queue"),
            });
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let job = &set.jobs[0];
    if job.state != "done" {
        return Ok(Err(format!(
            "set {id} failed: {}",
            job.error.as_deref().unwrap_or("no reason recorded")
        )));
    }
    let (mut ours, mut theirs, mut env) = (Vec::new(), Vec::new(), None);
    for &run in &job.runs {
        let Some(r) = store.get(RunId(run)).map_err(super::super::db::store_err)? else {
            continue;
        };
        if r.record.label == good {
            ours.push(r.record);
        } else if r.record.label == candidate {
            env = r.env.clone();
            theirs.push(r.record);
        }
    }
    Ok(Ok((
        Side::new(good, ours, None),
        Side::new(candidate, theirs, env),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(answers: &[Option<Bisect>]) -> Vec<Option<Step>> {
        answers
            .iter()
            .map(|a| {
                a.map(|answer| Step {
                    order: 1,
                    answer,
                    said: String::new(),
                    emulated: false,
                    more: None,
                })
            })
            .collect()
    }

    #[test]
    fn a_round_spreads_its_images_over_the_range_and_the_answers_narrow_it() {
        let none = answered(&[None; 10]);
        assert_eq!(spread(&none, 0, 9, 1), vec![4]);
        assert_eq!(spread(&none, 0, 9, 2), vec![3, 6]);
        assert_eq!(spread(&none, 0, 9, 3), vec![2, 4, 6]);
        // No more than there are images between.
        assert_eq!(spread(&none, 0, 3, 5), vec![1, 2]);
        assert!(spread(&none, 4, 5, 2).is_empty());
        let (g, b, s) = (Some(Bisect::Good), Some(Bisect::Bad), Some(Bisect::Skip));
        let steps = answered(&[g, None, g, s, b, None, b, None, None, b]);
        assert_eq!(narrowed(&steps, 0, 9), (2, 4));
        // A skip alone narrows nothing.
        let steps = answered(&[g, None, s, None, b]);
        assert_eq!(narrowed(&steps, 0, 4), (0, 4));
    }
}
