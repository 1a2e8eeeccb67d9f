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
