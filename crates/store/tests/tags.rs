//! Experiment tags on stored runs: written with the run, found again by
//! experiment and label, dropped with the run.

use plumb_samples::RunRecord;
use plumb_store::{RunTag, Store};

fn record(label: &str, started_at: &str) -> RunRecord {
    let mut r = plumb_samples::testing::example();
    r.label = label.to_string();
    r.started_at = started_at.to_string();
    r
}

#[test]
fn tagged_runs_are_found_by_experiment_and_label() {
    let path = std::env::temp_dir().join(format!("plumb-store-tags-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut s = Store::open(&path).unwrap();
    let tag = |point: &str, variant: Option<&str>| RunTag {
        experiment: "s1".into(),
        point: point.into(),
        variant: variant.map(str::to_string),
        seed: Some(7),
        variant_rank: variant.map(|_| 1),
    };
    let a = s
        .insert_tagged_run(
            &record("x", "2026-11-01T00:00:00Z"),
            None,
            &tag("sndbuf=8K", None),
        )
        .unwrap();
    s.insert_tagged_run(
        &record("y", "2026-11-01T00:00:01Z"),
        None,
        &tag("sndbuf=16K", Some("rps")),
    )
    .unwrap();
    s.insert_run(&record("x", "2026-11-01T00:00:02Z"), None)
        .unwrap();
    let all = s.experiment_runs("s1", None).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].0.point, "sndbuf=8K");
    assert_eq!(all[1].0.variant.as_deref(), Some("rps"));
    assert_eq!(all[1].0.seed, Some(7));
    assert_eq!(all[0].0.variant_rank, None);
    assert_eq!(all[1].0.variant_rank, Some(1));
    assert_eq!(s.experiment_runs("s1", Some("x")).unwrap().len(), 1);
    assert!(s.experiment_runs("s2", None).unwrap().is_empty());
    assert_eq!(s.experiments().unwrap(), vec![("s1".to_string(), 2)]);
    assert!(s.delete(a).unwrap());
    assert_eq!(s.experiment_runs("s1", None).unwrap().len(), 1);
    drop(s);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// What a sweep stored as a tag reads back whole, by run and by experiment,
/// and goes through export and import.
#[test]
fn a_variants_rank_round_trips() {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("plumb-store-rank-{}.db", std::process::id()));
    let copy = dir.join(format!("plumb-store-rank-copy-{}.db", std::process::id()));
    let remove = |p: &std::path::Path| {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
        }
    };
    remove(&path);
    remove(&copy);
    let mut s = Store::open(&path).unwrap();
    let tag = |variant: &str, rank: u32| RunTag {
        experiment: "e".into(),
        point: format!("sndbuf=8K,variant={variant}"),
        variant: Some(variant.into()),
        seed: Some(3),
        variant_rank: Some(rank),
    };
    // A random order ran the file's second variant first.
    let b = s
        .insert_tagged_run(&record("x", "2026-11-01T00:00:00Z"), None, &tag("b", 1))
        .unwrap();
    let a = s
        .insert_tagged_run(&record("x", "2026-11-01T00:00:01Z"), None, &tag("a", 0))
        .unwrap();
    assert_eq!(s.tag_of(b).unwrap(), Some(tag("b", 1)));
    assert_eq!(s.tag_of(a).unwrap(), Some(tag("a", 0)));
    let runs = s.experiment_runs("e", None).unwrap();
    let ranks: Vec<_> = runs.iter().map(|(t, _)| t.variant_rank).collect();
    assert_eq!(ranks, [Some(1), Some(0)]);
    let export = s.export(&plumb_store::RunFilter::default()).unwrap();
    let text = serde_json::to_string(&export).unwrap();
    assert!(text.contains("\"variant_rank\":1"), "{text}");
    let mut d = Store::open(&copy).unwrap();
    assert_eq!(d.import(&export).unwrap().len(), 2);
    let copied: Vec<_> = d
        .experiment_runs("e", None)
        .unwrap()
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(copied, [tag("b", 1), tag("a", 0)]);
    drop((s, d));
    remove(&path);
    remove(&copy);
}

/// An export written before ranks were kept has no such key: it imports,
/// its tags without a rank.
#[test]
fn an_export_without_ranks_imports() {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("plumb-store-norank-{}.db", std::process::id()));
    let remove = |p: &std::path::Path| {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
        }
    };
    remove(&path);
    let mut s = Store::open(&path).unwrap();
    let old = RunTag {
        experiment: "e".into(),
        point: "variant=a".into(),
        variant: Some("a".into()),
        seed: None,
        variant_rank: None,
    };
    let id = s
        .insert_tagged_run(&record("x", "2026-11-01T00:00:00Z"), None, &old)
        .unwrap();
    let text =
        serde_json::to_string(&s.export(&plumb_store::RunFilter::default()).unwrap()).unwrap();
    assert!(!text.contains("variant_rank"), "{text}");
    assert!(s.delete(id).unwrap());
    let export: plumb_store::Export = serde_json::from_str(&text).unwrap();
    assert_eq!(s.import(&export).unwrap().len(), 1);
    let (tag, _) = s.experiment_runs("e", None).unwrap().remove(0);
    assert_eq!(tag, old);
    drop(s);
    remove(&path);
}
