//! Verdicts from records handed in (never paths or the store): runs are
//! matched by a key (the spec key, or an experiment point's place in its
//! matrix), each matched point gets its deltas, Welch's test, Fieller's
//! interval of the ratio and a verdict, and the
//! comparison is explained by the environment diff, the CPU budget per
//! end (seconds of user, system and softirq time per GB moved), the events
//! behind it and the CPUs that took each device's interrupts.
#![deny(unsafe_code)]

mod budget;
pub mod decide;
pub mod history;
pub mod limits;
pub mod load;
pub mod profile;

pub use budget::{busier_neighbours, BudgetLine, OTHER};
use plumb_samples::{EnvChange, Environment, Iteration, Metric, RunRecord};
use plumb_stats::{CompareParams, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;

/// A side of a point whose iterations sit on two levels.
#[derive(Debug, Clone, Serialize)]
pub struct TwoLevels {
    /// "A" or "B".
    pub side: String,
    pub low: f64,
    pub low_n: usize,
    pub high: f64,
    pub high_n: usize,
}

/// One side of a comparison: a label (or a run id) and the runs under it.
#[derive(Debug, Clone)]
pub struct Side {
    pub name: String,
    pub runs: Vec<SideRun>,
    /// The environment of the newest run on this side, when known.
    pub env: Option<Environment>,
}

/// A run and the key it is matched by on the other side.
#[derive(Debug, Clone)]
pub struct SideRun {
    /// The run's spec key, or where the run sits in an experiment when the
    /// variants compared change its spec (`sndbuf=8K`).
    pub key: String,
    pub record: RunRecord,
}

impl Side {
    /// Runs matched by their spec keys; each other part of a run of parts
    /// is a point of its own, matched by the run's key and its name.
    pub fn new(name: impl Into<String>, runs: Vec<RunRecord>, env: Option<Environment>) -> Side {
        Side {
            name: name.into(),
            runs: runs
                .into_iter()
                .flat_map(|record| {
                    let parts = record.part_views();
                    std::iter::once(record).chain(parts)
                })
                .map(|record| SideRun {
                    key: record.spec_key.clone(),
                    record,
                })
                .collect(),
            env,
        }
    }

    /// The records, newest last as they were handed in.
    pub fn records(&self) -> impl Iterator<Item = &RunRecord> {
        self.runs.iter().map(|r| &r.record)
    }

    /// The complete runs matched by `key`.
    fn complete_at<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a RunRecord> {
        self.runs
            .iter()
            .filter(move |r| r.key == key && r.record.complete)
            .map(|r| &r.record)
    }
}

/// How the comparison was made; stated in every rendering.
#[derive(Debug, Clone, Serialize)]
pub struct Method {
    pub test: String,
    pub alpha: f64,
    pub noise_band: f64,
    pub level: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SideStats {
    pub n: usize,
    pub mean: f64,
    /// Student-t interval of the mean at the method's level; equal to the
    /// mean when n < 2.
    pub lo: f64,
    pub hi: f64,
    /// The iterations' sample standard deviation: their spread, which the
    /// iterations a side needed to decide follow.
    pub sd: f64,
    pub runs: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The run keys of the point on each side (equal where the spec is).
    #[serde(skip)]
    pub key_a: String,
    #[serde(skip)]
    pub key_b: String,
    pub spec_key: String,
    pub summary: String,
    pub metric: Metric,
    /// The metric's unit, for JSON and CSV readers.
    pub unit: &'static str,
    pub a: SideStats,
    pub b: SideStats,
    /// mean(b) / mean(a) - 1.
    pub change: f64,
    pub p_value: f64,
    /// Fieller's interval of mean(b) / mean(a), which leaves 1 out exactly
    /// where `p_value` is below 1 - level; `ratio_hi` is infinite (null in
    /// JSON) where A's mean is not distinguishable from 0.
    pub ratio_lo: f64,
    pub ratio_hi: f64,
    pub verdict: Verdict,
    /// With the verdict `too_few`: iterations a side at which a change of
    /// `needed_for` would be told at the spread observed
    /// (`plumb_stats::needed_a_side`); absent past `plumb_stats::NEEDED_MAX`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needed: Option<usize>,
    /// With the verdict `too_few`: the change, as a fraction, that `needed`
    /// is sized to tell: the noise band, or the threshold of `check` and
    /// `bisect`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needed_for: Option<f64>,
    /// The sides whose iterations sit on two levels, whatever the verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bimodal: Vec<TwoLevels>,
    /// What the budget lines count: "CPU seconds per GB" or "CPU
    /// microseconds per transaction".
    pub budget_unit: &'static str,
    pub budget: Vec<BudgetLine>,
    /// Hosts whose other processes were busier on one side (see
    /// [`busier_neighbours`]).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub neighbours: Vec<String>,
    /// Sides whose windows were too short for their path (too few round
    /// trips, senders still in slow start as they opened).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub short_windows: Vec<String>,
    /// What the event lines count: "events per GB" or "events per million
    /// transactions".
    pub events_unit: &'static str,
    /// Migrations, softnet drops and squeezes, interface drops per end,
    /// where either side counted any.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub events: Vec<BudgetLine>,
    /// Interfaces whose interrupts a different CPU took most of on the two
    /// sides, per end.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub irq_moves: Vec<String>,
    /// Per end, the functions whose CPU time per unit of work changed,
    /// where both sides were profiled (`--profile`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profile: Vec<profile::EndProfiles>,
    /// Per end whose flows sent on both sides, what limited them: the
    /// shares of their busy time, each with its interval and verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<limits::LimitLine>,
    /// Runs of parts with probes and loads: each probe's median in each
    /// stretch of the window in which the same loads ran, on both sides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub under_load: Vec<load::LoadLine>,
    /// Whether its verdict counts for `check` and `bisect`: every point's
    /// does, unless the comparison decides on a figure
    /// ([`decide::decide_on`]) that this point lacks.
    pub decides: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub method: Method,
    pub points: Vec<Point>,
    /// Summaries of test points measured on one side only.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
    /// Points with fewer than 2 complete iterations on a side: no test possible.
    pub too_few: Vec<String>,
    pub env_diff: Vec<EnvChange>,
    /// Each side's kernel release per end (`client 6.6.0, server 6.7.0`),
    /// when the side recorded an environment.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernels_a: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernels_b: Option<String>,
    /// Facts one side could not capture, which the diff is silent about.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub env_unknown: Vec<String>,
    /// Set when the two sides share no test point but each has exactly one,
    /// and those were compared with each other: what differs in the specs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spec_diff: Vec<EnvChange>,
    /// Set when the two sides were measured by different plumb builds
    /// (either end's): says which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builds: Option<String>,
    /// Set when either side ran in a virtual machine (`--kernel`): where
    /// each side ran, and whether the comparison crossed machines.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub machines: Option<String>,
    /// The runs of either side that the host disturbed beyond plumb's
    /// bound (`RunRecord::suspect`), each with its side and why: `check`
    /// and `bisect` answer "cannot tell" while there is one.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub suspect: Vec<String>,
    /// The figure the points that have it were judged on instead of their
    /// headline ([`decide::decide_on`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_on: Option<String>,
}

/// The plumb builds that measured a side's runs, both ends', as recorded.
fn builds_of(s: &Side) -> std::collections::BTreeSet<String> {
    s.runs
        .iter()
        .flat_map(|r| {
            let server = r.record.peer.as_ref().and_then(|p| p.build.clone());
            r.record.build.clone().into_iter().chain(server)
        })
        .collect()
}

/// A set's members joined by "and".
fn joined(s: &std::collections::BTreeSet<String>) -> String {
    s.iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// One line when the sides' builds differ; records made before builds were
/// recorded say nothing.
fn different_builds(a: &Side, b: &Side) -> Option<String> {
    let (ba, bb) = (builds_of(a), builds_of(b));
    if ba.is_empty() || bb.is_empty() || ba == bb {
        return None;
    }
    Some(format!(
        "{} and {} were measured by different plumb builds: {} by {}; {} by {}",
        a.name,
        b.name,
        a.name,
        joined(&ba),
        b.name,
        joined(&bb)
    ))
}

impl Point {
    /// Its change, p, ratio interval, verdict and the iterations a
    /// verdict needs, as `plumb_stats::compare` judged its sides' values;
    /// None (one iteration a side, or a mean of 0) tells nothing.
    pub(crate) fn judge(&mut self, c: Option<&plumb_stats::Comparison>, noise_band: f64) {
        match c {
            Some(v) => {
                self.change = v.change;
                self.p_value = v.welch.p;
                (self.ratio_lo, self.ratio_hi) = (v.ratio.lo, v.ratio.hi);
                self.verdict = v.verdict;
                self.needed = v.needed;
                self.needed_for = (v.verdict == Verdict::TooFew).then_some(noise_band);
            }
            None => {
                self.change = self.b.mean / self.a.mean - 1.0;
                self.p_value = 1.0;
                (self.ratio_lo, self.ratio_hi) = (0.0, f64::INFINITY);
                self.verdict = Verdict::TooFew;
                self.needed = None;
                self.needed_for = Some(noise_band);
            }
        }
    }

    /// Each side's spread over A's mean, as `needed` is sized from it.
    pub fn spread(&self) -> (f64, f64) {
        let over = self.a.mean.abs();
        (self.a.sd / over, self.b.sd / over)
    }
}

impl Comparison {
    /// Sizes the `needed` of every point with too few iterations to tell a
    /// change of `change` (a fraction) rather than the noise band: what
    /// `check` and `bisect` look for is a change beyond their threshold.
    pub fn size_needed_for(&mut self, change: f64) {
        let alpha = self.method.alpha;
        for p in &mut self.points {
            if p.verdict == Verdict::TooFew {
                let (cv_a, cv_b) = p.spread();
                p.needed = plumb_stats::needed_a_side(p.a.n.max(p.b.n), cv_a, cv_b, change, alpha);
                p.needed_for = Some(change);
            }
        }
    }

    /// The worst verdict over all points: regression beats the undecided
    /// ones (bimodal, too few iterations, inconclusive) beat improvement
    /// and no change.
    pub fn overall(&self) -> Option<Verdict> {
        let rank = |v: &Verdict| match v {
            Verdict::Regression => 5,
            Verdict::Bimodal => 4,
            Verdict::TooFew => 3,
            Verdict::Inconclusive => 2,
            Verdict::Improvement => 1,
            Verdict::NoChange => 0,
        };
        self.points.iter().map(|p| p.verdict).max_by_key(rank)
    }
}

fn complete_iterations<'a>(side: &'a Side, key: &'a str) -> Vec<&'a Iteration> {
    side.complete_at(key)
        .flat_map(|r| r.iterations.iter().filter(|i| i.complete))
        .collect()
}

fn side_stats(xs: &[f64], level: f64, runs: usize) -> SideStats {
    let (mean, lo, hi) = plumb_stats::mean_with_interval(xs, level);
    SideStats {
        n: xs.len(),
        mean,
        lo,
        hi,
        sd: plumb_stats::Summary::of(xs).map_or(0.0, |s| s.sd),
        runs,
    }
}

/// What a point is, in one line: a part of a run of parts
/// ([`RunRecord::part_views`], keyed `RUN_KEY/NAME`) is named first.
pub fn point_summary(record: &RunRecord) -> String {
    match record.part_name() {
        Some(name) => format!("part {name}: {}", record.spec.summary()),
        None => record.spec.summary(),
    }
}

/// Compares side `a` (the baseline) with side `b` (the candidate).
pub fn compare(a: &Side, b: &Side, params: &CompareParams) -> Comparison {
    compare_across(a, b, params, false)
}

/// Where a record's run was made: on a host, or the virtual machine.
fn machine_of(r: &RunRecord) -> String {
    r.spec
        .machine
        .as_ref()
        .map_or_else(|| "on a host".to_string(), ToString::to_string)
}

/// The accelerator a record ran under, None on a host: runs under two
/// accelerators (or a host and a guest) measure different machines.
fn accel_of(r: &RunRecord) -> Option<&str> {
    r.spec.machine.as_ref().map(|m| m.accel.as_str())
}

/// One line when either side ran in a virtual machine: where each ran.
fn machines_line(a: &Side, b: &Side) -> Option<String> {
    let of = |s: &Side| -> std::collections::BTreeSet<String> {
        s.runs
            .iter()
            .filter(|r| r.record.complete)
            .map(|r| machine_of(&r.record))
            .collect()
    };
    let (ma, mb) = (of(a), of(b));
    if ma.iter().chain(&mb).all(|m| m == "on a host") {
        return None;
    }
    let emulated = ma.iter().chain(&mb).any(|m| m.contains("tcg"));
    let caveat = if emulated {
        " (under TCG, figures measure QEMU's emulator as well as the kernel and follow \
         the host's load: they compare kernel with kernel under TCG, not with a host)"
    } else {
        ""
    };
    Some(if ma == mb {
        format!("both sides ran {}{caveat}", joined(&ma))
    } else {
        format!(
            "the sides ran on different machines: {} {}; {} {}{caveat}",
            a.name,
            joined(&ma),
            b.name,
            joined(&mb)
        )
    })
}

/// [`compare`], where `across_machines` lets two single test points made
/// under different accelerators (or on a host and in a guest) be compared
/// with each other; without it they get no verdict.
pub fn compare_across(
    a: &Side,
    b: &Side,
    params: &CompareParams,
    across_machines: bool,
) -> Comparison {
    let keys = |s: &Side| -> BTreeMap<String, String> {
        s.runs
            .iter()
            .filter(|r| r.record.complete)
            .map(|r| (r.key.clone(), point_summary(&r.record)))
            .collect()
    };
    let (ka, kb) = (keys(a), keys(b));
    // Two single test points that differ (a run with --pacing-rate against
    // one without, named by the user) are compared with each other, and
    // the spec difference is stated.
    let mut pairs: Vec<(String, String, String)> = ka
        .iter()
        .filter(|(k, _)| kb.contains_key(*k))
        .map(|(k, s)| (k.clone(), k.clone(), s.clone()))
        .collect();
    let mut spec_diff = Vec::new();
    let mut machines = machines_line(a, b);
    let accel = |s: &Side, k: &str| -> Option<String> {
        s.runs
            .iter()
            .find(|r| r.key == k)
            .and_then(|r| accel_of(&r.record).map(str::to_string))
    };
    // A run of parts counts as one point here, its parts following it.
    let runs = |s: &Side| -> BTreeMap<String, String> {
        s.runs
            .iter()
            .filter(|r| r.record.complete && r.record.part_name().is_none())
            .map(|r| (r.key.clone(), point_summary(&r.record)))
            .collect()
    };
    let (ra, rb) = (runs(a), runs(b));
    // Two points paired though they differ: each side's summary, or one.
    let pair_summary = |sa: &String, sb: &String| -> String {
        if sa == sb {
            sa.clone()
        } else {
            format!("{sa} vs {sb}")
        }
    };
    if pairs.is_empty() && ra.len() == 1 && rb.len() == 1 {
        let (ka1, sa) = ra.iter().next().expect("one key");
        let (kb1, sb) = rb.iter().next().expect("one key");
        let crossed = !across_machines && accel(a, ka1) != accel(b, kb1);
        if crossed {
            machines = machines.map(|m| {
                format!("{m}; no verdict across them (--across-machines compares them anyway)")
            });
        }
        if !crossed {
            pairs.push((ka1.clone(), kb1.clone(), pair_summary(sa, sb)));
            // Their parts pair by name (`RUN_KEY/NAME`).
            for (k, sa) in &ka {
                let Some(name) = k.strip_prefix(&format!("{ka1}/")) else {
                    continue;
                };
                let kb2 = format!("{kb1}/{name}");
                if let Some(sb) = kb.get(&kb2) {
                    pairs.push((k.clone(), kb2, pair_summary(sa, sb)));
                }
            }
            let spec = |s: &Side, k: &str| {
                s.runs
                    .iter()
                    .find(|r| r.key == k)
                    .map(|r| spec_fields(&r.record))
                    .unwrap_or_default()
            };
            spec_diff = spec(a, ka1).diff(&spec(b, kb1));
        }
    }
    let mut points = Vec::new();
    let mut too_few = Vec::new();
    for (key_a, key_b, summary) in &pairs {
        let ia = complete_iterations(a, key_a);
        let ib = complete_iterations(b, key_b);
        let xa: Vec<f64> = ia.iter().map(|i| i.derived.metric()).collect();
        let xb: Vec<f64> = ib.iter().map(|i| i.derived.metric()).collect();
        let Some(c) = plumb_stats::compare(&xa, &xb, params) else {
            too_few.push(format!("{summary} (n = {} vs {})", xa.len(), xb.len()));
            continue;
        };
        let record_a = a.runs.iter().find(|r| &r.key == key_a).map(|r| &r.record);
        let metric = record_a.map_or(Metric::Throughput, |r| r.metric());
        let transactional = metric == Metric::Tps;
        let level = params.level;
        // A part of a run of parts has no CPU of its own: the host's and the
        // processes' are its run's, for every part together.
        let budget = match record_a.and_then(|r| r.part_name()) {
            Some(_) => Vec::new(),
            None => budget::lines(&ia, &ib, transactional, level, budget::cpu, |_, _| true),
        };
        let events = budget::lines(&ia, &ib, transactional, level, budget::events, |a, b| {
            a > 0.0 || b > 0.0
        });
        let runs = |s: &Side, key: &str| s.complete_at(key).count();
        points.push(Point {
            key_a: key_a.clone(),
            key_b: key_b.clone(),
            spec_key: if key_a == key_b {
                key_a.clone()
            } else {
                format!("{key_a}/{key_b}")
            },
            summary: summary.clone(),
            metric,
            unit: metric.unit(),
            budget_unit: metric.cost_unit(),
            a: side_stats(&xa, params.level, runs(a, key_a)),
            b: side_stats(&xb, params.level, runs(b, key_b)),
            // Judged below, from `c`.
            change: 0.0,
            p_value: 1.0,
            ratio_lo: 0.0,
            ratio_hi: f64::INFINITY,
            verdict: Verdict::TooFew,
            needed: None,
            needed_for: None,
            bimodal: c
                .bimodal
                .iter()
                .map(|(side, l)| TwoLevels {
                    side: side.to_string(),
                    low: l.low_mean,
                    low_n: l.low_n,
                    high: l.high_mean,
                    high_n: l.high_n,
                })
                .collect(),
            neighbours: busier_neighbours(&ia, &ib),
            short_windows: [("A", &ia), ("B", &ib)]
                .into_iter()
                .filter_map(|(side, its)| short_windows(side, its))
                .collect(),
            budget,
            events_unit: metric.events_unit(),
            events,
            irq_moves: budget::irq_moves(&ia, &ib),
            profile: profile::compare(&ia, &ib, metric),
            limits: limits::lines(&ia, &ib, params.level),
            under_load: load::lines(&ia, &ib, params.level),
            decides: true,
        });
        if let Some(p) = points.last_mut() {
            p.judge(Some(&c), params.noise_band);
        }
    }
    let paired = |k: &String| pairs.iter().any(|(x, y, _)| x == k || y == k);
    let only = |x: &BTreeMap<String, String>, _y: &BTreeMap<String, String>| {
        x.iter()
            .filter(|(k, _)| !paired(k))
            .map(|(_, s)| s.clone())
            .collect()
    };
    let suspect = [a, b]
        .iter()
        .flat_map(|s| {
            s.runs.iter().filter_map(move |r| {
                let why = r.record.suspect.as_ref()?;
                Some(format!(
                    "{} ({}, {}): {why}",
                    s.name,
                    point_summary(&r.record),
                    r.record.started_at
                ))
            })
        })
        .collect();
    let (env_diff, env_unknown) = match (&a.env, &b.env) {
        (Some(ea), Some(eb)) => (ea.diff(eb), ea.unknown_notes(eb)),
        _ => (Vec::new(), Vec::new()),
    };
    Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        method: Method {
            test: "Welch's t-test on iteration means; Fieller's interval of the ratio of means"
                .into(),
            alpha: params.alpha,
            noise_band: params.noise_band,
            level: params.level,
        },
        only_a: only(&ka, &kb),
        only_b: only(&kb, &ka),
        points,
        too_few,
        env_diff,
        env_unknown,
        spec_diff,
        builds: different_builds(a, b),
        machines,
        suspect,
        kernels_a: a.env.as_ref().map(Environment::kernels),
        kernels_b: b.env.as_ref().map(Environment::kernels),
        decided_on: None,
    }
}

/// A record's spec as dotted field names and their values (`socket.sndbuf`
/// = `auto`), unset fields left out, so that the differences of two specs
/// read like an environment diff.
pub fn spec_fields(record: &RunRecord) -> Environment {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Environment) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            serde_json::Value::Null => {}
            serde_json::Value::String(s) => out.set(prefix, s.clone()),
            other => out.set(prefix, other.to_string()),
        }
    }
    let mut out = Environment::default();
    walk(
        "",
        &serde_json::to_value(&record.spec).unwrap_or_default(),
        &mut out,
    );
    out
}

