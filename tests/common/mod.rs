//! Helpers for the end-to-end tests: run the real binary, read its JSON,
//! look at processes in /proc.
#![allow(dead_code)]

use serde_json::Value;
use std::process::{Command, Output};

/// The binary, with its result database in a file of this test process so
/// no test writes to the user's.
pub fn plumb() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_plumb"));
    c.env(
        "PLUMB_DB",
        std::env::temp_dir().join(format!("plumb-test-{}.db", std::process::id())),
    );
    c
}

/// Runs plumb to completion. `plumb run` gets `--iterations 1` unless the
/// test asks for a count (most tests look at one iteration's behaviour), and
/// `--no-store` unless it names a `--db`.
pub fn run(args: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    if args.first() == Some(&"run") && !args.contains(&"--iterations") && args.len() >= 2 {
        all.splice(2..2, ["--iterations", "1"]);
    }
    if args.first() == Some(&"run")
        && !args.contains(&"--db")
        && !args.contains(&"--no-store")
        && args.len() >= 2
    {
        all.splice(2..2, ["--no-store"]);
    }
    plumb().args(&all).output().expect("plumb runs")
}

/// A database file unique to this test, removed with its WAL files on drop.
pub struct TempDb(pub std::path::PathBuf);

impl TempDb {
    pub fn new(name: &str) -> TempDb {
        let p = std::env::temp_dir().join(format!("plumb-{name}-{}.db", std::process::id()));
        let db = TempDb(p);
        db.clean();
        db
    }
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
    fn clean(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.clean();
    }
}

/// `plumb run stream ARGS --json`, which must succeed; returns the record.
pub fn stream_json(args: &[&str]) -> Value {
    let mut all = vec!["run", "stream", "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(
        out.status.success(),
        "plumb {all:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

/// PIDs of the processes whose parent is `ppid`.
pub fn children(ppid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(ppid) && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// (thread name, Cpus_allowed_list) of every thread of `pid`.
pub fn thread_affinity(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in dir.flatten() {
        let p = t.path();
        let name = std::fs::read_to_string(p.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("")
            .trim()
            .to_string();
        out.push((name, allowed));
    }
    out
}

pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
