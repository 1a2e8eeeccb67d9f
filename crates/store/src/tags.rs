//! Runs made by an experiment carry its name, the point and the variant
//! (with its place in the file), so `plumb sweep --resume` finds the points
//! already stored and `plumb report --experiment` finds all of them again,
//! with the same baseline as the sweep.

use crate::{Result, RunId, Store, StoredRun};
use plumb_samples::{Environment, RunRecord};
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
    ) -> Result<RunId> {
        self.insert_one(record, env, Some(tag))
    }

    /// The tag of a run, if an experiment made it.
    pub fn tag_of(&self, id: RunId) -> Result<Option<RunTag>> {
        self.backend.tag_of(id)
    }

    /// The runs of an experiment (under `label` when given), oldest first.
    pub fn experiment_runs(
        &self,
        experiment: &str,
        label: Option<&str>,
    ) -> Result<Vec<(RunTag, StoredRun)>> {
        let rows = self.backend.experiment_tags(experiment, label)?;
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
    pub fn experiments(&self) -> Result<Vec<(String, u64)>> {
        self.backend.experiments()
    }
}

/// A stored rank as the tag holds it. Neither engine has an unsigned type:
/// a value no plumb writes (negative, or past u32) reads as none, alike on
/// both, rather than failing the whole report.
pub(crate) fn rank(v: Option<i64>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok())
}
