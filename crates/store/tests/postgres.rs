//! The store on a real PostgreSQL server that each test starts itself
//! (Debian's postgresql package): the same answers as SQLite, concurrent
//! first writers, a writer killed mid-run, copies between the engines, and
//! the connection's errors.

use plumb_samples::{Environment, RunRecord};
use plumb_store::{Export, Location, RunFilter, RunTag, Store, StoreError, SCHEMA_VERSION};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

#[path = "shared/pgserver.rs"]
mod pgserver;
#[path = "shared/precondition.rs"]
mod precondition;
#[path = "shared/tempdb.rs"]
mod tempdb;
use pgserver::{PgServer, PASSWORD};
use precondition::skip;
use tempdb::TempDb;

fn record(label: &str, started_at: &str, n: u32) -> RunRecord {
    let mut r = plumb_samples::testing::example();
    r.label = label.to_string();
    r.started_at = started_at.to_string();
    // Fixed ids, so that both engines hold the very same runs.
    r.uuid = Some(format!("00000000-0000-4000-8000-{n:012}"));
    r
}

fn env(kernel: &str, server: Option<&str>) -> Environment {
    let mut e = Environment::default();
    e.set("kernel.release", kernel);
    e.set("sysctl.net.core.somaxconn", "4096");
    if let Some(s) = server {
        let mut other = Environment::default();
        other.set("kernel.release", s);
        e.add_server_end(&other);
    }
    e
}

fn tag(point: &str, variant: Option<&str>) -> RunTag {
    RunTag {
        experiment: "sweep1".into(),
        point: point.into(),
        variant: variant.map(str::to_string),
        seed: Some(42),
        // Not 0: a rank that is not the first is the one to lose.
        variant_rank: variant.map(|_| 1),
    }
}

/// Everything a store answers, as text, for comparing two stores.
fn answers(s: &mut Store) -> Vec<String> {
    let mut out = Vec::new();
    let filters = [
        RunFilter::default(),
        RunFilter {
            label: Some("new".into()),
            ..Default::default()
        },
        RunFilter {
            since: Some("2026-11-02".into()),
            until: Some("2026-11-03T12:00:00Z".into()),
            ..Default::default()
        },
        RunFilter {
            workload: Some("stream".into()),
            limit: Some(2),
            ..Default::default()
        },
        RunFilter {
            spec_key: Some("nothing".into()),
            ..Default::default()
        },
    ];
    for f in &filters {
        out.push(format!("{:?}", s.list(f).unwrap()));
        out.push(format!("{:?}", s.runs(f).unwrap()));
        out.push(serde_json::to_string(&s.export(f).unwrap()).unwrap());
        out.push(s.export_csv(f).unwrap());
    }
    for id in s.list(&RunFilter::default()).unwrap() {
        out.push(format!("{:?}", s.get(id.id).unwrap()));
        out.push(format!("{:?}", s.tag_of(id.id).unwrap()));
    }
    out.push(format!("{:?}", s.get(plumb_store::RunId(999)).unwrap()));
    out.push(format!("{:?}", s.labels().unwrap()));
    out.push(format!("{:?}", s.experiments().unwrap()));
    out.push(format!("{:?}", s.experiment_runs("sweep1", None).unwrap()));
    out.push(format!(
        "{:?}",
        s.experiment_runs("sweep1", Some("new")).unwrap()
    ));
    out.push(format!("{:?}", s.experiment_runs("none", None).unwrap()));
    out.push(format!("{:?}", s.runs_with_label("old").unwrap()));
    out.push(format!("{:?}", s.runs_with_label("none").unwrap()));
    out.push(format!("{:?}", s.schema_version().unwrap()));
    out
}

