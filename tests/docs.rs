//! Shell completions and man pages come from the same definitions as --help:
//! each completion script parses in its shell, each page renders with
//! `man -l` without a warning, and --version names the build.

mod common;
use common::*;
use std::process::Command;

#[test]
fn completion_scripts_parse_in_their_shells() {
    for (shell, check) in [
        ("bash", ["bash", "-n"]),
        ("zsh", ["zsh", "-n"]),
        ("fish", ["fish", "--no-execute"]),
    ] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("plumb"), "{shell}: {text}");
        assert!(text.contains("--pacing-rate"), "{shell} lacks run's flags");
        if !require_tool(check[0], check[0]) {
            continue;
        }
        let file =
            std::env::temp_dir().join(format!("plumb-completion-{}.{shell}", std::process::id()));
        std::fs::write(&file, &text).unwrap();
        let parsed = Command::new(check[0])
            .arg(check[1])
            .arg(&file)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&file);
        assert_ok_for(&parsed, &format!("{shell} cannot parse its script"));
    }
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn every_command_has_a_man_page_that_renders_cleanly() {
    let dir = std::env::temp_dir().join(format!("plumb-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = run(&["man", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for want in [
        "plumb.1",
        "plumb-run.1",
        "plumb-run-stream.1",
        "plumb-compare.1",
        "plumb-serve.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "no {want} in {pages:?}");
    }
    assert!(
        !pages.iter().any(|p| p.contains("flow-group-member")),
        "a hidden command got a page"
    );
    if !require_tool("man", "man-db") {
        return;
    }
    for page in &pages {
        let path = dir.join(page);
        let shown = Command::new("man")
            .args(["--warnings=all", "-l"])
            .arg(&path)
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        let warnings = String::from_utf8_lossy(&shown.stderr);
        assert!(
            shown.status.success() && warnings.trim().is_empty(),
            "{page}: {warnings}"
        );
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{page}: {text}"
        );
    }
    let stream = String::from_utf8_lossy(
        &Command::new("man")
            .arg("-l")
            .arg(dir.join("plumb-run-stream.1"))
            .env("MANWIDTH", "80")
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(stream.contains("sndbuf"), "{stream}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn version_names_the_commit_target_profile_and_linking() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    let v = String::from_utf8(out.stdout).unwrap();
    assert!(v.starts_with("plumb 0."), "{v}");
    for part in ["commit ", "x86_64-unknown-linux-", "debug"] {
        assert!(v.contains(part), "no '{part}' in {v}");
    }
    assert!(v.contains("static") || v.contains("dynamic"), "{v}");
}
