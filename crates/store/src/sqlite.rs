//! The result store in one SQLite file (WAL).
//!
//! Schema versions live in `PRAGMA user_version`. Each migration runs in its
//! own transaction; a database written by a newer plumb is refused, never
//! downgraded.

use crate::backend::{Backend, Columns, NewRun, RawRun, Selection};
use crate::tags::{rank, RunTag};
use crate::{Result, RunId, RunRow, StoreError, SCHEMA_VERSION};
use plumb_samples::{Environment, RunRecord};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// Each entry takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // v1: runs with their record, deduplicated environments, per-iteration totals.
    "CREATE TABLE environments (
        hash TEXT PRIMARY KEY,
        facts TEXT NOT NULL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        started_at TEXT NOT NULL,
        label TEXT NOT NULL,
        workload TEXT NOT NULL,
        spec_key TEXT NOT NULL,
        summary TEXT NOT NULL,
        complete INTEGER NOT NULL,
        iterations INTEGER NOT NULL,
        throughput_bps REAL,
        env_hash TEXT REFERENCES environments(hash),
        record TEXT NOT NULL
    );
    CREATE INDEX runs_label ON runs(label, started_at);
    CREATE INDEX runs_spec_key ON runs(spec_key);
    CREATE TABLE iterations (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        complete INTEGER NOT NULL,
        window_s REAL NOT NULL,
        throughput_bps REAL NOT NULL,
        client_cpu_s_per_gb REAL NOT NULL,
        server_cpu_s_per_gb REAL NOT NULL,
        host_cpu_s_per_gb REAL NOT NULL,
        retransmits INTEGER NOT NULL,
        PRIMARY KEY (run_id, idx)
    );",
    // v2: the one-second interval samples of both ends, for plots and
    // stability checks without decoding records.
    "CREATE TABLE interval_samples (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        iteration INTEGER NOT NULL,
        role TEXT NOT NULL,
        t_s REAL NOT NULL,
        dt_s REAL NOT NULL,
        bytes_sent INTEGER NOT NULL,
        bytes_received INTEGER NOT NULL
    );
    CREATE INDEX interval_samples_run ON interval_samples(run_id, iteration);",
    // v3: request/response runs list their transaction rate. Older rows are
    // all streams, so nothing to fill in.
    "ALTER TABLE runs ADD COLUMN tps REAL;",
    // v4: the experiment, point and variant a run was made for (tags.rs).
    "CREATE TABLE run_tags (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        experiment TEXT NOT NULL,
        point TEXT NOT NULL,
        variant TEXT,
        seed INTEGER
    );
    CREATE INDEX run_tags_experiment ON run_tags(experiment, point);",
    // v5: each end's environment apart, both deduplicated in environments:
    // env_hash is the client's, server_env_hash the server's when it was
    // captured on a host or namespace of its own. Older runs have none.
    "ALTER TABLE runs ADD COLUMN server_env_hash TEXT REFERENCES environments(hash);",
    // v6: each run's globally unique id, kept through export, import and
    // copy; the runs stored before it get a random one here.
    "ALTER TABLE runs ADD COLUMN uuid TEXT;
    UPDATE runs SET uuid = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
        substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) ||
        substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)));
    CREATE UNIQUE INDEX runs_uuid ON runs(uuid);",
    // v7: each tagged run's variant's place in the experiment file, so
    // that a report takes the same variant as its baseline as the sweep
    // did. Older tags have none: their file is not at hand to tell.
    "ALTER TABLE run_tags ADD COLUMN variant_rank INTEGER;",
    // v8: each end's sampled TCP state summed over its flows, a row per
    // sample (series.rs); older records have none to fill in.
    crate::series::TCP_SAMPLES_TABLE,
];

// A migration added here must move the crate's version too, and the
// reverse: a mismatch does not compile.
const _: () = assert!(MIGRATIONS.len() as i64 == SCHEMA_VERSION);

/// A new random (version 4) UUID in SQL, for a run that comes without one.
const NEW_UUID: &str = "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || \
    substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || \
    substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))";

pub(crate) struct Sqlite {
    conn: Connection,
    path: String,
}

fn err(path: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        path: path.to_string(),
        source,
    }
}

/// The columns a run's tag is read from, in [`tag_from`]'s order.
const TAG_COLUMNS: &str = "t.experiment, t.point, t.variant, t.seed, t.variant_rank";

