//! The run summary's figures read one way: a receive buffer shows what
//! autotuning made of it over the run, the per-CPU table names the threads
//! pinned to each CPU or leaves the column out, and "in flight" is TCP's
//! data in flight alone, not what the sockets held at the window's edges.

mod common;
use common::*;
use serde_json::Value;

/// One stored iteration of a 2 s stream with `args`; its summary as `plumb
/// show` prints it, and its record.
fn shown(db: &TempDb, args: &[&str]) -> (String, Value) {
    let mut all = vec!["stream", "--duration", "2s", "--warmup", "500ms"];
    all.extend(args);
    store_one_iteration(db, &all);
    let out = run(&["show", "1", "--db", db.path()]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let out = run(&["show", "1", "--json", "--db", db.path()]);
    assert_ok(&out);
    (text, serde_json::from_slice(&out.stdout).unwrap())
}

/// The option `name` as `end` read it back.
fn option<'a>(rec: &'a Value, end: &str, name: &str) -> &'a Value {
    items(&rec["iterations"][0][end]["socket_options"])
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("{end} has no {name}"))
}

#[test]
fn an_autotuned_receive_buffer_shows_what_it_grew_to_and_the_words_keep_one_meaning() {
    let _alone = measuring_alone();
    let db = TempDb::new("summary-counts");
    let (text, rec) = shown(&db, &[]);

    // The server receives into a buffer left to the kernel, which grows
    // it over two seconds of loopback traffic.
    let rcvbuf = option(&rec, "server", "rcvbuf");
    assert_eq!(rcvbuf["status"], "default", "{rcvbuf}");
    let granted: u64 = rcvbuf["granted"].as_str().unwrap().parse().unwrap();
    let tuned: u64 = rcvbuf["at_close"]
        .as_str()
        .unwrap_or_else(|| panic!("no read-back at the close: {rcvbuf}"))
        .parse()
        .unwrap();
    assert!(tuned > granted, "{rcvbuf}");
    let row = text
        .lines()
        .find(|l| l.starts_with("rcvbuf ") && l.contains("auto"))
        .unwrap_or_else(|| panic!("no rcvbuf option row in:\n{text}"));
    assert!(
        row.ends_with(&format!("{granted} -> {tuned}")),
        "the server's column shows both:\n{text}"
    );
    assert!(text.contains("(A -> B: read back as the flows"), "{text}");

    // What the sockets held at the edges is not TCP's data in flight.
    assert!(
        text.contains("queued in sockets at the window edges: "),
        "{text}"
    );
    assert!(!text.contains("in flight at the window edges"), "{text}");

    // Neither end pinned: no pinned column.
    let cpu = text
        .lines()
        .find(|l| l.starts_with("cpu ") && l.contains("softirq%"))
        .unwrap_or_else(|| panic!("no per-CPU table in:\n{text}"));
    assert!(!cpu.contains("pinned"), "{text}");
}

#[test]
fn the_pinned_column_names_the_end_pinned_to_each_cpu() {
    if online_cpus() < 2 {
        assert!(std::env::var_os("CI").is_none(), "CI has 2 CPUs");
        eprintln!("skipped: the_pinned_column_names_the_end_pinned_to_each_cpu: one CPU");
        return;
    }
    let _alone = measuring_alone();
    let db = TempDb::new("summary-pinned");
    let (text, _) = shown(&db, &["--client-cpus", "0", "--server-cpus", "1"]);
    let mut lines = text
        .lines()
        .skip_while(|l| !(l.starts_with("cpu ") && l.contains("softirq%")));
    let head = lines
        .next()
        .unwrap_or_else(|| panic!("no per-CPU table in:\n{text}"));
    let at = head
        .find("pinned")
        .unwrap_or_else(|| panic!("no pinned column:\n{text}"));
    let rows: Vec<&str> = lines.take(2).collect();
    assert!(rows[0].starts_with("0 "), "{text}");
    assert!(rows[0][at..].starts_with("client "), "{text}");
    assert!(rows[1].starts_with("1 "), "{text}");
    assert!(rows[1][at..].starts_with("server "), "{text}");
}
