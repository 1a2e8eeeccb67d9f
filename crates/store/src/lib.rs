//! The result store: one SQLite file (WAL) with a versioned schema, or a
//! PostgreSQL database (postgres.rs) when the location is a
//! `postgres://` or `postgresql://` URL.
//!
//! A run is written in one transaction when it finishes, so a run that was
//! interrupted, or a process that was killed, never leaves a row that looks
//! complete. The whole record is kept as JSON (the source of truth for
//! `show`, `export` and `compare`); the columns and tables beside it exist to
//! filter and to query without decoding every record.
//!
//! Schema versions live in `PRAGMA user_version`. Each migration runs in its
//! own transaction; a database written by a newer plumb is refused, never
//! downgraded.
//!
//! Everything that is not SQL (decoding records, building filters, the
//! columns derived from a record, CSV) is shared by both engines, so that
//! they answer alike.
#![deny(unsafe_code)]

use plumb_samples::{Environment, RunRecord};
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Identifies a stored run; printed by `plumb list`, accepted by `show`,
/// `compare`, `delete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(pub i64);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("result database {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("result database {path}: {message}")]
    Postgres { path: String, message: String },
    /// The PostgreSQL server could not be reached or refused us; `message`
    /// says what to do.
    #[error("result database {path}: {message}")]
    Connect { path: String, message: String },
    #[error("result database {path}: schema version {found} is newer than this plumb understands ({known}); use a newer plumb")]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("result database {path} does not exist; check --db or PLUMB_DB, or store a run there first with `plumb run`")]
    Missing { path: String },
    #[error("result database {path}: cannot create {dir}: {source}")]
    Dir {
        path: String,
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error("result database {path}: stored run {id} is unreadable: {message}")]
    Corrupt {
        path: String,
        id: i64,
        message: String,
    },
    #[error("{flag}: '{value}' is not a date (2026-11-01) or an RFC 3339 time")]
    BadDate { flag: &'static str, value: String },
    #[error("import: run {index} of the file: {message}")]
    Import { index: usize, message: String },
}

mod pgtls;
mod postgres;
mod tags;
pub use postgres::pgpass_lookup;
pub use tags::RunTag;

pub type Result<T> = std::result::Result<T, StoreError>;

/// Which runs `list` and `export` return. Empty fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub label: Option<String>,
    pub workload: Option<String>,
    pub spec_key: Option<String>,
    /// A date (`2026-11-01`) or RFC 3339 time; runs started at or after it.
    pub since: Option<String>,
    /// Runs started before it.
    pub until: Option<String>,
    pub limit: Option<usize>,
}

/// One line of `plumb list`.
#[derive(Debug, Clone)]
pub struct RunRow {
    pub id: RunId,
    pub started_at: String,
    pub label: String,
    pub workload: String,
    pub spec_key: String,
    pub complete: bool,
    pub iterations: u32,
    pub summary: String,
    /// Mean throughput of the complete iterations.
    pub throughput_bps: Option<f64>,
    /// Mean transactions per second (request/response workloads).
    pub tps: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct StoredRun {
    pub id: RunId,
    pub record: RunRecord,
    pub env: Option<Environment>,
}

/// What `plumb export` writes and `plumb import` reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Export {
    pub schema: String,
    pub runs: Vec<ExportedRun>,
}

pub const EXPORT_SCHEMA: &str = "plumb.export/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportedRun {
    pub record: RunRecord,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub env: Option<Environment>,
    /// The experiment, point and variant the run was made for.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tag: Option<RunTag>,
}

/// `$PLUMB_DB`, else `$XDG_DATA_HOME/plumb/plumb.db`, else
/// `~/.local/share/plumb/plumb.db`, else `./plumb.db`. `$PLUMB_DB` may be a
/// `postgres://` URL: `Location::new` tells the two apart.
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("PLUMB_DB").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        });
    match data {
        Some(d) => d.join("plumb").join("plumb.db"),
        None => PathBuf::from("plumb.db"),
    }
}

/// Where the results are: an SQLite file, or a PostgreSQL database named by
/// a `postgres://` / `postgresql://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    File(PathBuf),
    Postgres(String),
}

