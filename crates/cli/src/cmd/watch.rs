//! `plumb lab watch DIR --points FILE`: every kernel that appears in DIR is
//! measured without anyone typing: a job set of the points file booting
//! it, for the lab's agents; once the runs of the kernels found so far are
//! in, the changes between neighbouring kernels (E-divisive means over
//! every iteration, `compare::history::kernel_changes`) are mailed and
//! posted, each once. In a directory every kernel is measured, so the two
//! kernels around a change are neighbours in it and are named; there is
//! nothing between them to bisect. With `--git`, the heads of a git tree
//! are built into the directory as they come (`tree.rs`), and the commits
//! between two heads around a change are bisected on the lab's agents.

use super::lab::{jobs_of, lab_url, plural, submitter};
use crate::args::LabWatchArgs;
use crate::Failure;
use plumb_compare::history::{self, kernel_changes};
use plumb_run::experiment::Plan;
use plumb_run::notify::{self, Mail};
use plumb_samples::RunRecord;
use plumb_stats::ChangeParams;
use plumb_store::lab::{Lab, NewSet, ReportedChange, Watched};
use plumb_store::{Location, Store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime};

mod tree;

/// A kernel file of the directory, with the label its runs take.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    path: PathBuf,
    label: String,
}

/// The release a kernel's file name gives (`linux-image-RELEASE_...deb`,
/// `vmlinuz-RELEASE`), else its name; None for a file that is no kernel.
fn release_of(name: &str) -> Option<String> {
    let release = if let Some(rest) = name.strip_prefix("linux-image-") {
        rest.strip_suffix(".deb")?.split('_').next()?.to_string()
    } else if let Some(rest) = name.strip_prefix("vmlinuz-") {
        rest.to_string()
    } else if name.starts_with("bzImage") {
        name.to_string()
    } else {
        return None;
    };
    let label = label_of(&release);
    (!label.is_empty()).then_some(label)
}

