//! Records for tests: the schema's example run, as every crate that reads
//! records tests against it.

use crate::RunRecord;

/// schemas/examples/run.v1.example.json.
pub fn example() -> RunRecord {
    serde_json::from_str(include_str!(
        "../../../schemas/examples/run.v1.example.json"
    ))
    .expect("the schema's example run reads as a record")
}

/// The example run with one complete iteration per throughput (bit/s) and
/// no transactions.
pub fn with_throughput(throughput: &[f64]) -> RunRecord {
    let mut r = example();
    let it = r.iterations[0].clone();
    r.iterations = throughput
        .iter()
        .map(|t| {
            let mut i = it.clone();
            i.complete = true;
            i.derived.throughput_bps = *t;
            i.derived.tps = None;
            i
        })
        .collect();
    r
}
