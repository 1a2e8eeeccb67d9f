//! Labels: every place a label enters refuses one that a shell, a file name
//! or a URL would break on, in one line that states the rule; and `plumb
//! list` and `plumb history` keep their columns in line under labels as
//! long as a kernel release.

mod common;
use common::*;

/// The rule's own words, as every refusal states them.
const RULE: &str = "a label is 1 to 128 ASCII letters, digits and the characters . _ + - @ : ~";

#[test]
fn a_label_with_a_space_or_a_slash_is_refused_with_the_rule_named() {
    for (args, shown) in [
        (vec!["run", "stream", "--label", "my kernel"], "a space"),
        (vec!["run", "stream", "--label", "6.6/rc1"], "'/'"),
        (vec!["run", "rr", "--label", "a?b"], "'?'"),
        (vec!["run", "stream", "--label", ""], "empty"),
        (vec!["sweep", "x.toml", "--label", "a b"], "a space"),
        (vec!["check", "--baseline", "b", "--label", "x/y"], "'/'"),
        (
            vec![
                "run",
                "stream",
                "--kernel",
                "my kernel=/nonexistent/bzImage",
            ],
            "a space",
        ),
        (
            vec![
                "check",
                "--baseline",
                "b",
                "--kernel",
                "a/b=/nonexistent/bzImage",
            ],
            "'/'",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: not one line: {err}"
        );
        assert!(err.contains(RULE), "{args:?}: the rule is not named: {err}");
        assert!(err.contains(shown), "{args:?}: {shown} is not named: {err}");
        let flag = if args.contains(&"--kernel") {
            "--kernel"
        } else {
            "--label"
        };
        assert!(err.contains(flag), "{args:?}: {flag} is not named: {err}");
    }
    let long = "x".repeat(129);
    assert_refused_in_one_line(&["run", "stream", "--label", &long], "129 bytes");
}

#[test]
fn an_experiment_files_label_keeps_to_the_same_rule() {
    let file = ExperimentFile::new(
        "label-rule",
        "name = \"label-rule\"\nlabel = \"nightly build\"\n[base]\nworkload = \"rr\"\n",
    );
    let out = run(&["sweep", file.path(), "--dry-run"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert_mentions(&err, &[RULE, "a space", "label"]);
}

#[test]
fn labels_plumb_makes_itself_and_kernel_releases_are_taken() {
    // A dry run parses and validates everything and measures nothing.
    for label in [
        "6.18.44-fc-v657",
        "6.12.57+deb13-cloud-amd64",
        "6.1.0-41-cloud-amd64@1a2b3c4d",
    ] {
        let out = run(&["run", "stream", "--dry-run", "--label", label]);
        assert_ok_for(&out, label);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(label), "{label}: {text}");
    }
}

/// Where each of `fields` starts in `header`, by name.
fn starts(header: &str, fields: &[&str]) -> Vec<usize> {
    fields
        .iter()
        .map(|f| {
            header
                .find(f)
                .unwrap_or_else(|| panic!("no {f:?} in {header:?}"))
        })
        .collect()
}

/// Labels as long as the kernel releases plumb meets, and a short one.
const LABELS: [&str; 3] = [
    "6.12.57+deb13-cloud-amd64",
    "k1",
    "6.1.0-41-cloud-amd64@1a2b3c4d",
];

fn three_labelled_runs(db: &TempDb) {
    for label in LABELS {
        store_short(db, "rr", label);
    }
}

#[test]
fn list_and_history_keep_their_columns_in_line_under_long_labels() {
    let _alone = measuring_alone();
    let db = TempDb::new("labels-columns");
    three_labelled_runs(&db);

    let out = run(&["list", "--db", db.path()]);
    assert_ok(&out);
    let list = String::from_utf8(out.stdout).unwrap();
    let mut lines = list.lines();
    let header = lines.next().unwrap();
    let [label_at, iter_at, point_at] = starts(header, &["label", "iter", "test point"])[..] else {
        unreachable!()
    };
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), LABELS.len(), "{list}");
    let json: serde_json::Value =
        serde_json::from_slice(&run(&["list", "--db", db.path(), "--format", "json"]).stdout)
            .unwrap();
    for (row, r) in rows.iter().zip(items(&json)) {
        let label = r["label"].as_str().unwrap();
        let summary = r["summary"].as_str().unwrap();
        assert!(
            row[label_at..].starts_with(label),
            "label out of line:\n{list}"
        );
        // "iter" is right-aligned: the count ends where the heading does.
        assert_eq!(
            row[..iter_at + 4].trim_end().len(),
            iter_at + 4,
            "iterations out of line:\n{list}"
        );
        assert_eq!(&row[point_at..], summary, "test point out of line:\n{list}");
    }

    let out = run(&["history", "--db", db.path()]);
    assert_ok(&out);
    let history = String::from_utf8(out.stdout).unwrap();
    let header = history
        .lines()
        .find(|l| l.contains("started (UTC)"))
        .unwrap_or_else(|| panic!("no table in:\n{history}"));
    let [label_at, interval_at] = starts(header, &["label", "95 % interval"])[..] else {
        unreachable!()
    };
    // The unit heading is right-aligned over the means: both end two
    // columns before the interval.
    let mean_end = interval_at - 2;
    let rows: Vec<&str> = history
        .lines()
        .filter(|l| LABELS.iter().any(|label| l.contains(label)))
        .collect();
    assert_eq!(rows.len(), LABELS.len(), "{history}");
    for row in rows {
        assert!(
            LABELS.iter().any(|l| row[label_at..].starts_with(l)),
            "label out of line:\n{history}"
        );
        assert_eq!(
            row[..mean_end].trim_end().len(),
            mean_end,
            "mean out of line:\n{history}"
        );
        assert_eq!(&row[mean_end..interval_at], "  ", "{history}");
        assert!(
            row[interval_at..].contains(" .. ") && !row[interval_at..].starts_with(' '),
            "interval out of line:\n{history}"
        );
    }
}
