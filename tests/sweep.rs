//! `plumb sweep`: every point of an experiment run and stored with its tag,
//! variants' knobs set and restored, Ctrl-C then --resume, errors at a line.

mod common;
use common::{assert_ok, is_root, ok, plumb, quick_rr, skip, TempDb};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

struct Files(Vec<std::path::PathBuf>);
impl Drop for Files {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn write(name: &str, text: &str) -> (std::path::PathBuf, Files) {
    let p = std::env::temp_dir().join(format!("plumb-sweep-{name}-{}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    (p.clone(), Files(vec![p, journal(name)]))
}

fn journal(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("plumb-sweep-journal-{name}-{}", std::process::id()))
}

/// `plumb sweep FILE --db DB`, its knobs journalled in the journal of the
/// file written as `name`.
fn sweep(name: &str, file: &std::path::Path, db: &TempDb) -> Command {
    let mut c = plumb();
    c.env("PLUMB_JOURNAL", journal(name)).args([
        "sweep",
        file.to_str().unwrap(),
        "--db",
        db.path(),
    ]);
    c
}

#[test]
fn every_point_and_variant_is_run_stored_and_compared() {
    let rps = if is_root() {
        "knobs = { \"rps:lo\" = \"1\" }"
    } else {
        skip("the variant's rps:lo knob needs root; the sweep runs without it");
        ""
    };
    let (file, _f) = write(
        "all",
        &format!(
            r#"{}
[matrix]
req_size = [1, 100]
[[variant]]
name = "plain"
[[variant]]
name = "other"
{rps}
"#,
            quick_rr("sweep-test", "iterations = \"2\"\norder = \"interleaved\"")
        ),
    );
    let db = TempDb::new("sweep-all");
    let before = std::fs::read_to_string("/sys/class/net/lo/queues/rx-0/rps_cpus").ok();
    let out = sweep("all", &file, &db).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for p in [
        "req_size=1,variant=plain",
        "req_size=1,variant=other",
        "req_size=100,variant=plain",
        "req_size=100,variant=other",
    ] {
        assert!(
            stdout.contains(&format!("{p}: ")) && stdout.contains("(2 iterations)"),
            "{p}: {stdout}"
        );
    }
    assert!(stdout.contains("A = plain   B = other"), "{stdout}");
    assert!(stdout.contains("[req_size=100]"), "{stdout}");
    // Not a terminal: no progress bar drawn.
    assert!(
        !stderr.contains("eta") && !stderr.contains('\r'),
        "{stderr}"
    );
    assert!(stderr.contains("4 points (0 stored already)"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string("/sys/class/net/lo/queues/rx-0/rps_cpus").ok(),
        before
    );
    // The runs are tagged in the store and listed.
    let list = plumb().args(["list", "--db", db.path()]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&list.stdout)
            .matches("rr 1 flow")
            .count(),
        4
    );

    // Again without --resume: refused, nothing run.
    let again = plumb()
        .args(["sweep", file.to_str().unwrap(), "--db", db.path()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
}

#[test]
fn an_interrupted_sweep_resumes_without_redoing_stored_points() {
    let (file, _f) = write(
        "resume",
        r#"
name = "sweep-resume"
iterations = 1
order = "sequential"
[base]
workload = "stream"
duration = "1s"
warmup = "0s"
[matrix]
msg_size = ["4K", "16K", "64K", "128K"]
"#,
    );
    let db = TempDb::new("sweep-resume");
    let mut child = sweep("resume", &file, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("msg_size=4K: "), "{first}");
    assert!(ok(
        Command::new("kill").args(["-INT", &child.id().to_string()])
    ));
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let stored_first = 1 + rest.iter().filter(|l| l.starts_with("msg_size=")).count();
    assert!(stored_first < 4, "interrupted before the end: {rest:?}");

    let out = sweep("resume", &file, &db)
        .arg("--resume")
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("({stored_first} stored already)")),
        "{stderr}"
    );
    assert!(!stdout.contains("msg_size=4K: "), "4K was stored: {stdout}");
    assert!(stdout.contains("msg_size=128K: "), "{stdout}");
    let list = plumb().args(["list", "--db", db.path()]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&list.stdout)
            .matches("stream send")
            .count(),
        4
    );
}

#[test]
fn errors_in_the_file_name_the_line_and_key() {
    for (name, text, says) in [
        (
            "key",
            "name = \"x\"\n[base]\nworkload = \"rr\"\nwarp = 9\n",
            ":line 4: base.warp: 'warp' is not a spec field",
        ),
        (
            "size",
            "name = \"x\"\n[matrix]\nsndbuf = [\"8K\",\n  \"8Q\"]\n",
            ":line 4: sndbuf: ",
        ),
        (
            "knob",
            "name = \"x\"\n[[variant]]\nname = \"v\"\nknobs = { \"fan:lo\" = 1 }\n",
            ":line 4: variant 'v'.knobs.\"fan:lo\": 'fan:lo' is not a knob",
        ),
    ] {
        let (file, _f) = write(name, text);
        let out = plumb()
            .args(["sweep", file.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn a_variant_with_an_unsupported_knob_is_refused_before_any_run() {
    let (file, _f) = write(
        "badknob",
        &format!(
            r#"{}
[[variant]]
name = "plain"
[[variant]]
name = "lro"
knobs = {{ "offload:lo:lro" = "on" }}
"#,
            quick_rr("sweep-badknob", "iterations = 1")
        ),
    );
    let db = TempDb::new("sweep-badknob");
    let out = sweep("badknob", &file, &db).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("variant 'lro': knob offload:lo:lro"), "{err}");
    assert!(out.stdout.is_empty(), "nothing ran");
}
