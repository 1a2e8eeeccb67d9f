//! Runs made by an experiment carry its name, the point and the variant
//! (with its place in the file), so `plumb sweep --resume` finds the points
//! already stored and `plumb report --experiment` finds all of them again,
//! with the same baseline as the sweep.

use super::{postgres, Conn, RunId, Store, StoredRun};
use plumb_samples::{Environment, RunRecord};
use rusqlite::{params, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

/// Where a run belongs in an experiment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTag {
    pub experiment: String,
    /// The point's id: its axis values and variant, `sndbuf=8K,variant=rps`.
    pub point: String,
    pub variant: Option<String>,
    /// The seed the experiment's order was drawn with.
    pub seed: Option<u64>,
    /// The variant's place among the experiment file's variants, from 0:
    /// the report takes the first as its baseline, as the sweep does, even
    /// when a random order ran another variant first. None for the runs of
    /// an experiment without variants, and for runs stored before schema
    /// version 7 began to keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant_rank: Option<u32>,
}

impl Store {
    /// Writes a run and its tag in one transaction.
    pub fn insert_tagged_run(
        &mut self,
        record: &RunRecord,
        env: Option<&Environment>,
        tag: &RunTag,
    ) -> super::Result<RunId> {
        self.insert_one(record, env, Some(tag))
    }

    /// The tag of a run, if an experiment made it.
    pub fn tag_of(&self, id: RunId) -> super::Result<Option<RunTag>> {
        let c = match &self.conn {
            Conn::Sqlite(c) => c,
            Conn::Postgres(c) => return postgres::tag_of(&mut c.borrow_mut(), &self.path, id),
        };
        c.query_row(
            "SELECT t.experiment, t.point, t.variant, t.seed, t.variant_rank FROM run_tags t
             WHERE t.run_id = ?1",
            params![id.0],
            |r| {
                Ok(RunTag {
                    experiment: r.get(0)?,
                    point: r.get(1)?,
                    variant: r.get(2)?,
                    seed: r.get::<_, Option<i64>>(3)?.map(|s| s as u64),
                    variant_rank: rank(r.get(4)?),
                })
            },
        )
        .optional()
        .map_err(|e| self.err(e))
    }

    /// The runs of an experiment (under `label` when given), oldest first.
    pub fn experiment_runs(
        &self,
        experiment: &str,
        label: Option<&str>,
    ) -> super::Result<Vec<(RunTag, StoredRun)>> {
        let c = match &self.conn {
            Conn::Sqlite(c) => c,
            Conn::Postgres(c) => {
                // Bound first: the client is borrowed again to read each run.
                let rows =
                    postgres::experiment_tags(&mut c.borrow_mut(), &self.path, experiment, label)?;
                return self.runs_of(rows);
            }
        };
        let mut stmt = c
            .prepare(
                "SELECT t.run_id, t.point, t.variant, t.seed, t.variant_rank
                 FROM run_tags t JOIN runs r ON r.id = t.run_id
                 WHERE t.experiment = ?1 AND (?2 IS NULL OR r.label = ?2)
                 ORDER BY r.started_at, r.id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![experiment, label], |r| {
                Ok((
                    RunId(r.get(0)?),
                    RunTag {
                        experiment: experiment.to_string(),
                        point: r.get(1)?,
                        variant: r.get(2)?,
                        seed: r.get::<_, Option<i64>>(3)?.map(|s| s as u64),
                        variant_rank: rank(r.get(4)?),
                    },
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        self.runs_of(rows)
    }

    fn runs_of(&self, rows: Vec<(RunId, RunTag)>) -> super::Result<Vec<(RunTag, StoredRun)>> {
        let mut out = Vec::with_capacity(rows.len());
        for (id, tag) in rows {
            if let Some(run) = self.get(id)? {
                out.push((tag, run));
            }
        }
        Ok(out)
    }

    /// The experiments with stored runs and their number of runs, most
    /// recently run first.
    pub fn experiments(&self) -> super::Result<Vec<(String, u64)>> {
        self.counted(
            "SELECT t.experiment, COUNT(*) FROM run_tags t JOIN runs r ON r.id = t.run_id \
             GROUP BY t.experiment ORDER BY MAX(r.started_at) DESC, MAX(r.id) DESC",
        )
    }
}

/// Tags the run `id` in the transaction that writes it.
pub(crate) fn insert_tag(tx: &Transaction, id: RunId, tag: &RunTag) -> rusqlite::Result<()> {
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

/// A stored rank as the tag holds it. Neither engine has an unsigned type:
/// a value no plumb writes (negative, or past u32) reads as none, alike on
/// both, rather than failing the whole report.
pub(crate) fn rank(v: Option<i64>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok())
}
