//! A lab of many hosts (docs/lab.md): `plumb lab submit` queues an
//! experiment's points as jobs on the team's PostgreSQL, `plumb agent` on
//! each host claims and runs them as `plumb sweep` runs points, `plumb lab
//! status` and `wait` follow them. The queue's guarantees are the
//! database's (plumb_store::lab); this is what runs a job.

use crate::args::{
    AgentArgs, DbArgs, LabGrantArgs, LabStatusArgs, LabSubmitArgs, LabWaitArgs, RunCommand,
    ServerArgs,
};
use crate::Failure;
use plumb_run::experiment::{self as runner, Observer, Plan};
use plumb_samples::RunRecord;
use plumb_spec::experiment::Point;
use plumb_store::lab::{Claim, Lab, NewSet, Released, SetStatus};
use plumb_store::{Location, RunTag};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exit status of `lab wait` when a job failed: `check`'s error.
const FAILED: i32 = 128;
/// Exit status of `lab wait --timeout` when time ran out, as timeout(1).
const TIMED_OUT: i32 = 124;

/// The lab's database: a PostgreSQL URL from --db or $PLUMB_DB.
pub(crate) fn lab_url(db: &DbArgs) -> Result<String, Failure> {
    let given = db
        .db
        .clone()
        .or_else(|| std::env::var_os("PLUMB_DB").map(Into::into));
    match given.map(Location::new) {
        Some(Location::Postgres(url)) => Ok(url),
        Some(Location::File(p)) => Err(Failure::usage(format!(
            "--db {}: a lab's queue lives on PostgreSQL; give postgres://USER@HOST/DB",
            p.display()
        ))),
        None => Err(Failure::usage(
            "--db: a lab needs the team's PostgreSQL; give --db postgres://USER@HOST/DB or set PLUMB_DB",
        )),
    }
}

pub(crate) fn open(db: &DbArgs) -> Result<Lab, Failure> {
    Lab::open(&lab_url(db)?).map_err(super::db::store_err)
}

/// Who submits a set: USER@HOST.
pub(crate) fn submitter() -> String {
    format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
        plumb_sys::proc::hostname()
    )
}

/// The points of one job: a cell of the matrix with all its variants, so
/// that what is compared runs on one host, interleaved as a sweep runs it.
pub(crate) fn jobs_of(plan: &Plan) -> Vec<Vec<String>> {
    let mut cells: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    for p in &plan.points {
        let cell = p.id.without_variant().to_string();
        let at = cells.len();
        cells
            .entry(cell)
            .or_insert((at, Vec::new()))
            .1
            .push(p.id.to_string());
    }
    let mut jobs: Vec<(usize, Vec<String>)> = cells.into_values().collect();
    jobs.sort_by_key(|(at, _)| *at);
    jobs.into_iter().map(|(_, points)| points).collect()
}

pub fn submit(a: LabSubmitArgs) -> Result<i32, Failure> {
    let plan = super::sweep::load(&a.file, a.quick)?;
    let label = a
        .label
        .clone()
        .or_else(|| plan.experiment.label.clone())
        .ok_or_else(|| {
            Failure::usage(format!(
                "--label: {} names no label; give the set's runs one",
                a.file.display()
            ))
        })?;
    let file = std::fs::read_to_string(&a.file)
        .map_err(|e| Failure::usage(format!("{}: {e}", a.file.display())))?;
    put(
        &a.db,
        &NewSet {
            experiment: &plan.experiment.name,
            label: &label,
            class: &a.class,
            file: &file,
            quick: a.quick,
            seed: plan.seed(a.order_seed),
            kernels: &a.kernel,
            submitted_by: &submitter(),
            jobs: jobs_of(&plan),
            max_attempts: a.attempts,
        },
    )
}

/// Stores a set and says what it holds: its id on stdout.
fn put(db: &DbArgs, set: &NewSet) -> Result<i32, Failure> {
    let mut lab = open(db)?;
    let id = lab.submit(set).map_err(super::db::store_err)?;
    crate::outln!("{id}");
    let (jobs, points) = (set.jobs.len(), set.jobs.iter().map(Vec::len).sum());
    eprintln!(
        "set {id}: experiment {}, {jobs} job{} ({points} point{}), class {}, label {}; \
         `plumb lab wait {id}` returns when it is done",
        set.experiment,
        plural(jobs),
        plural(points),
        set.class,
        set.label,
    );
    Ok(0)
}