/// What `plumb check` answers, in git bisect's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bisect {
    /// No regression beyond the threshold: exit 0.
    Good,
    /// A significant regression beyond the threshold: exit 1.
    Bad,
    /// Cannot tell: exit 125 (`git bisect skip`).
    Skip,
}

impl Bisect {
    pub fn exit_code(self) -> i32 {
        match self {
            Bisect::Good => 0,
            Bisect::Bad => 1,
            Bisect::Skip => 125,
        }
    }
}

/// A regression counts as bad only when it is significant and the drop is
/// beyond `threshold` (a fraction); any point that cannot be told (too few
/// iterations, a side on two levels, or inconclusive without ruling out a
/// drop that large), or no point at all, is a skip.
pub fn bisect(c: &Comparison, threshold: f64) -> Bisect {
    bisect_for(c, threshold, Change::Worse)
}

/// Which change a bisect looks for: the first build that got worse (a
/// regression), better (a fix), or either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Worse,
    Better,
    Any,
}

/// [`bisect`] for the change asked: a significant change of that kind
/// beyond `threshold` is bad.
pub fn bisect_for(c: &Comparison, threshold: f64, change: Change) -> Bisect {
    // A side the host disturbed cannot tell good from bad.
    if !c.points.iter().any(|p| p.decides) || !c.suspect.is_empty() {
        return Bisect::Skip;
    }
    let worse = matches!(change, Change::Worse | Change::Any);
    let better = matches!(change, Change::Better | Change::Any);
    let mut out = Bisect::Good;
    for p in c.points.iter().filter(|p| p.decides) {
        // How far the ratio's interval reaches toward worse and toward
        // better: down for a throughput, up for a latency.
        let (down, up) = (1.0 - p.ratio_lo, p.ratio_hi - 1.0);
        let (toward_worse, toward_better) = if p.metric.higher_is_better() {
            (down, up)
        } else {
            (up, down)
        };
        match p.verdict {
            Verdict::Regression if worse && p.change.abs() > threshold => return Bisect::Bad,
            Verdict::Improvement if better && p.change.abs() > threshold => return Bisect::Bad,
            // Not significant either way (or too few iterations to say
            // so), but if the ratio's interval stays inside the threshold
            // on the side looked for, a change that large is ruled out.
            Verdict::Inconclusive | Verdict::TooFew
                if (worse && toward_worse > threshold) || (better && toward_better > threshold) =>
            {
                out = Bisect::Skip
            }
            Verdict::Bimodal => out = Bisect::Skip,
            _ => {}
        }
    }
    out
}

