//! Running an experiment's points: the plan (points and each variant's
//! knobs, checked before the first run), the order of each round (shuffled
//! with the stored seed, interleaved, or sequential), each iteration under
//! its variant's knobs, and the putting together of one point's iterations,
//! made one at a time in different rounds, into one run record. What
//! becomes of a finished point (stored, printed) is the caller's.

use crate::knob::{self, Journal, KnobError, Setting};
use crate::{confidence, vm, Repeat, RunError, RunOptions};
use plumb_engine::meter::NoSink;
use plumb_samples::{Confidence, Iteration, RunRecord};
use plumb_spec::experiment::{Experiment, ExperimentError, Order, Point, PointId};
use std::sync::atomic::Ordering::Relaxed;

/// Why an experiment cannot start.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// In the file: its line and key.
    #[error(transparent)]
    File(#[from] ExperimentError),
    #[error("line {line}: variant '{variant}'.{table}.\"{key}\": {source}")]
    Knob {
        line: usize,
        variant: String,
        /// `knobs` or `server_knobs`.
        table: &'static str,
        key: String,
        source: KnobError,
    },
    #[error("the file has no [quick] profile")]
    NoQuick,
    /// Found before the first run, not an hour into the sweep.
    #[error("variant '{variant}': {source}")]
    Host { variant: String, source: KnobError },
    #[error("{0}: topology veth needs root (it creates network namespaces)")]
    NeedsRoot(PointId),
    /// `profile = true` where this process may not profile every CPU.
    #[error("profile = true: {0}")]
    Profile(String),
}

/// Why a sweep stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{point}: {source}")]
    Knob { point: PointId, source: KnobError },
    #[error("{point}: {source}")]
    Run { point: PointId, source: RunError },
    /// A guest of `--kernel` failed to boot or to run its points.
    #[error("kernel {label}: {source}")]
    Guest {
        label: String,
        source: crate::vm::VmError,
    },
    /// The caller could not keep a finished point.
    #[error("{point}: measured but not stored: {message}")]
    Keep { point: PointId, message: String },
}

/// An experiment ready to run: its points and the parsed knobs of each
/// variant.
#[derive(Debug, Clone)]
pub struct Plan {
    pub experiment: Experiment,
    pub points: Vec<Point>,
    /// One list per variant, in the file's order.
    knobs: Vec<Vec<Setting>>,
    /// The same for the server end.
    server_knobs: Vec<Vec<Setting>>,
}

/// A variant's `KNOB = VALUE` table, parsed.
fn settings(
    variant: &plumb_spec::experiment::Variant,
    table: &'static str,
    located: &[plumb_spec::experiment::Located],
) -> Result<Vec<Setting>, PlanError> {
    located
        .iter()
        .map(|k| {
            Setting::new(&k.key, &k.value).map_err(|source| PlanError::Knob {
                line: k.line,
                variant: variant.name.clone(),
                table,
                key: k.key.clone(),
                source,
            })
        })
        .collect()
}

impl Plan {
    /// Reads an experiment file's text: every point built, every knob
    /// parsed, the quick profile applied when asked.
    pub fn parse(text: &str, quick: bool) -> Result<Plan, PlanError> {
        let mut experiment = Experiment::parse(text)?;
        let mut knobs = Vec::new();
        let mut server_knobs = Vec::new();
        for v in &experiment.variants {
            knobs.push(settings(v, "knobs", &v.knobs)?);
            server_knobs.push(settings(v, "server_knobs", &v.server_knobs)?);
        }
        if quick {
            if experiment.quick.is_none() {
                return Err(PlanError::NoQuick);
            }
            experiment = experiment.quick_profile();
        }
        let points = experiment.points()?;
        Ok(Plan {
            experiment,
            points,
            knobs,
            server_knobs,
        })
    }

    /// The iterations each point takes and the confidence it aims at.
    pub fn repeat(&self) -> Repeat {
        Repeat {
            min: self.experiment.iterations.0,
            max: self.experiment.iterations.1,
            level: self.experiment.confidence.0,
            target: self.experiment.confidence.1,
        }
    }

    /// The seed of the order: the one asked for, else the file's, else one
    /// drawn from the clock (stored with the runs, so it can be reused).
    pub fn seed(&self, asked: Option<u64>) -> u64 {
        asked.or(self.experiment.seed).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
    }

