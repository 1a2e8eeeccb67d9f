//! Commands that fit a shell user's habits: output piped into `head` ends
//! quietly when the reader goes (a sweep keeps measuring and storing), and
//! a command that only reads never creates a database it was pointed at.

mod common;
use common::{assert_ok_for, plumb, store_short, ExperimentFile, TempDb};
use std::process::Command;

/// Runs `plumb ARGS | READER` in bash; returns plumb's exit status (from
/// PIPESTATUS) and its stderr.
fn piped(args: &[&str], reader: &str) -> (i32, String) {
    let exe = env!("CARGO_BIN_EXE_plumb");
    let err = std::env::temp_dir().join(format!(
        "plumb-habits-{}-{}.err",
        std::process::id(),
        args[0]
    ));
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "'{exe}' {} 2>'{}' | {reader} >/dev/null; exit ${{PIPESTATUS[0]}}",
        quoted.join(" "),
        err.display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let _ = std::fs::remove_file(&err);
    (out.status.code().unwrap_or(-1), stderr)
}

fn quiet_end((code, err): (i32, String), what: &str) {
    assert!(
        code == 0 || code == 141,
        "{what}: exit {code}, stderr:\n{err}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(!err.contains("Broken pipe"), "{what}: {err}");
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let db = TempDb::new("habits-pipe");
    for label in ["a", "b"] {
        store_short(&db, "stream", label);
    }
    // `env` prints thousands of facts: far more than a pipe holds.
    quiet_end(piped(&["env"], "head -c 1"), "env | head -c 1");
    // `true` reads nothing and is gone before plumb's first write.
    for args in [
        vec!["show", "1", "--json", "--db", db.path()],
        vec!["list", "--db", db.path()],
        vec!["env", "--diff", "1", "2", "--db", db.path()],
        vec!["compare", "a", "b", "--db", db.path()],
        vec!["export", "--db", db.path()],
    ] {
        quiet_end(piped(&args, "true"), &args.join(" "));
    }
}

#[test]
fn a_sweep_whose_stdout_closes_keeps_measuring_and_storing() {
    let db = TempDb::new("habits-sweep");
    let file = ExperimentFile::new(
        "habits",
        r#"
name = "habits"
iterations = 1
base = { workload = "stream", duration = "300ms", warmup = "100ms" }
matrix = { msg_size = ["16K", "64K", "128K"] }
"#,
    );
    let (code, err) = piped(&["sweep", file.path(), "--db", db.path()], "true");
    quiet_end((code, err.clone()), "sweep | true");
    assert_eq!(code, 0, "{err}");
    let list = plumb()
        .args(["list", "--format", "json", "--db", db.path()])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        rows.as_array().unwrap().len(),
        3,
        "every point stored: {rows}"
    );
}

#[test]
fn reading_commands_do_not_create_a_missing_database() {
    let dir = std::env::temp_dir().join(format!("plumb-habits-missing-{}", std::process::id()));
    let path = dir.join("typo.db");
    let db = path.to_str().unwrap();
    for args in [
        vec!["list", "--db", db],
        vec!["show", "1", "--db", db],
        vec!["compare", "a", "b", "--db", db],
        vec!["report", "--db", db],
        vec!["env", "--diff", "1", "2", "--db", db],
        vec!["export", "--db", db],
        vec!["delete", "1", "--db", db],
    ] {
        let out = plumb().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("does not exist") && err.contains("typo.db"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?} created {}", dir.display());
    }
}

/// Two runs measuring on one host at once both say so in their records, and
/// `--exclusive` refuses to start beside another.
#[test]
fn two_runs_at_once_warn_in_both_records_or_are_refused() {
    let dir = std::env::temp_dir().join(format!("plumb-habits-activity-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let stream = |window: &str, extra: &[&str]| {
        let mut c = plumb();
        c.env("PLUMB_ACTIVITY_DIR", &dir)
            .args(["run", "stream", "--no-store", "--json", "--iterations", "1"])
            .args(["--duration", window, "--warmup", "100ms"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    let long = stream("3s", &[]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let refused = stream("1s", &["--exclusive"]).output().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--exclusive") && err.contains("another plumb run"),
        "{err}"
    );
    let short = stream("500ms", &[]).output().unwrap();
    let long = long.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for (what, out) in [("long", &long), ("short", &short)] {
        assert_ok_for(out, what);
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let warnings = r["iterations"][0]["client"]["warnings"].to_string();
        assert!(
            warnings.contains("another plumb run"),
            "{what} run does not say another measured beside it: {warnings}"
        );
    }
}
