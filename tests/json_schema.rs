//! `plumb run --json` output against the versioned JSON Schema in the repo,
//! which the record's types generate (the samples crate's test keeps the
//! committed file equal to it), and the records an earlier build stored.

mod common;
use common::*;

#[test]
fn run_json_validates_against_the_schema() {
    let v = schema();
    let cases: [(&str, &[&str]); 10] = [
        ("stream", &[]),
        (
            "stream",
            &[
                "--direction",
                "both",
                "--flows",
                "3",
                "--sndbuf",
                "64K",
                "--rcvbuf",
                "64K",
                "--nodelay",
                "--pacing-rate",
                "5G",
                "--label",
                "schema-test",
            ],
        ),
        (
            "stream",
            &["--direction", "recv", "--zerocopy", "msg", "--rx", "skip"],
        ),
        (
            "rr",
            &[
                "--flows",
                "100",
                "--resp-size",
                "64",
                "--resp-writes",
                "8,rest",
            ],
        ),
        ("crr", &["--close", "fin"]),
        ("crr", &["--close", "server-fin"]),
        ("udp-stream", &[]),
        ("udp-rr", &["--flows", "3"]),
        ("stream", &["--read-size", "16K"]),
        (
            "rr",
            &[
                "--part",
                "load=stream:flows=2:direction=both:start=1s:stop=2s",
            ],
        ),
    ];
    for (workload, extra) in cases {
        let duration: &[&str] = match extra.contains(&"--part") {
            true => &["--duration", "3s"],
            false => &["--duration", "1s"],
        };
        let args = [duration, extra].concat();
        let doc = workload_json(workload, &args);
        assert_eq!(doc["schema"], "plumb.run/1");
        let errs = schema_errors(&v, &doc);
        assert!(
            errs.is_empty(),
            "{workload} {args:?}: output does not match the schema:\n{}",
            errs.join("\n")
        );
    }
}

#[test]
fn the_schema_rejects_what_is_not_a_run() {
    let v = schema();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/examples/run.v1.example.json"
    ))
    .unwrap();
    let example: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        schema_errors(&v, &example).is_empty(),
        "the shipped example is valid: {:?}",
        schema_errors(&v, &example)
    );

    let mut wrong_version = example.clone();
    wrong_version["schema"] = "plumb.run/2".into();
    assert!(!v.is_valid(&wrong_version));

    let mut no_transfer = example.clone();
    no_transfer["iterations"][0]
        .as_object_mut()
        .unwrap()
        .remove("transfer");
    assert!(!v.is_valid(&no_transfer));

    let mut text_number = example.clone();
    text_number["iterations"][0]["derived"]["throughput_bps"] = "fast".into();
    assert!(!v.is_valid(&text_number));
}

/// The records a store written by an earlier build holds (made by
/// `tests/data/make-records.sh`): the schema the types make today takes
/// each of them as it is stored, and refuses it without a field it
/// requires or with a key no type names.
#[test]
fn every_record_an_earlier_build_stored_meets_the_schema() {
    let v = schema();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/records-v1.sqlite");
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut rows = db
        .prepare("SELECT id, record FROM runs ORDER BY id")
        .unwrap();
    let records: Vec<(i64, serde_json::Value)> = rows
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (id, text) = r.unwrap();
            (id, serde_json::from_str(&text).unwrap())
        })
        .collect();
    let workloads: std::collections::BTreeSet<&str> = records
        .iter()
        .map(|(_, r)| r["spec"]["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        workloads.len(),
        5,
        "the store holds every workload: {workloads:?}"
    );
    for (id, record) in &records {
        let errs = schema_errors(&v, record);
        assert!(
            errs.is_empty(),
            "run {id} of the store:\n{}",
            errs.join("\n")
        );
    }

    let (_, record) = &records[0];
    let mut no_key = record.clone();
    no_key.as_object_mut().unwrap().remove("spec_key");
    let mut no_bytes = record.clone();
    no_bytes["iterations"][0]["client"]
        .as_object_mut()
        .unwrap()
        .remove("bytes_sent");
    let mut stray = record.clone();
    stray["iterations"][0]["client"]["bytes_sen"] = 1.into();
    let mut null_uuid = record.clone();
    null_uuid["uuid"] = serde_json::Value::Null;
    for (what, bad) in [
        ("without spec_key", no_key),
        ("without an end's bytes_sent", no_bytes),
        ("with a key no type names", stray),
        (
            "with a null where a field is left out or present",
            null_uuid,
        ),
    ] {
        assert!(!v.is_valid(&bad), "a record {what} is refused");
    }
}
