//! The lines of a report: which runs make up each line (a variant, a label,
//! or a run named by the user), where each run sits on the axes, and the
//! sides the lines are compared as.

use super::{varying_coords, Entry};
use plumb_compare::{Side, SideRun};
use plumb_samples::{Environment, RunRecord};
use plumb_spec::experiment::PointId;

/// A stored run of an experiment: where it sits and what it measured.
#[derive(Debug, Clone)]
pub struct TaggedRun {
    pub point: PointId,
    pub record: RunRecord,
    pub env: Option<Environment>,
}

/// What a report is made of: its title, every run placed on its line and
/// axes, and the lines as sides to compare (the first is the baseline).
#[derive(Debug, Clone)]
pub struct Lines {
    pub title: String,
    pub entries: Vec<Entry>,
    pub sides: Vec<Side>,
}

/// The runs of experiment `name`: one line per variant (per label and
/// variant when the runs carry several labels), else one per label. Runs
/// match across lines by their place in the matrix, whatever else their
/// variant changed.
pub fn experiment_lines(name: &str, runs: Vec<TaggedRun>) -> Lines {
    let mut labels: Vec<String> = runs.iter().map(|r| r.record.label.clone()).collect();
    labels.sort();
    labels.dedup();
    let variants = runs.iter().any(|r| r.point.variant.is_some());
    let count = runs.len();
    let mut entries = Vec::new();
    let mut lines: Vec<(String, Vec<TaggedRun>)> = Vec::new();
    for r in runs {
        let series = match (&r.point.variant, labels.len() > 1) {
            (Some(v), false) => v.clone(),
            (Some(v), true) => format!("{}/{v}", r.record.label),
            (None, _) => r.record.label.clone(),
        };
        entries.push(Entry {
            series: series.clone(),
            coords: r.point.coords.clone(),
            record: r.record.clone(),
        });
        match lines.iter_mut().find(|(s, _)| *s == series) {
            Some((_, rs)) => rs.push(r),
            None => lines.push((series, vec![r])),
        }
    }
    let sides: Vec<Side> = lines
        .into_iter()
        .map(|(name, rs)| matrix_side(&name, rs))
        .collect();
    let title = format!(
        "experiment {name}: {count} run{}, {}",
        if count == 1 { "" } else { "s" },
        if variants {
            format!("{} variants", sides.len())
        } else {
            format!(
                "label{} {}",
                if labels.len() == 1 { "" } else { "s" },
                labels.join(", ")
            )
        }
    );
    Lines {
        title,
        entries,
        sides,
    }
}

/// Runs of an experiment as one side of a comparison, matched with the
/// other side by their place in the matrix, whatever else their variant
/// changed; the environment is the newest run's that has one.
pub fn matrix_side(name: &str, runs: impl IntoIterator<Item = TaggedRun>) -> Side {
    let mut side = Side::new(name, Vec::new(), None);
    for r in runs {
        side.runs.push(SideRun {
            key: r.point.without_variant().to_string(),
            record: r.record,
        });
        if r.env.is_some() {
            side.env = r.env;
        }
    }
    side
}

/// Labels or runs named by the user, one line each, placed on the spec
/// fields that differ between them.
pub fn named_lines(sides: Vec<Side>) -> Lines {
    let all: Vec<(&str, &RunRecord)> = sides
        .iter()
        .flat_map(|s| s.records().map(move |r| (s.name.as_str(), r)))
        .collect();
    let coords = varying_coords(&all.iter().map(|(_, r)| *r).collect::<Vec<_>>());
    let entries = all
        .iter()
        .zip(coords)
        .map(|((series, r), coords)| Entry {
            series: series.to_string(),
            coords,
            record: (*r).clone(),
        })
        .collect();
    let names: Vec<&str> = sides.iter().map(|s| s.name.as_str()).collect();
    Lines {
        title: format!("report of {}", names.join(", ")),
        entries,
        sides,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_make_lines_matched_by_their_place_in_the_matrix() {
        let record = plumb_samples::testing::example();
        let run = |point: &str| TaggedRun {
            point: PointId::parse(point),
            record: record.clone(),
            env: None,
        };
        let lines = experiment_lines(
            "e",
            vec![
                run("sndbuf=8K,variant=a"),
                run("sndbuf=8K,variant=b"),
                run("sndbuf=16K,variant=a"),
            ],
        );
        assert_eq!(lines.title, "experiment e: 3 runs, 2 variants");
        let names: Vec<&str> = lines.sides.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let keys: Vec<&str> = lines.sides[0].runs.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["sndbuf=8K", "sndbuf=16K"]);
        assert_eq!(lines.sides[1].runs[0].key, "sndbuf=8K");
        assert_eq!(
            lines.entries[2].coords,
            vec![("sndbuf".into(), "16K".into())]
        );
        for r in lines.sides.iter().flat_map(|s| s.records()) {
            assert_eq!(r.spec_key, record.spec_key, "the stored key is kept");
        }
    }
}