/// `plumb run ... --lab CLASS`: the run as an experiment file of one
/// point (its fields as typed, its repetition, label, far server and
/// knobs), submitted as a set of one job, so that an agent makes exactly
/// what `plumb run` would have made here. What only this host could do or
/// what an agent decides for itself is refused by its flag.
pub fn submit_run(cmd: RunCommand, class: &str) -> Result<i32, Failure> {
    let RunCommand {
        workload,
        settings,
        common: a,
    } = cmd;
    let b = &a.vm.boot;
    let refused = [
        (a.dry_run, "--dry-run", "it would submit nothing"),
        (a.json, "--json", "the agent stores the run; read it with `plumb report`"),
        (a.no_store, "--no-store", "the agent stores the run"),
        (a.exclusive, "--exclusive", "an agent measures alone on its host"),
        (a.profile.trace, "--trace", "a lab run profiles with --profile only"),
        (a.profile.tcp_probe, "--tcp-probe", "a lab run profiles with --profile only"),
        (a.far.psk_file.is_some(), "--psk-file", "the key file is this host's"),
        (a.far.ssh_command.is_some(), "--ssh-command", "the agent reaches far hosts its own way"),
        (a.far.server_address.is_some(), "--server-address", "the agent reaches far hosts its own way"),
        (a.far.ssh_copy_dynamic, "--ssh-copy-dynamic", "the agent reaches far hosts its own way"),
        (a.vm.kernel.len() > 1, "--kernel", "a run boots one kernel; submit an experiment file with `plumb lab submit` to compare several"),
        (!matches!(b.accel, plumb_run::vm::Accel::Auto), "--accel", BOOTS),
        (b.vcpus != plumb_run::vm::DEFAULT_VCPUS, "--vcpus", BOOTS),
        (b.vm_memory != plumb_run::vm::DEFAULT_MEMORY_MIB, "--vm-memory", BOOTS),
        (b.kernel_append.is_some(), "--kernel-append", BOOTS),
        (b.vm_link, "--vm-link", BOOTS),
    ];
    if let Some((_, flag, why)) = refused.iter().find(|(set, _, _)| *set) {
        return Err(Failure::usage(format!("{flag}: not with --lab: {why}")));
    }
    let fields = super::run::run_fields(&workload, settings, a.ipv6);
    // The run's own checks, as `plumb run` makes them, with its flags'
    // names, before anything else.
    let spec = super::run::build_run(&fields)?;
    let pairs = |s: &[plumb_run::knob::Setting]| -> Vec<(String, String)> {
        s.iter()
            .map(|k| (k.knob.to_string(), k.value.clone()))
            .collect()
    };
    let (knobs, server_knobs) = (pairs(&a.knobs), pairs(&a.server_knobs));
    let label = a.label.clone().ok_or_else(|| {
        Failure::usage("--label: a run submitted to a lab needs one: this host's kernel release would not be the agent's")
    })?;
    let file = plumb_spec::experiment::RunFile {
        settings: &fields,
        iterations: a.repeat.iterations,
        confidence: a.repeat.confidence,
        label: Some(&label),
        server: a.far.server.as_deref(),
        profile: a.profile.profile,
        knobs: &knobs,
        server_knobs: &server_knobs,
    }
    .text();
    // A file that reads back as another run is never submitted.
    let plan = Plan::parse(&file, false)
        .map_err(|e| Failure::usage(format!("--lab: this run does not make a lab job: {e}")))?;
    if plan.points.len() != 1 || plan.points[0].spec != spec {
        return Err(Failure::usage(
            "--lab: this run does not read back as itself from a lab job; submit it as an experiment file",
        ));
    }
    put(
        &a.db,
        &NewSet {
            experiment: &plan.experiment.name,
            label: &label,
            class,
            file: &file,
            quick: false,
            seed: plan.seed(None),
            kernels: &a.vm.kernel,
            submitted_by: &submitter(),
            jobs: jobs_of(&plan),
            max_attempts: 3,
        },
    )
}