/// A run's tag from [`TAG_COLUMNS`], starting at column `at`.
fn tag_from(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<RunTag> {
    Ok(RunTag {
        experiment: r.get(at)?,
        point: r.get(at + 1)?,
        variant: r.get(at + 2)?,
        seed: r.get::<_, Option<i64>>(at + 3)?.map(|s| s as u64),
        variant_rank: rank(r.get(at + 4)?),
    })
}

impl Sqlite {
    /// The row `sql` selects for run `id` (its one parameter), read by
    /// `row`; None where there is none.
    fn one_of<T>(
        &self,
        sql: &str,
        id: RunId,
        row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>> {
        self.conn
            .query_row(sql, params![id.0], row)
            .optional()
            .map_err(err(&self.path))
    }

    /// Opens (creating if needed) the file at `path` and migrates it up to
    /// `target`: below the current version only for tests that build a
    /// database of an older schema.
    pub(crate) fn open(path: &Path, target: i64) -> Result<Sqlite> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                path: shown.clone(),
                dir: dir.display().to_string(),
                source,
            })?;
        }
        let mut conn = Connection::open(path).map_err(err(&shown))?;
        configure(&mut conn, &shown)?;
        migrate(&mut conn, &shown, target)?;
        Ok(Sqlite { conn, path: shown })
    }

    /// Runs `body` in one transaction and commits it.
    fn write<T>(
        &mut self,
        body: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let e = err(&self.path);
        // Every write takes the write lock as it begins, waiting for it up
        // to the busy timeout: a deferred transaction that read first fails
        // at once when another writer committed in between.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        let out = body(&tx).map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(out)
    }

    /// The rows of the SELECT ... FROM `select` over `selection`, each read
    /// by `row`.
    fn selected<T>(
        &self,
        selection: &Selection,
        select: &str,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let e = err(&self.path);
        let (sql, args) = selection.sql(select, |n| format!("?{n}"));
        let mut values: Vec<rusqlite::types::Value> =
            args.into_iter().map(rusqlite::types::Value::Text).collect();
        values.extend(selection.limit.map(rusqlite::types::Value::Integer));
        let mut stmt = self.conn.prepare(&sql).map_err(&e)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(values), row)
            .map_err(&e)?;
        rows.collect::<rusqlite::Result<_>>().map_err(&e)
    }

    /// The rows of a `SELECT name, COUNT(*) ...` query.
    fn counted(&self, sql: &str) -> Result<Vec<(String, u64)>> {
        let e = err(&self.path);
        let mut stmt = self.conn.prepare(sql).map_err(&e)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
            .map_err(&e)?;
        rows.collect::<rusqlite::Result<_>>().map_err(&e)
    }
}

/// What every connection sets before its first statement.
fn configure(conn: &mut Connection, shown: &str) -> Result<()> {
    let e = err(shown);
    // Several plumb processes may share a database (a sweep beside a
    // compare); wait for a writer instead of failing at once.
    conn.busy_timeout(Duration::from_secs(10)).map_err(&e)?;
    // Turning a new file to WAL needs it to itself for a moment, and
    // SQLite answers "locked" at once rather than waiting when another
    // plumb opens the same new file: try again until the busy timeout.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Ok(()) => break,
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::DatabaseBusy && Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(other) => return Err(e(other)),
        }
    }
    conn.pragma_update(None, "foreign_keys", "ON").map_err(&e)
}

/// Brings the schema up to `target`, refusing one from a newer plumb.
fn migrate(conn: &mut Connection, shown: &str, target: i64) -> Result<()> {
    let e = err(shown);
    let found: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(&e)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: shown.to_string(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found >= target {
        return Ok(());
    }
    loop {
        // Another plumb may be migrating the same file right now (two
        // first runs on a new database): each step takes the write lock
        // first and reads the version under it, so a step is done once.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        let step = (|| {
            let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version >= target {
                return Ok(false);
            }
            tx.execute_batch(MIGRATIONS[version as usize])?;
            if version == 1 {
                backfill_interval_samples(&tx)?;
            }
            tx.pragma_update(None, "user_version", version + 1)?;
            tx.commit()?;
            Ok(true)
        })();
        match step {
            Ok(true) => continue,
            Ok(false) => return Ok(()),
            Err(source) => return Err(e(source)),
        }
    }
}

impl Backend for Sqlite {
    fn path(&self) -> &str {
        &self.path
    }

