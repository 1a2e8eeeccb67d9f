//! A git tree a watch follows (`plumb lab watch DIR --git TREE --build
//! COMMAND`): the commit its branch names, when new, is built in a work
//! tree of plumb's inside DIR, kept between builds so that they are
//! incremental, and its image is put in DIR, where the watch finds it as
//! any kernel that appears there. A commit whose build failed is not built
//! again: its log stays beside the images.

use crate::args::WatchTreeArgs;
use crate::Failure;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The work tree the builds are made in, inside the watched directory.
const WORK_TREE: &str = ".plumb-build";

fn git(tree: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commit `--branch` names now.
fn head(t: &WatchTreeArgs, tree: &Path) -> Result<String, String> {
    git(
        tree,
        &["rev-parse", "--verify", &format!("{}^{{commit}}", t.branch)],
    )
}

/// Refuses a --git that is no git tree, or a --branch it does not have,
/// before the first look.
pub(super) fn check(t: &WatchTreeArgs) -> Result<(), Failure> {
    match &t.git {
        Some(tree) => head(t, tree)
            .map(drop)
            .map_err(|e| Failure::usage(format!("--git {}: {e}", tree.display()))),
        None => Ok(()),
    }
}

/// Builds the commit `--branch` names into `dir` unless it is there
/// already or its build failed before: the image's path when one was
/// built now.
pub(super) fn build_new(t: &WatchTreeArgs, dir: &Path) -> Result<Option<PathBuf>, String> {
    let (Some(tree), Some(build)) = (&t.git, &t.build) else {
        return Ok(None);
    };
    let sha = head(t, tree)?;
    let describe = git(
        tree,
        &["describe", "--tags", "--always", "--abbrev=12", &sha],
    )?;
    let name = super::label_of(&describe);
    let image = dir.join(format!("vmlinuz-{name}"));
    let failed = dir.join(format!(".plumb-build-failed-{name}.log"));
    if image.exists() || failed.exists() {
        return Ok(None);
    }
    let work = dir.join(WORK_TREE);
    if work.exists() {
        git(&work, &["checkout", "--quiet", "--force", "--detach", &sha])?;
    } else {
        // A work tree removed by hand is still registered until pruned.
        git(tree, &["worktree", "prune"])?;
        let at = work.to_string_lossy();
        git(tree, &["worktree", "add", "--quiet", "--detach", &at, &sha])?;
    }
    eprintln!("building {name} ({sha}) in {}", work.display());
    let out = Command::new("sh")
        .arg("-c")
        .arg(build)
        .current_dir(&work)
        .output()
        .map_err(|e| format!("--build: sh: {e}"))?;
    let built = work.join(&t.image);
    if !out.status.success() || !built.is_file() {
        let mut log = out.stdout;
        log.extend(out.stderr);
        std::fs::write(&failed, &log).map_err(|e| format!("{}: {e}", failed.display()))?;
        let why = match out.status.success() {
            true => format!("it left no {}", t.image.display()),
            false => format!("it exited {}", out.status),
        };
        eprintln!(
            "build of {name} failed ({why}); its log is {}; it is not built again",
            failed.display()
        );
        return Ok(None);
    }
    // Whole or not at all: nobody reading the directory sees half an image.
    let part = dir.join(format!(".vmlinuz-{name}.part"));
    std::fs::copy(&built, &part)
        .and_then(|_| std::fs::rename(&part, &image))
        .map_err(|e| format!("{}: {e}", image.display()))?;
    // Which commit a kernel is, for the bisection between two heads.
    std::fs::write(commit_file(dir, &name), format!("{sha}\n"))
        .map_err(|e| format!("{}: {e}", commit_file(dir, &name).display()))?;
    eprintln!("built {name}: {}", image.display());
    Ok(Some(image))
}

/// Where the commit a head's kernel was built from is written.
fn commit_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".plumb-build-{name}.commit"))
}

/// What the report says of the commits between two heads around a change,
/// `before` and `after` by their labels: the commit itself where they are
/// adjacent, else the end of a bisection of the commits between them on
/// the lab's agents (`plumb bisect --tree --lab-class`, which builds each
/// commit git picks in the watch's work tree).
pub(super) fn between(
    a: &crate::args::LabWatchArgs,
    url: &str,
    dir: &Path,
    before: &str,
    after: &str,
    regression: bool,
) -> String {
    let (Some(tree), Some(build)) = (&a.tree.git, &a.tree.build) else {
        return String::new();
    };
    let read = |name: &str| {
        std::fs::read_to_string(commit_file(dir, name))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let (Some(good), Some(bad)) = (read(before), read(after)) else {
        return format!(
            "  {before} and {after} were not both built from heads of {}: nothing to bisect.\n",
            tree.display()
        );
    };
    let range = format!("{good}..{bad}");
    let count = match git(tree, &["rev-list", "--count", &range]) {
        Ok(n) => n.parse::<u64>().unwrap_or(0),
        Err(e) => return format!("  the commits between them cannot be listed: {e}\n"),
    };
    if count <= 1 {
        return format!(
            "  {after} ({bad}) is the commit right after {before} in {}: it is the one.\n",
            tree.display()
        );
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("plumb"));
    let mut cmd = Command::new(exe);
    cmd.arg("bisect")
        .arg("--tree")
        .arg(dir.join(WORK_TREE))
        .args(["--good", &good, "--bad", &bad, "--build", build])
        .arg("--image")
        .arg(&a.tree.image)
        .arg("--points")
        .arg(&a.points)
        .args(["--lab-class", &a.class])
        .arg("--builds")
        .arg(dir.join(".plumb-bisect"))
        .args(["--change", if regression { "worse" } else { "better" }])
        .args(["--threshold", &format!("{}", a.min_change * 100.0)])
        .args(["--db", url])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    eprintln!(
        "bisecting the {} commits of {} between {before} and {after} on the lab",
        count - 1,
        tree.display()
    );
    let said = match cmd.output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
            match out.status.code() {
                Some(0) | Some(125) => text,
                _ => format!(
                    "{text}\nthe bisection ended with {} (its reasons are in the watch's log)",
                    out.status
                ),
            }
        }
        Err(e) => format!("the bisection could not start: {e}"),
    };
    let said: String = said.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "  {} commits of {} lie between them (git log {range}); bisected on the lab's agents of class {}:\n{said}",
        count - 1,
        tree.display(),
        a.class
    )
}
