//! The store against a real SQLite file: round trips, filters, deletion,
//! import, and migration from the first schema version.

use plumb_samples::{Environment, RunRecord};
use plumb_store::{Export, RunFilter, RunId, Store, StoreError, SCHEMA_VERSION};
use std::path::PathBuf;

#[path = "shared/tempdb.rs"]
mod tempdb;
use plumb_samples::testing::example;
use tempdb::TempDb;

fn record(label: &str, started_at: &str) -> RunRecord {
    let mut r = example();
    r.label = label.to_string();
    r.started_at = started_at.to_string();
    r
}

fn env(kernel: &str) -> Environment {
    let mut e = Environment::default();
    e.set("kernel.release", kernel);
    e.set("sysctl.net.core.somaxconn", "4096");
    e
}

fn count(path: &PathBuf, sql: &str) -> i64 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Writes `r` into `runs` by hand, as a plumb of an older schema did: only
/// the columns of the first version, with the client's environment
/// `env_hash` (stored before, or none). Its row id.
fn insert_old_run(c: &rusqlite::Connection, r: &RunRecord, env_hash: Option<&str>) -> RunId {
    c.execute(
        "INSERT INTO runs (started_at, label, workload, spec_key, summary, complete, iterations,
                           throughput_bps, env_hash, record)
         VALUES (?1, ?2, 'stream', ?3, 's', 1, ?4, 1e9, ?5, ?6)",
        rusqlite::params![
            r.started_at,
            r.label,
            r.spec_key,
            r.iterations.len() as i64,
            env_hash,
            serde_json::to_string(r).unwrap()
        ],
    )
    .unwrap();
    RunId(c.last_insert_rowid())
}

#[test]
fn a_run_round_trips_with_its_environment() {
    let db = TempDb::new("roundtrip");
    let mut s = Store::open(&db.0).unwrap();
    let r = record("6.6", "2026-11-20T10:00:00Z");
    let id = s.insert_run(&r, Some(&env("6.6.0"))).unwrap();
    let got = s.get(id).unwrap().expect("stored");
    // The store gave the run its unique id; the rest is as written.
    let mut given = got.record.clone();
    assert_eq!(given.uuid.take().map(|u| u.len()), Some(36));
    assert_eq!(given, r);
    assert_eq!(got.env.unwrap().get("kernel.release"), Some("6.6.0"));
    assert!(s.get(RunId(id.0 + 100)).unwrap().is_none());
    let samples: usize = r
        .iterations
        .iter()
        .map(|i| i.client.intervals.len() + i.server.intervals.len())
        .sum();
    assert!(samples > 0, "the example has interval samples");
    assert_eq!(
        count(&db.0, "SELECT COUNT(*) FROM interval_samples") as usize,
        samples
    );
    assert_eq!(
        count(&db.0, "SELECT COUNT(*) FROM iterations") as usize,
        r.iterations.len()
    );
    // The sampled TCP state: a row per sample of each end, its sums.
    let series = |e: &plumb_samples::EndResult| e.tcp_series.as_ref().map_or(0, |s| s.t_ms.len());
    let tcp: usize = r
        .iterations
        .iter()
        .map(|i| series(&i.client) + series(&i.server))
        .sum();
    assert!(tcp > 0, "the example has sampled TCP state");
    assert_eq!(
        count(&db.0, "SELECT COUNT(*) FROM tcp_samples") as usize,
        tcp
    );
    let last = r.iterations[0].client.tcp_series.as_ref().unwrap();
    let k = last.t_ms.len() - 1;
    assert_eq!(
        count(
            &db.0,
            "SELECT cwnd FROM tcp_samples WHERE role = 'client' AND iteration = 0
             ORDER BY t_s DESC LIMIT 1"
        ),
        last.all.cwnd[k] as i64
    );
}

