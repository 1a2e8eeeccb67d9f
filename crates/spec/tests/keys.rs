//! Spec keys are a stored contract: every run is stored and matched under
//! its spec's key, so a change of the spec types that moved an existing key
//! would cut every stored history off from the runs made after it. This
//! test pins the keys of real specs: each workload's default, and every
//! point of every example experiment, full and quick. The rule that keeps
//! them (docs/json.md, "Spec keys"): a field added to the spec is left out
//! of its serialisation while it holds its default
//! (`#[serde(skip_serializing_if = ..., default)]`), so that every spec
//! that does not use it keeps its key.
//!
//! `keys.pinned` beside this file holds the keys; a key that must move is a
//! schema version with a migration of the stored keys, not an edit of that
//! file. A point whose spec changed (a default it takes moved, such as the
//! engine `--io auto` chooses for it) is another test point, not a moved
//! key: its line is edited, with the reason in the commit.

use plumb_spec::experiment::Experiment;
use plumb_spec::{build, Field, Names, Spec};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `--io auto` decides by the host's CPUs: the keys are pinned as a
/// 2-CPU host builds them.
fn on_two_cpus(mut spec: Spec) -> Spec {
    plumb_spec::auto::resolve(&mut spec, 2, true);
    spec
}

/// "name key" lines, sorted: the defaults, then every example's points.
fn keys_now() -> Vec<String> {
    let mut out = Vec::new();
    for w in ["stream", "rr", "crr", "udp-stream", "udp-rr"] {
        let spec = on_two_cpus(build(&[(Field::Workload, w)], Names::Flags).unwrap());
        out.push(format!("default/{w} {}", spec.key()));
    }
    let mut files: Vec<_> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the example experiments: {files:?}");
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let exp = Experiment::parse(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut profiles = vec![("full", exp.clone())];
        if exp.quick.is_some() {
            profiles.push(("quick", exp.quick_profile()));
        }
        for (profile, e) in profiles {
            for p in e.points().unwrap() {
                let key = on_two_cpus(p.spec.clone()).key();
                out.push(format!("{name}/{profile}/{} {key}", p.id));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_keys_of_real_specs_never_move() {
    let pinned_path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/keys.pinned"));
    let now = keys_now();
    if std::env::var_os("PLUMB_PIN_KEYS").is_some() {
        // Pins keys for points that are new (an example gained a point);
        // a key that moved still fails below.
        let mut text = now.join("\n");
        text.push('\n');
        let old = std::fs::read_to_string(pinned_path).unwrap_or_default();
        for line in old.lines() {
            let name = line.split(' ').next().unwrap();
            if let Some(n) = now.iter().find(|l| l.split(' ').next() == Some(name)) {
                assert_eq!(n, line, "a pinned key moved");
            }
        }
        std::fs::write(pinned_path, text).unwrap();
    }
    let pinned = std::fs::read_to_string(pinned_path).expect("tests/keys.pinned");
    let mut moved = Vec::new();
    for line in pinned.lines() {
        let (name, key) = line.split_once(' ').unwrap();
        match now.iter().find_map(|l| l.strip_prefix(&format!("{name} "))) {
            Some(k) if k == key => {}
            Some(k) => moved.push(format!("{name}: pinned {key}, now {k}")),
            // A point an example no longer has: its stored runs keep their key.
            None => {}
        }
    }
    assert!(
        moved.is_empty(),
        "spec keys moved, which cuts stored history off from new runs:\n{}\n\
         A field added to the spec must be left out of its serialisation while it \
         holds its default (docs/json.md, \"Spec keys\").",
        moved.join("\n")
    );
    // Every key of now is pinned, so a new example point is pinned as it
    // comes (PLUMB_PIN_KEYS=1 cargo test -p plumb-spec --test keys).
    let unpinned: Vec<&String> = now
        .iter()
        .filter(|l| !pinned.lines().any(|p| p == l.as_str()))
        .collect();
    assert!(unpinned.is_empty(), "keys not pinned yet: {unpinned:?}");
}

#[test]
fn a_field_at_its_default_is_not_part_of_the_key() {
    // The fields added after the first stored runs are absent at their
    // defaults, which is what keeps the keys above.
    let spec = build(&[(Field::Workload, "stream")], Names::Flags).unwrap();
    let json = serde_json::to_value(&spec).unwrap();
    for later in ["zerocopy", "rx", "io", "topology", "server_host"] {
        assert!(
            json.get(later).is_none(),
            "{later} serialised at its default: {json}"
        );
    }
}
