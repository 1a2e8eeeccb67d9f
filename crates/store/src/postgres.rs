//! The result store on a PostgreSQL server, for a lab whose hosts share one
//! database. The layout mirrors the SQLite one (sqlite.rs) so that both
//! answer every query alike.
//!
//! Reaching the server (URL, libpq's variables, `.pgpass`) is pgconn.rs;
//! TLS follows the URL's sslmode and sslrootcert as libpq reads them
//! (pgtls.rs).

use crate::backend::{self, Backend, Columns, NewRun, RawRun, Selection};
use crate::pgconn::{self, chain};
use crate::tags::{rank, RunTag};
use crate::{Result, RunId, RunRow, StoreError, SCHEMA_VERSION};
use ::postgres::{types::ToSql, Client, GenericClient, Row, Transaction};
use plumb_samples::{Environment, RunRecord};
use std::cell::RefCell;

/// Versioned steps, each taking the schema to its version. PostgreSQL
/// support began at SQLite's v6, so its first step builds that layout whole.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        6,
        r#"CREATE TABLE environments (
        hash TEXT PRIMARY KEY,
        facts TEXT NOT NULL
    );
    CREATE TABLE runs (
        id BIGSERIAL PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,
        -- byte order, as SQLite compares: the normalised times then sort
        -- as times whatever the database's locale
        started_at TEXT COLLATE "C" NOT NULL,
        label TEXT NOT NULL,
        workload TEXT NOT NULL,
        spec_key TEXT NOT NULL,
        summary TEXT NOT NULL,
        complete BOOLEAN NOT NULL,
        iterations BIGINT NOT NULL,
        throughput_bps DOUBLE PRECISION,
        tps DOUBLE PRECISION,
        env_hash TEXT REFERENCES environments(hash),
        server_env_hash TEXT REFERENCES environments(hash),
        record TEXT NOT NULL
    );
    CREATE INDEX runs_label ON runs(label, started_at);
    CREATE INDEX runs_spec_key ON runs(spec_key);
    CREATE TABLE iterations (
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx BIGINT NOT NULL,
        complete BOOLEAN NOT NULL,
        window_s DOUBLE PRECISION NOT NULL,
        throughput_bps DOUBLE PRECISION NOT NULL,
        client_cpu_s_per_gb DOUBLE PRECISION NOT NULL,
        server_cpu_s_per_gb DOUBLE PRECISION NOT NULL,
        host_cpu_s_per_gb DOUBLE PRECISION NOT NULL,
        retransmits BIGINT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
    CREATE TABLE interval_samples (
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        iteration BIGINT NOT NULL,
        role TEXT NOT NULL,
        t_s DOUBLE PRECISION NOT NULL,
        dt_s DOUBLE PRECISION NOT NULL,
        bytes_sent BIGINT NOT NULL,
        bytes_received BIGINT NOT NULL
    );
    CREATE INDEX interval_samples_run ON interval_samples(run_id, iteration);
    CREATE TABLE run_tags (
        run_id BIGINT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        experiment TEXT NOT NULL,
        point TEXT NOT NULL,
        variant TEXT,
        seed BIGINT
    );
    CREATE INDEX run_tags_experiment ON run_tags(experiment, point);"#,
    ),
    // As SQLite's v7: the variant's place in the experiment file.
    (7, "ALTER TABLE run_tags ADD COLUMN variant_rank BIGINT;"),
    // As SQLite's v8: the sampled TCP state, a row per sample.
    (8, crate::series::TCP_SAMPLES_TABLE),
];

/// The advisory lock that serialises migrations: two first writers on a new
/// database would otherwise both create the tables and one would fail.
pub(crate) const MIGRATION_LOCK: i64 = 0x706c_756d_6200; // "plumb\0"

/// Taken shared by every write of runs and alone by a delete: a delete
/// drops the environments no run refers to, and must not drop one that a
/// run being written at that moment found already stored. (SQLite has one
/// writer at a time, so there it cannot happen.)
const ENVIRONMENTS_LOCK: i64 = 0x706c_756d_6201;

/// Taken by an import, so that two imports of the same file add each run
/// once, as on SQLite, instead of one failing on the uuid.
const IMPORT_LOCK: i64 = 0x706c_756d_6202;

pub(crate) struct Postgres {
    // `Backend` reads through `&self`; a PostgreSQL client needs `&mut`.
    // A store is not shared between threads, so a RefCell suffices.
    client: RefCell<Client>,
    path: String,
}