#[test]
fn environments_are_kept_once_and_dropped_with_their_last_run() {
    let db = TempDb::new("envdedup");
    let mut s = Store::open(&db.0).unwrap();
    let a = s
        .insert_run(&record("x", "2026-11-20T10:00:00Z"), Some(&env("6.5.0")))
        .unwrap();
    let b = s
        .insert_run(&record("x", "2026-11-20T11:00:00Z"), Some(&env("6.5.0")))
        .unwrap();
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM environments"), 1);
    assert!(s.delete(a).unwrap());
    assert!(
        !s.delete(a).unwrap(),
        "deleting twice says there was nothing"
    );
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM environments"), 1);
    assert!(s.delete(b).unwrap());
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM environments"), 0);
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM interval_samples"), 0);
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM tcp_samples"), 0);
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM iterations"), 0);
}

/// A run between two hosts: the client's environment, and the server's
/// added under its end.
fn two_ends(client: &str, server: &str) -> Environment {
    let mut e = env(client);
    e.add_server_end(&env(server));
    e
}

#[test]
fn each_ends_environment_is_kept_apart_and_a_host_once_whichever_end_it_was() {
    let db = TempDb::new("ends");
    let mut s = Store::open(&db.0).unwrap();
    let both = two_ends("6.6.0", "6.7.0");
    let a = s
        .insert_run(&record("x", "2026-11-20T10:00:00Z"), Some(&both))
        .unwrap();
    // The ends swapped: the same two host environments, no new row.
    let b = s
        .insert_run(
            &record("x", "2026-11-20T11:00:00Z"),
            Some(&two_ends("6.7.0", "6.6.0")),
        )
        .unwrap();
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM environments"), 2);
    assert_eq!(
        count(
            &db.0,
            "SELECT COUNT(*) FROM runs WHERE server_env_hash IS NOT NULL AND server_env_hash != env_hash"
        ),
        2
    );
    let got = s.get(a).unwrap().unwrap().env.unwrap();
    assert_eq!(got, both);
    assert_eq!(got.kernels(), "client 6.6.0, server 6.7.0");
    // The server's environment goes with its last run.
    assert!(s.delete(a).unwrap());
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM environments"), 2);
    assert!(s.delete(b).unwrap());
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM environments"), 0);
}

#[test]
fn a_version_4_run_migrates_without_a_server_environment() {
    let db = TempDb::new("migrate4");
    let id = {
        drop(Store::open_at_version(&db.0, 4).unwrap());
        // The run as a version-4 plumb wrote it: one environment.
        let c = rusqlite::Connection::open(&db.0).unwrap();
        let e = env("6.5.0");
        c.execute(
            "INSERT INTO environments (hash, facts) VALUES (?1, ?2)",
            rusqlite::params![e.hash(), serde_json::to_string(&e.facts).unwrap()],
        )
        .unwrap();
        insert_old_run(&c, &record("x", "2026-11-20T10:00:00Z"), Some(&e.hash()))
    };
    let s = Store::open(&db.0).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let got = s.get(id).unwrap().unwrap().env.unwrap();
    assert_eq!(got, env("6.5.0"));
    assert!(!got.has_server_end());
    assert_eq!(got.kernels(), "6.5.0");
}

#[test]
fn list_filters_by_label_date_and_limit_newest_first() {
    let db = TempDb::new("filters");
    let mut s = Store::open(&db.0).unwrap();
    s.insert_run(&record("old", "2026-10-01T08:00:00Z"), None)
        .unwrap();
    s.insert_run(&record("new", "2026-11-02T08:00:00Z"), None)
        .unwrap();
    s.insert_run(&record("new", "2026-11-03T08:00:00Z"), None)
        .unwrap();
    let all = s.list(&RunFilter::default()).unwrap();
    let starts: Vec<&str> = all.iter().map(|r| r.started_at.as_str()).collect();
    assert_eq!(
        starts,
        [
            "2026-11-03T08:00:00Z",
            "2026-11-02T08:00:00Z",
            "2026-10-01T08:00:00Z"
        ]
    );
    let f = |label: Option<&str>, since: Option<&str>, until: Option<&str>, limit| RunFilter {
        label: label.map(String::from),
        since: since.map(String::from),
        until: until.map(String::from),
        limit,
        ..RunFilter::default()
    };
    assert_eq!(s.list(&f(Some("new"), None, None, None)).unwrap().len(), 2);
    assert_eq!(
        s.list(&f(None, Some("2026-11-01"), None, None))
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        s.list(&f(None, None, Some("2026-11-03"), None))
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        s.list(&f(None, None, None, Some(1))).unwrap()[0].label,
        "new"
    );
    let err = s
        .list(&f(None, Some("last tuesday"), None, None))
        .unwrap_err();
    assert!(err.to_string().starts_with("--since:"), "{err}");
    assert_eq!(s.runs_with_label("new").unwrap().len(), 2);
    let labels = s.labels().unwrap();
    assert_eq!(labels[0], ("new".to_string(), 2));
    let row = &all[0];
    assert!(row.throughput_bps.unwrap() > 0.0);
    assert_eq!(row.workload, "stream");
}