    fn schema_version(&self) -> Result<i64> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(err(&self.path))
    }

    fn insert(&mut self, runs: &[NewRun<'_>], skip_known: bool) -> Result<Vec<RunId>> {
        self.write(|tx| {
            let mut ids = Vec::new();
            for run in runs {
                if skip_known && stored_already(tx, run.record)? {
                    continue;
                }
                let id = insert_in(tx, run.record, run.env)?;
                if let Some(tag) = run.tag {
                    insert_tag(tx, id, tag)?;
                }
                ids.push(id);
            }
            Ok(ids)
        })
    }

    fn get(&self, id: RunId) -> Result<Option<RawRun>> {
        let sql = "SELECT r.record, e.facts, s.facts, r.uuid FROM runs r
                   LEFT JOIN environments e ON e.hash = r.env_hash
                   LEFT JOIN environments s ON s.hash = r.server_env_hash
                   WHERE r.id = ?1";
        self.one_of(sql, id, |r| {
            Ok(RawRun {
                record: r.get(0)?,
                client: r.get(1)?,
                server: r.get(2)?,
                uuid: r.get(3)?,
            })
        })
    }

    fn list(&self, selection: &Selection) -> Result<Vec<RunRow>> {
        self.selected(
            selection,
            "SELECT id, started_at, label, workload, spec_key, complete, iterations, summary, throughput_bps, tps
             FROM runs",
            |r| {
                Ok(RunRow {
                    id: RunId(r.get(0)?),
                    started_at: r.get(1)?,
                    label: r.get(2)?,
                    workload: r.get(3)?,
                    spec_key: r.get(4)?,
                    complete: r.get(5)?,
                    iterations: r.get(6)?,
                    summary: r.get(7)?,
                    throughput_bps: r.get(8)?,
                    tps: r.get(9)?,
                })
            },
        )
    }

    fn runs(&self, selection: &Selection) -> Result<Vec<(RunId, RawRun)>> {
        self.selected(
            selection,
            "SELECT r.id, r.record, e.facts, s.facts, r.uuid FROM runs r
             LEFT JOIN environments e ON e.hash = r.env_hash
             LEFT JOIN environments s ON s.hash = r.server_env_hash",
            |r| {
                Ok((
                    RunId(r.get(0)?),
                    RawRun {
                        record: r.get(1)?,
                        client: r.get(2)?,
                        server: r.get(3)?,
                        uuid: r.get(4)?,
                    },
                ))
            },
        )
    }

    fn labels(&self) -> Result<Vec<(String, u64)>> {
        self.counted(
            "SELECT label, COUNT(*) FROM runs GROUP BY label ORDER BY MAX(started_at) DESC",
        )
    }

    fn delete(&mut self, id: RunId) -> Result<bool> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM interval_samples WHERE run_id = ?1",
                params![id.0],
            )?;
            tx.execute("DELETE FROM tcp_samples WHERE run_id = ?1", params![id.0])?;
            tx.execute("DELETE FROM iterations WHERE run_id = ?1", params![id.0])?;
            let n = tx.execute("DELETE FROM runs WHERE id = ?1", params![id.0])?;
            tx.execute(
                "DELETE FROM environments WHERE hash NOT IN
                 (SELECT env_hash FROM runs WHERE env_hash IS NOT NULL
                  UNION SELECT server_env_hash FROM runs WHERE server_env_hash IS NOT NULL)",
                [],
            )?;
            Ok(n > 0)
        })
    }

    fn tag_of(&self, id: RunId) -> Result<Option<RunTag>> {
        let sql = format!("SELECT {TAG_COLUMNS} FROM run_tags t WHERE t.run_id = ?1");
        self.one_of(&sql, id, |r| tag_from(r, 0))
    }

    fn experiment_tags(
        &self,
        experiment: &str,
        label: Option<&str>,
    ) -> Result<Vec<(RunId, RunTag)>> {
        let e = err(&self.path);
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT t.run_id, {TAG_COLUMNS}
                 FROM run_tags t JOIN runs r ON r.id = t.run_id
                 WHERE t.experiment = ?1 AND (?2 IS NULL OR r.label = ?2)
                 ORDER BY r.started_at, r.id"
            ))
            .map_err(&e)?;
        let rows = stmt
            .query_map(params![experiment, label], |r| {
                Ok((RunId(r.get(0)?), tag_from(r, 1)?))
            })
            .map_err(&e)?;
        rows.collect::<rusqlite::Result<_>>().map_err(&e)
    }

    fn experiments(&self) -> Result<Vec<(String, u64)>> {
        self.counted(
            "SELECT t.experiment, COUNT(*) FROM run_tags t JOIN runs r ON r.id = t.run_id \
             GROUP BY t.experiment ORDER BY MAX(r.started_at) DESC, MAX(r.id) DESC",
        )
    }
}

/// Whether an import already holds `r`: the same id, or for a run exported
/// without one, the same start time, label and spec key.
fn stored_already(tx: &Transaction, r: &RunRecord) -> rusqlite::Result<bool> {
    match &r.uuid {
        Some(u) => tx.query_row(
            "SELECT EXISTS(SELECT 1 FROM runs WHERE uuid = ?1)",
            params![u],
            |r| r.get(0),
        ),
        None => tx.query_row(
            "SELECT EXISTS(SELECT 1 FROM runs WHERE started_at = ?1 AND label = ?2 AND spec_key = ?3)",
            params![r.started_at, r.label, r.spec_key],
            |r| r.get(0),
        ),
    }
}