pub(crate) fn err(shown: &str) -> impl Fn(::postgres::Error) -> StoreError + '_ {
    move |e| {
        let path = shown.to_string();
        match e.as_db_error() {
            // Classes 08 (connection exception) and 57 (operator
            // intervention: a shutdown, a restart) end the connection.
            Some(db) if ["08", "57"].contains(&&db.code().code()[..2]) => StoreError::Lost {
                path,
                message: db.message().to_string(),
            },
            Some(db) => StoreError::Postgres {
                path,
                message: db.message().to_string(),
            },
            None if e.is_closed()
                || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) =>
            {
                StoreError::Lost {
                    path,
                    message: chain(&e),
                }
            }
            None => StoreError::Postgres {
                path,
                message: chain(&e),
            },
        }
    }
}

fn version_in(c: &mut impl GenericClient) -> std::result::Result<i64, ::postgres::Error> {
    version_of(c, "plumb_schema")
}

/// The version a schema table (`plumb_schema`, the lab's
/// `plumb_lab_schema`) holds; 0 where it does not exist yet.
pub(crate) fn version_of(
    c: &mut impl GenericClient,
    table: &'static str,
) -> std::result::Result<i64, ::postgres::Error> {
    // Read from pg_class itself, not through to_regclass: the catalog cache
    // is not refreshed by an advisory lock, so after waiting for another
    // plumb's migration it can still say the table is missing.
    let exists: bool = c
        .query_one(
            "SELECT EXISTS(SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relname = $1 AND n.nspname = current_schema())",
            &[&table],
        )?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i64> = c
        .query_one(&format!("SELECT max(version) FROM {table}"), &[])?
        .get(0);
    Ok(v.unwrap_or(0))
}

impl Postgres {
    /// Connects to the database at `url` and brings it to the current
    /// schema.
    pub(crate) fn open(url: &str) -> Result<Postgres> {
        let shown = pgconn::redact(url);
        let mut client = pgconn::connect(url, &shown)?;
        setup(&mut client, &shown)?;
        Ok(Postgres {
            client: RefCell::new(client),
            path: shown,
        })
    }

    /// The rows of the SELECT ... FROM `select` over `selection`: its
    /// arguments, then the limit where there is one.
    fn selected(&self, selection: &Selection, select: &str) -> Result<Vec<Row>> {
        let (sql, args) = selection.sql(select, |n| format!("${n}"));
        let mut params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
        if let Some(n) = &selection.limit {
            params.push(n);
        }
        self.client
            .borrow_mut()
            .query(&sql, &params)
            .map_err(err(&self.path))
    }

    /// The rows of a `SELECT name, COUNT(*) ...` query.
    fn counted(&self, sql: &str) -> Result<Vec<(String, u64)>> {
        let rows = self
            .client
            .borrow_mut()
            .query(sql, &[])
            .map_err(err(&self.path))?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
            .collect())
    }
}