    /// The label of the runs: the one asked for, else the file's, else the
    /// kernel release.
    pub fn label(&self, asked: Option<&str>) -> String {
        asked
            .map(str::to_string)
            .or_else(|| self.experiment.label.clone())
            .unwrap_or_else(plumb_sys::proc::kernel_release)
    }

    /// Whether this host lets every variant set its knobs and every point
    /// build its topology.
    pub fn check_host(&self) -> Result<(), PlanError> {
        let both = self.knobs.iter().zip(&self.server_knobs);
        for (v, (own, server)) in self.experiment.variants.iter().zip(both) {
            for settings in [own, server] {
                knob::check(settings).map_err(|source| PlanError::Host {
                    variant: v.name.clone(),
                    source,
                })?;
            }
        }
        if let Some(p) = self.points.iter().find(|p| p.spec.topology.is_some()) {
            if !plumb_sys::process::is_root() {
                return Err(PlanError::NeedsRoot(p.id.clone()));
            }
        }
        if self.points.iter().any(|p| self.profiled(p)) {
            if let Some(why) = plumb_sys::perf::refusal() {
                return Err(PlanError::Profile(why));
            }
        }
        Ok(())
    }

    /// The indexes of the points not among `stored`.
    pub fn pending(&self, stored: &[PointId]) -> Vec<usize> {
        (0..self.points.len())
            .filter(|i| !stored.contains(&self.points[*i].id))
            .collect()
    }

    fn variant_of(&self, p: &Point) -> Option<usize> {
        let name = p.id.variant.as_ref()?;
        self.experiment
            .variants
            .iter()
            .position(|v| &v.name == name)
    }

    pub fn knobs_of(&self, p: &Point) -> &[Setting] {
        self.variant_of(p)
            .map(|i| self.knobs[i].as_slice())
            .unwrap_or_default()
    }

    /// Point `p` as a guest makes it: its knobs and its server's are both
    /// the guest's; observed as asked, and profiled where the file says.
    pub fn guest_run(
        &self,
        p: &Point,
        repeat: Repeat,
        observe: plumb_samples::Observe,
    ) -> vm::GuestRun {
        let strings = |k: &[Setting]| k.iter().map(ToString::to_string).collect::<Vec<_>>();
        // The server's own namespace under a veth topology; else the
        // embedded server shares the guest's.
        let mut knobs = strings(self.knobs_of(p));
        let apart = p.spec.topology.is_some();
        let server_knobs = knob::server_knobs(&mut knobs, strings(self.server_knobs_of(p)), apart);
        vm::GuestRun {
            spec: p.spec.clone(),
            repeat,
            knobs,
            server_knobs,
            observe: self.observe(p, observe),
        }
    }

    /// What `p`'s ends read beyond the defaults: as asked, and profiled
    /// where the file says so.
    pub fn observe(&self, p: &Point, mut asked: plumb_samples::Observe) -> plumb_samples::Observe {
        if asked.profile.is_none() && self.profiled(p) {
            asked.profile = Some(plumb_samples::ProfileAsk::default());
        }
        asked
    }

    /// Whether `p` runs with kernel profiles: its variant's `profile`,
    /// else the experiment's.
    pub fn profiled(&self, p: &Point) -> bool {
        self.variant_of(p)
            .and_then(|i| self.experiment.variants[i].profile)
            .unwrap_or(self.experiment.profile)
    }

    pub fn server_knobs_of(&self, p: &Point) -> &[Setting] {
        self.variant_of(p)
            .map(|i| self.server_knobs[i].as_slice())
            .unwrap_or_default()
    }
}

/// What a sweep tells whoever watches it.
pub trait Observer {
    /// Point `index` starts `iteration` ("3", or "1..10" for a whole point).
    fn starting(&mut self, index: usize, point: &Point, iteration: &str);
    /// One iteration is done.
    fn iteration_done(&mut self);
    /// A point past its minimum without the confidence target takes one
    /// iteration more than counted.
    fn one_more(&mut self);
    /// A point is done; an error ends the sweep.
    fn finished(&mut self, point: &Point, record: &RunRecord) -> Result<(), String>;
}

/// How far a sweep got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Points finished (and kept) by this sweep.
    pub finished: usize,
    /// Stopped by a signal or by an incomplete run.
    pub interrupted: bool,
}

