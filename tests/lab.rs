//! A lab of many hosts on one PostgreSQL (docs/lab.md): agents as separate
//! processes claim an experiment's jobs over TLS, each job's runs are
//! stored once whatever happens to the agents, and a job an agent cannot
//! run fails with the reason. The tests take turns (`measuring_alone`):
//! the watch's judges kernels by their figures.

mod common;
#[path = "../crates/store/tests/shared/pgserver.rs"]
mod pgserver;

#[allow(unused_imports)]
use common::skip;
use common::{assert_ok, plumb, ExperimentFile};
use pgserver::PgServer;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// The lab's database on a server of the test's own, reached over TLS with
/// the server's certificate checked.
struct LabDb {
    server: PgServer,
    url: String,
    /// The test's name (`lab-NAME`): its server's, and its one-point sets'.
    name: String,
}

impl LabDb {
    fn start(name: &str) -> Option<LabDb> {
        let server = PgServer::start_with(name, false, true)?;
        server.database("lab");
        let url = format!(
            "postgres://plumb@localhost:{}/lab?sslmode=verify-full&sslrootcert={}",
            server.port,
            server.dir.join("ca.pem").display()
        );
        Some(LabDb {
            server,
            url,
            name: name.to_string(),
        })
    }

    /// A lab with one set of one point submitted ([`LabDb::submit_one`]),
    /// and the host held for the test ([`common::measuring_alone`]).
    fn with_one(
        name: &str,
        base: &str,
        more: &[&str],
    ) -> Option<(LabDb, i64, std::sync::MutexGuard<'static, ()>)> {
        let db = LabDb::start(name)?;
        let alone = common::measuring_alone();
        let set = db.submit_one(base, more);
        Some((db, set, alone))
    }

    fn plumb(&self, args: &[&str]) -> Command {
        let mut c = plumb();
        c.args(args).args(["--db", &self.url]);
        c
    }

    /// `plumb lab watch DIR --points FILE` on this lab; the caller adds the
    /// rest.
    fn watch(&self, dir: &Path, points: &ExperimentFile) -> Command {
        self.plumb(&[
            "lab",
            "watch",
            dir.to_str().unwrap(),
            "--points",
            points.path(),
        ])
    }

