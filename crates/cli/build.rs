//! Names the build in `plumb --version` and in every record: the commit it
//! was built from, the target, the profile, and whether the executable is
//! statically linked, so that two results measured by different builds can
//! be told apart.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    let target = std::env::var("TARGET").unwrap_or_default();
    // PROFILE says only debug or release; the directory the build writes to
    // is named after the profile itself (target/[TRIPLE/]PROFILE/build/...).
    let out_dir = std::env::var("OUT_DIR").unwrap_or_default();
    let profile = std::path::Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("unknown")
        .to_string();
    // Cargo leaves crt-static out of the target features it hands build
    // scripts, so a musl target (static unless told otherwise) and the
    // RUSTFLAGS that switch it are read as well.
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let rustflags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl");
    let on = features.split(',').any(|f| f == "crt-static") || rustflags.contains("+crt-static");
    let off = rustflags.contains("-crt-static");
    let linking = if on || (musl && !off) {
        "static"
    } else {
        "dynamic"
    };
    println!(
        "cargo:rustc-env=PLUMB_BUILD={} (commit {commit}, {target}, {profile}, {linking})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default()
    );
    // A new commit is a new build string. Only paths that exist are named: a
    // missing one would make cargo run this script, and rebuild the crate,
    // every time (a source tarball, a worktree's .git file).
    println!("cargo:rerun-if-changed=build.rs");
    let dirs = Command::new("git")
        .args(["rev-parse", "--git-dir", "--git-common-dir"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut dirs = dirs.lines().map(std::path::PathBuf::from);
    if let (Some(git), Some(common)) = (dirs.next(), dirs.next()) {
        for path in [
            git.join("HEAD"),
            common.join("refs/heads"),
            common.join("packed-refs"),
        ] {
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