impl Location {
    /// A URL with a PostgreSQL scheme is a server; anything else a file.
    pub fn new(value: impl Into<PathBuf>) -> Location {
        let path: PathBuf = value.into();
        match path.to_str() {
            Some(s) if is_postgres_url(s) => Location::Postgres(s.to_string()),
            _ => Location::File(path),
        }
    }

    /// `$PLUMB_DB` (a path or a URL), else the default file.
    pub fn default_location() -> Location {
        Location::new(default_path())
    }
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Location {
        Location::new(p)
    }
}

fn is_postgres_url(s: &str) -> bool {
    let lower = s.get(..13).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

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
];

/// A new random (version 4) UUID in SQL, for a run that comes without one.
const NEW_UUID: &str = "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || \
    substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || \
    substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))";

/// The schema version this plumb writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

enum Conn {
    Sqlite(Connection),
    // The store reads through `&self`; a PostgreSQL client needs `&mut`.
    // Neither connection is shared between threads, so a RefCell suffices.
    Postgres(std::cell::RefCell<::postgres::Client>),
}

pub struct Store {
    conn: Conn,
    path: String,
}

use postgres::RawRun;

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it to
    /// the current schema. A `postgres://` path is taken as a URL.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_location(&Location::from(path))
    }

    /// Opens the database at `path` for a command that only reads: one that
    /// does not exist is an error (a mistyped --db would otherwise become a
    /// new, empty database that "has no runs").
    pub fn open_existing(path: &Path) -> Result<Store> {
        Self::open_existing_location(&Location::from(path))
    }

    /// Opens (creating the tables if needed) the store at `location`.
    pub fn open_location(location: &Location) -> Result<Store> {
        match location {
            Location::File(path) => Self::open_at_version(path, SCHEMA_VERSION),
            Location::Postgres(url) => Self::open_postgres(url),
        }
    }

    /// As `open_existing`; a PostgreSQL database must exist on its server
    /// (plumb never creates one), its tables are made when missing.
    pub fn open_existing_location(location: &Location) -> Result<Store> {
        match location {
            Location::File(path) if !path.exists() => Err(StoreError::Missing {
                path: path.display().to_string(),
            }),
            _ => Self::open_location(location),
        }
    }

    fn open_postgres(url: &str) -> Result<Store> {
        let shown = postgres::redact(url);
        let mut client = postgres::connect(url, &shown)?;
        postgres::setup(&mut client, &shown)?;
        Ok(Store {
            conn: Conn::Postgres(std::cell::RefCell::new(client)),
            path: shown,
        })
    }

    /// Opens and migrates only up to `version`: how tests build a database
    /// of an older schema.
    #[doc(hidden)]
    pub fn open_at_version(path: &Path, version: i64) -> Result<Store> {
        if let Location::Postgres(url) = Location::from(path) {
            return Self::open_postgres(&url);
        }
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                path: shown.clone(),
                dir: dir.display().to_string(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: shown.clone(),
            source,
        })?;
        let mut store = Store {
            conn: Conn::Sqlite(conn),
            path: shown,
        };
        store.setup(version)?;
        Ok(store)
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn setup(&mut self, target: i64) -> Result<()> {
        let path = self.path.clone();
        let err = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let Conn::Sqlite(conn) = &mut self.conn else {
            return Ok(());
        };
        // Several plumb processes may share a database (a sweep beside a
        // compare); wait for a writer instead of failing at once.
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(err)?;
        // Turning a new file to WAL needs it to itself for a moment, and
        // SQLite answers "locked" at once rather than waiting when another
        // plumb opens the same new file: try again until the busy timeout.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match conn.pragma_update(None, "journal_mode", "WAL") {
                Ok(()) => break,
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && std::time::Instant::now() < until =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => return Err(err(e)),
            }
        }
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err)?;
        let found: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(err)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.clone(),
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
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err)?;
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
                Err(source) => return Err(err(source)),
            }
        }
    }

    pub fn schema_version(&self) -> Result<i64> {
        match &self.conn {
            Conn::Sqlite(c) => c
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(|e| self.err(e)),
            Conn::Postgres(c) => postgres::schema_version(&mut c.borrow_mut(), &self.path),
        }
    }

    /// Writes a finished run, its environment, iterations and interval
    /// samples, all in one transaction.
    pub fn insert_run(&mut self, record: &RunRecord, env: Option<&Environment>) -> Result<RunId> {
        self.insert_one(record, env, None)
    }

    /// Writes one run, with its tag when it has one, in one transaction.
    fn insert_one(
        &mut self,
        record: &RunRecord,
        env: Option<&Environment>,
        tag: Option<&RunTag>,
    ) -> Result<RunId> {
        if let Conn::Postgres(c) = &mut self.conn {
            let ids = postgres::insert_runs(c.get_mut(), &self.path, &[(record, env, tag)], false)?;
            return Ok(ids[0]);
        }
        self.write(|tx, wrap| {
            let id = insert_in(tx, record, env).map_err(wrap)?;
            if let Some(tag) = tag {
                tags::insert_tag(tx, id, tag).map_err(wrap)?;
            }
            Ok(id)
        })
    }

    /// Runs `body` in one SQLite transaction and commits it; `body` turns
    /// SQLite errors into the store's with the function it is given.
    fn write<T>(
        &mut self,
        body: impl FnOnce(
            &rusqlite::Transaction<'_>,
            &dyn Fn(rusqlite::Error) -> StoreError,
        ) -> Result<T>,
    ) -> Result<T> {
        let path = self.path.clone();
        let wrap = move |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let Conn::Sqlite(conn) = &mut self.conn else {
            unreachable!("an SQLite write on PostgreSQL");
        };
        // Every write takes the write lock as it begins, waiting for it up
        // to the busy timeout: a deferred transaction that read first fails
        // at once when another writer committed in between.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&wrap)?;
        let out = body(&tx, &wrap)?;
        tx.commit().map_err(&wrap)?;
        Ok(out)
    }

    pub fn get(&self, id: RunId) -> Result<Option<StoredRun>> {
        let row: Option<RawRun> = match &self.conn {
            Conn::Sqlite(c) => c
                .query_row(
                    "SELECT r.record, e.facts, s.facts, r.uuid FROM runs r
                     LEFT JOIN environments e ON e.hash = r.env_hash
                     LEFT JOIN environments s ON s.hash = r.server_env_hash
                     WHERE r.id = ?1",
                    params![id.0],
                    |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()
                .map_err(|e| self.err(e))?,
            Conn::Postgres(c) => postgres::get(&mut c.borrow_mut(), &self.path, id)?,
        };
        row.map(|raw| self.stored(id.0, raw)).transpose()
    }

    /// A run as read: its record, environments and id decoded.
    fn stored(&self, id: i64, (record, client, server, uuid): RawRun) -> Result<StoredRun> {
        let mut run = self.decode(id, &record, client.as_deref(), server.as_deref())?;
        // Runs stored before v6 got their id in the column only.
        if run.record.uuid.is_none() {
            run.record.uuid = uuid;
        }
        Ok(run)
    }

    fn decode(
        &self,
        id: i64,
        record: &str,
        facts: Option<&str>,
        server_facts: Option<&str>,
    ) -> Result<StoredRun> {
        let corrupt = |message: String| StoreError::Corrupt {
            path: self.path.clone(),
            id,
            message,
        };
        let record: RunRecord = serde_json::from_str(record).map_err(|e| corrupt(e.to_string()))?;
        let env_of = |facts: Option<&str>, end: &str| {
            facts
                .map(|f| serde_json::from_str(f).map(|facts| Environment { facts }))
                .transpose()
                .map_err(|e| corrupt(format!("{end} environment: {e}")))
        };
        let mut env = env_of(facts, "client")?;
        if let (Some(env), Some(server)) = (&mut env, env_of(server_facts, "server")?) {
            env.add_server_end(&server);
        }
        Ok(StoredRun {
            id: RunId(id),
            record,
            env,
        })
    }

    /// The WHERE clause of `filter` and its arguments, all text;
    /// `placeholder(n)` writes the n-th (from 1) in the engine's style.
    fn where_clause(
        filter: &RunFilter,
        placeholder: impl Fn(usize) -> String,
    ) -> Result<(String, Vec<String>)> {
        let mut conds = Vec::new();
        let mut args = Vec::new();
        let mut cond = |column: &str, op: &str, value: String| {
            args.push(value);
            conds.push(format!("{column} {op} {}", placeholder(args.len())));
        };
        if let Some(l) = &filter.label {
            cond("label", "=", l.clone());
        }
        if let Some(w) = &filter.workload {
            cond("workload", "=", w.clone());
        }
        if let Some(k) = &filter.spec_key {
            cond("spec_key", "=", k.clone());
        }
        if let Some(s) = &filter.since {
            cond("started_at", ">=", timestamp("--since", s)?);
        }
        if let Some(u) = &filter.until {
            cond("started_at", "<", timestamp("--until", u)?);
        }
        let clause = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        Ok((clause, args))
    }

    /// `select` (a SELECT ... FROM of the runs table) over the runs matching
    /// `filter`, newest first and limited as it asks, with the arguments of
    /// its placeholders in this engine's style: what `list` and `load` share.
    fn filtered(
        &self,
        filter: &RunFilter,
        select: &str,
    ) -> Result<(String, Vec<String>, Option<i64>)> {
        let postgres = matches!(self.conn, Conn::Postgres(_));
        let placeholder = |n: usize| {
            if postgres {
                format!("${n}")
            } else {
                format!("?{n}")
            }
        };
        let (clause, args) = Self::where_clause(filter, placeholder)?;
        let mut sql = format!("{select}{clause} ORDER BY started_at DESC, id DESC");
        let limit = filter.limit.map(|n| n.min(i64::MAX as usize) as i64);
        if limit.is_some() {
            sql.push_str(&format!(" LIMIT {}", placeholder(args.len() + 1)));
        }
        Ok((sql, args, limit))
    }

    /// Runs matching `filter`, newest first.
    pub fn list(&self, filter: &RunFilter) -> Result<Vec<RunRow>> {
        let (sql, args, limit) = self.filtered(
            filter,
            "SELECT id, started_at, label, workload, spec_key, complete, iterations, summary, throughput_bps, tps
             FROM runs",
        )?;
        let c = match &self.conn {
            Conn::Sqlite(c) => c,
            Conn::Postgres(c) => {
                return postgres::list(&mut c.borrow_mut(), &self.path, &sql, &args, limit)
            }
        };
        let mut stmt = c.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(sqlite_values(args, limit), |r| {
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
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// The runs matching `filter`, oldest first (the order they were
    /// measured in, and the order an import recreates them in), with their
    /// environments, read in one query: a round trip per run is what a
    /// shared server cannot afford.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<StoredRun>> {
        // Newest first for the limit, as `list` counts it; turned below.
        let (sql, args, limit) = self.filtered(
            filter,
            "SELECT r.id, r.record, e.facts, s.facts, r.uuid FROM runs r
             LEFT JOIN environments e ON e.hash = r.env_hash
             LEFT JOIN environments s ON s.hash = r.server_env_hash",
        )?;
        let rows: Vec<(i64, RawRun)> = match &self.conn {
            Conn::Postgres(c) => {
                postgres::raw_runs(&mut c.borrow_mut(), &self.path, &sql, &args, limit)?
            }
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare(&sql).map_err(|e| self.err(e))?;
                let rows = stmt
                    .query_map(sqlite_values(args, limit), |r| {
                        Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
                    })
                    .map_err(|e| self.err(e))?;
                rows.collect::<std::result::Result<_, _>>()
                    .map_err(|e| self.err(e))?
            }
        };
        rows.into_iter()
            .rev()
            .map(|(id, raw)| self.stored(id, raw))
            .collect()
    }

    /// Every run under `label`, oldest first.
    pub fn runs_with_label(&self, label: &str) -> Result<Vec<StoredRun>> {
        self.runs(&RunFilter {
            label: Some(label.to_string()),
            ..RunFilter::default()
        })
    }

    /// Labels with their number of runs, most recently used first.
    pub fn labels(&self) -> Result<Vec<(String, u64)>> {
        self.counted(
            "SELECT label, COUNT(*) FROM runs GROUP BY label ORDER BY MAX(started_at) DESC",
        )
    }

    /// The rows of a `SELECT name, COUNT(*) ...` query.
    fn counted(&self, sql: &str) -> Result<Vec<(String, u64)>> {
        let c = match &self.conn {
            Conn::Sqlite(c) => c,
            Conn::Postgres(c) => return postgres::counted(&mut c.borrow_mut(), &self.path, sql),
        };
        let mut stmt = c.prepare(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Removes a run with everything that belongs only to it. False when
    /// there was no such run.
    pub fn delete(&mut self, id: RunId) -> Result<bool> {
        if let Conn::Postgres(c) = &mut self.conn {
            return postgres::delete(c.get_mut(), &self.path, id);
        }
        self.write(|tx, wrap| {
            tx.execute(
                "DELETE FROM interval_samples WHERE run_id = ?1",
                params![id.0],
            )
            .map_err(wrap)?;
            tx.execute("DELETE FROM iterations WHERE run_id = ?1", params![id.0])
                .map_err(wrap)?;
            let n = tx
                .execute("DELETE FROM runs WHERE id = ?1", params![id.0])
                .map_err(wrap)?;
            tx.execute(
                "DELETE FROM environments WHERE hash NOT IN
                 (SELECT env_hash FROM runs WHERE env_hash IS NOT NULL
                  UNION SELECT server_env_hash FROM runs WHERE server_env_hash IS NOT NULL)",
                [],
            )
            .map_err(wrap)?;
            Ok(n > 0)
        })
    }

    pub fn export(&self, filter: &RunFilter) -> Result<Export> {
        Ok(Export {
            schema: EXPORT_SCHEMA.to_string(),
            runs: self
                .runs(filter)?
                .into_iter()
                .map(|r| {
                    Ok(ExportedRun {
                        tag: self.tag_of(r.id)?,
                        record: r.record,
                        env: r.env,
                    })
                })
                .collect::<Result<_>>()?,
        })
    }

    /// Adds the runs of an export, all or none, with their tags. A run
    /// already stored (the same id; for a run exported without one, the
    /// same start time, label and spec key) is skipped, so importing a file
    /// twice, or copying a store again, does not double its runs. Returns
    /// the ids of the runs added.
    pub fn import(&mut self, export: &Export) -> Result<Vec<RunId>> {
        if export.schema != EXPORT_SCHEMA {
            return Err(StoreError::Import {
                index: 0,
                message: format!("schema is '{}', expected '{EXPORT_SCHEMA}'", export.schema),
            });
        }
        if let Some(i) = export
            .runs
            .iter()
            .position(|r| r.record.iterations.is_empty())
        {
            return Err(StoreError::Import {
                index: i + 1,
                message: "the run has no iterations".into(),
            });
        }
        if let Conn::Postgres(c) = &mut self.conn {
            return postgres::import(c.get_mut(), &self.path, &export.runs);
        }
        self.write(|tx, wrap| {
            let mut ids = Vec::new();
            for run in &export.runs {
                let r = &run.record;
                let exists: bool = match &r.uuid {
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
                .map_err(wrap)?;
                if !exists {
                    let id = insert_in(tx, r, run.env.as_ref()).map_err(wrap)?;
                    if let Some(tag) = &run.tag {
                        tags::insert_tag(tx, id, tag).map_err(wrap)?;
                    }
                    ids.push(id);
                }
            }
            Ok(ids)
        })
    }

    /// One line per iteration, for spreadsheets and plotting scripts.
    pub fn export_csv(&self, filter: &RunFilter) -> Result<String> {
        let mut out = String::from(
            "run_id,started_at,label,workload,spec_key,spec,iteration,complete,window_s,throughput_bps,\
             sent_bytes,received_bytes,client_cpu_s_per_gb,server_cpu_s_per_gb,host_cpu_s_per_gb,retransmits\n",
        );
        for run in self.runs(filter)? {
            for it in &run.record.iterations {
                out.push_str(&csv_line(run.id, &run.record, it));
            }
        }
        Ok(out)
    }
}

/// One iteration of a run as a line of `export_csv`. Iterations are
/// numbered from 1, as the terminal shows them (#1), not by their index.
fn csv_line(id: RunId, r: &RunRecord, it: &plumb_samples::Iteration) -> String {
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
        id.0,
        csv_field(&r.started_at),
        csv_field(&r.label),
        r.spec.workload,
        r.spec_key,
        csv_field(&r.spec.summary()),
        it.index + 1,
        it.complete,
        it.window_s,
        it.derived.throughput_bps,
        it.transfer.sent_bytes,
        it.transfer.received_bytes,
        it.derived.client_cpu_s_per_gb,
        it.derived.server_cpu_s_per_gb,
        it.derived.host_cpu_s_per_gb,
        it.derived.retransmits,
    )
}

/// The arguments of a filtered query (`Store::filtered`) for SQLite.
fn sqlite_values(
    args: Vec<String>,
    limit: Option<i64>,
) -> rusqlite::ParamsFromIter<Vec<rusqlite::types::Value>> {
    let mut values: Vec<rusqlite::types::Value> =
        args.into_iter().map(rusqlite::types::Value::Text).collect();
    values.extend(limit.map(rusqlite::types::Value::Integer));
    rusqlite::params_from_iter(values)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Turns a `--since`/`--until` value into the form `started_at` is stored
/// in, so that text order is time order.
fn timestamp(flag: &'static str, value: &str) -> Result<String> {
    let bad = || StoreError::BadDate {
        flag,
        value: value.to_string(),
    };
    if let Ok(ts) = value.parse::<jiff::Timestamp>() {
        return Ok(ts.to_string());
    }
    let date: jiff::civil::Date = value.parse().map_err(|_| bad())?;
    let ts = date
        .to_zoned(jiff::tz::TimeZone::UTC)
        .map_err(|_| bad())?
        .timestamp();
    Ok(ts.to_string())
}

fn mean_of(record: &RunRecord, f: impl Fn(&plumb_samples::Derived) -> Option<f64>) -> Option<f64> {
    let done: Vec<f64> = record
        .iterations
        .iter()
        .filter(|i| i.complete)
        .filter_map(|i| f(&i.derived))
        .collect();
    (!done.is_empty()).then(|| done.iter().sum::<f64>() / done.len() as f64)
}

/// The columns of `runs` derived from a record, alike on both engines.
struct Columns {
    /// The record with its uuid, as stored.
    record: RunRecord,
    uuid: String,
    started_at: String,
    workload: String,
    summary: String,
    throughput_bps: Option<f64>,
    tps: Option<f64>,
    json: String,
}

impl Columns {
    fn new(record: &RunRecord, uuid: String) -> std::result::Result<Columns, String> {
        let mut record = record.clone();
        record.uuid = Some(uuid.clone());
        Ok(Columns {
            // A run's time is stored normalised so that text order is time
            // order.
            started_at: record
                .started_at
                .parse::<jiff::Timestamp>()
                .map(|t| t.to_string())
                .unwrap_or_else(|_| record.started_at.clone()),
            workload: record.spec.workload.to_string(),
            summary: record.spec.summary(),
            throughput_bps: mean_of(&record, |d| Some(d.throughput_bps)),
            tps: mean_of(&record, |d| d.tps),
            json: json(&record)?,
            uuid,
            record,
        })
    }
}

fn json<T: Serialize>(v: &T) -> std::result::Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
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
    insert_samples(tx, id, record)?;
    Ok(RunId(id))
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

#[cfg(test)]
mod csv_tests {
    use super::*;

    #[test]
    fn csv_numbers_iterations_from_one_as_the_terminal_does() {
        let r = plumb_samples::testing::example();
        let it = &r.iterations[0];
        assert_eq!(it.index, 0);
        let line = csv_line(RunId(3), &r, it);
        // The iteration follows the spec, whose summary is quoted for its
        // commas.
        assert!(r.spec.summary().contains(','));
        let iteration = line
            .split("\",")
            .nth(1)
            .and_then(|rest| rest.split(',').next());
        assert_eq!(iteration, Some("1"), "{line}");
        assert!(line.starts_with("3,"), "{line}");
    }
}
