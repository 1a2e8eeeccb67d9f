//! What a user types: every value-taking flag names itself for a negative
//! or malformed value, units follow one rule on the command line and in
//! experiment files alike, the summary shows what differs from the
//! defaults, and a run that moved nothing says so.

mod common;
use common::*;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exits 2 with one line on stderr that names `flag` and the value.
fn refused(args: &[&str], flag: &str, value: &str) {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: not one line: {err}");
    assert!(
        lines[0].starts_with(&format!("plumb: error: {flag}: ")),
        "{args:?}: {err}"
    );
    assert!(lines[0].contains(&format!("'{value}'")), "{args:?}: {err}");
}

#[test]
fn negative_and_malformed_values_name_their_flag() {
    for (workload, flag, value) in [
        ("stream", "--sndbuf", "-5"),
        ("stream", "--rcvbuf", "-4"),
        ("stream", "--flows", "-1"),
        ("stream", "--threads", "-2"),
        ("stream", "--duration", "-1s"),
        ("stream", "--warmup", "-1"),
        ("stream", "--msg-size", "-8K"),
        ("stream", "--mss", "-1"),
        ("stream", "--pacing-rate", "-1G"),
        ("stream", "--pacing-rate", "10GB/s"),
        ("stream", "--client-cpus", "-1"),
        ("stream", "--delay", "-1ms"),
        ("stream", "--direction", "-1"),
        ("rr", "--rate", "-5"),
        ("rr", "--pipeline", "-1"),
        ("rr", "--req-size", "banana"),
        ("rr", "--resp-writes", "banana"),
        ("udp-rr", "--timeout", "-1"),
        ("udp-stream", "--msg-size", "-1"),
    ] {
        refused(&["run", workload, flag, value], flag, value);
    }
    // The malformed part of a list is the one named.
    refused(
        &["run", "rr", "--resp-writes", "8,banana"],
        "--resp-writes",
        "banana",
    );
    refused(&["serve", "--max-buffer", "-1"], "--max-buffer", "-1");
}

#[test]
fn a_flag_and_an_experiment_key_refuse_a_value_in_the_same_words() {
    let out = run(&["run", "stream", "--sndbuf", "-5"]);
    let flag_err = stderr(&out);
    let why = flag_err
        .trim()
        .strip_prefix("plumb: error: --sndbuf: ")
        .expect("the flag is named")
        .to_string();
    let dir = std::env::temp_dir().join(format!("plumb-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("e.toml");
    std::fs::write(&file, "name = \"e\"\n[base]\nsndbuf = \"-5\"\n").unwrap();
    let out = plumb()
        .args(["sweep", file.to_str().unwrap()])
        .output()
        .unwrap();
    let key_err = stderr(&out);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2), "{key_err}");
    assert!(key_err.contains("line 3: sndbuf: "), "{key_err}");
    assert!(key_err.contains(&why), "{key_err} lacks {why}");
}

#[test]
fn common_unit_spellings_are_accepted_and_the_summary_names_them() {
    let out = run(&[
        "run",
        "stream",
        "--msg-size",
        "64kb",
        "--sndbuf",
        "128KB",
        "--rcvbuf",
        "1MB",
        "--pacing-rate",
        "10Gbps",
        "--duration",
        "1sec",
        "--warmup",
        "100MS",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("");
    assert!(
        first.contains("x 64K")
            && first.contains("sndbuf 128K")
            && first.contains("rcvbuf 1M")
            && first.contains("pacing 10G")
            && first.contains(", 1s,"),
        "{first}"
    );
}

#[test]
fn help_shows_the_defaults_of_the_spec_and_the_unit_rule() {
    let out = plumb().args(["run", "stream", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_mentions(
        &text,
        &[
            "[default: 128K]",
            "[default: 10s]",
            "[default: auto]",
            "docs/units.md",
        ],
    );
    let out = plumb().args(["run", "udp-rr", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[default: 200ms]"), "{text}");
}

#[test]
fn a_run_that_moved_nothing_says_so_and_is_not_counted() {
    let out = run(&[
        "run",
        "stream",
        "--pacing-rate",
        "1K",
        "--duration",
        "1s",
        "--warmup",
        "100ms",
        "--iterations",
        "2..5",
        "--json",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning") && err.contains("not counted") && err.contains("--pacing-rate"),
        "{err}"
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let its = rec["iterations"].as_array().unwrap();
    assert_eq!(its.len(), 1, "a starved run stops at once");
    let warnings = its[0]["client"]["warnings"].to_string();
    assert!(warnings.contains("not counted"), "{warnings}");
    assert_eq!(rec["confidence"]["mean"], 0.0);
    assert_eq!(rec["confidence"]["reached"], false);
}