/// Brings the database to the current schema, refusing one from a newer
/// plumb.
pub(crate) fn setup(c: &mut Client, shown: &str) -> Result<()> {
    let too_new = |found| StoreError::TooNew {
        path: shown.to_string(),
        found,
        known: SCHEMA_VERSION,
    };
    // The common case, an up-to-date database, takes no lock and needs no
    // right to create tables.
    let found = version_in(c).map_err(err(shown))?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let e = err(shown);
    let mut tx = c.transaction().map_err(&e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(&e)?;
    // Read again under the lock: another plumb may have migrated meanwhile.
    let found = version_in(&mut tx).map_err(&e)?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    tx.batch_execute("CREATE TABLE IF NOT EXISTS plumb_schema (version BIGINT NOT NULL)")
        .map_err(&e)?;
    let mut version = found;
    for (to, sql) in MIGRATIONS.iter().filter(|(to, _)| *to > found) {
        tx.batch_execute(sql).map_err(&e)?;
        version = *to;
    }
    tx.execute("DELETE FROM plumb_schema", &[]).map_err(&e)?;
    tx.execute(
        "INSERT INTO plumb_schema (version) VALUES ($1)",
        &[&version],
    )
    .map_err(&e)?;
    tx.commit().map_err(&e)
}

/// Writes runs (each with its tag, if any) in one transaction. With
/// `skip_known`, a run already stored (by uuid, else by time, label and
/// spec key) is left out, as an import does.
fn insert_runs(
    c: &mut Client,
    shown: &str,
    runs: &[NewRun<'_>],
    skip_known: bool,
) -> Result<Vec<RunId>> {
    let e = err(shown);
    let mut tx = c.transaction().map_err(&e)?;
    let ids = insert_runs_in(&mut tx, shown, runs, skip_known)?;
    tx.commit().map_err(&e)?;
    Ok(ids)
}

/// [`insert_runs`] inside a transaction of the caller's, which commits it
/// with whatever else it must change at once (a lab's job, lab.rs).
pub(crate) fn insert_runs_in(
    tx: &mut Transaction<'_>,
    shown: &str,
    runs: &[NewRun<'_>],
    skip_known: bool,
) -> Result<Vec<RunId>> {
    let e = err(shown);
    tx.execute(
        "SELECT pg_advisory_xact_lock_shared($1)",
        &[&ENVIRONMENTS_LOCK],
    )
    .map_err(&e)?;
    if skip_known {
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&IMPORT_LOCK])
            .map_err(&e)?;
    }
    let mut ids = Vec::new();
    for run in runs {
        let record = run.record;
        if skip_known {
            let exists: bool = match &record.uuid {
                Some(u) => tx.query_one("SELECT EXISTS(SELECT 1 FROM runs WHERE uuid = $1)", &[u]),
                None => tx.query_one(
                    "SELECT EXISTS(SELECT 1 FROM runs WHERE started_at = $1 AND label = $2 AND spec_key = $3)",
                    &[&record.started_at, &record.label, &record.spec_key],
                ),
            }
            .map_err(&e)?
            .get(0);
            if exists {
                continue;
            }
        }
        let id = insert_in(tx, shown, record, run.env)?;
        if let Some(tag) = run.tag {
            tx.execute(
                "INSERT INTO run_tags (run_id, experiment, point, variant, seed, variant_rank)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id.0,
                    &tag.experiment,
                    &tag.point,
                    &tag.variant,
                    &tag.seed.map(|s| s as i64),
                    &tag.variant_rank.map(i64::from),
                ],
            )
            .map_err(&e)?;
        }
        ids.push(id);
    }
    Ok(ids)
}

fn insert_in(
    tx: &mut Transaction<'_>,
    shown: &str,
    record: &RunRecord,
    env: Option<&Environment>,
) -> Result<RunId> {
    let e = err(shown);
    let mut put = |env: Option<Environment>| -> Result<Option<String>> {
        let Some(env) = env else { return Ok(None) };
        let hash = env.hash();
        let facts = backend::json(&env.facts).map_err(|m| corrupt(shown, m))?;
        // Another plumb may store the same host's environment at the same
        // moment: the second waits for the first and then adds nothing.
        tx.execute(
            "INSERT INTO environments (hash, facts) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
            &[&hash, &facts],
        )
        .map_err(&e)?;
        Ok(Some(hash))
    };
    let env_hash = put(env.map(Environment::client_end))?;
    let server_env_hash = put(env.and_then(Environment::server_end))?;
    let uuid: String = match &record.uuid {
        Some(u) => u.clone(),
        None => tx
            .query_one("SELECT gen_random_uuid()::text", &[])
            .map_err(&e)?
            .get(0),
    };
    let cols = Columns::new(record, uuid).map_err(|m| corrupt(shown, m))?;
    let r = &cols.record;
    let id: i64 = tx
        .query_one(
            "INSERT INTO runs (started_at, label, workload, spec_key, summary, complete, iterations,
                               throughput_bps, env_hash, record, tps, server_env_hash, uuid)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
            &[
                &cols.started_at,
                &r.label,
                &cols.workload,
                &r.spec_key,
                &cols.summary,
                &r.complete,
                &(r.iterations.len() as i64),
                &cols.throughput_bps,
                &env_hash,
                &cols.json,
                &cols.tps,
                &server_env_hash,
                &cols.uuid,
            ],
        )
        .map_err(&e)?
        .get(0);
    insert_iterations(tx, id, r).map_err(&e)?;
    insert_samples(tx, id, r).map_err(&e)?;
    insert_tcp_samples(tx, id, r).map_err(&e)?;
    Ok(RunId(id))
}