/// Runs the points `todo` (indexes into `plan.points`) in the experiment's
/// order, each iteration under its variant's knobs, until every one is done
/// or the run is interrupted.
pub fn run(
    plan: &Plan,
    todo: &[usize],
    seed: u64,
    opts: &RunOptions,
    observer: &mut dyn Observer,
) -> Result<Outcome, SweepError> {
    let repeat = plan.repeat();
    let journal = Journal::open_default();
    let points = &plan.points;
    let unit = |i: usize,
                iteration: String,
                rep: &Repeat,
                observer: &mut dyn Observer|
     -> Result<RunRecord, SweepError> {
        let p = &points[i];
        observer.starting(i, p, &iteration);
        let mut own = plan.knobs_of(p).to_vec();
        let mut with_server = opts.clone();
        with_server.client_knobs = knob::take_client(&mut own);
        with_server.observe = plan.observe(p, opts.observe);
        let apart = p.spec.topology.is_some() || opts.server.is_some();
        with_server.server_knobs =
            knob::server_knobs(&mut own, plan.server_knobs_of(p).to_vec(), apart);
        // Held until the iteration is over, then undone.
        let (_applied, _) = knob::apply(&journal, &own).map_err(|source| SweepError::Knob {
            point: p.id.clone(),
            source,
        })?;
        let mut progress = |_: &Iteration, _: &Confidence| observer.iteration_done();
        crate::run(&p.spec, &with_server, rep, &mut NoSink, &mut progress).map_err(|source| {
            SweepError::Run {
                point: p.id.clone(),
                source,
            }
        })
    };
    let keep =
        |i: usize, rec: &RunRecord, observer: &mut dyn Observer| keep(&points[i], rec, observer);
    let interrupted = || opts.interrupted.load(Relaxed);
    let mut finished = 0;
    if plan.experiment.order == Order::Sequential {
        for &i in todo {
            let rec = unit(i, format!("1..{}", repeat.max), &repeat, observer)?;
            if !rec.complete || interrupted() {
                break;
            }
            keep(i, &rec, observer)?;
            finished += 1;
        }
    } else {
        let mut parts: Vec<Vec<RunRecord>> = vec![Vec::new(); points.len()];
        let mut pending = todo.to_vec();
        let mut round = 0u32;
        while !pending.is_empty() && !interrupted() {
            for i in round_order(plan.experiment.order, &pending, seed, round) {
                let iteration = (parts[i].len() + 1).to_string();
                let rec = unit(i, iteration, &Repeat::once(), observer)?;
                if !rec.complete || interrupted() {
                    break;
                }
                if add_part(&mut parts[i], rec, &repeat, &points[i], observer)? {
                    finished += 1;
                    pending.retain(|x| *x != i);
                }
            }
            round += 1;
        }
    }
    Ok(Outcome {
        finished,
        interrupted: interrupted() || finished < todo.len(),
    })
}

fn keep(point: &Point, rec: &RunRecord, observer: &mut dyn Observer) -> Result<(), SweepError> {
    observer
        .finished(point, rec)
        .map_err(|message| SweepError::Keep {
            point: point.id.clone(),
            message,
        })
}

/// Adds a one-iteration run to a point's parts, and keeps the point once
/// it needs no more iterations: returns whether it is done.
fn add_part(
    parts: &mut Vec<RunRecord>,
    rec: RunRecord,
    repeat: &Repeat,
    point: &Point,
    observer: &mut dyn Observer,
) -> Result<bool, SweepError> {
    parts.push(rec);
    let merged = merge(parts, repeat).expect("one part at least");
    if point_done(&merged, repeat) {
        keep(point, &merged, observer)?;
        return Ok(true);
    }
    if merged.iterations.len() as u32 >= repeat.min {
        observer.one_more();
    }
    Ok(false)
}

