//! What a record says about where it ran: the family the flows used, and
//! the path between the ends, which is part of the test point.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Child, Stdio};

/// A `plumb serve` on a free port of `listen`, killed (by PID) on drop.
struct Server(Child, String);

impl Server {
    fn start(listen: &str) -> Server {
        let mut child = plumb()
            .args(["serve", "--listen", listen])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("plumb serve starts");
        let addr = listening_addr(&mut child);
        Server(child, addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn record(args: &[&str]) -> Value {
    let out = run(args);
    assert_ok_for(&out, &format!("plumb {args:?}"));
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn an_ipv6_server_address_makes_an_ipv6_record_without_a_flag() {
    let server = Server::start("[::1]:0");
    assert!(server.1.starts_with("[::1]:"), "{}", server.1);
    let args = ["--duration", "1s", "--warmup", "200ms", "--json"];
    let mut remote = vec!["run", "udp-rr", "--server", &server.1];
    remote.extend(args);
    let v6 = record(&remote);
    assert_eq!(v6["spec"]["family"], "v6", "{}", v6["spec"]);
    assert_eq!(v6["spec"]["server_host"], "::1");
    // The record names the server: where it was reached and how it started.
    assert_eq!(v6["peer"]["started"], "manual", "{}", v6["peer"]);
    assert_eq!(v6["peer"]["server"], "::1");
    assert_eq!(v6["peer"]["address"], server.1.as_str());
    // Both ends name their build, and the record keeps the far end's.
    let it = &v6["iterations"][0];
    let server_build = it["server"]["build"].as_str().expect("the server's build");
    assert!(server_build.contains("commit "), "{server_build}");
    assert_eq!(v6["peer"]["build"], server_build);
    assert_eq!(it["client"]["build"], v6["build"]);
    // The flows really were IPv6: the server saw an IPv6 peer.
    let tx = v6["iterations"][0]["derived"]["tps"].clone();
    assert!(tx.as_f64().unwrap_or(0.0) > 0.0, "{tx}");
    // -4 against an IPv6 literal is refused, naming the flag.
    let mut v4 = vec!["run", "udp-rr", "-4", "--server", &server.1];
    v4.extend(args);
    let out = run(&v4);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--server") && err.contains("ipv4"), "{err}");
    // The same options on the embedded server: another test point.
    let mut local = vec!["run", "udp-rr", "-6"];
    local.extend(args);
    let embedded = record(&local);
    assert_eq!(embedded["spec"]["family"], "v6");
    assert!(embedded["spec"].get("server_host").is_none());
    assert_eq!(
        embedded["peer"]["started"], "embedded",
        "{}",
        embedded["peer"]
    );
    assert_ne!(embedded["spec_key"], v6["spec_key"]);
}

/// A fact one run could not capture (offloads without ethtool) is said
/// once, as not captured, and is not a difference from a run that had it.
#[test]
fn facts_a_run_could_not_capture_are_not_differences() {
    let db = TempDb::new("record-unknown");
    let stream = |label: &str, path: &str| {
        let out = plumb()
            .env("PATH", path)
            .args(["run", "stream", "--duration", "300ms", "--warmup", "100ms"])
            .args(["--iterations", "2", "--label", label, "--db", db.path()])
            .output()
            .unwrap();
        assert_ok(&out);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let said = stream("bare", "/nonexistent");
    assert!(
        said.contains("environment: not captured: if.lo.offload.* (ethtool not installed)"),
        "{said}"
    );
    stream("full", &std::env::var("PATH").unwrap());
    if !require_tool("ethtool", "ethtool") {
        return;
    }
    let diff = run(&["env", "--diff", "bare", "full", "--db", db.path()]);
    let text = String::from_utf8_lossy(&diff.stdout);
    assert_ok(&diff);
    assert!(
        !text.lines().any(|l| l.starts_with("if.lo.offload.")),
        "offloads reported as differences:\n{text}"
    );
    assert_eq!(
        text.matches("not captured on A: if.lo.offload.* (ethtool not installed)")
            .count(),
        1,
        "{text}"
    );
    let cmp = run(&["compare", "bare", "full", "--db", db.path()]);
    let text = String::from_utf8_lossy(&cmp.stdout);
    assert!(!text.contains("if.lo.offload.tx"), "{text}");
    assert_eq!(text.matches("not captured on A").count(), 1, "{text}");
}

/// `--dry-run` says what would run, under the key the run is then stored
/// under, and touches nothing: no database, no traffic.
#[test]
fn a_dry_run_names_the_spec_key_the_run_stores() {
    let db = TempDb::new("dry-run");
    let spec_args = [
        "run",
        "rr",
        "--flows",
        "2",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
    ];
    let args = [
        &spec_args[..],
        &["--db", db.path(), "--label", "dry", "--json"],
    ]
    .concat();
    let dry = run(&[&args[..], &["--dry-run"]].concat());
    assert_ok(&dry);
    let plan: Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["label"], "dry");
    let point = &plan["points"][0];
    assert_eq!(point["spec"]["flows"], 2);
    assert!(
        !std::path::Path::new(db.path()).exists(),
        "a dry run made the database"
    );
    let real = run(&args);
    assert_ok(&real);
    let rec: Value = serde_json::from_slice(&real.stdout).unwrap();
    assert_eq!(point["spec_key"], rec["spec_key"], "{plan}");
    // The text names the same key and summary line.
    let text = run(&[&spec_args[..], &["--dry-run"]].concat());
    assert_ok(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("spec key   {}", rec["spec_key"].as_str().unwrap())),
        "{text}"
    );
    assert!(text.contains("rr 2 flows"), "{text}");
    // A sweep lists every point of the plan.
    let sweep = run(&[
        "sweep",
        "examples/s1-small-buffers.toml",
        "--quick",
        "--dry-run",
        "--format",
        "json",
        "--db",
        db.path(),
    ]);
    assert_ok(&sweep);
    let plan: Value = serde_json::from_slice(&sweep.stdout).unwrap();
    let points = plan["points"].as_array().unwrap();
    assert!(points.len() >= 2, "{plan}");
    assert!(points
        .iter()
        .all(|p| p["point"].is_string() && p["spec_key"].is_string()));
}