    fn submit(&self, file: &ExperimentFile, more: &[&str]) -> i64 {
        let out = self
            .plumb(&["lab", "submit", file.path()])
            .args(more)
            .output()
            .unwrap();
        assert_ok(&out);
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// An agent, its log kept in a file of the test's.
    fn agent(&self, name: &str, more: &[&str]) -> Agent {
        let log = self.server.dir.join(format!("agent-{name}.log"));
        let child = self
            .plumb(&["agent", "--name", name, "--poll", "200ms"])
            .args(more)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Agent { child, log }
    }

    fn status(&self, set: i64) -> Value {
        self.status_of(&[&set.to_string()])
    }

    /// Every set's status, as `plumb lab status --json` gives it.
    fn sets(&self) -> Vec<Value> {
        let status = self.status_of(&[]);
        status["sets"].as_array().unwrap().clone()
    }

    fn status_of(&self, sets: &[&str]) -> Value {
        let out = self
            .plumb(&["lab", "status"])
            .args(sets)
            .arg("--json")
            .output()
            .unwrap();
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// A set of one point and one iteration of the `base` spec (TOML
    /// lines), submitted; the experiment is the test's name, its label
    /// that name without `lab-`.
    fn submit_one(&self, base: &str, more: &[&str]) -> i64 {
        let name = &self.name;
        let label = name.trim_start_matches("lab-");
        let file = ExperimentFile::new(
            name,
            &format!("name = \"{name}\"\nlabel = \"{label}\"\niterations = 1\n[base]\n{base}"),
        );
        self.submit(&file, more)
    }

    /// The set's jobs as `plumb lab status` gives them.
    fn jobs(&self, set: i64) -> Vec<Value> {
        self.status(set)["sets"][0]["jobs"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Waits for the set, which must end done, and for its agents, which
    /// must exit cleanly once the queue is empty (`--until-empty`).
    fn done(&self, set: i64, agents: &mut [Agent]) {
        let out = self.wait(set);
        let logs: Vec<String> = agents.iter().map(Agent::log).collect();
        assert_eq!(out.status.code(), Some(0), "{out:?}\n{logs:#?}");
        for a in agents {
            assert_eq!(a.exit(), Some(0), "{}", a.log());
        }
    }

    /// The set's jobs, once `until` holds for them (or the test fails).
    fn jobs_once(&self, set: i64, what: &str, until: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let jobs = self.jobs(set);
            if until(&jobs) {
                return jobs;
            }
            assert!(Instant::now() < deadline, "never {what}: {jobs:#?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait(&self, set: i64) -> std::process::Output {
        self.plumb(&["lab", "wait", &set.to_string(), "--timeout", "120s"])
            .output()
            .unwrap()
    }

    /// The stored runs of the test's own one-point sets
    /// ([`LabDb::submit_one`]).
    fn own_runs(&self) -> Vec<(String, String, Value)> {
        self.runs(&self.name)
    }

    /// The stored runs of `experiment`: (point, spec key, record).
    fn runs(&self, experiment: &str) -> Vec<(String, String, Value)> {
        let out = self.plumb(&["export"]).output().unwrap();
        assert_ok(&out);
        let export: Value = serde_json::from_slice(&out.stdout).unwrap();
        export["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["tag"]["experiment"] == experiment)
            .map(|r| {
                (
                    r["tag"]["point"].as_str().unwrap().to_string(),
                    r["record"]["spec_key"].as_str().unwrap().to_string(),
                    r["record"].clone(),
                )
            })
            .collect()
    }
}

struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// Stops the agent as systemd does (SIGTERM); it must exit cleanly.
    fn stop(&mut self) {
        self.signal("-TERM");
        assert_eq!(self.exit(), Some(0), "{}", self.log());
    }

    /// Waits for the agent to exit; its status code.
    fn exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(
                Instant::now() < deadline,
                "agent never exited: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Only the agent this test started, by its pid.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn a_sweep_spread_over_three_agents_comes_back_whole_each_cells_variants_on_one_agent() {
    // Each agent's runs put their ends in namespaces of its own.
    if common::skip_unless_veth() {
        return;
    }
    let Some(db) = LabDb::start("lab-spread") else {
        return;
    };
    let _alone = common::measuring_alone();
    let file = ExperimentFile::new(
        "lab-spread",
        &(common::quick_rr(
            "lab-spread",
            "label = \"spread\"\niterations = 2\norder = \"random\"\nseed = 7",
        ) + "topology = \"veth\"\n[matrix]\nreq_size = [1, 64, 512]\n"
            + common::PLAIN_AND_NODELAY),
    );
    let set = db.submit(&file, &[]);
    let mut agents: Vec<Agent> = ["a", "b", "c"]
        .iter()
        .map(|n| db.agent(n, &["--until-empty"]))
        .collect();
    db.done(set, &mut agents);
    // The namespaces of each agent's runs (named after its pid) are gone.
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    for a in &agents {
        let theirs = format!("plumb-{}-", a.child.id());
        assert!(!netns.contains(&theirs), "{theirs}: {netns}");
    }

    // Every point stored once, with the spec key `plumb sweep` gives it.
    let dry = plumb()
        .args(["sweep", "--dry-run", "--format", "json", file.path()])
        .output()
        .unwrap();
    assert_ok(&dry);
    let dry: Value = serde_json::from_slice(&dry.stdout).unwrap();
    let planned: BTreeMap<String, String> = dry["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["point"].as_str().unwrap().to_string(),
                p["spec_key"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(planned.len(), 6);
    let runs = db.runs("lab-spread");
    let stored: BTreeMap<String, String> = runs
        .iter()
        .map(|(p, k, _)| (p.clone(), k.clone()))
        .collect();
    assert_eq!(runs.len(), 6, "one run per point: {stored:?}");
    assert_eq!(stored, planned);
    for (point, _, record) in &runs {
        assert_eq!(record["label"], "spread", "{point}");
        assert_eq!(record["iterations"].as_array().unwrap().len(), 2, "{point}");
    }

    // A job per cell, its two variants run by one agent, round by round.
    let jobs = db.jobs(set);
    assert_eq!(jobs.len(), 3);
    for job in &jobs {
        assert_eq!(job["state"], "done", "{job}");
        assert_eq!(job["runs"].as_array().unwrap().len(), 2, "{job}");
        let agent = job["agent"].as_str().unwrap();
        let log = agents[["a", "b", "c"].iter().position(|n| *n == agent).unwrap()].log();
        let prefix = format!("agent {agent}: job {}: point ", job["id"]);
        let started: Vec<(String, String)> = log
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .map(|l| {
                let (point, iteration) = l.split_once(" iteration ").unwrap();
                (point.to_string(), iteration.to_string())
            })
            .collect();
        assert_eq!(started.len(), 4, "{log}");
        let rounds: Vec<&str> = started.iter().map(|(_, i)| i.as_str()).collect();
        assert_eq!(rounds, ["1", "1", "2", "2"], "interleaved: {log}");
        let variants: BTreeSet<&str> = started[..2]
            .iter()
            .map(|(p, _)| p.rsplit_once("variant=").unwrap().1)
            .collect();
        assert_eq!(variants.len(), 2, "both variants in a round: {log}");
    }
}

/// The timing of a run a lab test submits as flags: two short iterations.
const SHORT_RUN: [&str; 6] = [
    "--duration",
    "300ms",
    "--warmup",
    "100ms",
    "--iterations",
    "2",
];

/// A job long enough for an agent to be stopped, killed or left behind in.
const STREAM_3S: &str = "workload = \"stream\"\nduration = \"3s\"\nwarmup = \"200ms\"\n";

#[test]
fn a_job_outlives_its_agents_a_stop_hands_it_back_a_kill_loses_it_one_run_is_stored() {
    let Some((db, set, _alone)) = LabDb::with_one("lab-faults", STREAM_3S, &[]) else {
        return;
    };
    let running_on = |agent: &str| {
        let agent = agent.to_string();
        move |jobs: &[Value]| jobs[0]["state"] == "running" && jobs[0]["agent"] == agent.as_str()
    };

    // Stopped politely mid-job: handed back, the attempt not counted.
    let mut first = db.agent("first", &["--lease", "2s"]);
    db.jobs_once(set, "running on first", running_on("first"));
    first.stop();
    let jobs = db.jobs_once(set, "queued", |j| j[0]["state"] == "queued");
    assert_eq!(jobs[0]["attempts"], 0, "{jobs:?}");
    assert!(first.log().contains("handed it back"), "{}", first.log());

    // Killed mid-job: its lease runs out and another agent runs it.
    let mut second = db.agent("second", &["--lease", "2s"]);
    db.jobs_once(set, "running on second", running_on("second"));
    second.signal("-KILL");
    second.exit();
    db.done(
        set,
        &mut [db.agent("third", &["--lease", "2s", "--until-empty"])],
    );
    let jobs = db.jobs(set);
    assert_eq!(jobs[0]["agent"], "third", "{jobs:?}");
    assert_eq!(jobs[0]["attempts"], 2, "{jobs:?}");
    assert_eq!(db.own_runs().len(), 1);
}

#[test]
fn an_agent_stopped_past_its_lease_stores_nothing_when_it_wakes() {
    let Some((db, set, _alone)) = LabDb::with_one("lab-stopped", STREAM_3S, &[]) else {
        return;
    };
    let mut sleeper = db.agent("sleeper", &["--lease", "1s"]);
    db.jobs_once(set, "running on sleeper", |j| j[0]["agent"] == "sleeper");
    sleeper.signal("-STOP");
    // Past the lease, another agent takes the job and stores its run.
    std::thread::sleep(Duration::from_millis(1500));
    db.done(
        set,
        &mut [db.agent("other", &["--lease", "1s", "--until-empty"])],
    );
    sleeper.signal("-CONT");
    let said = Instant::now();
    while !sleeper.log().contains("lost the lease") {
        assert!(
            said.elapsed() < Duration::from_secs(30),
            "{}",
            sleeper.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    sleeper.stop();
    assert_eq!(db.own_runs().len(), 1, "{}", sleeper.log());
    let jobs = db.jobs(set);
    assert_eq!(jobs[0]["agent"], "other", "{jobs:?}");
}

#[test]
fn a_job_that_sets_a_knob_the_agent_does_not_allow_fails_with_the_knob_named() {
    let Some((db, set, _alone)) = LabDb::with_one(
        "lab-refused",
        "workload = \"rr\"\nduration = \"200ms\"\n[[variant]]\nname = \"big\"\n\
         knobs = { \"sysctl:net.core.rmem_max\" = \"8388608\" }\n",
        &["--attempts", "2"],
    ) else {
        return;
    };
    let mut agent = db.agent(
        "strict",
        &["--until-empty", "--allow-knob", "sysctl:net.ipv4.*"],
    );
    assert_eq!(agent.exit(), Some(0), "{}", agent.log());
    let out = db.wait(set);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128), "{err}");
    assert!(
        err.contains("sysctl:net.core.rmem_max") && err.contains("--allow-knob"),
        "{err}"
    );
    let jobs = db.jobs(set);
    assert_eq!(jobs[0]["state"], "failed", "{jobs:?}");
    assert_eq!(jobs[0]["attempts"], 2, "{jobs:?}");
    assert!(db.own_runs().is_empty());
    let log = agent.log();
    assert_eq!(log.matches("failed (queued again)").count(), 1, "{log}");
    assert_eq!(log.matches("failed (failed for good)").count(), 1, "{log}");
}

#[test]
fn an_agents_role_claims_and_stores_runs_and_is_refused_everything_else() {
    let Some(db) = LabDb::start("lab-trust") else {
        return;
    };
    let _alone = common::measuring_alone();
    // The server's own socket, where its owner is trusted without TLS.
    let connect = |user: &str| {
        postgres::Client::connect(
            &format!(
                "host={} port={} user={user} dbname=lab",
                db.server.dir.display(),
                db.server.port
            ),
            postgres::NoTls,
        )
        .unwrap()
    };
    connect("plumb")
        .batch_execute("CREATE ROLE lab_agent LOGIN")
        .unwrap();
    let out = db.plumb(&["lab", "grant", "lab_agent"]).output().unwrap();
    assert_ok(&out);
    let set = db.submit_one("workload = \"rr\"\nduration = \"300ms\"\n", &[]);
    let as_agent = db.url.replace("plumb@", "lab_agent@");
    let log = db.server.dir.join("agent-restricted.log");
    let agent = plumb()
        .args([
            "agent",
            "--name",
            "restricted",
            "--until-empty",
            "--db",
            &as_agent,
        ])
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(agent.success(), "{said}");
    assert_eq!(db.wait(set).status.code(), Some(0), "{said}");
    assert_eq!(db.own_runs().len(), 1, "{said}");

    let mut c = connect("lab_agent");
    let job: i64 = db.jobs(set)[0]["id"].as_i64().unwrap();
    for sql in [
        "DELETE FROM runs",
        "UPDATE runs SET label = 'forged'",
        "UPDATE lab_jobs SET state = 'queued', agent = 'restricted'",
        "SELECT token FROM lab_jobs",
        "INSERT INTO lab_jobs (set_id, points, state, max_attempts) VALUES (1, 'x', 'queued', 1)",
        "DELETE FROM lab_sets",
        "CREATE TABLE mine (x INTEGER)",
        "SELECT rolpassword FROM pg_authid",
    ] {
        match c.batch_execute(sql) {
            Err(e) => {
                let said = e.as_db_error().map(|d| d.message().to_string());
                assert!(
                    said.as_deref()
                        .is_some_and(|m| m.contains("permission denied")),
                    "{sql}: {e:?}"
                );
            }
            Ok(()) => panic!("{sql}: allowed"),
        }
    }
    // Another agent's lease cannot be taken over without its token, which
    // the role cannot read.
    let renewed: bool = c
        .query_one("SELECT plumb_lab_renew($1, 'a guess', 60)", &[&job])
        .unwrap()
        .get(0);
    assert!(!renewed);
    assert_eq!(db.own_runs().len(), 1);
}

#[test]
fn the_agents_systemd_unit_verifies_and_starts_plumb_agent() {
    if !common::require_tool("systemd-analyze", "systemd") {
        return;
    }
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("contrib/systemd/plumb-agent.service"),
    )
    .unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let (exe, args) = exec.split_once(' ').unwrap();
    assert_eq!(exe, "/usr/local/bin/plumb");
    // The flags it passes are the agent's: they parse, with values in the
    // place of the environment file's.
    let words: Vec<String> = args
        .split_whitespace()
        .map(|w| match w {
            "${PLUMB_LAB_DB}" => "postgres://lab_agent@localhost/lab".to_string(),
            "${PLUMB_LAB_CLASS}" => "default".into(),
            "$PLUMB_AGENT_ARGS" => "--until-empty".into(),
            w => w.into(),
        })
        .collect();
    let out = plumb().args(&words).arg("--help").output().unwrap();
    assert_ok(&out);
    // Checked as systemd reads it, with the binary where this test has it.
    let dir = std::env::temp_dir().join(format!("plumb-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plumb-agent.service");
    std::fs::write(&path, unit.replace(exe, env!("CARGO_BIN_EXE_plumb"))).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A lab for a test that boots guests, and Debian's test kernels of each
/// series, oldest first: 6.1's and 6.12's. None where either is missing
/// (the test is skipped, or fails under CI).
fn guest_lab(name: &str) -> Option<(LabDb, Vec<PathBuf>, Vec<PathBuf>)> {
    let kernels = common::kernels()?;
    let db = LabDb::start(name)?;
    Some((
        db,
        common::series(&kernels, "6.1."),
        common::series(&kernels, "6.12."),
    ))
}

#[test]
fn a_set_with_kernels_is_run_inside_guests_each_kernel_under_its_label() {
    let Some((db, old, new)) = guest_lab("lab-kernels") else {
        return;
    };
    let _alone = common::measuring_alone();
    let (old, new) = (old.last().unwrap().clone(), new.last().unwrap().clone());
    let file = ExperimentFile::new(
        "lab-kernels",
        r#"name = "lab-kernels"
label = "unused-with-two-kernels"
iterations = 1
[base]
workload = "rr"
duration = "500ms"
warmup = "100ms"
"#,
    );
    let set = db.submit(
        &file,
        &[
            "--kernel",
            &format!("old={}", old.display()),
            "--kernel",
            &format!("new={}", new.display()),
        ],
    );
    let mut agent = db.agent("booter", &["--until-empty"]);
    assert_eq!(agent.exit(), Some(0), "{}", agent.log());
    let out = db.wait(set);
    assert_eq!(out.status.code(), Some(0), "{out:?}\n{}", agent.log());
    let runs = db.runs("lab-kernels");
    assert_eq!(runs.len(), 2, "{}", agent.log());
    for (label, deb) in [("old", &old), ("new", &new)] {
        let (_, _, record) = runs
            .iter()
            .find(|(_, _, r)| r["label"] == label)
            .unwrap_or_else(|| panic!("no run labelled {label}: {}", agent.log()));
        assert_eq!(
            record["vm"]["release"],
            common::release_of(deb).as_str(),
            "{label}"
        );
    }
}

/// A server of the test's on loopback: `each` serves a connection (read
/// from its reader, answered on its writer) and sends what it kept on the
/// channel.
fn sink(
    each: fn(&mut BufReader<TcpStream>, &mut TcpStream, &Sender<String>),
) -> (u16, Receiver<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut w = conn.try_clone().unwrap();
            each(&mut BufReader::new(conn), &mut w, &tx);
        }
    });
    (port, rx)
}

/// A mail server that takes any message and hands each over, whole.
fn mail_sink() -> (u16, Receiver<String>) {
    sink(|r, w, tx| {
        let _ = w.write_all(b"220 sink\r\n");
        let (mut data, mut message) = (false, String::new());
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            let l = line.trim_end().to_string();
            line.clear();
            if data {
                if l == "." {
                    data = false;
                    let _ = tx.send(std::mem::take(&mut message));
                    let _ = w.write_all(b"250 kept\r\n");
                } else {
                    message += &l;
                    message.push('\n');
                }
                continue;
            }
            let reply: &[u8] = match l.get(..4).unwrap_or("") {
                "DATA" => {
                    data = true;
                    b"354 go on\r\n"
                }
                "QUIT" => b"221 bye\r\n",
                _ => b"250 ok\r\n",
            };
            let _ = w.write_all(reply);
        }
    })
}

/// A webhook: each POST's body.
fn webhook_sink() -> (u16, Receiver<String>) {
    sink(|r, w, tx| {
        let mut length = 0;
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            line.clear();
        }
        let mut body = vec![0; length];
        let _ = r.read_exact(&mut body);
        let _ = w.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
        let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
    })
}

#[test]
fn a_watched_directory_measures_each_new_kernel_and_reports_the_change_between_two_once() {
    let Some((db, old, new)) = guest_lab("lab-watch") else {
        return;
    };
    let _alone = common::measuring_alone();
    // The receive window of docs/kernels.md: a 16K buffer over 10 ms a side
    // moves about half as much again under 6.12 as under 6.1. In sequential
    // order a job boots its kernel once, not once an iteration (the default
    // order's twelve boots took 130 s under TCG): what is tested is the
    // watch, and the change is many times the iterations' spread.
    let file = ExperimentFile::new(
        "lab-watch",
        "name = \"watched\"\niterations = 3\norder = \"sequential\"\n[base]\n\
         workload = \"stream\"\n\
         topology = \"veth\"\ndelay = \"10ms\"\nrcvbuf = \"16K\"\nduration = \"1s\"\n\
         warmup = \"500ms\"\n",
    );
    let dir = db.server.dir.join("kernels");
    std::fs::create_dir_all(&dir).unwrap();
    let (smtp, mails) = mail_sink();
    let (hook, posts) = webhook_sink();
    let mut agent = db.agent("measurer", &[]);
    let watch = || {
        let smtp = format!("127.0.0.1:{smtp}");
        let hook = format!("http://127.0.0.1:{hook}/plumb");
        let out = db
            .watch(&dir, &file)
            .args(["--once", "--smtp", &smtp, "--mail-to", "netdev@lab.test"])
            .args(["--webhook", &hook])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}\n{}", agent.log());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Copied one after the other, so each appears after the one before.
    let drop_in = |debs: &[PathBuf]| {
        for deb in debs {
            std::fs::copy(deb, dir.join(deb.file_name().unwrap())).unwrap();
        }
    };

    drop_in(&new);
    let said = watch();
    assert!(said.is_empty(), "no change among the 6.12 kernels: {said}");
    assert!(mails.try_recv().is_err() && posts.try_recv().is_err());

    drop_in(&old);
    let said = watch();
    let (before, after) = (
        common::release_of(new.last().unwrap()),
        common::release_of(&old[0]),
    );
    let between = format!("between {before} and {after}");
    let mail = mails.recv_timeout(Duration::from_secs(10)).expect("a mail");
    for text in [&said, &mail] {
        assert!(
            text.contains(&between) && text.contains("regression") && text.contains("neighbours"),
            "{text}\n{}",
            agent.log()
        );
    }
    assert!(
        mail.contains("Subject: plumb watch watched: 1 change"),
        "{mail}"
    );
    let post: Value =
        serde_json::from_str(&posts.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    let change = &post["changes"][0];
    assert_eq!(change["before_label"], before.as_str(), "{post:#}");
    assert_eq!(change["after_label"], after.as_str(), "{post:#}");
    assert!(change["change"].as_f64().unwrap() < -0.1, "{post:#}");
    // Every kernel was measured once, in guests of its own release.
    let runs = db.runs("watched");
    assert_eq!(runs.len(), 4, "{}", agent.log());
    for (_, _, r) in &runs {
        assert_eq!(r["vm"]["release"], r["label"], "{r:#}");
    }

    // Told once: a look with nothing new sends nothing.
    assert!(watch().is_empty());
    assert!(mails.recv_timeout(Duration::from_secs(1)).is_err());
    agent.stop();
}

#[test]
fn a_bisect_over_a_lab_tests_two_images_at_once_and_names_the_first_that_changed() {
    let Some((db, old, new)) = guest_lab("lab-bisect") else {
        return;
    };
    let _alone = common::measuring_alone();
    let path = |p: &PathBuf| p.display().to_string();
    let (old, new): (Vec<String>, Vec<String>) = (
        old.iter().map(path).collect(),
        new.iter().map(path).collect(),
    );
    // The receive window of docs/bisect.md, which 6.12 opened wider; in
    // sequential order each kernel boots once a job, as a bisect on one
    // host boots it (interleaved rounds boot both kernels every round).
    let file = ExperimentFile::new(
        "lab-bisect",
        "name = \"lab-window\"\niterations = \"4..4\"\norder = \"sequential\"\n\
         [base]\nworkload = \"stream\"\n\
         topology = \"veth\"\ndelay = \"10ms\"\nrcvbuf = \"16K\"\nduration = \"1s\"\n\
         warmup = \"500ms\"\n",
    );
    // One agent: two on this test's host would each load the other's
    // guests, whose runs are then suspect and skipped. The bisect still
    // submits two images at once; the queue hands them out as agents come
    // free (the spread over several is the sweep test's).
    let mut agents = [db.agent("bisect-a", &[])];
    let out = db
        .plumb(&["bisect", "--points", file.path(), "--lab-class", "default"])
        .args(["--parallel", "2", "--good", &old[0], "--bad", &new[1]])
        .args([&old[1], &new[0]])
        .args(["--change", "better", "--threshold", "20"])
        .output()
        .unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let logs: Vec<String> = agents.iter().map(Agent::log).collect();
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}\n{logs:#?}");
    let name = |p: &str| {
        std::path::Path::new(p)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string()
    };
    assert!(
        text.contains(&format!("first bad: {} ", name(&new[0])))
            && text.contains(&format!("after {} ", name(&old[1]))),
        "{text}\n{err}"
    );
    // Two images at once: the bad one and one of the range, then the last.
    assert_eq!(err.matches("beside the good image").count(), 3, "{err}");
    // Each was measured beside the good image on one agent: its set's job
    // stored the good image's runs and its own.
    let sets = db.sets();
    assert_eq!(sets.len(), 3, "{sets:#?}");
    each_beside_the_good_one(&sets);
    for a in &mut agents {
        a.stop();
    }
}

/// A bisection's sets: one job each, done, that stored the good kernel's
/// runs and its candidate's, so each comparison was made on one agent.
#[track_caller]
fn each_beside_the_good_one(sets: &[Value]) {
    for set in sets {
        let job = &set["jobs"][0];
        assert_eq!(job["state"], "done", "{set:#}");
        assert_eq!(job["runs"].as_array().unwrap().len(), 2, "{set:#}");
    }
}

/// One run's flags go to a lab as they are (`plumb run ... --lab CLASS`):
/// an agent of that class stores the run `plumb run` would have made here,
/// its spec key the one `plumb run --dry-run` names for the same flags and
/// its iterations as many as asked; a flag only this host could honour is
/// refused by its name, and nothing is queued for it.
#[test]
fn one_runs_flags_submitted_to_a_lab_are_made_by_an_agent_as_that_run() {
    let Some(db) = LabDb::start("lab-run") else {
        return;
    };
    let _alone = common::measuring_alone();
    let flags = [
        "run",
        "rr",
        "--flows",
        "2",
        "--req-size",
        "64",
        "--resp-size",
        "2K",
        "--label",
        "one-run",
    ];
    let flags = [&flags[..], &SHORT_RUN].concat();
    let dry = plumb()
        .args(&flags)
        .args(["--dry-run", "--json"])
        .output()
        .unwrap();
    assert_ok(&dry);
    let dry: Value = serde_json::from_slice(&dry.stdout).unwrap();
    let key = dry["points"][0]["spec_key"].as_str().unwrap().to_string();

    let refused = db
        .plumb(&flags)
        .args(["--lab", "small", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("plumb: error: --json: not with --lab"),
        "{err}"
    );

    let out = db.plumb(&flags).args(["--lab", "small"]).output().unwrap();
    assert_ok(&out);
    let set: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // Only an agent of the set's class claims it.
    let status = db.status(set);
    assert_eq!(
        status["sets"][0]["jobs"].as_array().unwrap().len(),
        1,
        "{status:#}"
    );
    assert_eq!(status["sets"][0]["class"], "small", "{status:#}");
    let mut agent = db.agent("small-1", &["--until-empty", "--class", "small"]);
    assert_eq!(agent.exit(), Some(0), "{}", agent.log());
    assert_ok(&db.wait(set));
    let runs = db.runs("run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    let (_, stored_key, record) = &runs[0];
    assert_eq!(stored_key, &key);
    assert_eq!(record["label"], "one-run");
    assert_eq!(record["iterations"].as_array().unwrap().len(), 2);
    assert_eq!(record["spec"]["flows"], 2);
}

/// A run against a far host's `plumb serve` (its `--server`) goes to the
/// lab as it is: the agent reaches that server and stores the run as made
/// against a server started by hand there. With that server gone, the same
/// run fails on the agent with the address it could not reach, never
/// silently and never on an embedded server instead.
#[test]
fn a_lab_run_against_a_far_server_is_made_there_and_fails_by_name_without_it() {
    let Some(db) = LabDb::start("lab-far") else {
        return;
    };
    let _alone = common::measuring_alone();
    let (addr, serve) = common::serve_on_loopback();
    let submit = |label: &str| -> i64 {
        let out = db
            .plumb(&["run", "rr", "--server", &addr, "--label", label])
            .args(SHORT_RUN)
            .args(["--lab", "far"])
            .output()
            .unwrap();
        assert_ok(&out);
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let set = submit("far");
    let mut agent = db.agent("far-1", &["--until-empty", "--class", "far"]);
    assert_eq!(agent.exit(), Some(0), "{}", agent.log());
    assert_ok(&db.wait(set));
    let runs = db.runs("run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    let record = &runs[0].2;
    assert_eq!(record["peer"]["started"], "manual", "{}", record["peer"]);
    let host = record["spec"]["server_host"].as_str().unwrap_or_default();
    assert!(host.starts_with("127.0.0.1"), "{}", record["spec"]);

    drop(serve);
    let set = submit("far-gone");
    let mut agent = db.agent(
        "far-2",
        &["--until-empty", "--class", "far", "--lease", "5s"],
    );
    assert_eq!(agent.exit(), Some(0), "{}", agent.log());
    let out = db.wait(set);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128), "{err}");
    assert!(err.contains(&addr), "{err}");
    assert_eq!(db.runs("run").len(), 1);
}

/// A git tree made with `git init` and the directory a watch of it
/// builds into, both in the test's server directory.
fn watched_tree(db: &LabDb) -> (PathBuf, PathBuf) {
    let repo = db.server.dir.join("linux");
    let dir = db.server.dir.join("kernels");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    git_in(&repo, &["init", "--quiet"]);
    (repo, dir)
}

/// What git prints in `repo`, trimmed; git must succeed.
fn git_in(repo: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@lab.test"])
        .args(args)
        .output()
        .unwrap();
    assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `lab watch --git`: each new head of a tree is built by the user's
/// command in plumb's work tree, its image put in the watched directory
/// under `git describe`'s name and submitted as a set under that label; a
/// head already built, or whose build failed, is not built again, and a
/// failed build's log is kept. The images hold what the build wrote (the
/// commit it was run at, as git says), so each is its own commit's.
#[test]
fn a_watched_git_tree_builds_each_new_head_once_into_the_directory() {
    if !common::require_tool("git", "git") {
        return;
    }
    let Some(db) = LabDb::start("lab-tree") else {
        return;
    };
    let (repo, dir) = watched_tree(&db);
    let builds = db.server.dir.join("builds");
    let git = |args: &[&str]| git_in(&repo, args);
    // A build that fails where the tree says so, and counts itself.
    let build = format!(
        "echo built >> {}; test ! -e broken && mkdir -p out && git rev-parse HEAD > out/bzImage",
        builds.display()
    );
    let commit = |what: &str, broken: bool| -> (String, String) {
        std::fs::write(repo.join("what"), what).unwrap();
        let flag = repo.join("broken");
        if broken {
            std::fs::write(&flag, "").unwrap();
            git(&["add", "broken"]);
        } else if flag.exists() {
            git(&["rm", "--quiet", "broken"]);
        }
        git(&["add", "what"]);
        git(&["commit", "--quiet", "-m", what]);
        let sha = git(&["rev-parse", "HEAD"]);
        let name = git(&["describe", "--tags", "--always", "--abbrev=12", &sha]);
        (sha, name)
    };
    let file = ExperimentFile::new(
        "lab-tree",
        "name = \"tree\"\niterations = 1\n[base]\nworkload = \"rr\"\nduration = \"200ms\"\n",
    );
    let (first, first_name) = commit("one", false);
    let log = db.server.dir.join("watch.log");
    let mut watch = db
        .watch(&dir, &file)
        .args(["--git", repo.to_str().unwrap(), "--build", &build])
        .args([
            "--image",
            "out/bzImage",
            "--every",
            "200ms",
            "--class",
            "nobody",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let watch_pid = watch.id().to_string();
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    let labels = || -> Vec<String> {
        let mut l: Vec<String> = (db.sets().iter())
            .map(|s| s["label"].as_str().unwrap().to_string())
            .collect();
        l.sort();
        l
    };
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "never {what}: {}", said());
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let image = |name: &str| dir.join(format!("vmlinuz-{name}"));
    until("built the first head", &|| labels() == [first_name.clone()]);
    assert_eq!(
        std::fs::read_to_string(image(&first_name)).unwrap().trim(),
        first
    );

    let (_, broken_name) = commit("two", true);
    let failed = dir.join(format!(".plumb-build-failed-{broken_name}.log"));
    until("failed the broken head", &|| failed.exists());
    assert!(!image(&broken_name).exists());

    let (third, _) = commit("three", false);
    git(&["tag", "v7.0"]);
    until("built the tagged head", &|| {
        labels().len() == 2 && image("v7.0").exists()
    });
    assert_eq!(
        std::fs::read_to_string(image("v7.0")).unwrap().trim(),
        third
    );
    assert_eq!(labels(), {
        let mut l = vec![first_name.clone(), "v7.0".to_string()];
        l.sort();
        l
    });
    // A few more looks build nothing again: three builds, one a head each.
    std::thread::sleep(Duration::from_millis(800));
    let ran = std::fs::read_to_string(&builds).unwrap();
    assert_eq!(ran.lines().count(), 3, "{}", said());
    let s = said();
    assert!(s.contains(&format!("build of {broken_name} failed")), "{s}");
    assert!(s.contains("no agent of class nobody is alive"), "{s}");

    let ok = Command::new("kill")
        .args(["-INT", &watch_pid])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    // Interrupted, it says so by its status, as every plumb command does.
    assert_eq!(watch.wait().unwrap().code(), Some(130), "{}", said());
}

/// A change between two heads of a git tree that are commits apart: the
/// watch bisects the commits between them on the lab's agents, building
/// each one git picks in its work tree, and names the first that changed.
/// The tree's commits name Debian's packages; its build copies the one
/// named, so that 6.12 turns into 6.1 at the third commit.
#[test]
fn a_change_between_two_heads_of_a_git_tree_is_bisected_on_the_lab() {
    if !common::require_tool("git", "git") {
        return;
    }
    let Some((db, old, new)) = guest_lab("lab-tree-bisect") else {
        return;
    };
    let _alone = common::measuring_alone();
    let (old, new) = (old.last().unwrap().clone(), new.last().unwrap().clone());
    let (repo, dir) = watched_tree(&db);
    let git = |args: &[&str]| git_in(&repo, args);
    let commit = |package: &std::path::Path| -> String {
        std::fs::write(repo.join("kernel"), package.display().to_string()).unwrap();
        git(&["add", "kernel"]);
        git(&["commit", "--quiet", "--allow-empty", "-m", "kernel"]);
        git(&["rev-parse", "HEAD"])
    };
    // The window of docs/bisect.md, one boot a kernel and set; 20 % of
    // change is what the bisection calls bad.
    let file = ExperimentFile::new(
        "lab-tree-bisect",
        "name = \"tree-window\"\niterations = \"4..4\"\norder = \"sequential\"\n\
         [base]\nworkload = \"stream\"\ntopology = \"veth\"\ndelay = \"10ms\"\n\
         rcvbuf = \"16K\"\nduration = \"1s\"\nwarmup = \"500ms\"\n",
    );
    let mut agent = db.agent("measurer", &[]);
    let watch = || {
        let out = db
            .watch(&dir, &file)
            .args(["--git", repo.to_str().unwrap(), "--build"])
            .arg("mkdir -p out && cp \"$(cat kernel)\" out/kernel.deb")
            .args(["--image", "out/kernel.deb", "--once", "--min-change", "20"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}\n{}", agent.log());
        (String::from_utf8_lossy(&out.stdout).into_owned(), err)
    };
    let first = commit(&new);
    let (said, _) = watch();
    assert!(said.is_empty(), "one head, no change: {said}");
    let _good = commit(&new);
    let first_bad = commit(&old);
    let head = commit(&old);
    let (said, err) = watch();
    let short = |sha: &str| git(&["rev-parse", "--short", sha]);
    assert!(
        said.contains("2 commits of") && said.contains(&format!("git log {first}..{head}")),
        "{said}\n{err}"
    );
    assert!(
        said.contains(&format!(
            "first bad: {first_bad} (bisect-{})",
            short(&first_bad)
        )),
        "{said}\n{err}\n{}",
        agent.log()
    );
    // Each commit tested was booted beside the good head by the agent: a
    // set each, the good head's runs and its own in its one job.
    let bisected: Vec<Value> = (db.sets().into_iter())
        .filter(|s| s["label"].as_str().unwrap().starts_with("bisect-"))
        .collect();
    assert!((2..=3).contains(&bisected.len()), "{bisected:#?}");
    each_beside_the_good_one(&bisected);
    // The work tree is back where the watch left it, and the kernels put
    // out for the agents are gone.
    let work = dir.join(".plumb-build");
    let refs = Command::new("git")
        .arg("-C")
        .arg(&work)
        .args(["for-each-ref", "refs/bisect"])
        .output()
        .unwrap();
    assert!(refs.stdout.is_empty(), "{refs:?}");
    let left: Vec<_> = std::fs::read_dir(dir.join(".plumb-bisect"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    agent.stop();
}

/// The lab's database restarted under a running job (a fast shutdown ends
/// every connection): the agent's renewals and its finish ask again on new
/// connections, so the job keeps its first attempt and its run is stored
/// once, by the same agent.
#[test]
fn an_agent_rides_out_a_restart_of_the_database_mid_job() {
    let Some((db, set, _alone)) = LabDb::with_one(
        "lab-restart",
        "workload = \"stream\"\nduration = \"4s\"\nwarmup = \"200ms\"\n",
        &[],
    ) else {
        return;
    };
    let mut agent = db.agent("steady", &["--lease", "6s", "--until-empty"]);
    db.jobs_once(set, "running", |j| j[0]["state"] == "running");
    let restarted = db
        .server
        .command("pg_ctl")
        .arg("-D")
        .arg(db.server.dir.join("data"))
        .arg("-l")
        .arg(db.server.dir.join("log"))
        .args(["-m", "fast", "-w", "restart"])
        // The server it starts keeps what it inherits open: no pipes.
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(restarted.success(), "pg_ctl restart");
    assert_eq!(agent.exit(), Some(0), "{}", agent.log());
    let log = agent.log();
    assert!(
        log.contains("did not answer"),
        "no connection was lost: {log}"
    );
    assert!(log.contains("finished job"), "{log}");
    assert_ok(&db.wait(set));
    let jobs = db.jobs(set);
    assert_eq!(
        (&jobs[0]["agent"], &jobs[0]["attempts"]),
        (&Value::from("steady"), &Value::from(1)),
        "{jobs:?}"
    );
    assert_eq!(db.own_runs().len(), 1);
}
