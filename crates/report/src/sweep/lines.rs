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

/// The runs of experiment `name`, each with its variant's rank in the
/// experiment file where the store has one: one line per variant (per label
/// and variant when the runs carry several labels), else one per label.
/// Runs match across lines by their place in the matrix, whatever else
/// their variant changed.
pub fn experiment_lines(name: &str, runs: Vec<(TaggedRun, Option<u32>)>) -> Lines {
    let mut labels: Vec<String> = runs.iter().map(|(r, _)| r.record.label.clone()).collect();
    labels.sort();
    labels.dedup();
    let variants = runs.iter().any(|(r, _)| r.point.variant.is_some());
    let ranked = variants && runs.iter().all(|(_, rank)| rank.is_some());
    let count = runs.len();
    let mut entries = Vec::new();
    let mut lines: Vec<Pending> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (r, rank) in runs {
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
        match lines.iter_mut().find(|l| l.series == series) {
            Some(l) => {
                // The newest run's: a file whose variants were reordered
                // between a sweep and its --resume ranks them as it is now,
                // as the sweep's own summary reads it.
                l.rank = rank;
                l.runs.push(r);
            }
            None => {
                let label_seen = match seen.iter().position(|l| *l == r.record.label) {
                    Some(i) => i,
                    None => {
                        seen.push(r.record.label.clone());
                        seen.len() - 1
                    }
                };
                lines.push(Pending {
                    series,
                    label_seen,
                    rank,
                    runs: vec![r],
                })
            }
        }
    }
    if ranked {
        in_file_order(&mut lines, &mut entries);
    }
    let sides: Vec<Side> = lines
        .into_iter()
        .map(|l| matrix_side(&l.series, l.runs))
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

/// A line of an experiment's report while its runs are gathered.
struct Pending {
    series: String,
    /// The place of the line's label among the labels in the order they
    /// first came.
    label_seen: usize,
    rank: Option<u32>,
    runs: Vec<TaggedRun>,
}

/// Puts the variants' lines in the experiment file's order, so that the
/// first line, the baseline every other is compared with, is the file's
/// first variant, as at the end of `plumb sweep`, rather than whichever
/// variant a random order happened to run first. Labels keep the order
/// they first came in. The entries follow their lines, so that plots and
/// tables list the lines as the comparisons do.
fn in_file_order(lines: &mut [Pending], entries: &mut [Entry]) {
    lines.sort_by_key(|l| (l.label_seen, l.rank));
    entries.sort_by_key(|e| lines.iter().position(|l| l.series == e.series));
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
                (run("sndbuf=8K,variant=a"), None),
                (run("sndbuf=8K,variant=b"), None),
                (run("sndbuf=16K,variant=a"), None),
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

    fn run(point: &str, label: &str) -> TaggedRun {
        let mut record = plumb_samples::testing::example();
        record.label = label.into();
        TaggedRun {
            point: PointId::parse(point),
            record,
            env: None,
        }
    }

    fn names(lines: &Lines) -> Vec<&str> {
        lines.sides.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn the_files_first_variant_is_the_baseline_whichever_ran_first() {
        // A random order ran the file's second variant (rank 1) first.
        let lines = experiment_lines(
            "e",
            vec![
                (run("flows=1,variant=nodelay", "l"), Some(1)),
                (run("flows=1,variant=nagle", "l"), Some(0)),
                (run("flows=4,variant=nodelay", "l"), Some(1)),
                (run("flows=4,variant=nagle", "l"), Some(0)),
            ],
        );
        assert_eq!(names(&lines), ["nagle", "nodelay"]);
        let series: Vec<&str> = lines.entries.iter().map(|e| e.series.as_str()).collect();
        assert_eq!(series, ["nagle", "nagle", "nodelay", "nodelay"]);
        let keys: Vec<&str> = lines.sides[0].runs.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            ["flows=1", "flows=4"],
            "each line keeps its runs' order"
        );
        // The comparison the report makes of them: A is the file's first.
        let c = plumb_compare::compare(
            &lines.sides[0],
            &lines.sides[1],
            &plumb_stats::CompareParams::default(),
        );
        assert_eq!((c.a.as_str(), c.b.as_str()), ("nagle", "nodelay"));
    }

    #[test]
    fn ranks_order_the_variants_within_each_label() {
        let lines = experiment_lines(
            "e",
            vec![
                (run("variant=b", "new"), Some(1)),
                (run("variant=a", "new"), Some(0)),
                (run("variant=b", "old"), Some(1)),
                (run("variant=a", "old"), Some(0)),
            ],
        );
        assert_eq!(names(&lines), ["new/a", "new/b", "old/a", "old/b"]);
    }

    #[test]
    fn runs_stored_without_ranks_keep_the_order_they_came_in() {
        // One run from before ranks were stored: none of them decide.
        let lines = experiment_lines(
            "e",
            vec![
                (run("variant=b", "l"), None),
                (run("variant=a", "l"), Some(0)),
                (run("variant=b", "l"), Some(1)),
            ],
        );
        assert_eq!(names(&lines), ["b", "a"]);
        let series: Vec<&str> = lines.entries.iter().map(|e| e.series.as_str()).collect();
        assert_eq!(series, ["b", "a", "b"]);
    }
}