#[test]
fn import_adds_each_run_once_and_refuses_foreign_files() {
    let src = TempDb::new("import-src");
    let dst = TempDb::new("import-dst");
    let mut s = Store::open(&src.0).unwrap();
    s.insert_run(&record("a", "2026-11-20T10:00:00Z"), Some(&env("6.5.0")))
        .unwrap();
    s.insert_run(&record("b", "2026-11-20T11:00:00Z"), None)
        .unwrap();
    let export = s.export(&RunFilter::default()).unwrap();
    let text = serde_json::to_string(&export).unwrap();
    let export: Export = serde_json::from_str(&text).unwrap();
    let mut d = Store::open(&dst.0).unwrap();
    assert_eq!(d.import(&export).unwrap().len(), 2);
    assert_eq!(
        d.import(&export).unwrap().len(),
        0,
        "a second import adds nothing"
    );
    let a = d.runs_with_label("a").unwrap();
    assert_eq!(
        a[0].env.as_ref().unwrap().get("kernel.release"),
        Some("6.5.0")
    );
    // The sampled TCP state comes with the records, and its rows with it.
    assert_eq!(
        a[0].record.iterations[0].client.tcp_series,
        record("a", "").iterations[0].client.tcp_series
    );
    let rows = "SELECT COUNT(*) FROM tcp_samples";
    assert!(count(&dst.0, rows) > 0);
    assert_eq!(count(&dst.0, rows), count(&src.0, rows));
    let mut bad = export.clone();
    bad.schema = "something/else".into();
    assert!(matches!(d.import(&bad), Err(StoreError::Import { .. })));
    let csv = d.export_csv(&RunFilter::default()).unwrap();
    let iterations: usize = export.runs.iter().map(|r| r.record.iterations.len()).sum();
    assert_eq!(csv.lines().count(), 1 + iterations);
}

#[test]
fn a_version_1_database_migrates_and_keeps_its_runs() {
    let db = TempDb::new("migrate");
    let r = record("6.5", "2026-11-19T09:00:00Z");
    {
        let old = Store::open_at_version(&db.0, 1).unwrap();
        assert_eq!(old.schema_version().unwrap(), 1);
        // What a version-1 plumb wrote: no interval_samples table yet. The
        // insert path writes samples, so write the v1 rows by hand.
        drop(old);
        let c = rusqlite::Connection::open(&db.0).unwrap();
        let has_samples: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'interval_samples'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(has_samples, 0);
        insert_old_run(&c, &r, None);
    }
    let s = Store::open(&db.0).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let runs = s.runs_with_label("6.5").unwrap();
    assert_eq!(runs.len(), 1);
    let mut migrated = runs[0].record.clone();
    assert!(migrated.uuid.take().is_some(), "a migrated run gets its id");
    assert_eq!(migrated, r);
    let samples: usize = r
        .iterations
        .iter()
        .map(|i| i.client.intervals.len() + i.server.intervals.len())
        .sum();
    assert_eq!(
        count(&db.0, "SELECT COUNT(*) FROM interval_samples") as usize,
        samples,
        "the migration fills the new table from the stored records"
    );
}