/// What made a side's windows too short for its path, as its first such
/// iteration says, and in how many of its iterations.
fn short_windows(side: &str, its: &[&Iteration]) -> Option<String> {
    let flagged: Vec<Vec<String>> = its
        .iter()
        .map(|i| i.short_window())
        .filter(|w| !w.is_empty())
        .collect();
    Some(format!(
        "{side}: {} (in {} of its {} iterations)",
        flagged.first()?.join("; "),
        flagged.len(),
        its.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(throughput: &[f64], server_host: &str) -> RunRecord {
        let mut r = plumb_samples::testing::with_throughput(throughput);
        r.complete = true;
        for i in &mut r.iterations {
            i.server.hostname = server_host.to_string();
        }
        r
    }

    fn budget_ends(server_host: &str) -> Vec<String> {
        let side =
            |name: &str| Side::new(name, vec![record(&[9e9, 9.1e9, 8.9e9], server_host)], None);
        let c = compare(&side("a"), &side("b"), &CompareParams::default());
        let mut ends: Vec<String> = c.points[0].budget.iter().map(|l| l.end.clone()).collect();
        ends.retain(|e| e.contains("host"));
        ends.dedup();
        ends
    }

    fn verdict_of(a: &[f64], b: &[f64]) -> Comparison {
        let side = |name: &str, xs: &[f64]| Side::new(name, vec![record(xs, "h")], None);
        compare(&side("a", a), &side("b", b), &CompareParams::default())
    }

    #[test]
    fn a_suspect_run_on_either_side_is_a_skip_for_bisect() {
        let clear = [9e9, 9.1e9, 8.9e9, 9.05e9];
        let side = |name: &str, xs: &[f64], suspect: Option<&str>| {
            let mut r = record(xs, "h");
            r.suspect = suspect.map(str::to_string);
            Side::new(name, vec![r], None)
        };
        // A clear regression, but B's host was busy.
        let c = compare(
            &side("a", &clear, None),
            &side("b", &[4e9, 4.1e9, 3.9e9, 4.05e9], None),
            &CompareParams::default(),
        );
        assert_eq!(bisect(&c, 0.05), Bisect::Bad);
        let c = compare(
            &side("a", &clear, None),
            &side(
                "b",
                &[4e9, 4.1e9, 3.9e9, 4.05e9],
                Some("other processes took 40 %"),
            ),
            &CompareParams::default(),
        );
        assert_eq!(c.suspect.len(), 1, "{:?}", c.suspect);
        assert!(c.suspect[0].starts_with("b ("), "{:?}", c.suspect);
        assert_eq!(bisect(&c, 0.05), Bisect::Skip);
        let c = compare(
            &side("a", &clear, Some("busy")),
            &side("b", &clear, None),
            &CompareParams::default(),
        );
        assert_eq!(bisect(&c, 0.05), Bisect::Skip);
    }

    #[test]
    fn too_few_iterations_and_two_levels_are_skips_for_bisect() {
        // Two iterations a side, one of them wild: a drop far beyond any
        // threshold that no test can yet decide.
        let c = verdict_of(&[9e9, 9.2e9], &[1e9, 8e9]);
        let p = &c.points[0];
        assert_eq!(p.verdict, Verdict::TooFew, "{p:?}");
        // A spread that wild needs more iterations than are worth naming.
        assert_eq!(p.needed, None);
        assert!(p.ratio_lo < 1.0 && p.ratio_hi > 1.0);
        assert_eq!(bisect(&c, 0.05), Bisect::Skip);
        assert_eq!(c.overall(), Some(Verdict::TooFew));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["points"][0]["verdict"], "too_few");
        assert!(json["points"][0].get("needed").is_none(), "{json}");
        // 10.0 and 10.4 Gbit/s against 9.8 and 10.2: a spread of 2.77 % of
        // A's mean a side, which tells the 2 % noise band at 31 a side
        // (2 (1.960 + 0.842)² 0.0277² / 0.02² = 30.2) and check's 5 %
        // threshold at 5 (4.8).
        let mut c = verdict_of(&[10e9, 10.4e9], &[9.8e9, 10.2e9]);
        assert_eq!(c.points[0].verdict, Verdict::TooFew);
        assert_eq!(c.points[0].needed, Some(31));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["points"][0]["needed"], 31);
        assert_eq!(json["points"][0]["needed_for"], 0.02);
        c.size_needed_for(0.05);
        assert_eq!(c.points[0].needed, Some(5));
        assert_eq!(c.points[0].needed_for, Some(0.05));
        assert_eq!(bisect(&c, 0.05), Bisect::Skip);
        // B runs at A's rate but stalls in two iterations.
        let a = [9e9, 9.1e9, 8.9e9, 9.05e9, 8.95e9, 9e9];
        let c = verdict_of(&a, &[9e9, 1e9, 9.1e9, 8.9e9, 1.1e9, 9.05e9]);
        let p = &c.points[0];
        assert_eq!(p.verdict, Verdict::Bimodal, "{p:?}");
        assert_eq!(bisect(&c, 0.05), Bisect::Skip);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["points"][0]["verdict"], "bimodal");
        assert_eq!(json["points"][0]["bimodal"][0]["side"], "B");
        assert_eq!(json["points"][0]["bimodal"][0]["low_n"], 2);
    }

    #[test]
    fn a_bisect_finds_the_change_it_looks_for_and_rules_out_what_the_interval_does() {
        // B is twice A: bad for a bisect after a fix, good after a regression.
        let c = verdict_of(&[4e7, 4.1e7, 3.9e7], &[8e7, 8.2e7, 7.9e7]);
        assert_eq!(c.points[0].verdict, Verdict::Improvement);
        assert_eq!(bisect_for(&c, 0.05, Change::Better), Bisect::Bad);
        assert_eq!(bisect_for(&c, 0.05, Change::Any), Bisect::Bad);
        assert_eq!(bisect_for(&c, 0.05, Change::Worse), Bisect::Good);
        assert_eq!(bisect(&c, 0.05), Bisect::Good);
        // The same within a hair: whatever the verdict, the interval rules
        // out a change of 5 % either way.
        let c = verdict_of(&[4e7, 4.01e7, 3.99e7], &[4.0e7, 4.005e7, 3.995e7]);
        let p = &c.points[0];
        assert!(p.ratio_lo > 0.95 && p.ratio_hi < 1.05, "{p:?}");
        assert_eq!(bisect_for(&c, 0.05, Change::Any), Bisect::Good, "{p:?}");
    }

    /// A side whose two ends ran on one host, each iteration's first CPU
    /// of it as `busier` leaves it.
    fn one_host(name: &str, busier: impl Fn(&mut plumb_samples::CpuTimes)) -> Side {
        let mut r = record(&[9e9, 9.1e9, 8.9e9], "h");
        for i in &mut r.iterations {
            i.server.hostname = i.client.hostname.clone();
            busier(&mut i.client.cpus[0]);
        }
        Side::new(name, vec![r], None)
    }

    #[test]
    fn a_neighbour_whose_ticks_were_lost_is_named_all_the_same() {
        // B's host ticked as A's did, but its idle clock says 8 s more of
        // it was busy: time a tickless kernel's ticks missed.
        let a = one_host("a", |c| c.span_s = Some(c.total_s()));
        let b = one_host("b", |c| c.span_s = Some(c.total_s() + 8.0));
        let c = compare(&a, &b, &CompareParams::default());
        let p = &c.points[0];
        let other = p.budget.iter().find(|l| l.part == OTHER).unwrap();
        assert!(other.b > other.a, "{other:?}");
        assert_eq!(p.neighbours.len(), 1, "{:?}", p.neighbours);
        assert!(
            p.neighbours[0].contains("busier under B"),
            "{:?}",
            p.neighbours
        );
    }

    #[test]
    fn a_busier_neighbour_is_named_apart_from_the_tests_own_cpu() {
        // B's host spent 8 s more than its ends in user time: a compile.
        let a = one_host("a", |_| {});
        let b = one_host("b", |c| c.user_s += 8.0);
        let c = compare(&a, &b, &CompareParams::default());
        let p = &c.points[0];
        let other = p.budget.iter().find(|l| l.part == OTHER).unwrap();
        assert_eq!(other.end, "host");
        assert!(other.b > other.a, "{other:?}");
        // The ends' own lines are untouched by the neighbour.
        for l in p
            .budget
            .iter()
            .filter(|l| l.end == "client" || l.end == "server")
        {
            assert_eq!(l.a, l.b, "{l:?}");
        }
        assert_eq!(p.neighbours.len(), 1, "{:?}", p.neighbours);
        assert!(
            p.neighbours[0].contains("busier under B"),
            "{}",
            p.neighbours[0]
        );
        // The same host on both sides says nothing.
        let c = compare(&a, &one_host("b", |_| {}), &CompareParams::default());
        assert!(c.points[0].neighbours.is_empty());
    }

    #[test]
    fn ends_on_one_host_count_its_cpus_once() {
        let r = plumb_samples::testing::example();
        let same = r.iterations[0].client.hostname.clone();
        assert_eq!(budget_ends(&same), vec!["host".to_string()]);
        assert_eq!(
            budget_ends("elsewhere"),
            vec!["client host".to_string(), "server host".to_string()]
        );
    }

    /// A side of three iterations whose server, on a host of its own, was
    /// migrated `migrations` times, dropped `dropped` packets in its
    /// backlogs and took eth0's interrupts on `irq_cpu`.
    fn accounted(name: &str, migrations: u64, dropped: u64, irq_cpu: u32) -> Side {
        let mut r = record(&[9e9, 9.1e9, 8.9e9], "elsewhere");
        for i in &mut r.iterations {
            i.server.process.sched = Some(plumb_samples::SchedTimes {
                migrations: Some(migrations),
                ..Default::default()
            });
            i.server.softnet = vec![plumb_samples::SoftnetCounts {
                cpu: 3,
                processed: 1000,
                dropped,
                ..Default::default()
            }];
            i.server.interfaces = vec![plumb_samples::InterfaceCounts {
                name: "eth0".into(),
                irqs: vec![plumb_samples::IrqCounts {
                    irq: 40,
                    name: "eth0-TxRx-0".into(),
                    cpus: vec![
                        plumb_samples::IrqCpu {
                            cpu: irq_cpu,
                            count: 900,
                        },
                        plumb_samples::IrqCpu { cpu: 7, count: 100 },
                    ],
                }],
                ..Default::default()
            }];
        }
        Side::new(name, vec![r], None)
    }

    #[test]
    fn migrations_drops_and_moved_interrupts_explain_a_point_per_end() {
        let c = compare(
            &accounted("a", 10, 0, 1),
            &accounted("b", 40, 5, 0),
            &CompareParams::default(),
        );
        let p = &c.points[0];
        assert_eq!(p.events_unit, "events per GB");
        let line = |end: &str, part: &str| {
            p.events
                .iter()
                .find(|l| l.end == end && l.part == part)
                .unwrap_or_else(|| panic!("{end} {part} in {:?}", p.events))
        };
        let m = line("server", "migrations");
        assert!((m.change.unwrap() - 3.0).abs() < 1e-9, "{m:?}");
        // Every iteration of B migrated more than every one of A's.
        assert_eq!(m.verdict, limits::ShareVerdict::More, "{m:?}");
        let r = record(&[1.0], "elsewhere");
        let gb = r.iterations[0].transfer.received_bytes as f64 / 1e9;
        assert!((m.a - 10.0 / gb).abs() < 1e-6 * m.a, "{m:?}, {gb} GB each");
        let d = line("server host", "softnet dropped");
        assert_eq!(d.a, 0.0);
        assert!(d.b > 0.0 && d.change.is_none(), "{d:?}");
        // Nothing counted on either side says nothing.
        assert!(
            p.events.iter().all(|l| l.part != "time_squeeze"),
            "{:?}",
            p.events
        );
        assert_eq!(
            p.irq_moves,
            vec!["server: IRQs of eth0 moved from CPU 1 (90 %) to CPU 0 (90 %)".to_string()]
        );
        let same = compare(
            &accounted("a", 10, 0, 1),
            &accounted("b", 10, 0, 1),
            &CompareParams::default(),
        );
        assert!(same.points[0].irq_moves.is_empty());
    }

    #[test]
    fn an_event_line_whose_iterations_overlap_is_no_difference() {
        let spread = |name: &str, counts: [u64; 3]| {
            let mut s = accounted(name, 0, 0, 1);
            for (i, n) in s.runs[0].record.iterations.iter_mut().zip(counts) {
                i.server.process.sched.as_mut().unwrap().migrations = Some(n);
            }
            s
        };
        let c = compare(
            &spread("a", [5, 10, 15]),
            &spread("b", [6, 11, 13]),
            &CompareParams::default(),
        );
        let m = c.points[0]
            .events
            .iter()
            .find(|l| l.part == "migrations")
            .unwrap();
        assert!(m.change.unwrap() > 0.0, "{m:?}");
        assert_eq!(m.verdict, limits::ShareVerdict::NoDifference, "{m:?}");
        assert!(m.p_value.unwrap() > 0.5, "{m:?}");
    }

    fn side(name: &str, client: Option<&str>, server: Option<&str>) -> Side {
        let mut r = plumb_samples::testing::example();
        r.build = client.map(str::to_string);
        r.peer = server.map(|b| plumb_samples::Peer {
            started: plumb_samples::ServerStart::Ssh,
            server: None,
            address: None,
            build: Some(b.to_string()),
            build_id: None,
            same_host: false,
        });
        Side::new(name, vec![r], None)
    }

    #[test]
    fn different_builds_are_said_and_old_records_say_nothing() {
        let p = CompareParams::default();
        let same = compare(
            &side("a", Some("x"), Some("x")),
            &side("b", Some("x"), Some("x")),
            &p,
        );
        assert_eq!(same.builds, None);
        let old = compare(&side("a", None, None), &side("b", Some("y"), None), &p);
        assert_eq!(old.builds, None);
        let far = compare(
            &side("a", Some("x"), Some("x")),
            &side("b", Some("x"), Some("y")),
            &p,
        );
        let said = far.builds.expect("the far end's build differs");
        assert!(said.contains("different plumb builds"), "{said}");
        assert!(said.contains("b by x and y"), "{said}");
    }
}