/// The same writes on any store; returns what each step answered.
fn exercise(s: &mut Store) -> Vec<String> {
    let mut out = Vec::new();
    let a = s
        .insert_run(
            &record("old", "2026-10-01T08:00:00Z", 1),
            Some(&env("6.5.0", None)),
        )
        .unwrap();
    s.insert_run(
        &record("new", "2026-11-02T08:00:00+01:00", 2),
        Some(&env("6.6.0", Some("6.7.0"))),
    )
    .unwrap();
    s.insert_tagged_run(
        &record("new", "2026-11-03T08:00:00Z", 3),
        Some(&env("6.5.0", None)),
        &tag("sndbuf=8K", None),
    )
    .unwrap();
    s.insert_tagged_run(
        &record("x,\"quoted\"", "2026-11-04T08:00:00.5Z", 4),
        None,
        &tag("sndbuf=16K", Some("rps")),
    )
    .unwrap();
    out.extend(answers(s));
    let all = s.export(&RunFilter::default()).unwrap();
    out.push(format!("{:?}", s.import(&all).unwrap()));
    out.push(format!("{}", s.delete(a).unwrap()));
    out.push(format!("{}", s.delete(a).unwrap()));
    out.extend(answers(s));
    // Import the deleted run back, and once more: added once.
    out.push(format!("{:?}", s.import(&all).unwrap()));
    out.push(format!("{:?}", s.import(&all).unwrap()));
    let bad = Export {
        schema: "other".into(),
        runs: vec![],
    };
    out.push(format!("{}", s.import(&bad).unwrap_err()));
    out.extend(answers(s));
    out
}

#[test]
fn both_engines_answer_every_operation_alike() {
    let Some(server) = PgServer::start("alike", false) else {
        return;
    };
    let file = TempDb::new("alike");
    let mut lite = Store::open(&file.0).unwrap();
    let url = server.database("alike");
    let mut pg = Store::open_location(&Location::new(&url)).unwrap();
    assert_eq!(pg.path(), url);
    let from_lite = exercise(&mut lite);
    let from_pg = exercise(&mut pg);
    assert_eq!(from_lite.len(), from_pg.len());
    for (i, (l, p)) in from_lite.iter().zip(&from_pg).enumerate() {
        assert_eq!(l, p, "answer {i} differs between SQLite and PostgreSQL");
    }
    // The tables beside the records agree too.
    let mut c = server.client("alike");
    let lc = rusqlite::Connection::open(&file.0).unwrap();
    for table in [
        "runs",
        "iterations",
        "interval_samples",
        "tcp_samples",
        "environments",
        "run_tags",
    ] {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        let n: i64 = c.query_one(&sql, &[]).unwrap().get(0);
        let m: i64 = lc.query_row(&sql, [], |r| r.get(0)).unwrap();
        assert_eq!(n, m, "{table}");
    }
    // A database from a newer plumb is refused, not downgraded.
    c.execute("UPDATE plumb_schema SET version = 99", &[])
        .unwrap();
    match Store::open_location(&Location::new(&url)) {
        Err(StoreError::TooNew { found: 99, .. }) => {}
        other => panic!("expected TooNew, got {:?}", other.err()),
    }
}

#[test]
fn a_version_6_database_migrates_its_tags_without_ranks() {
    let Some(server) = PgServer::start("rank", false) else {
        return;
    };
    let url = server.database("rank");
    let id = {
        let mut s = Store::open_location(&Location::new(&url)).unwrap();
        s.insert_tagged_run(
            &record("x", "2026-11-01T00:00:00Z", 1),
            None,
            &tag("sndbuf=8K,variant=rps", Some("rps")),
        )
        .unwrap()
    };
    // Back to the layout a version-6 plumb made: no rank column, no
    // sampled TCP state.
    let mut c = server.client("rank");
    c.batch_execute(
        "ALTER TABLE run_tags DROP COLUMN variant_rank; DROP TABLE tcp_samples;
         UPDATE plumb_schema SET version = 6",
    )
    .unwrap();
    let s = Store::open_location(&Location::new(&url)).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let old = RunTag {
        variant_rank: None,
        ..tag("sndbuf=8K,variant=rps", Some("rps"))
    };
    assert_eq!(s.tag_of(id).unwrap(), Some(old.clone()));
    assert_eq!(s.experiment_runs("sweep1", None).unwrap()[0].0, old);
}