#[test]
fn a_database_from_a_newer_plumb_is_refused() {
    let db = TempDb::new("newer");
    drop(Store::open(&db.0).unwrap());
    let c = rusqlite::Connection::open(&db.0).unwrap();
    c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(c);
    let err = Store::open(&db.0).err().expect("refused");
    assert!(matches!(err, StoreError::TooNew { .. }));
    assert!(err.to_string().contains("newer"), "{err}");
}

#[test]
fn an_uncommitted_run_leaves_nothing() {
    // The process-kill case end to end lives in tests/regression.rs; here the
    // transaction boundary itself: a failing insert leaves no partial rows.
    let db = TempDb::new("atomic");
    let mut s = Store::open(&db.0).unwrap();
    s.insert_run(&record("ok", "2026-11-20T10:00:00Z"), None)
        .unwrap();
    let c = rusqlite::Connection::open(&db.0).unwrap();
    // Make the per-iteration insert fail after the run row went in.
    c.execute_batch(
        "CREATE TRIGGER fail_iter BEFORE INSERT ON iterations
         BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;",
    )
    .unwrap();
    drop(c);
    let err = s
        .insert_run(&record("broken", "2026-11-20T11:00:00Z"), None)
        .unwrap_err();
    assert!(err.to_string().contains("disk on fire"), "{err}");
    assert_eq!(count(&db.0, "SELECT COUNT(*) FROM runs"), 1);
    assert!(s.runs_with_label("broken").unwrap().is_empty());
}

