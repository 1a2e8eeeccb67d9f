//! What a new user meets first in `plumb list`, `plumb report`, `plumb
//! compare` and `plumb sweep`: machine-readable lists, a report of the most
//! recent work when none is named, one method, one CPU budget for a
//! host both ends share, and --format on a sweep's comparison.

mod common;
use common::{assert_ok, plumb, run, ExperimentFile, TempDb};
use serde_json::Value;

fn ok(out: &std::process::Output) -> String {
    assert_ok(out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `plumb report` of the database with no names: what it says on stderr.
fn report_says(db: &TempDb) -> String {
    let out = plumb()
        .args(["report", "--db", db.path()])
        .output()
        .unwrap();
    ok(&out);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stream(db: &TempDb, label: &str) {
    ok(&run(&[
        "run",
        "stream",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--iterations",
        "3",
        "--label",
        label,
        "--db",
        db.path(),
    ]));
}

#[test]
fn lists_reports_and_comparisons_of_labels() {
    let db = TempDb::new("report-fixes-labels");
    stream(&db, "before");
    stream(&db, "after");

    let json = ok(&plumb()
        .args(["list", "--format", "json", "--db", db.path()])
        .output()
        .unwrap());
    let rows: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    assert_eq!(rows[0]["label"], "after", "newest first: {rows}");
    assert!(rows[0]["throughput_bps"].as_f64().unwrap() > 0.0);
    let csv = ok(&plumb()
        .args(["list", "--format", "csv", "--db", db.path()])
        .output()
        .unwrap());
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with("run,started_at,label,"), "{csv}");

    // No names: the two most recent labels, said so on stderr.
    let out = plumb()
        .args(["report", "--db", db.path()])
        .output()
        .unwrap();
    let text = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("reporting labels before, after"),
        "{stderr}"
    );
    assert!(text.contains("A = before   B = after"), "{text}");
    assert!(text.contains("Fieller's interval of the ratio"), "{text}");
    assert_eq!(
        text.matches("environment: no difference recorded").count()
            + text.matches("environment differences").count(),
        1,
        "{text}"
    );
    assert!(!text.contains("null"), "{text}");

    // Both ends on this host: its CPUs once, not as two hosts.
    let cmp = ok(&plumb()
        .args(["compare", "before", "after", "--db", db.path()])
        .output()
        .unwrap());
    assert!(cmp.contains("Fieller's interval of the ratio"), "{cmp}");
    assert!(
        !cmp.contains("client host") && !cmp.contains("server host"),
        "{cmp}"
    );
    assert!(cmp.contains("host softirq"), "{cmp}");
}

#[test]
fn a_sweep_compares_in_the_asked_format_and_report_finds_it() {
    let db = TempDb::new("report-fixes-sweep");
    let file = ExperimentFile::new(
        "report-fixes",
        r#"
name = "fixes"
order = "interleaved"
iterations = 2
base = { workload = "rr", duration = "300ms", warmup = "100ms" }
matrix = { req_size = [1, 100] }
variant = [{ name = "plain" }, { name = "other" }]
"#,
    );
    let out = plumb()
        .args(["sweep", file.path(), "--format", "json", "--db", db.path()])
        .output()
        .unwrap();
    let text = ok(&out);
    // The point lines come first, then the comparison as one JSON array.
    let json = &text[text.find('[').expect("a JSON array")..];
    let cs: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(cs[0]["a"], "plain");
    assert_eq!(cs[0]["points"].as_array().unwrap().len(), 2, "{cs}");

    let said = report_says(&db);
    assert!(said.contains("reporting experiment fixes"), "{said}");
    stream(&db, "later");
    let said = report_says(&db);
    assert!(
        said.contains(", later, of the most recent runs"),
        "the newest run is not the experiment's: {said}"
    );
}
