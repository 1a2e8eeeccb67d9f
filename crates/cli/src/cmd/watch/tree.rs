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
    eprintln!("built {name}: {}", image.display());
    Ok(Some(image))
}