/// Two plumb processes storing their first runs on a new database at once
/// both migrate it: each step is taken under the write lock, so neither
/// fails with "table already exists".
#[test]
fn many_first_opens_of_a_new_database_race_safely() {
    for round in 0..5 {
        let db = TempDb::new(&format!("race{round}"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (path, barrier) = (db.0.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut s = Store::open(&path).map_err(|e| e.to_string())?;
                    let r = record(&format!("t{i}"), "2026-11-20T10:00:00Z");
                    s.insert_run(&r, Some(&env("6.6.0")))
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        for t in threads {
            t.join()
                .unwrap()
                .expect("every first open migrates or waits");
        }
        assert_eq!(count(&db.0, "SELECT COUNT(*) FROM runs"), 4);
        assert_eq!(count(&db.0, "PRAGMA user_version"), SCHEMA_VERSION);
    }
}

#[test]
fn a_reading_command_does_not_create_a_missing_database() {
    let dir = std::env::temp_dir().join(format!("plumb-store-missing-{}", std::process::id()));
    let path = dir.join("nope.db");
    match Store::open_existing(&path) {
        Err(e @ StoreError::Missing { .. }) => {
            assert!(e.to_string().contains("does not exist"), "{e}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("opened a database that does not exist"),
    }
    assert!(!dir.exists(), "its directory was created");
    let db = TempDb::new("existing");
    Store::open(&db.0).unwrap();
    Store::open_existing(&db.0).expect("an existing database opens");
}

#[test]
fn each_run_has_a_unique_id_that_export_import_and_tags_keep() {
    let src = TempDb::new("uuid-src");
    let dst = TempDb::new("uuid-dst");
    let mut s = Store::open(&src.0).unwrap();
    // A record that came with its id keeps it; one without gets one.
    let mut given = record("a", "2026-11-20T10:00:00Z");
    given.uuid = Some("0f1e2d3c-4b5a-4697-8877-665544332211".into());
    let a = s.insert_run(&given, None).unwrap();
    let tag = plumb_store::RunTag {
        experiment: "e".into(),
        point: "flows=1".into(),
        variant: Some("v".into()),
        seed: Some(7),
        variant_rank: Some(2),
    };
    let b = s
        .insert_tagged_run(&record("b", "2026-11-20T11:00:00Z"), None, &tag)
        .unwrap();
    let ua = s.get(a).unwrap().unwrap().record.uuid.unwrap();
    let ub = s.get(b).unwrap().unwrap().record.uuid.unwrap();
    assert_eq!(ua, "0f1e2d3c-4b5a-4697-8877-665544332211");
    assert_eq!(ub.len(), 36);
    assert_ne!(ua, ub);
    assert_eq!(
        count(
            &src.0,
            "SELECT COUNT(DISTINCT uuid) FROM runs WHERE uuid IS NOT NULL"
        ),
        2
    );
    let export = s.export(&RunFilter::default()).unwrap();
    let mut d = Store::open(&dst.0).unwrap();
    assert_eq!(d.import(&export).unwrap().len(), 2);
    // The same runs under another start time are still the same runs.
    let mut moved = export.clone();
    for r in &mut moved.runs {
        r.record.started_at = "2030-01-01T00:00:00Z".into();
    }
    assert_eq!(d.import(&moved).unwrap().len(), 0);
    let back = d.export(&RunFilter::default()).unwrap();
    let ids: Vec<_> = back
        .runs
        .iter()
        .map(|r| r.record.uuid.clone().unwrap())
        .collect();
    assert_eq!(ids, vec![ua, ub]);
    assert_eq!(back.runs[1].tag.as_ref(), Some(&tag));
    assert_eq!(d.experiment_runs("e", None).unwrap().len(), 1);
}

#[test]
fn runs_stored_before_ids_get_one_each_at_migration() {
    let db = TempDb::new("migrate5");
    {
        drop(Store::open_at_version(&db.0, 5).unwrap());
        // The runs as a version-5 plumb wrote them: no id anywhere.
        let c = rusqlite::Connection::open(&db.0).unwrap();
        for h in 10..13 {
            insert_old_run(&c, &record("x", &format!("2026-11-20T{h}:00:00Z")), None);
        }
    }
    let s = Store::open(&db.0).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(count(&db.0, "SELECT COUNT(DISTINCT uuid) FROM runs"), 3);
    let rows = s.list(&RunFilter::default()).unwrap();
    for r in rows {
        let u = s.get(r.id).unwrap().unwrap().record.uuid.unwrap();
        assert_eq!(u.len(), 36, "{u}");
        assert_eq!(&u[14..15], "4", "{u}");
    }
}

#[test]
fn tags_stored_before_ranks_migrate_without_one() {
    let db = TempDb::new("migrate6");
    let tag = plumb_store::RunTag {
        experiment: "e".into(),
        point: "flows=1,variant=nagle".into(),
        variant: Some("nagle".into()),
        seed: Some(9),
        variant_rank: None,
    };
    let id = {
        // A version-6 plumb's tag, written through the store of the time:
        // its run_tags has no rank column to write to.
        drop(Store::open_at_version(&db.0, 6).unwrap());
        let c = rusqlite::Connection::open(&db.0).unwrap();
        let id = insert_old_run(&c, &record("x", "2026-11-20T10:00:00Z"), None);
        c.execute(
            "UPDATE runs SET uuid = '0f1e2d3c-4b5a-4697-8877-665544332211' WHERE id = ?1",
            rusqlite::params![id.0],
        )
        .unwrap();
        c.execute(
            "INSERT INTO run_tags (run_id, experiment, point, variant, seed)
             VALUES (?1, 'e', 'flows=1,variant=nagle', 'nagle', 9)",
            rusqlite::params![id.0],
        )
        .unwrap();
        id
    };
    let mut s = Store::open(&db.0).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(s.tag_of(id).unwrap(), Some(tag.clone()));
    assert_eq!(s.experiment_runs("e", None).unwrap()[0].0, tag);
    // A new tag in the migrated database keeps its rank.
    let ranked = plumb_store::RunTag {
        point: "flows=1,variant=nodelay".into(),
        variant: Some("nodelay".into()),
        variant_rank: Some(1),
        ..tag
    };
    let b = s
        .insert_tagged_run(&record("x", "2026-11-20T11:00:00Z"), None, &ranked)
        .unwrap();
    assert_eq!(s.tag_of(b).unwrap(), Some(ranked));
}
