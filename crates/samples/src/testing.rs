//! Records for tests: the schema's example run, as every crate that reads
//! records tests against it.

use crate::{EndResult, Iteration, PartIteration, RunRecord};

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

/// A part of `it` named `name` that ran from `start_s` into the window for
/// `window_s`, with `it`'s figures and no seconds of its own on the client
/// (a load, where `it`'s client is the probe).
pub fn part(it: &Iteration, name: &str, start_s: f64, window_s: f64) -> PartIteration {
    PartIteration {
        name: name.into(),
        start_s,
        window_s,
        transfer: it.transfer.clone(),
        derived: it.derived.clone(),
        client: EndResult {
            intervals: Vec::new(),
            ..it.client.clone()
        },
        server: it.server.clone(),
    }
}
