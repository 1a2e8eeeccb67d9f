//! `plumb doctor` against the real host: the values it reports are the
//! kernel's, a busy process started here is found and named, and settings
//! changed inside a namespace the test creates change the verdicts.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};

fn doctor_json(cmd: &mut Command) -> Value {
    let out = cmd.output().expect("plumb doctor runs");
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn finding<'a>(audit: &'a Value, check: &str) -> &'a Value {
    items(&audit["findings"])
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding in {audit}"))
}

#[test]
fn reports_the_kernels_values_and_what_each_run_records() {
    let a = doctor_json(plumb().args(["doctor", "--json", "--sample", "200ms"]));
    assert_eq!(a["schema"], "plumb.doctor/1");
    assert_eq!(a["interfaces"][0], "lo");
    for (check, file) in [
        ("rmem_max", "/proc/sys/net/core/rmem_max"),
        ("wmem_max", "/proc/sys/net/core/wmem_max"),
        ("optmem_max", "/proc/sys/net/core/optmem_max"),
    ] {
        let want: u64 = std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let f = finding(&a, check);
        let value = f["value"].as_str().unwrap();
        assert!(value.starts_with(&format!("{want} (")), "{check}: {f}");
        let floor = if check == "optmem_max" {
            1 << 20
        } else {
            16 << 20
        };
        let status = if want < floor { "warn" } else { "ok" };
        assert_eq!(f["status"], status, "{f}");
        assert_eq!(f["advice"].is_string(), status == "warn", "{f}");
        let key = format!("sysctl.net.core.{check}");
        assert_eq!(f["recorded_as"][0], key.as_str());
        // What doctor names as recorded is what a run records.
        let env = run(&["env"]);
        let env = String::from_utf8_lossy(&env.stdout);
        assert!(
            env.contains(&format!("{key} = {want}")),
            "{key} in plumb env"
        );
    }
    let mtu = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap();
    assert_eq!(finding(&a, "lo mtu")["value"], mtu.trim());
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let hard = line.split_whitespace().nth(4).unwrap();
    let files = finding(&a, "open files");
    assert!(
        files["value"]
            .as_str()
            .unwrap()
            .ends_with(&format!("hard {hard}")),
        "{files} vs {line}"
    );
    for f in a["findings"].as_array().unwrap() {
        assert!(["ok", "warn", "info"].contains(&f["status"].as_str().unwrap()));
        assert!(f["why"].as_str().unwrap().len() > 20, "{f}");
    }
}

#[test]
fn a_busy_process_is_named_and_makes_the_host_too_noisy() {
    let spinner = Spinner::start(None);
    let pid = spinner.0.id();
    let a = doctor_json(plumb().args(["doctor", "--json", "--sample", "1s"]));
    let busy = a["busy_processes"].as_array().unwrap();
    let me = busy
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not among {busy:?}"));
    assert_eq!(me["name"], "sh");
    // It spins on one CPU; on a loaded 2-CPU host it still gets a good share.
    assert!(f(&me["cpu_percent"]) > 20.0, "{me}");
    assert!(f(&me["cpu_percent"]) <= 101.0, "{me}");
    let noisy = a["too_noisy"]
        .as_str()
        .expect("the host is called too noisy");
    assert!(
        noisy.starts_with("too noisy to trust a comparison"),
        "{noisy}"
    );
    assert_eq!(finding(&a, "other processes")["status"], "warn");
    let text = run(&["doctor", "--sample", "500ms"]);
    let text = String::from_utf8_lossy(&text.stdout);
    // Values wrap at 80 columns: read the text as one line.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&format!("sh (pid {pid})")), "{text}");
    assert!(flat.contains("too noisy to trust a comparison"), "{text}");
    assert_fits_80(&text);
    drop(spinner);
}

#[test]
fn settings_changed_in_a_namespace_change_the_verdicts() {
    let Some(ns) = Netns::new("doctor") else {
        return;
    };
    // optmem_max and the loopback's RPS mask belong to the namespace, so the
    // host's own settings are never touched.
    ns.sysctl("net.core.optmem_max", "2097152");
    let a = doctor_json(
        ns.exec(env!("CARGO_BIN_EXE_plumb"))
            .args(["doctor", "--json", "--sample", "100ms"]),
    );
    assert_eq!(finding(&a, "optmem_max")["status"], "ok");
    assert_eq!(finding(&a, "optmem_max")["value"], "2097152 (2 MiB)");
    assert_eq!(finding(&a, "lo rps")["value"], "off");

    ns.sysctl("net.core.optmem_max", "20480");
    assert!(ok(ns.exec("sh").args([
        "-c",
        "echo 1 > /sys/class/net/lo/queues/rx-0/rps_cpus"
    ])));
    let a = doctor_json(
        ns.exec(env!("CARGO_BIN_EXE_plumb"))
            .args(["doctor", "--json", "--sample", "100ms"]),
    );
    let opt = finding(&a, "optmem_max");
    assert_eq!(opt["status"], "warn", "{opt}");
    assert_eq!(opt["value"], "20480 (20 KiB)");
    assert!(opt["advice"]
        .as_str()
        .unwrap()
        .contains("net.core.optmem_max=1048576"));
    assert_eq!(finding(&a, "lo rps")["value"], "rx-0 1");
}

#[test]
fn bad_doctor_flags_are_named() {
    for (args, needle) in [
        (
            vec!["doctor", "--interface", "nope0"],
            "--interface: no interface 'nope0'",
        ),
        (
            vec!["doctor", "--interface", "a/b"],
            "--interface: 'a/b' is not an interface name",
        ),
        (vec!["doctor", "--sample", "0s"], "--sample"),
        (vec!["doctor", "--sample", "fast"], "--sample"),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        // The first line says it all (clap adds a hint to try --help).
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(needle), "{args:?}: {err}");
    }
}

/// A process that burned CPU before the sample and renames itself during it
/// (as kernel workers do) used nothing during the sample: it must not be
/// charged its whole lifetime, and the host verdict must agree with the
/// CPU figure beside it.
#[test]
fn a_process_renamed_during_the_sample_is_not_charged_its_lifetime() {
    let script = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; echo ready; \
                  sleep 0.7; echo plumb-renamed > /proc/$$/comm; sleep 30";
    let mut child = Command::new("sh")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let spinner = Spinner(child);
    let pid = spinner.0.id();
    let lifetime_ticks: u64 = {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .collect();
        rest[11].parse::<u64>().unwrap() + rest[12].parse::<u64>().unwrap()
    };
    assert!(lifetime_ticks >= 20, "the loop used {lifetime_ticks} ticks");
    let a = doctor_json(plumb().args(["doctor", "--json", "--sample", "1500ms"]));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "plumb-renamed", "renamed during the sample");
    let busy = a["busy_processes"].as_array().unwrap();
    assert!(
        !busy.iter().any(|p| p["pid"] == pid),
        "pid {pid} (idle while sampled) counted as busy: {busy:?}"
    );
    // What the processes used fits in what the CPUs were busy for (a tick
    // of slack per process for sampling at tick granularity).
    let cpus = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes()[3].is_ascii_digit())
        .count() as f64;
    let others: f64 = busy.iter().map(|p| f(&p["cpu_percent"])).sum();
    let host = f(&a["busy_percent"]) * cpus;
    assert!(
        others <= host + 10.0 * busy.len() as f64,
        "processes {others:.0} % of a CPU, host busy {host:.0} % of a CPU: {busy:?}"
    );
    drop(spinner);
}