/// [`run`] with every point made inside each guest (`--kernel`): `todo`
/// holds each guest's points. One boot per guest per round runs that
/// round's points, the guests taking turns to go first so that drift
/// spreads over all; in sequential order, one boot per guest runs each of
/// its points to the end.
pub fn run_in_guests(
    plan: &Plan,
    todo: &[Vec<usize>],
    seed: u64,
    opts: &RunOptions,
    guests: &[vm::Guest],
    observer: &mut dyn Observer,
) -> Result<Outcome, SweepError> {
    let repeat = plan.repeat();
    let points = &plan.points;
    let order = plan.experiment.order;
    let sequential = order == Order::Sequential;
    let guest_run = |i: usize| {
        let rep = if sequential { repeat } else { Repeat::once() };
        plan.guest_run(&points[i], rep, opts.observe)
    };
    let interrupted = || opts.interrupted.load(Relaxed);
    let total: usize = todo.iter().map(Vec::len).sum();
    let mut finished = 0;
    let mut parts: Vec<Vec<Vec<RunRecord>>> = vec![vec![Vec::new(); points.len()]; guests.len()];
    let mut pending = todo.to_vec();
    let mut round = 0u32;
    while pending.iter().any(|p| !p.is_empty()) && !interrupted() {
        for step in 0..guests.len() {
            let g = (step + round as usize) % guests.len();
            if pending[g].is_empty() || interrupted() {
                continue;
            }
            let visit = round_order(order, &pending[g], seed, round);
            let runs: Vec<vm::GuestRun> = visit.iter().map(|&i| guest_run(i)).collect();
            let label = guests[g].label();
            for &i in &visit {
                let iteration = if sequential {
                    format!("1..{}", repeat.max)
                } else {
                    (parts[g][i].len() + 1).to_string()
                };
                observer.starting(i, &points[i], &format!("{iteration} under {label}"));
            }
            // A point kept or refused inside the boot's callback ends it;
            // the reason is kept here.
            let mut stopped: Option<SweepError> = None;
            let booted = guests[g].run(&runs, &mut |k, rec| {
                let i = visit[k];
                for _ in &rec.iterations {
                    observer.iteration_done();
                }
                let done = if sequential {
                    keep(&points[i], &rec, observer).map(|_| true)
                } else {
                    add_part(&mut parts[g][i], rec, &repeat, &points[i], observer)
                };
                match done {
                    Ok(true) => {
                        finished += 1;
                        pending[g].retain(|x| *x != i);
                        Ok(())
                    }
                    Ok(false) => Ok(()),
                    Err(e) => {
                        let message = e.to_string();
                        stopped = Some(e);
                        Err(vm::VmError::input(message))
                    }
                }
            });
            if let Some(e) = stopped {
                return Err(e);
            }
            match booted {
                // What was kept stays; the sweep says how to go on.
                Err(e) if e.fault == vm::Fault::Interrupted => break,
                r => r.map_err(|source| SweepError::Guest { label, source })?,
            }
        }
        round += 1;
    }
    Ok(Outcome {
        finished,
        interrupted: interrupted() || finished < total,
    })
}

/// The test points of a set of runs, each once, from its newest run: what
/// `plumb check` runs again to compare with them.
pub fn newest_per_point<'a>(runs: impl IntoIterator<Item = &'a RunRecord>) -> Vec<&'a RunRecord> {
    let mut newest: Vec<&RunRecord> = runs.into_iter().collect();
    newest.sort_by(|x, y| y.started_at.cmp(&x.started_at));
    let mut out: Vec<&RunRecord> = Vec::new();
    for r in newest {
        if !out.iter().any(|s| s.spec_key == r.spec_key) {
            out.push(r);
        }
    }
    out
}

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
    fn a_plan_knows_its_points_knobs_and_what_is_left() {
        let text = "name = \"p\"\niterations = \"2..5\"\n[base]\nworkload = \"rr\"\n\
                    [matrix]\nreq_size = [1, 100]\n[[variant]]\nname = \"a\"\n\
                    [[variant]]\nname = \"b\"\nknobs = { \"rps:lo\" = \"3\" }\n\
                    server_knobs = { \"rps:lo\" = \"1\", \"sysctl:net.core.rmem_max\" = 8388608 }\n";
        let plan = Plan::parse(text, false).unwrap();
        assert_eq!(plan.points.len(), 4);
        assert_eq!((plan.repeat().min, plan.repeat().max), (2, 5));
        assert!(plan.knobs_of(&plan.points[0]).is_empty());
        assert_eq!(plan.knobs_of(&plan.points[1]).len(), 1);
        assert!(plan.server_knobs_of(&plan.points[0]).is_empty());
        let server: Vec<String> = plan
            .server_knobs_of(&plan.points[1])
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(server, ["rps:lo=1", "sysctl:net.core.rmem_max=8388608"]);
        let stored = [PointId::parse("req_size=1,variant=b")];
        assert_eq!(plan.pending(&stored), vec![0, 2, 3]);
        assert!(matches!(Plan::parse(text, true), Err(PlanError::NoQuick)));
        let bad = text.replace("rps:lo", "nonsense");
        let e = Plan::parse(&bad, false).unwrap_err().to_string();
        assert!(
            e.starts_with("line 11: variant 'b'.knobs.\"nonsense\": "),
            "{e}"
        );
    }

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
