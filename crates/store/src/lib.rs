//! The result store: one SQLite file (sqlite.rs), or a PostgreSQL database
//! (postgres.rs) when the location is a `postgres://` or `postgresql://`
//! URL. Each is a `Backend` (backend.rs) with its own SQL and its own
//! versioned migrations; a database written by a newer plumb is refused,
//! never downgraded.
//!
//! A run is written in one transaction when it finishes, so a run that was
//! interrupted, or a process that was killed, never leaves a row that looks
//! complete. The whole record is kept as JSON (the source of truth for
//! `show`, `export` and `compare`); the columns and tables beside it exist to
//! filter and to query without decoding every record.
//!
//! Everything that is not SQL (decoding records, checking filters, the
//! export formats) is here, shared by every backend, so that they answer
//! alike.
#![deny(unsafe_code)]

use backend::{Backend, NewRun, RawRun, Selection};
use plumb_samples::{Environment, RunRecord};
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
    /// The PostgreSQL server went away under a connection (a restart, the
    /// network): a new connection may well work.
    #[error("result database {path}: {message}")]
    Lost { path: String, message: String },
}

impl StoreError {
    /// The database could not be reached or went away, rather than said no:
    /// asking again on a new connection may succeed.
    pub fn transient(&self) -> bool {
        matches!(self, StoreError::Connect { .. } | StoreError::Lost { .. })
    }
}

mod backend;
pub mod lab;
mod pgconn;
mod pgtls;
mod postgres;
mod series;
mod sqlite;
mod tags;
pub use pgconn::pgpass_lookup;
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

/// The schema version this plumb writes. Each backend's migrations end at
/// it (sqlite.rs asserts so as it compiles, postgres.rs in a test).
pub const SCHEMA_VERSION: i64 = 8;

pub struct Store {
    backend: Box<dyn Backend>,
}

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
        Self::open_at(location, SCHEMA_VERSION)
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

    /// Opens and migrates only up to `version`: how tests build a database
    /// of an older schema.
    #[doc(hidden)]
    pub fn open_at_version(path: &Path, version: i64) -> Result<Store> {
        Self::open_at(&Location::from(path), version)
    }

    /// The one place a location picks its backend. Only SQLite stops short
    /// of the current version: PostgreSQL's schema begins at v6.
    fn open_at(location: &Location, version: i64) -> Result<Store> {
        let backend: Box<dyn Backend> = match location {
            Location::File(path) => Box::new(sqlite::Sqlite::open(path, version)?),
            Location::Postgres(url) => Box::new(postgres::Postgres::open(url)?),
        };
        Ok(Store { backend })
    }

    pub fn path(&self) -> &str {
        self.backend.path()
    }

    pub fn schema_version(&self) -> Result<i64> {
        self.backend.schema_version()
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
        let run = NewRun { record, env, tag };
        // Nothing is skipped: one run in, one id out.
        Ok(self.backend.insert(&[run], false)?[0])
    }

    pub fn get(&self, id: RunId) -> Result<Option<StoredRun>> {
        self.backend
            .get(id)?
            .map(|raw| self.stored(id, raw))
            .transpose()
    }

    /// A run as read: its record, environments and id decoded.
    fn stored(&self, id: RunId, raw: RawRun) -> Result<StoredRun> {
        let corrupt = |message: String| StoreError::Corrupt {
            path: self.path().to_string(),
            id: id.0,
            message,
        };
        let mut record: RunRecord =
            serde_json::from_str(&raw.record).map_err(|e| corrupt(e.to_string()))?;
        let env_of = |facts: Option<&str>, end: &str| {
            facts
                .map(|f| serde_json::from_str(f).map(|facts| Environment { facts }))
                .transpose()
                .map_err(|e| corrupt(format!("{end} environment: {e}")))
        };
        let mut env = env_of(raw.client.as_deref(), "client")?;
        if let (Some(env), Some(server)) = (&mut env, env_of(raw.server.as_deref(), "server")?) {
            env.add_server_end(&server);
        }
        // Runs stored before v6 got their id in the column only.
        if record.uuid.is_none() {
            record.uuid = raw.uuid;
        }
        Ok(StoredRun { id, record, env })
    }

    /// Runs matching `filter`, newest first.
    pub fn list(&self, filter: &RunFilter) -> Result<Vec<RunRow>> {
        self.backend.list(&filter.selection()?)
    }

    /// The runs matching `filter`, oldest first (the order they were
    /// measured in, and the order an import recreates them in), with their
    /// environments.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<StoredRun>> {
        // Newest first for the limit, as `list` counts it; turned here.
        self.backend
            .runs(&filter.selection()?)?
            .into_iter()
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
        self.backend.labels()
    }

    /// Removes a run with everything that belongs only to it. False when
    /// there was no such run.
    pub fn delete(&mut self, id: RunId) -> Result<bool> {
        self.backend.delete(id)
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
        let runs: Vec<NewRun<'_>> = export
            .runs
            .iter()
            .map(|r| NewRun {
                record: &r.record,
                env: r.env.as_ref(),
                tag: r.tag.as_ref(),
            })
            .collect();
        self.backend.insert(&runs, true)
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

impl RunFilter {
    /// The filter checked, its times in the form `started_at` is stored in.
    fn selection(&self) -> Result<Selection> {
        let time = |flag, value: &Option<String>| value.as_deref().map(|v| timestamp(flag, v));
        Ok(Selection {
            label: self.label.clone(),
            workload: self.workload.clone(),
            spec_key: self.spec_key.clone(),
            since: time("--since", &self.since).transpose()?,
            until: time("--until", &self.until).transpose()?,
            limit: self.limit.map(|n| n.min(i64::MAX as usize) as i64),
        })
    }
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
