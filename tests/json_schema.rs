//! `plumb run --json` output against the versioned JSON Schema in the repo.

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