fn insert_iterations(
    tx: &mut Transaction<'_>,
    id: i64,
    r: &RunRecord,
) -> std::result::Result<(), ::postgres::Error> {
    let stmt = tx.prepare(
        "INSERT INTO iterations (run_id, idx, complete, window_s, throughput_bps, client_cpu_s_per_gb,
                                 server_cpu_s_per_gb, host_cpu_s_per_gb, retransmits)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )?;
    for it in &r.iterations {
        let d = &it.derived;
        tx.execute(
            &stmt,
            &[
                &id,
                &i64::from(it.index),
                &it.complete,
                &it.window_s,
                &d.throughput_bps,
                &d.client_cpu_s_per_gb,
                &d.server_cpu_s_per_gb,
                &d.host_cpu_s_per_gb,
                &(d.retransmits as i64),
            ],
        )?;
    }
    Ok(())
}

/// All samples in one statement: a run has thousands, and one round trip
/// each would dominate the write.
fn insert_samples(
    tx: &mut Transaction<'_>,
    id: i64,
    r: &RunRecord,
) -> std::result::Result<(), ::postgres::Error> {
    let (mut iter, mut role, mut t, mut dt, mut sent, mut recv) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for it in &r.iterations {
        for (name, end) in [("client", &it.client), ("server", &it.server)] {
            for s in &end.intervals {
                iter.push(i64::from(it.index));
                role.push(name);
                t.push(s.t_s);
                dt.push(s.dt_s);
                sent.push(s.bytes_sent as i64);
                recv.push(s.bytes_received as i64);
            }
        }
    }
    if !iter.is_empty() {
        tx.execute(
            "INSERT INTO interval_samples (run_id, iteration, role, t_s, dt_s, bytes_sent, bytes_received)
             SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::float8[], $5::float8[], $6::bigint[], $7::bigint[])",
            &[&id, &iter, &role, &t, &dt, &sent, &recv],
        )?;
    }
    Ok(())
}

/// As the interval samples, in one statement.
fn insert_tcp_samples(
    tx: &mut Transaction<'_>,
    id: i64,
    r: &RunRecord,
) -> std::result::Result<(), ::postgres::Error> {
    let rows = crate::series::tcp_rows(r);
    if rows.is_empty() {
        return Ok(());
    }
    let ints = |f: fn(&crate::series::TcpRow) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let floats = |f: fn(&crate::series::TcpRow) -> f64| rows.iter().map(f).collect::<Vec<f64>>();
    let roles: Vec<&str> = rows.iter().map(|r| r.role).collect();
    tx.execute(
        "INSERT INTO tcp_samples (run_id, iteration, role, t_s, flows, cwnd, in_flight_bytes,
                                  srtt_us, delivery_rate_bps, retrans, busy_s, rwnd_limited_s,
                                  sndbuf_limited_s)
         SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::float8[], $5::bigint[],
                                  $6::bigint[], $7::bigint[], $8::float8[], $9::bigint[],
                                  $10::bigint[], $11::float8[], $12::float8[], $13::float8[])",
        &[
            &id,
            &ints(|r| r.iteration),
            &roles,
            &floats(|r| r.t_s),
            &ints(|r| r.flows),
            &ints(|r| r.cwnd),
            &ints(|r| r.in_flight_bytes),
            &floats(|r| r.srtt_us),
            &ints(|r| r.delivery_rate_bps),
            &ints(|r| r.retrans),
            &floats(|r| r.busy_s),
            &floats(|r| r.rwnd_limited_s),
            &floats(|r| r.sndbuf_limited_s),
        ],
    )?;
    Ok(())
}

fn corrupt(shown: &str, message: String) -> StoreError {
    StoreError::Postgres {
        path: shown.to_string(),
        message,
    }
}

fn tag(experiment: String, r: &Row) -> RunTag {
    RunTag {
        experiment,
        point: r.get(1),
        variant: r.get(2),
        seed: r.get::<_, Option<i64>>(3).map(|s| s as u64),
        variant_rank: rank(r.get(4)),
    }
}

fn raw(r: &Row, from: usize) -> RawRun {
    RawRun {
        record: r.get(from),
        client: r.get(from + 1),
        server: r.get(from + 2),
        uuid: r.get(from + 3),
    }
}

impl Backend for Postgres {
    fn path(&self) -> &str {
        &self.path
    }

    fn schema_version(&self) -> Result<i64> {
        version_in(&mut *self.client.borrow_mut()).map_err(err(&self.path))
    }