/// `name` kept to the label rule: anything else becomes '-'.
fn label_of(name: &str) -> String {
    name.chars()
        .map(|c| {
            if plumb_spec::check_label(&c.to_string()).is_ok() {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The numbers of a name, to order files that appeared together as dpkg
/// orders versions (6.1.0-56 before 6.1.0-57, 6.12.115 before 6.12.117).
fn version_key(name: &str) -> Vec<u64> {
    let version = name.split('_').nth(1).unwrap_or(name);
    version
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The kernels of `dir` not yet found, oldest first: by the time they
/// appeared, then by version.
fn new_kernels(dir: &Path, known: &[Watched]) -> Result<Vec<Found>, Failure> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Failure::usage(format!("{}: {e}", dir.display())))?;
    let mut found: Vec<(SystemTime, Vec<u64>, Found)> = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        let Some(label) = release_of(&name) else {
            continue;
        };
        let Ok(meta) = e.metadata() else { continue };
        // A package still being copied in is taken at the next look.
        if !meta.is_file() || meta.len() == 0 {
            continue;
        }
        if known.iter().any(|k| Path::new(&k.image) == path) {
            continue;
        }
        let when = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        found.push((when, version_key(&name), Found { path, label }));
    }
    found.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok(found.into_iter().map(|(_, _, f)| f).collect())
}

/// One change to report, with what it needs to be told.
struct Change {
    point: String,
    summary: String,
    metric: plumb_samples::Metric,
    change: history::Change,
    /// With --git: what lies between the two heads (`tree::between`).
    between: Option<String>,
}

pub fn exec(a: LabWatchArgs) -> Result<i32, Failure> {
    let url = lab_url(&a.db)?;
    let file = std::fs::read_to_string(&a.points)
        .map_err(|e| Failure::usage(format!("--points {}: {e}", a.points.display())))?;
    let plan = super::sweep::load(&a.points, false)?;
    let dir = std::fs::canonicalize(&a.dir)
        .map_err(|e| Failure::usage(format!("{}: {e}", a.dir.display())))?;
    if !dir.is_dir() {
        return Err(Failure::usage(format!(
            "{}: not a directory; give the one new kernels appear in",
            dir.display()
        )));
    }
    if !(0.0..1.0).contains(&a.max_p) || a.max_p == 0.0 {
        return Err(Failure::usage(format!(
            "--max-p: {} is not a p-value; give one above 0 and below 1, like 0.05",
            a.max_p
        )));
    }
    if !a.mail_to.is_empty() && a.smtp.is_none() && !Path::new(&a.sendmail).exists() {
        return Err(Failure::usage(format!(
            "--mail-to: no --smtp server given and no sendmail at {}; give one or the other",
            a.sendmail
        )));
    }
    tree::check(&a.tree)?;
    let source = dir.display().to_string();
    let mut lab = Lab::open(&url).map_err(super::db::store_err)?;
    let store = Store::open_location(&Location::Postgres(url)).map_err(super::db::store_err)?;
    let stop = crate::interrupt_flag();
    let mut told = false;
    eprintln!(
        "watching {source} for kernels: experiment {} ({} point{}), class {}",
        plan.experiment.name,
        plan.points.len(),
        plural(plan.points.len()),
        a.class
    );
    loop {
        if let Err(e) = tree::build_new(&a.tree, &dir) {
            eprintln!("--git: {e}; tried again at the next look");
        }
        let known = lab.watched(&source).map_err(super::db::store_err)?;
        for k in new_kernels(&dir, &known)? {
            let kernel = format!("{}={}", k.label, k.path.display());
            let set = NewSet {
                experiment: &plan.experiment.name,
                label: &k.label,
                class: &a.class,
                file: &file,
                quick: false,
                seed: plan.seed(None),
                kernels: std::slice::from_ref(&kernel),
                submitted_by: &submitter(),
                jobs: jobs_of(&plan),
                max_attempts: a.attempts,
            };
            let id = lab
                .watch_submit(&source, &k.path.display().to_string(), &k.label, &set)
                .map_err(super::db::store_err)?;
            eprintln!(
                "found {}: set {id} submitted under label {}",
                k.path.display(),
                k.label
            );
        }
        let known = lab.watched(&source).map_err(super::db::store_err)?;
        let settled = known.iter().take_while(|k| k.settled).count();
        let params = ChangeParams {
            max_p: a.max_p,
            min_magnitude: a.min_change,
            ..ChangeParams::default()
        };
        let changes = changes(&store, &plan, &known[..settled], &params)?;
        report(&a, &mut lab, &source, &plan, &known[..settled], changes)?;
        if a.once && settled == known.len() {
            return Ok(0);
        }
        // Nothing is measured without an agent: say so once, not wait mute.
        let agents = lab.agents().map_err(super::db::store_err)?;
        if settled < known.len() && super::lab::live(&agents, &a.class) == 0 && !told {
            eprintln!(
                "waiting for runs: no agent of class {} is alive; start `plumb agent --class {}` on a test host",
                a.class, a.class
            );
            told = true;
        }
        let wait = if a.once {
            Duration::from_millis(500)
        } else {
            Duration::from_millis(a.every)
        };
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if stop.load(Relaxed) {
                return Ok(crate::exit::INTERRUPTED);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Each point's runs under the kernels' labels, newest per label.
fn series(
    store: &Store,
    plan: &Plan,
    kernels: &[Watched],
) -> Result<Vec<Vec<Option<RunRecord>>>, Failure> {
    let mut per_point = vec![vec![None; kernels.len()]; plan.points.len()];
    for (k, kernel) in kernels.iter().enumerate() {
        let runs = store
            .experiment_runs(&plan.experiment.name, Some(&kernel.label))
            .map_err(super::db::store_err)?;
        for (tag, run) in runs {
            if let Some(i) = plan
                .points
                .iter()
                .position(|p| p.id.to_string() == tag.point)
            {
                per_point[i][k] = Some(run.record);
            }
        }
    }
    Ok(per_point)
}

/// The changes between neighbouring kernels of every point, over the
/// kernels whose runs are in.
fn changes(
    store: &Store,
    plan: &Plan,
    kernels: &[Watched],
    params: &ChangeParams,
) -> Result<Vec<Change>, Failure> {
    let mut out = Vec::new();
    for (p, runs) in plan.points.iter().zip(series(store, plan, kernels)?) {
        // A kernel whose set failed has no runs: the series goes on without
        // it, and its neighbours become neighbours.
        let measured: Vec<(String, Vec<f64>)> = kernels
            .iter()
            .zip(&runs)
            .filter_map(|(k, r)| Some((k.label.clone(), r.as_ref()?.metric_values())))
            .filter(|(_, xs)| !xs.is_empty())
            .collect();
        let Some(metric) = runs.iter().flatten().next().map(RunRecord::metric) else {
            continue;
        };
        let (found, _) = kernel_changes(&measured, metric.higher_is_better(), params);
        out.extend(found.into_iter().map(|change| Change {
            point: p.id.to_string(),
            summary: p.spec.summary(),
            metric,
            change,
            between: None,
        }));
    }
    Ok(out)
}

/// Mails and posts the changes not reported before, then notes them.
fn report(
    a: &LabWatchArgs,
    lab: &mut Lab,
    source: &str,
    plan: &Plan,
    kernels: &[Watched],
    changes: Vec<Change>,
) -> Result<(), Failure> {
    let mut new = Vec::new();
    for c in changes {
        if !lab
            .reported(source, &reported(&plan.experiment.name, &c))
            .map_err(super::db::store_err)?
        {
            new.push(c);
        }
    }
    if new.is_empty() {
        return Ok(());
    }
    if a.tree.git.is_some() {
        let url = lab_url(&a.db)?;
        // One bisection a pair of heads and direction, whichever points
        // changed between them.
        let mut done: BTreeMap<(String, String, bool), String> = BTreeMap::new();
        for c in &mut new {
            let k = &c.change;
            let key = (k.before_label.clone(), k.after_label.clone(), k.regression);
            let text = done
                .entry(key)
                .or_insert_with_key(|(before, after, regression)| {
                    tree::between(a, &url, Path::new(source), before, after, *regression)
                });
            c.between = Some(text.clone());
        }
    }
    let text = body(source, plan, kernels, &new);
    crate::out!("{text}");
    let first = &new[0];
    let subject = format!(
        "plumb watch {}: {} change{}, {} between {} and {}",
        plan.experiment.name,
        new.len(),
        plural(new.len()),
        signed(first.change.change),
        first.change.before_label,
        first.change.after_label
    );
    let mut failed = Vec::new();
    if !a.mail_to.is_empty() {
        let mail = Mail {
            from: a
                .mail_from
                .clone()
                .unwrap_or_else(|| format!("plumb@{}", plumb_sys::proc::hostname())),
            to: a.mail_to.clone(),
            subject: subject.clone(),
            body: text.clone(),
        };
        let sent = match &a.smtp {
            Some(server) => notify::smtp(server, &mail),
            None => notify::sendmail(&a.sendmail, &mail),
        };
        if let Err(e) = sent {
            failed.push(e);
        }
    }
    if let Some(url) = &a.webhook {
        let doc = serde_json::json!({
            "source": source,
            "experiment": plan.experiment.name,
            "subject": subject,
            "text": text,
            "changes": new.iter().map(|c| serde_json::json!({
                "point": c.point,
                "summary": c.summary,
                "unit": c.metric.unit(),
                "before_label": c.change.before_label,
                "after_label": c.change.after_label,
                "mean_before": c.change.mean_before,
                "mean_after": c.change.mean_after,
                "change": c.change.change,
                "p": c.change.p,
                "regression": c.change.regression,
            })).collect::<Vec<_>>(),
        });
        if let Err(e) = notify::webhook(url, &doc.to_string()) {
            failed.push(e);
        }
    }
    // Unsent, a change stays unreported and goes out at the next look.
    if !failed.is_empty() {
        for e in &failed {
            eprintln!("plumb: warning: report not sent: {e}; trying again at the next look");
        }
        return Ok(());
    }
    for c in &new {
        lab.note_reported(source, &reported(&plan.experiment.name, c))
            .map_err(super::db::store_err)?;
    }
    Ok(())
}

fn reported<'a>(experiment: &'a str, c: &'a Change) -> ReportedChange<'a> {
    ReportedChange {
        experiment,
        point: &c.point,
        before_label: &c.change.before_label,
        after_label: &c.change.after_label,
    }
}

fn signed(change: f64) -> String {
    format!("{:+.1} %", change * 100.0)
}

/// The report as plain text, for a mailing list: the kernels in the order
/// they appeared, then each change with the two kernels around it, and,
/// where they were built from a git tree's heads, what lies between them.
fn body(source: &str, plan: &Plan, kernels: &[Watched], changes: &[Change]) -> String {
    let mut t = format!(
        "plumb lab watch of {source}, experiment {}: {} kernel{} measured, in the order they appeared:\n",
        plan.experiment.name,
        kernels.len(),
        plural(kernels.len())
    );
    for k in kernels {
        t += &format!("  {}  ({})\n", k.label, k.image);
    }
    t += &format!(
        "\n{} change{} between neighbouring kernels (E-divisive means over every iteration):\n",
        changes.len(),
        plural(changes.len())
    );
    for c in changes {
        let k = &c.change;
        t += &format!(
            "{} [{}]: between {} and {}: {} -> {}, {}, p {:.3}  => {}\n",
            c.summary,
            c.point,
            k.before_label,
            k.after_label,
            c.metric.format(k.mean_before),
            c.metric.format(k.mean_after),
            signed(k.change),
            k.p,
            if k.regression {
                "regression"
            } else {
                "improvement"
            }
        );
        t += &match &c.between {
            Some(text) => text.clone(),
            None => format!(
                "  {} and {} are neighbours in {source}: every kernel that appeared there was \
                 measured, so there is none between them to bisect.\n",
                k.before_label, k.after_label
            ),
        };
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_is_known_by_its_file_name_and_labelled_by_its_release() {
        assert_eq!(
            release_of("linux-image-6.12.115+deb12-cloud-amd64_6.12.115-2~deb12u1_amd64.deb")
                .as_deref(),
            Some("6.12.115+deb12-cloud-amd64")
        );
        assert_eq!(
            release_of("vmlinuz-6.8.0-rc1").as_deref(),
            Some("6.8.0-rc1")
        );
        assert_eq!(release_of("bzImage").as_deref(), Some("bzImage"));
        assert_eq!(release_of("linux-headers-6.1_all.deb"), None);
        assert_eq!(release_of("README"), None);
        let a = version_key("linux-image-6.1.0-56-cloud-amd64_6.1.192-2_amd64.deb");
        let b = version_key("linux-image-6.1.0-57-cloud-amd64_6.1.192-3_amd64.deb");
        assert!(a < b, "{a:?} {b:?}");
    }
}