#[test]
fn two_first_writers_on_a_new_database_lose_nothing() {
    let Some(server) = PgServer::start("race", false) else {
        return;
    };
    let url = server.database("race");
    let writers = 4;
    let each = 5;
    let start = std::sync::Arc::new(std::sync::Barrier::new(writers));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let url = url.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                // Each opens the new database at once: all migrate.
                let mut s = Store::open_location(&Location::new(&url)).unwrap();
                for i in 0..each {
                    let n = (w * 100 + i) as u32;
                    s.insert_run(
                        &record("race", &format!("2026-11-01T00:{w:02}:{i:02}Z"), n),
                        Some(&env("6.6.0", None)),
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = Store::open_location(&Location::new(&url)).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let runs = s.list(&RunFilter::default()).unwrap();
    assert_eq!(runs.len(), writers * each);
    let uuids: std::collections::BTreeSet<_> = s
        .export(&RunFilter::default())
        .unwrap()
        .runs
        .into_iter()
        .map(|r| r.record.uuid.unwrap())
        .collect();
    assert_eq!(uuids.len(), writers * each);
    let mut c = server.client("race");
    let envs: i64 = c
        .query_one("SELECT COUNT(*) FROM environments", &[])
        .unwrap()
        .get(0);
    assert_eq!(envs, 1);

    // Two imports of the same file at once add each run once.
    let export = s.export(&RunFilter::default()).unwrap();
    let copy = server.database("race_copy");
    drop(Store::open_location(&Location::new(&copy)).unwrap());
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (copy, export) = (copy.clone(), export.clone());
            std::thread::spawn(move || {
                let mut s = Store::open_location(&Location::new(&copy)).unwrap();
                s.import(&export).unwrap().len()
            })
        })
        .collect();
    let added: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(added, writers * each);
    let s = Store::open_location(&Location::new(&copy)).unwrap();
    assert_eq!(s.list(&RunFilter::default()).unwrap().len(), writers * each);
}

/// Not a test of its own: the writer that `a_killed_writer_leaves_no_trace`
/// runs in a child process and kills.
#[test]
fn killed_writer_child() {
    let Ok(url) = std::env::var("PLUMB_PG_CHILD_URL") else {
        return;
    };
    let mut s = Store::open_location(&Location::new(&url)).unwrap();
    let mut r = record("killed", "2026-11-01T00:00:00Z", 0);
    // A heavy run, so that the kill most likely lands inside a write.
    let it = r.iterations[0].clone();
    r.iterations = (0..200)
        .map(|i| {
            let mut it = it.clone();
            it.index = i;
            it
        })
        .collect();
    for n in 0.. {
        r.uuid = None;
        s.insert_run(&r, None).unwrap();
        println!("stored {n}");
    }
}