/// Why a run for a lab takes no boot flags.
const BOOTS: &str = "an agent boots guests with its own flags (`plumb agent --vcpus ...`)";

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Whether `--allow-knob` lets a job set `knob`.
fn allowed(allow: &[String], knob: &str) -> bool {
    allow.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => knob.starts_with(prefix),
        None => a == knob,
    })
}

/// Keeps a job's finished points in memory: they are stored together when
/// the job is finished, in the transaction that checks the lease.
struct Collect<'a> {
    /// "agent NAME: job N", before each iteration's line in the log.
    who: String,
    ctx: &'a super::run::RunContext,
    tags: super::sweep::Tags,
    runs: Vec<(RunRecord, RunTag)>,
}

impl Observer for Collect<'_> {
    fn starting(&mut self, _: usize, point: &Point, iteration: &str) {
        // The agent's log (its journal under systemd) shows the order the
        // job's points ran in: interleaved, as a sweep runs them.
        eprintln!("{}: point {} iteration {iteration}", self.who, point.id);
    }
    fn iteration_done(&mut self) {}
    fn one_more(&mut self) {}
    fn finished(&mut self, point: &Point, record: &RunRecord) -> Result<(), String> {
        self.runs
            .push(super::sweep::tagged(self.ctx, &self.tags, point, record));
        Ok(())
    }
}

/// What the agent is, for the lab's table of agents.
struct Me {
    name: String,
    class: String,
    host: String,
}

impl Me {
    fn say(&self, lab: &mut Lab, word: &str) {
        eprintln!("agent {}: {word}", self.name);
        // A word that cannot be written is not worth a job: the next
        // claim or finish says what is wrong with the database.
        let _ = lab.say(&self.name, &self.class, &self.host, word);
    }
}

pub fn agent(a: AgentArgs) -> Result<i32, Failure> {
    let url = lab_url(&a.db)?;
    let host = plumb_sys::proc::hostname();
    let me = Me {
        name: a.name.clone().unwrap_or_else(|| host.clone()),
        class: a.class.clone(),
        host,
    };
    let mut lab = Lab::open(&url).map_err(super::db::store_err)?;
    let stop = crate::interrupt_flag();
    me.say(&mut lab, "waiting for a job");
    loop {
        if stop.load(Relaxed) {
            me.say(&mut lab, "stopped");
            return Ok(0);
        }
        let claim = persist(&mut lab, &url, OUTAGE, |l| {
            l.claim(&me.name, &me.class, a.lease)
        })?;
        let Some(claim) = claim else {
            if a.until_empty && persist(&mut lab, &url, OUTAGE, |l| l.unsettled(&me.class))? == 0 {
                me.say(&mut lab, "nothing left to claim; exited");
                return Ok(0);
            }
            let until = Instant::now() + Duration::from_millis(a.poll);
            while Instant::now() < until && !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            continue;
        };
        run_job(&mut lab, &url, &a, &me, claim, &stop)?;
    }
}

/// Why a job ended without its runs.
enum Unfinished {
    /// The agent was asked to stop: the job goes back, uncounted.
    Stopped,
    /// The lease was lost (the agent was stopped past it): the job is not
    /// this agent's any more.
    Lost,
    Failed(String),
}

