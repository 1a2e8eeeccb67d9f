//! Knobs end to end: real sysctls, RPS masks, MTU, offloads, GSO/GRO sizes
//! and qdiscs, set for a run and put back after it, after Ctrl-C, after a
//! refused knob, and at the next start after the process was killed.

mod common;
use common::{
    measuring_alone, ok, plumb, require_root, require_tool, test_journal, Netns, TestJournal,
    ONE_SHORT,
};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn with_journal(j: &TestJournal) -> Command {
    let mut c = plumb();
    c.env("PLUMB_JOURNAL", &**j);
    c
}

/// A namespace with a veth pair inside it (both ends), so every knob of an
/// interface can be tried without touching the host's.
fn veth_ns(tag: &str) -> Option<Netns> {
    let ns = Netns::new(tag)?;
    assert!(ok(Command::new("ip").args([
        "-n", &ns.0, "link", "add", "plumb-ka", "type", "veth", "peer", "name", "plumb-kb"
    ])));
    Some(ns)
}

fn read_in(ns: &Netns, path: &str) -> String {
    let out = ns.exec("cat").arg(path).output().unwrap();
    assert!(out.status.success(), "cat {path} in {}", ns.0);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn link_value(ns: &Netns, iface: &str, key: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", &ns.0, "-d", "link", "show", "dev", iface])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == key)
        .map(|w| w[1].to_string())
        .unwrap_or_default()
}

fn offload(ns: &Netns, iface: &str, long: &str) -> String {
    let out = ns.exec("ethtool").args(["-k", iface]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{long}: ")))
        .map(|v| v.split_whitespace().next().unwrap().to_string())
        .unwrap_or_default()
}

fn root_qdisc(ns: &Netns, iface: &str) -> String {
    let out = Command::new("tc")
        .args(["-n", &ns.0, "qdisc", "show", "dev", iface, "root"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string()
}

/// Everything the knobs of these tests touch, as one comparable value.
fn snapshot(ns: &Netns) -> Vec<String> {
    vec![
        read_in(ns, "/proc/sys/net/ipv4/tcp_wmem"),
        read_in(ns, "/sys/class/net/plumb-ka/queues/rx-0/rps_cpus"),
        link_value(ns, "plumb-ka", "mtu"),
        link_value(ns, "plumb-ka", "gso_max_size"),
        offload(ns, "plumb-ka", "tcp-segmentation-offload"),
        root_qdisc(ns, "plumb-ka"),
    ]
}

fn knob_args(ns: &Netns) -> Vec<String> {
    let n = &ns.0;
    vec![
        format!("sysctl:net.ipv4.tcp_wmem@{n}=4096 32768 4194304"),
        format!("rps:plumb-ka@{n}=1"),
        format!("mtu:plumb-ka@{n}=1400"),
        format!("gso_max_size:plumb-ka@{n}=32768"),
        format!("offload:plumb-ka:tso@{n}=off"),
        format!("qdisc:plumb-ka@{n}=pfifo_fast"),
    ]
}

fn changed(ns: &Netns) -> Vec<String> {
    vec![
        "4096\t32768\t4194304".to_string(),
        "1".to_string(),
        "1400".to_string(),
        "32768".to_string(),
        "off".to_string(),
        "pfifo_fast".to_string(),
    ]
    .into_iter()
    .zip(snapshot(ns))
    .map(|(want, got)| {
        if got.trim_start_matches('0') == want.trim_start_matches('0') {
            "changed".into()
        } else {
            format!("{want} != {got}")
        }
    })
    .collect()
}

fn run_args(ns: &Netns, duration: &str) -> Vec<String> {
    let mut a: Vec<String> = [
        "run",
        "stream",
        "--duration",
        duration,
        "--warmup",
        "0",
        "--iterations",
        "1",
        "--no-store",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for k in knob_args(ns) {
        a.push("--knob".into());
        a.push(k);
    }
    a
}

/// Waits until every knob reads its new value (the run has set them).
fn wait_changed(ns: &Netns, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if changed(ns).iter().all(|c| c == "changed") {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("plumb exited ({st}) before its knobs were seen set");
        }
        assert!(
            Instant::now() < deadline,
            "knobs not set in time: {:?}",
            changed(ns)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A run with the veth pair's knobs, started and seen to have set them:
/// the namespace, the journal, the knobs' values before, and the run.
struct KnobRun {
    ns: Netns,
    j: TestJournal,
    before: Vec<String>,
    child: Child,
}

/// Starts a run of `duration` that sets the knobs, with its stderr to
/// `stderr`; None when a precondition is missing (said by the check).
fn knobs_set(tag: &str, duration: &str, stderr: Stdio) -> Option<KnobRun> {
    let ns = veth_ns(tag)?;
    if !require_tool("ethtool", "ethtool") {
        return None;
    }
    let j = test_journal(tag);
    let before = snapshot(&ns);
    let mut child = with_journal(&j)
        .args(run_args(&ns, duration))
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    wait_changed(&ns, &mut child);
    Some(KnobRun {
        ns,
        j,
        before,
        child,
    })
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn knobs_are_set_for_a_run_and_restored_after_it() {
    let Some(KnobRun {
        ns,
        j,
        before,
        child,
    }) = knobs_set("knob-run", "2s", Stdio::piped())
    else {
        return;
    };
    assert!(j.text().contains("rps:plumb-ka@"), "journal: {}", j.text());
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("knob mtu:plumb-ka@"), "{err}");
    assert!(err.contains("-> 1400"), "{err}");
    assert_eq!(snapshot(&ns), before, "restored after the run");
    assert_eq!(j.text().trim(), "", "journal emptied");
}

#[test]
fn rps_on_host_loopback_is_restored() {
    if !require_root("set RPS on lo") {
        return;
    }
    let _alone = measuring_alone();
    let path = "/sys/class/net/lo/queues/rx-0/rps_cpus";
    let before = std::fs::read_to_string(path).unwrap();
    let j = test_journal("lo");
    let mask = if before.trim().trim_start_matches('0').is_empty() {
        "1"
    } else {
        "0"
    };
    let out = with_journal(&j)
        .args(["run", "rr", "--knob", &format!("rps:lo={mask}")])
        .args(ONE_SHORT)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("knob rps:lo: rx-0={} -> {mask}", before.trim())),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(path).unwrap(), before);
}

#[test]
fn ctrl_c_restores_the_knobs() {
    let Some(KnobRun {
        ns,
        j,
        before,
        child,
    }) = knobs_set("knob-int", "60s", Stdio::piped())
    else {
        return;
    };
    assert!(ok(
        Command::new("kill").args(["-INT", &child.id().to_string()])
    ));
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(snapshot(&ns), before, "restored after Ctrl-C");
    assert_eq!(j.text().trim(), "");
}

#[test]
fn a_killed_run_is_restored_at_the_next_start() {
    let Some(KnobRun {
        ns,
        j,
        before,
        mut child,
    }) = knobs_set("knob-kill", "60s", Stdio::null())
    else {
        return;
    };
    child.kill().unwrap(); // SIGKILL: nothing of plumb runs after it
    child.wait().unwrap();
    assert!(changed(&ns).iter().all(|c| c == "changed"), "still set");
    assert_eq!(j.text().lines().count(), 6, "{}", j.text());

    // Any later start of plumb puts them back (here one that only reads
    // this host's environment).
    let out = with_journal(&j).arg("env").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("plumb: restored ").count(), 6, "{err}");
    assert_eq!(snapshot(&ns), before, "restored at the next start");
    assert_eq!(j.text().trim(), "");

    // `plumb restore` then finds nothing left.
    let out = with_journal(&j).arg("restore").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

#[test]
fn an_unsupported_knob_is_refused_before_anything_changes() {
    let Some(ns) = veth_ns("knob-refuse") else {
        return;
    };
    if !require_tool("ethtool", "ethtool") {
        return;
    }
    let j = test_journal("refuse");
    let before = snapshot(&ns);
    let n = &ns.0;
    for (bad, says) in [
        // lo's large-receive-offload is fixed off.
        (format!("offload:lo:lro@{n}=on"), "lro is fixed off"),
        (
            format!("sysctl:net.ipv4.no_such_thing@{n}=1"),
            "not supported",
        ),
        (format!("mtu:plumb-nope@{n}=1400"), "not supported"),
        (format!("qdisc:lo@{n}=netem delay 10ms"), "netem"),
        (format!("rps:plumb-ka@{n}=xyz"), "not a CPU mask"),
    ] {
        let out = with_journal(&j)
            .args(["run", "stream", "--duration", "1s", "--no-store"])
            .args(["--knob", &format!("rps:plumb-ka@{n}=1"), "--knob", &bad])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(snapshot(&ns), before, "{bad} changed something");
        assert_eq!(j.text().trim(), "");
    }
    // A malformed knob is a usage error from the argument parser.
    let out = plumb()
        .args(["run", "stream", "--knob", "fan:lo=1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("'fan:lo' is not a knob"));
}

#[test]
fn plumb_restore_puts_back_what_a_killed_run_left() {
    let Some(ns) = veth_ns("knob-restore") else {
        return;
    };
    let j = test_journal("restore");
    let rps = "/sys/class/net/plumb-ka/queues/rx-0/rps_cpus";
    let before = read_in(&ns, rps);
    let mut child = with_journal(&j)
        .args(["run", "stream", "--duration", "60s", "--no-store"])
        .args(["--knob", &format!("rps:plumb-ka@{}=1", ns.0)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while read_in(&ns, rps).trim_start_matches('0') != "1" {
        assert!(Instant::now() < deadline, "rps never set");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = with_journal(&j).arg("restore").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        said.contains(&format!("restored rps:plumb-ka@{}", ns.0)),
        "{said}"
    );
    assert_eq!(read_in(&ns, rps), before);
    assert_eq!(j.text().trim(), "");
}
