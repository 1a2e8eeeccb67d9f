//! The interface between `Store` and a database: each backend answers these
//! operations in its own SQL (sqlite.rs, postgres.rs). Besides the trait,
//! what the backends share that is not a dialect: the columns a record is
//! stored with and a filter in stored form, so that every backend writes
//! and selects alike.
//!
//! Opening and migrating are each backend's constructor, not a method: a
//! backend is only handed to `Store` once its schema is current.

use crate::tags::RunTag;
use crate::{Result, RunId, RunRow};
use plumb_samples::{Environment, RunRecord};
use serde::Serialize;

/// A run to write, with its ends' environment and its tag.
pub(crate) struct NewRun<'a> {
    pub record: &'a RunRecord,
    pub env: Option<&'a Environment>,
    pub tag: Option<&'a RunTag>,
}

/// A stored run as its columns hold it; `Store` decodes it, so that a
/// record that no longer parses is reported alike whatever the backend.
pub(crate) struct RawRun {
    pub record: String,
    /// The client end's facts, JSON.
    pub client: Option<String>,
    /// The server end's facts, JSON, where they were kept apart.
    pub server: Option<String>,
    pub uuid: Option<String>,
}

// Send: a `Store` may be moved to another thread; each connection still
// serves one thread at a time.
pub(crate) trait Backend: Send {
    /// The location as it may be shown: a path, or a URL without its
    /// password.
    fn path(&self) -> &str;

    fn schema_version(&self) -> Result<i64>;

    /// Writes `runs`, each with its environment, iterations, interval
    /// samples and tag, all in one transaction; their ids in order. With
    /// `skip_known`, a run already stored (by uuid, else by start time,
    /// label and spec key) is left out, as an import does.
    fn insert(&mut self, runs: &[NewRun<'_>], skip_known: bool) -> Result<Vec<RunId>>;

    fn get(&self, id: RunId) -> Result<Option<RawRun>>;

    /// The selected runs' rows, newest first.
    fn list(&self, selection: &Selection) -> Result<Vec<RunRow>>;

    /// The selected runs, newest first, with both ends' environments, in
    /// one query: a round trip per run is what a shared server cannot
    /// afford.
    fn runs(&self, selection: &Selection) -> Result<Vec<(RunId, RawRun)>>;

    /// Labels with their number of runs, most recently used first.
    fn labels(&self) -> Result<Vec<(String, u64)>>;

    /// Removes a run with everything that belongs only to it, its
    /// environments included when no other run refers to them. False when
    /// there was no such run.
    fn delete(&mut self, id: RunId) -> Result<bool>;

    fn tag_of(&self, id: RunId) -> Result<Option<RunTag>>;

    /// The tagged runs of `experiment` (under `label` when given), oldest
    /// first.
    fn experiment_tags(
        &self,
        experiment: &str,
        label: Option<&str>,
    ) -> Result<Vec<(RunId, RunTag)>>;

    /// The experiments with their number of runs, most recently run first.
    fn experiments(&self) -> Result<Vec<(String, u64)>>;
}

/// A `RunFilter` checked, its times normalised as `started_at` is stored
/// so that text order is time order.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    pub label: Option<String>,
    pub workload: Option<String>,
    pub spec_key: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: Option<i64>,
}

impl Selection {
    /// `select` (a SELECT ... FROM of the runs table) over the selected
    /// runs, newest first and limited, with the arguments of its
    /// placeholders, all text; the limit, where there is one, binds to the
    /// placeholder after them. `placeholder(n)` writes the n-th (from 1) in
    /// the backend's style.
    pub fn sql(
        &self,
        select: &str,
        placeholder: impl Fn(usize) -> String,
    ) -> (String, Vec<String>) {
        let mut conds = Vec::new();
        let mut args = Vec::new();
        let columns = [
            ("label", "=", &self.label),
            ("workload", "=", &self.workload),
            ("spec_key", "=", &self.spec_key),
            ("started_at", ">=", &self.since),
            ("started_at", "<", &self.until),
        ];
        for (column, op, value) in columns {
            if let Some(v) = value {
                args.push(v.clone());
                conds.push(format!("{column} {op} {}", placeholder(args.len())));
            }
        }
        let mut sql = select.to_string();
        if !conds.is_empty() {
            sql.push_str(&format!(" WHERE {}", conds.join(" AND ")));
        }
        sql.push_str(" ORDER BY started_at DESC, id DESC");
        if self.limit.is_some() {
            sql.push_str(&format!(" LIMIT {}", placeholder(args.len() + 1)));
        }
        (sql, args)
    }
}

/// The columns of `runs` derived from a record, alike on every backend.
pub(crate) struct Columns {
    /// The record with its uuid, as stored.
    pub record: RunRecord,
    pub uuid: String,
    pub started_at: String,
    pub workload: String,
    pub summary: String,
    pub throughput_bps: Option<f64>,
    pub tps: Option<f64>,
    pub json: String,
}

impl Columns {
    pub fn new(record: &RunRecord, uuid: String) -> std::result::Result<Columns, String> {
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

fn mean_of(record: &RunRecord, f: impl Fn(&plumb_samples::Derived) -> Option<f64>) -> Option<f64> {
    let done: Vec<f64> = record
        .iterations
        .iter()
        .filter(|i| i.complete)
        .filter_map(|i| f(&i.derived))
        .collect();
    (!done.is_empty()).then(|| done.iter().sum::<f64>() / done.len() as f64)
}

pub(crate) fn json<T: Serialize>(v: &T) -> std::result::Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_binds_its_arguments_in_order_and_the_limit_last() {
        let s = Selection {
            label: Some("l".into()),
            until: Some("u".into()),
            limit: Some(3),
            ..Selection::default()
        };
        let (sql, args) = s.sql("SELECT id FROM runs", |n| format!("${n}"));
        assert_eq!(
            sql,
            "SELECT id FROM runs WHERE label = $1 AND started_at < $2 \
             ORDER BY started_at DESC, id DESC LIMIT $3"
        );
        assert_eq!(args, ["l", "u"]);
        let (sql, args) = Selection::default().sql("SELECT id FROM runs", |n| format!("?{n}"));
        assert_eq!(sql, "SELECT id FROM runs ORDER BY started_at DESC, id DESC");
        assert!(args.is_empty());
    }
}