    fn insert(&mut self, runs: &[NewRun<'_>], skip_known: bool) -> Result<Vec<RunId>> {
        insert_runs(self.client.get_mut(), &self.path, runs, skip_known)
    }

    fn get(&self, id: RunId) -> Result<Option<RawRun>> {
        let row = self
            .client
            .borrow_mut()
            .query_opt(
                "SELECT r.record, e.facts, s.facts, r.uuid FROM runs r
                 LEFT JOIN environments e ON e.hash = r.env_hash
                 LEFT JOIN environments s ON s.hash = r.server_env_hash
                 WHERE r.id = $1",
                &[&id.0],
            )
            .map_err(err(&self.path))?;
        Ok(row.map(|r| raw(&r, 0)))
    }

    fn list(&self, selection: &Selection) -> Result<Vec<RunRow>> {
        let rows = self.selected(
            selection,
            "SELECT id, started_at, label, workload, spec_key, complete, iterations, summary, throughput_bps, tps
             FROM runs",
        )?;
        Ok(rows
            .iter()
            .map(|r| RunRow {
                id: RunId(r.get(0)),
                started_at: r.get(1),
                label: r.get(2),
                workload: r.get(3),
                spec_key: r.get(4),
                complete: r.get(5),
                iterations: r.get::<_, i64>(6) as u32,
                summary: r.get(7),
                throughput_bps: r.get(8),
                tps: r.get(9),
            })
            .collect())
    }

    fn runs(&self, selection: &Selection) -> Result<Vec<(RunId, RawRun)>> {
        let rows = self.selected(
            selection,
            "SELECT r.id, r.record, e.facts, s.facts, r.uuid FROM runs r
             LEFT JOIN environments e ON e.hash = r.env_hash
             LEFT JOIN environments s ON s.hash = r.server_env_hash",
        )?;
        Ok(rows.iter().map(|r| (RunId(r.get(0)), raw(r, 1))).collect())
    }

    fn labels(&self) -> Result<Vec<(String, u64)>> {
        self.counted(
            "SELECT label, COUNT(*) FROM runs GROUP BY label ORDER BY MAX(started_at) DESC",
        )
    }

    fn delete(&mut self, id: RunId) -> Result<bool> {
        let e = err(&self.path);
        let mut tx = self.client.get_mut().transaction().map_err(&e)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ENVIRONMENTS_LOCK])
            .map_err(&e)?;
        // The run's rows go with it (ON DELETE CASCADE); its environments only
        // when no other run refers to them.
        let n = tx
            .execute("DELETE FROM runs WHERE id = $1", &[&id.0])
            .map_err(&e)?;
        tx.execute(
            "DELETE FROM environments WHERE hash NOT IN
             (SELECT env_hash FROM runs WHERE env_hash IS NOT NULL
              UNION SELECT server_env_hash FROM runs WHERE server_env_hash IS NOT NULL)",
            &[],
        )
        .map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(n > 0)
    }

    fn tag_of(&self, id: RunId) -> Result<Option<RunTag>> {
        let row = self
            .client
            .borrow_mut()
            .query_opt(
                "SELECT experiment, point, variant, seed, variant_rank FROM run_tags WHERE run_id = $1",
                &[&id.0],
            )
            .map_err(err(&self.path))?;
        Ok(row.map(|r| tag(r.get(0), &r)))
    }

    fn experiment_tags(
        &self,
        experiment: &str,
        label: Option<&str>,
    ) -> Result<Vec<(RunId, RunTag)>> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT t.run_id, t.point, t.variant, t.seed, t.variant_rank
                 FROM run_tags t JOIN runs r ON r.id = t.run_id
                 WHERE t.experiment = $1 AND ($2::text IS NULL OR r.label = $2)
                 ORDER BY r.started_at, r.id",
                &[&experiment, &label],
            )
            .map_err(err(&self.path))?;
        Ok(rows
            .iter()
            .map(|r| (RunId(r.get(0)), tag(experiment.to_string(), r)))
            .collect())
    }

    fn experiments(&self) -> Result<Vec<(String, u64)>> {
        self.counted(
            "SELECT t.experiment, COUNT(*) FROM run_tags t JOIN runs r ON r.id = t.run_id \
             GROUP BY t.experiment ORDER BY MAX(r.started_at) DESC, MAX(r.id) DESC",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_migrations_end_at_the_current_schema() {
        assert_eq!(MIGRATIONS.last().unwrap().0, SCHEMA_VERSION);
    }
}