#[test]
fn a_killed_writer_leaves_no_trace() {
    let Some(server) = PgServer::start("kill", false) else {
        return;
    };
    let url = server.database("kill");
    drop(Store::open_location(&Location::new(&url)).unwrap());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "killed_writer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PLUMB_PG_CHILD_URL", &url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // Some runs committed, the next one under way. (The test harness
    // prints its own lines first.)
    let mut stored = 0;
    while stored < 3 {
        let line = lines.next().expect("the child writes").unwrap();
        stored += usize::from(line.starts_with("stored "));
    }
    std::thread::sleep(std::time::Duration::from_millis(7));
    child.kill().unwrap(); // SIGKILL: no unwinding, no rollback by us
    child.wait().unwrap();
    let mut c = server.client("kill");
    // The server rolls back the dead connection's transaction when it
    // notices the socket closed; wait for that backend to go.
    for _ in 0..100 {
        let n: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = 'kill' AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0);
        if n == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let runs: i64 = c
        .query_one("SELECT COUNT(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert!(runs >= 3, "the committed runs stay: {runs}");
    // Every run is whole; nothing belongs to a run that is not there.
    let partial: i64 = c
        .query_one(
            "SELECT COUNT(*) FROM runs r WHERE r.iterations <>
               (SELECT COUNT(*) FROM iterations i WHERE i.run_id = r.id)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(partial, 0);
    let samples: i64 = c
        .query_one("SELECT COUNT(*) FROM interval_samples", &[])
        .unwrap()
        .get(0);
    let per_run = {
        let r = record("x", "2026-11-01T00:00:00Z", 0);
        let it = &r.iterations[0];
        (it.client.intervals.len() + it.server.intervals.len()) as i64 * 200
    };
    assert_eq!(samples, runs * per_run);
    // The store takes writes again at once: no lock was left behind.
    let mut s = Store::open_location(&Location::new(&url)).unwrap();
    s.insert_run(&record("after", "2026-11-02T00:00:00Z", 1), None)
        .unwrap();
    assert_eq!(
        s.list(&RunFilter::default()).unwrap().len() as i64,
        runs + 1
    );
}

#[test]
fn sqlite_to_postgres_to_sqlite_keeps_uuids_and_adds_nothing_again() {
    let Some(server) = PgServer::start("copy", false) else {
        return;
    };
    let a = TempDb::new("copy-a");
    let b = TempDb::new("copy-b");
    let mut first = Store::open(&a.0).unwrap();
    let mut r = record("x", "2026-11-01T00:00:00Z", 0);
    r.uuid = None; // the store gives it one
    first
        .insert_run(&r, Some(&env("6.6.0", Some("6.1.0"))))
        .unwrap();
    first
        .insert_tagged_run(
            &record("y", "2026-11-02T00:00:00Z", 7),
            None,
            &tag("p", None),
        )
        .unwrap();
    let url = server.database("copy");
    let mut pg = Store::open(Path::new(&url)).unwrap();
    let mut last = Store::open(&b.0).unwrap();
    let all = RunFilter::default();
    let original = first.export(&all).unwrap();
    assert_eq!(pg.import(&original).unwrap().len(), 2);
    assert!(pg.import(&original).unwrap().is_empty());
    let via_pg = pg.export(&all).unwrap();
    assert_eq!(last.import(&via_pg).unwrap().len(), 2);
    assert!(last.import(&via_pg).unwrap().is_empty());
    assert!(pg.import(&last.export(&all).unwrap()).unwrap().is_empty());
    let text = |e: &Export| serde_json::to_string(e).unwrap();
    assert_eq!(text(&last.export(&all).unwrap()), text(&original));
    assert_eq!(text(&via_pg), text(&original));
}

#[test]
fn passwords_come_from_the_environment_and_never_show() {
    let Some(server) = PgServer::start("auth", true) else {
        return;
    };
    let url = server.database("auth");
    let dir = std::env::temp_dir().join(format!("plumb-pgpass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pgpass = dir.join("pgpass");
    // The only test of this binary that sets these variables.
    std::env::set_var("PGPASSFILE", &pgpass);
    std::env::remove_var("PGPASSWORD");
    let open = |url: &str| Store::open_location(&Location::new(url));

    // None given: the error says where to put it.
    let e = open(&url).err().expect("no password").to_string();
    assert!(e.contains("PGPASSWORD") && e.contains(".pgpass"), "{e}");
    assert!(e.contains(&url), "{e}");

    std::env::set_var("PGPASSWORD", "wrong-one");
    let e = open(&url).err().expect("a wrong password").to_string();
    assert!(
        e.contains("authentication failed") && e.contains("PGPASSWORD"),
        "{e}"
    );
    assert!(!e.contains("wrong-one"), "{e}");

    std::env::set_var("PGPASSWORD", PASSWORD);
    open(&url).unwrap();
    std::env::remove_var("PGPASSWORD");

    std::fs::write(
        &pgpass,
        format!(
            "otherhost:*:*:*:nope\n127.0.0.1:{}:auth:plumb:{PASSWORD}\n",
            server.port
        ),
    )
    .unwrap();
    open(&url).unwrap();

    // A password in the URL wins, and is never shown.
    let with = url.replace("plumb@", "plumb:hunter2@");
    let e = open(&with)
        .err()
        .expect("the URL's wrong password")
        .to_string();
    assert!(
        e.contains("authentication failed") && !e.contains("hunter2"),
        "{e}"
    );
    assert!(e.contains(&url), "{e}");
    let right = url.replace(
        "plumb@",
        &format!("plumb:{}@", PASSWORD.replace(' ', "%20")),
    );
    let s = open(&right).unwrap();
    assert!(!s.path().contains("secret"), "{}", s.path());
    std::env::remove_var("PGPASSFILE");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreachable_server_or_database_says_what_to_check() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://ann:pw@127.0.0.1:{port}/plumb");
    let e = Store::open_existing_location(&Location::new(&url))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("cannot reach") && e.contains(&format!("127.0.0.1:{port}")),
        "{e}"
    );
    assert!(!e.contains(":pw@"), "{e}");
    let e = Store::open(Path::new(
        "postgresql://a@127.0.0.1:1/d?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ))
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("/nonexistent/ca.pem"), "{e}");

    let Some(server) = PgServer::start("nodb", false) else {
        return;
    };
    let e = Store::open_location(&Location::new(server.url("absent")))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("'absent' does not exist"), "{e}");
}

#[test]
fn a_postgres_url_is_a_server_and_anything_else_a_file() {
    for server in ["postgres://u@h/db", "PostgreSQL://u@h:5433/db"] {
        assert_eq!(Location::new(server), Location::Postgres(server.into()));
    }
    for file in ["postgres/plumb.db", "./postgres://x"] {
        assert_eq!(Location::new(file), Location::File(file.into()));
    }
}

#[test]
fn tls_follows_sslmode_and_the_servers_log_shows_it_used() {
    let Some(server) = PgServer::start_with("tls", false, true) else {
        return;
    };
    server.database("tls");
    let dir = &server.dir;
    // The server's own word: each connection it authorized over TLS.
    let tls_logins = || {
        std::fs::read_to_string(dir.join("log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("connection authorized") && l.contains("database=tls"))
            .filter(|l| l.contains("SSL enabled"))
            .count()
    };
    let url =
        |host: &str, query: &str| format!("postgres://plumb@{host}:{}/tls{query}", server.port);
    let ca = dir.join("ca.pem").display().to_string();
    let other = dir.join("other-ca.pem").display().to_string();
    let open = |u: &str| Store::open_location(&Location::new(u)).map(drop);
    let logins_after = |u: &str| {
        let before = tls_logins();
        open(u).unwrap_or_else(|e| panic!("{u}: {e}"));
        // The log is written by another process: give it a moment.
        for _ in 0..50 {
            if tls_logins() > before {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        tls_logins() - before
    };

    // The server takes this database over TLS alone: in the clear it says
    // no, and the error says what to try.
    let e = open(&url("127.0.0.1", "?sslmode=disable"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pg_hba.conf") && e.contains("sslmode=require"),
        "{e}"
    );

    // prefer (the default) and require encrypt without checking.
    assert!(logins_after(&url("127.0.0.1", "")) >= 1);
    assert!(logins_after(&url("127.0.0.1", "?sslmode=require")) >= 1);
    // verify-ca: signed by the CA, whatever host it names.
    assert!(
        logins_after(&url(
            "127.0.0.1",
            &format!("?sslmode=verify-ca&sslrootcert={ca}")
        )) >= 1
    );
    // verify-full: and naming the host the URL gives.
    assert!(
        logins_after(&url(
            "localhost",
            &format!("?sslmode=verify-full&sslrootcert={ca}")
        )) >= 1
    );

    let e = open(&url(
        "127.0.0.1",
        &format!("?sslmode=verify-full&sslrootcert={ca}"),
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("certificate") && e.contains("verify-ca"), "{e}");
    for mode in ["require", "verify-ca", "verify-full"] {
        let e = open(&url(
            "localhost",
            &format!("?sslmode={mode}&sslrootcert={other}"),
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("certificate") && e.contains("sslrootcert"),
            "{mode}: {e}"
        );
    }
    let e = open(&url(
        "localhost",
        "?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("/nonexistent/ca.pem"), "{e}");
}

#[test]
fn insisting_on_tls_where_the_server_has_none_is_refused() {
    let Some(server) = PgServer::start("notls", false) else {
        return;
    };
    server.database("notls");
    let url = format!("postgres://plumb@127.0.0.1:{}/notls", server.port);
    // prefer goes on in the clear; require does not.
    Store::open_location(&Location::new(&url)).unwrap();
    let e = Store::open_location(&Location::new(format!("{url}?sslmode=require")))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("does not offer it") && e.contains("sslmode=prefer"),
        "{e}"
    );
}