/// Runs a claimed job and finishes or releases it.
fn run_job(
    lab: &mut Lab,
    url: &str,
    a: &AgentArgs,
    me: &Me,
    claim: Claim,
    stop: &Arc<AtomicBool>,
) -> Result<(), Failure> {
    let what = format!(
        "job {} of set {} ({}), attempt {}",
        claim.job,
        claim.set.id,
        claim.points.join("; "),
        claim.attempt
    );
    me.say(lab, &format!("running {what}"));
    // Ends the job's runs: set by a stop signal or a lost lease.
    let end = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let renewer = {
        let (end, lost, done, stop) = (end.clone(), lost.clone(), done.clone(), stop.clone());
        let (url, job, token, lease) = (url.to_string(), claim.job, claim.token.clone(), a.lease);
        // Its own connection: the runs hold the main one's thread.
        std::thread::spawn(move || {
            let every = Duration::from_millis((lease / 3).max(100));
            // The claim was made a moment ago: the lease holds at least
            // this long, renewed or not.
            let mut held_until = Instant::now() + Duration::from_millis(lease) - every / 2;
            let mut lab = Lab::open(&url).ok();
            let mut last = Instant::now();
            while !done.load(Relaxed) {
                if stop.load(Relaxed) {
                    end.store(true, Relaxed);
                }
                if last.elapsed() >= every {
                    last = Instant::now();
                    let gone = match lab.as_mut().map(|l| l.renew(job, &token, lease)) {
                        Some(Ok(true)) => {
                            held_until = last + Duration::from_millis(lease);
                            false
                        }
                        Some(Ok(false)) => true,
                        Some(Err(e)) if !e.transient() => true,
                        // The database out of reach for a moment (a
                        // restart, a network blip): the lease holds until
                        // it runs out, so the job goes on and the renewal
                        // is tried again on a new connection.
                        _ if Instant::now() < held_until => {
                            lab = Lab::open(&url).ok();
                            false
                        }
                        _ => true,
                    };
                    if gone {
                        lost.store(true, Relaxed);
                        end.store(true, Relaxed);
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let outcome = run_points(a, me, &claim, &end, &lost);
    done.store(true, Relaxed);
    let _ = renewer.join();
    // Complete runs are offered even when the renewer saw the lease lost:
    // finishing checks the lease itself, under the job's lock.
    // However long the job ran, its lease was renewed to last this long.
    let lease = Duration::from_millis(a.lease);
    match outcome {
        Ok(runs) => match persist(lab, url, lease, |l| {
            l.finish(claim.job, &claim.token, &runs)
        })? {
            Some(ids) => me.say(
                lab,
                &format!(
                    "finished {what}: {} run{} stored ({})",
                    ids.len(),
                    plural(ids.len()),
                    ids.iter()
                        .map(|i| i.0.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            None => me.say(
                lab,
                &format!("lost the lease of {what} before storing it; nothing stored"),
            ),
        },
        Err(Unfinished::Lost) => me.say(
            lab,
            &format!("lost the lease of {what} (stopped past it?); nothing stored"),
        ),
        Err(Unfinished::Stopped) => {
            let r = persist(lab, url, lease, |l| {
                l.release(claim.job, &claim.token, None)
            })?;
            let said = if r == Released::NotHeld {
                "its lease was already lost"
            } else {
                "handed it back"
            };
            me.say(lab, &format!("stopped during {what}; {said}"));
        }
        Err(Unfinished::Failed(why)) => {
            let r = persist(lab, url, lease, |l| {
                l.release(claim.job, &claim.token, Some(&why))
            })?;
            let then = match r {
                Released::Queued => "queued again",
                Released::Failed => "failed for good",
                Released::NotHeld => "its lease was already lost",
            };
            me.say(lab, &format!("{what} failed ({then}): {why}"));
        }
    }
    Ok(())
}

/// How long an agent waits for its database to come back between jobs.
const OUTAGE: Duration = Duration::from_secs(300);

/// `ask` of the lab, again on a new connection while the database does not
/// answer, for at most `within`: a restart of the database or a blip of
/// the network costs a wait, not the job's runs. Asking again is safe: what
/// changes a job checks its token and lease in one transaction.
fn persist<T>(
    lab: &mut Lab,
    url: &str,
    within: Duration,
    mut ask: impl FnMut(&mut Lab) -> Result<T, plumb_store::StoreError>,
) -> Result<T, Failure> {
    let deadline = Instant::now() + within;
    let mut told = false;
    loop {
        match ask(lab) {
            Ok(v) => return Ok(v),
            Err(e) if !e.transient() || Instant::now() >= deadline => {
                return Err(super::db::store_err(e))
            }
            Err(e) => {
                if !std::mem::replace(&mut told, true) {
                    eprintln!("the lab's database did not answer ({e}); asking again");
                }
                std::thread::sleep(Duration::from_millis(500));
                if let Ok(fresh) = Lab::open(url) {
                    *lab = fresh;
                }
            }
        }
    }
}

/// Makes the job's points as `plumb sweep` makes them, in the set's order
/// and seed, under its label: their records and tags.
fn run_points(
    a: &AgentArgs,
    me: &Me,
    claim: &Claim,
    end: &Arc<AtomicBool>,
    lost: &Arc<AtomicBool>,
) -> Result<Vec<(RunRecord, RunTag)>, Unfinished> {
    let fail = |why: String| Unfinished::Failed(why);
    let mut plan = Plan::parse(&claim.set.file, claim.set.quick)
        .map_err(|e| fail(format!("the set's experiment file: {e}")))?;
    let mut todo = Vec::new();
    for id in &claim.points {
        let i = plan
            .points
            .iter()
            .position(|p| p.id.to_string() == *id)
            .ok_or_else(|| fail(format!("point {id} is not in the set's experiment file")))?;
        todo.push(i);
    }
    if !claim.set.kernels.is_empty() {
        return run_in_guests(a, me, claim, &plan, &todo, end, lost);
    }
    for &i in &todo {
        let p = &plan.points[i];
        for s in plan.knobs_of(p).iter().chain(plan.server_knobs_of(p)) {
            let knob = s.knob.to_string();
            if !allowed(&a.allow_knob, &knob) {
                return Err(fail(format!(
                    "point {} sets {knob}, which this agent does not allow; \
                     add --allow-knob {knob} to the agent of each host that may set it",
                    p.id
                )));
            }
        }
    }
    plan.check_host().map_err(|e| fail(e.to_string()))?;
    let far = ServerArgs {
        server: plan.experiment.server.clone(),
        ..ServerArgs::none()
    };
    let family = plan
        .points
        .first()
        .map_or(plumb_spec::Family::V4, |p| p.spec.family);
    let reached = super::run::reach(&far, family).map_err(|f| fail(f.message))?;
    for p in &mut plan.points {
        reached.aim(&mut p.spec);
    }
    let ctx = reached.context(false, Default::default());
    let mut opts = ctx.options(&claim.set.label).map_err(|f| fail(f.message))?;
    opts.interrupted = end.clone();
    let mut keep = Collect {
        who: format!("agent {}: job {}", me.name, claim.job),
        ctx: &ctx,
        tags: super::sweep::Tags::of(&plan, claim.set.seed),
        runs: Vec::new(),
    };
    let outcome = runner::run(&plan, &todo, claim.set.seed, &opts, &mut keep);
    ended(outcome, keep.runs, end, lost)
}

/// The job's runs, or why it has none: a stop or a lost lease when the
/// runs were ended, else the runner's error.
fn ended(
    outcome: Result<runner::Outcome, runner::SweepError>,
    runs: Vec<(RunRecord, RunTag)>,
    end: &AtomicBool,
    lost: &AtomicBool,
) -> Result<Vec<(RunRecord, RunTag)>, Unfinished> {
    match outcome {
        _ if end.load(Relaxed) => Err(stopped(lost)),
        Err(e) => Err(Unfinished::Failed(e.to_string())),
        Ok(o) if o.interrupted => Err(Unfinished::Failed("a run ended incomplete".into())),
        Ok(_) => Ok(runs),
    }
}

/// [`run_points`] for a set with kernels: every kernel booted on this host
/// for each round, as `plumb sweep --kernel` boots them. The knobs are the
/// guests' and touch nothing of this host's, so no allow list applies.
fn run_in_guests(
    a: &AgentArgs,
    me: &Me,
    claim: &Claim,
    plan: &Plan,
    todo: &[usize],
    end: &Arc<AtomicBool>,
    lost: &Arc<AtomicBool>,
) -> Result<Vec<(RunRecord, RunTag)>, Unfinished> {
    let fail = |why: String| Unfinished::Failed(why);
    if plan.experiment.server.is_some() {
        return Err(fail(
            "the set boots kernels, which run both ends inside each guest; its file names a server"
                .into(),
        ));
    }
    let mut vm = a.boot.options().map_err(fail)?;
    vm.interrupted = end.clone();
    let kernels: Vec<crate::args::KernelArg> = claim
        .set
        .kernels
        .iter()
        .map(|k| crate::args::kernel_arg(k))
        .collect();
    let guests = super::sweep::open_guests(&kernels, Some(&claim.set.label), &vm, plan)
        .map_err(|f| fail(f.message))?;
    let ctx = super::run::reach(&ServerArgs::none(), plumb_spec::Family::V4)
        .map_err(|f| fail(f.message))?
        .context(false, Default::default());
    let mut opts = ctx.options(&claim.set.label).map_err(|f| fail(f.message))?;
    opts.interrupted = end.clone();
    let mut keep = Collect {
        who: format!("agent {}: job {}", me.name, claim.job),
        ctx: &ctx,
        tags: super::sweep::Tags::of(plan, claim.set.seed),
        runs: Vec::new(),
    };
    let todos = vec![todo.to_vec(); guests.len()];
    let outcome = runner::run_in_guests(plan, &todos, claim.set.seed, &opts, &guests, &mut keep);
    ended(outcome, keep.runs, end, lost)
}

fn stopped(lost: &AtomicBool) -> Unfinished {
    if lost.load(Relaxed) {
        Unfinished::Lost
    } else {
        Unfinished::Stopped
    }
}

/// "1m05s" for an estimate.
fn minutes(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// The time left: the set's jobs still to finish at the mean time of those
/// done, spread over the agents of its class seen lately.
fn estimate(set: &SetStatus, agents: usize) -> Option<f64> {
    let took: Vec<f64> = set
        .jobs
        .iter()
        .filter(|j| j.state == "done")
        .filter_map(|j| j.seconds)
        .collect();
    if took.is_empty() {
        return None;
    }
    let mean = took.iter().sum::<f64>() / took.len() as f64;
    let running: f64 = set
        .jobs
        .iter()
        .filter(|j| j.state == "running")
        .map(|j| (mean - j.seconds.unwrap_or(0.0)).max(0.0))
        .sum();
    let queued = set.count("queued") as f64 * mean;
    Some((running + queued) / agents.max(1) as f64)
}

/// A job's state with where and how long, and why for a failure.
fn job_state(j: &plumb_store::lab::JobStatus) -> String {
    let at = j.agent.as_deref().unwrap_or("?");
    let took = j.seconds.map(minutes).unwrap_or_default();
    let runs = j
        .runs
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let why = j.error.as_deref().unwrap_or("no reason recorded");
    match j.state.as_str() {
        "queued" if j.error.is_some() => format!("queued again (last try: {why})"),
        "running" => format!("running on {at}, attempt {}, {took}", j.attempts),
        "done" => format!("done on {at} in {took}, run{} {runs}", plural(j.runs.len())),
        "failed" => format!(
            "failed after {} attempt{} ({why})",
            j.attempts,
            plural(j.attempts as usize)
        ),
        other => other.to_string(),
    }
}

/// How recently an agent must have spoken to count as working.
const ALIVE_S: f64 = 120.0;

/// The agents of `class` seen lately: those the time left is spread over,
/// and the images a lab bisect tests at once.
pub(crate) fn live(agents: &[plumb_store::lab::AgentStatus], class: &str) -> usize {
    agents
        .iter()
        .filter(|g| g.class == class && g.seen_s_ago < ALIVE_S)
        .count()
}

pub fn status(a: LabStatusArgs) -> Result<i32, Failure> {
    let mut lab = open(&a.db)?;
    let sets = lab.status(a.set, 10).map_err(super::db::store_err)?;
    if let (Some(id), true) = (a.set, sets.is_empty()) {
        return Err(Failure::usage(format!("set {id}: no such job set")));
    }
    let agents = lab.agents().map_err(super::db::store_err)?;
    if a.json {
        let doc = serde_json::json!({ "sets": sets, "agents": agents });
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| Failure::usage(e.to_string()))?
        );
        return Ok(0);
    }
    for set in &sets {
        let alive = live(&agents, &set.class);
        let left = match estimate(set, alive) {
            Some(s) if !set.settled() => format!(", about {} left", minutes(s)),
            _ => String::new(),
        };
        crate::outln!(
            "set {} {} label {} class {}: {} done, {} running, {} queued, {} failed of {}{left}",
            set.id,
            set.experiment,
            set.label,
            set.class,
            set.count("done"),
            set.count("running"),
            set.count("queued"),
            set.count("failed"),
            set.jobs.len(),
        );
        for j in &set.jobs {
            crate::outln!("  job {} {}: {}", j.id, job_state(j), j.points.join("; "));
        }
    }
    for g in &agents {
        crate::outln!(
            "agent {} ({}, class {}, pid {}) {} ago: {}",
            g.name,
            g.host,
            g.class,
            g.pid,
            minutes(g.seen_s_ago),
            g.word
        );
    }
    Ok(0)
}

pub fn wait(a: LabWaitArgs) -> Result<i32, Failure> {
    let mut lab = open(&a.db)?;
    let started = Instant::now();
    let set = loop {
        let mut sets = lab.status(Some(a.set), 1).map_err(super::db::store_err)?;
        let Some(set) = sets.pop() else {
            return Err(Failure::usage(format!("set {}: no such job set", a.set)));
        };
        if set.settled() {
            break set;
        }
        if let Some(ms) = a.timeout {
            if started.elapsed() >= Duration::from_millis(ms) {
                eprintln!(
                    "set {}: {} of {} jobs done when --timeout ran out",
                    set.id,
                    set.count("done"),
                    set.jobs.len()
                );
                return Ok(TIMED_OUT);
            }
        }
        if crate::interrupt_flag().load(Relaxed) {
            return Ok(crate::exit::INTERRUPTED);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let failed: Vec<_> = set.jobs.iter().filter(|j| j.state == "failed").collect();
    for j in &failed {
        eprintln!(
            "set {}: job {} ({}) failed: {}",
            set.id,
            j.id,
            j.points.join("; "),
            j.error.as_deref().unwrap_or("no reason recorded")
        );
    }
    if !failed.is_empty() {
        return Ok(FAILED);
    }
    let runs: usize = set.jobs.iter().map(|j| j.runs.len()).sum();
    eprintln!(
        "set {}: {} job{} done, {runs} run{} stored under label {}",
        set.id,
        set.jobs.len(),
        plural(set.jobs.len()),
        plural(runs),
        set.label
    );
    let Some(baseline) = &a.baseline else {
        return Ok(0);
    };
    // The comparison is check's own, on the set's label.
    let mut argv: Vec<String> = ["plumb", "check", "--baseline", baseline.as_str()]
        .map(String::from)
        .to_vec();
    argv.extend(["--candidate".into(), set.label.clone()]);
    argv.extend(["--threshold".into(), format!("{}", a.threshold * 100.0)]);
    if let Some(db) = &a.db.db {
        argv.extend(["--db".into(), db.display().to_string()]);
    }
    let cli = <crate::args::Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let crate::args::Command::Check(c) = cli.command else {
        unreachable!("parsed as check")
    };
    super::compare::check(c)
}

pub fn grant(a: LabGrantArgs) -> Result<i32, Failure> {
    if a.print {
        for g in plumb_store::lab::GRANTS {
            crate::outln!("{};", g.replace("{role}", &a.role));
        }
        return Ok(0);
    }
    let mut lab = open(&a.db)?;
    lab.grant(&a.role).map_err(super::db::store_err)?;
    eprintln!(
        "role {}: may claim the lab's jobs and write runs; `plumb agent --db` as {} on each host",
        a.role, a.role
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knob_is_allowed_by_its_name_or_a_prefix() {
        let allow = vec![
            "sysctl:net.core.rmem_max".to_string(),
            "sysctl:net.ipv4.*".to_string(),
        ];
        assert!(allowed(&allow, "sysctl:net.core.rmem_max"));
        assert!(allowed(&allow, "sysctl:net.ipv4.tcp_rmem"));
        assert!(!allowed(&allow, "sysctl:net.core.wmem_max"));
        assert!(!allowed(&allow, "sysctl:net.ipv6.conf.all.mtu"));
        assert!(!allowed(&[], "sysctl:net.ipv4.tcp_rmem"));
    }

    #[test]
    fn a_cells_variants_are_one_job_in_the_files_order() {
        let text = r#"
name = "cells"
[base]
workload = "stream"
duration = "1s"
[matrix]
buffers = ["16K", "64K"]
[[variant]]
name = "a"
[[variant]]
name = "b"
"#;
        let plan = Plan::parse(text, false).unwrap();
        let jobs = jobs_of(&plan);
        assert_eq!(jobs.len(), 2, "{jobs:?}");
        for job in &jobs {
            assert_eq!(job.len(), 2, "{job:?}");
            assert!(job[0].ends_with("variant=a") && job[1].ends_with("variant=b"));
        }
        assert!(jobs[0][0].contains("16K"), "{jobs:?}");
    }
}