fn insert_in(
    tx: &Transaction,
    record: &RunRecord,
    env: Option<&Environment>,
) -> rusqlite::Result<RunId> {
    // Each end's facts under their plain names, so that one host's
    // environment is stored once whichever end it was.
    let put = |e: Option<Environment>| -> rusqlite::Result<Option<String>> {
        let Some(e) = e else { return Ok(None) };
        let hash = e.hash();
        tx.execute(
            "INSERT OR IGNORE INTO environments (hash, facts) VALUES (?1, ?2)",
            params![hash, to_json(&e.facts)?],
        )?;
        Ok(Some(hash))
    };
    let env_hash = put(env.map(Environment::client_end))?;
    let server_env_hash = put(env.and_then(Environment::server_end))?;
    let uuid: String = match &record.uuid {
        Some(u) => u.clone(),
        None => tx.query_row(&format!("SELECT {NEW_UUID}"), [], |r| r.get(0))?,
    };
    let cols = Columns::new(record, uuid)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
    let record = &cols.record;
    tx.execute(
        "INSERT INTO runs (started_at, label, workload, spec_key, summary, complete, iterations,
                           throughput_bps, env_hash, record, tps, server_env_hash, uuid)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            cols.started_at,
            record.label,
            cols.workload,
            record.spec_key,
            cols.summary,
            record.complete,
            record.iterations.len() as i64,
            cols.throughput_bps,
            env_hash,
            cols.json,
            cols.tps,
            server_env_hash,
            cols.uuid,
        ],
    )?;
    let id = tx.last_insert_rowid();
    insert_iterations(tx, id, record)?;
    insert_samples(tx, id, record)?;
    insert_tcp_samples(tx, id, record)?;
    Ok(RunId(id))
}

fn insert_iterations(tx: &Transaction, id: i64, record: &RunRecord) -> rusqlite::Result<()> {
    for it in &record.iterations {
        tx.execute(
            "INSERT INTO iterations (run_id, idx, complete, window_s, throughput_bps, client_cpu_s_per_gb,
                                     server_cpu_s_per_gb, host_cpu_s_per_gb, retransmits)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                id,
                it.index,
                it.complete,
                it.window_s,
                it.derived.throughput_bps,
                it.derived.client_cpu_s_per_gb,
                it.derived.server_cpu_s_per_gb,
                it.derived.host_cpu_s_per_gb,
                it.derived.retransmits as i64,
            ],
        )?;
    }
    Ok(())
}

fn insert_samples(tx: &Transaction, id: i64, record: &RunRecord) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO interval_samples (run_id, iteration, role, t_s, dt_s, bytes_sent, bytes_received)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for it in &record.iterations {
        for (role, end) in [("client", &it.client), ("server", &it.server)] {
            for s in &end.intervals {
                stmt.execute(params![
                    id,
                    it.index,
                    role,
                    s.t_s,
                    s.dt_s,
                    s.bytes_sent as i64,
                    s.bytes_received as i64
                ])?;
            }
        }
    }
    Ok(())
}

fn insert_tcp_samples(tx: &Transaction, id: i64, record: &RunRecord) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO tcp_samples (run_id, iteration, role, t_s, flows, cwnd, in_flight_bytes,
                                  srtt_us, delivery_rate_bps, retrans, busy_s, rwnd_limited_s,
                                  sndbuf_limited_s)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    for r in crate::series::tcp_rows(record) {
        stmt.execute(params![
            id,
            r.iteration,
            r.role,
            r.t_s,
            r.flows,
            r.cwnd,
            r.in_flight_bytes,
            r.srtt_us,
            r.delivery_rate_bps,
            r.retrans,
            r.busy_s,
            r.rwnd_limited_s,
            r.sndbuf_limited_s
        ])?;
    }
    Ok(())
}

/// Tags the run `id` in the transaction that writes it.
fn insert_tag(tx: &Transaction, id: RunId, tag: &RunTag) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO run_tags (run_id, experiment, point, variant, seed, variant_rank)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            id.0,
            tag.experiment,
            tag.point,
            tag.variant,
            tag.seed.map(|s| s as i64),
            tag.variant_rank
        ],
    )?;
    Ok(())
}

/// Migration to v2 fills the new table from the records already stored.
fn backfill_interval_samples(tx: &Transaction) -> rusqlite::Result<()> {
    let runs: Vec<(i64, String)> = {
        let mut stmt = tx.prepare("SELECT id, record FROM runs")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (id, text) in runs {
        // A record this plumb cannot read keeps its row; it just gets no samples.
        if let Ok(record) = serde_json::from_str::<RunRecord>(&text) {
            insert_samples(tx, id, &record)?;
        }
    }
    Ok(())
}

fn to_json<T: Serialize>(v: &T) -> rusqlite::Result<String> {
    serde_json::to_string(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}
