//! Both ends of a two-host run are explained: each end captures its own
//! environment where it runs, the server sends its with its results, and a
//! difference between two runs names the end it belongs to. Two namespaces
//! joined by a veth pair that the test creates, `plumb serve` in one.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Output, Stdio};

/// plumb inside `ns`, with the test's database and no activity register.
fn plumb_in(ns: &Netns, db: &TempDb) -> Command {
    let mut c = ns.exec(env!("CARGO_BIN_EXE_plumb"));
    c.env("PLUMB_DB", db.path())
        .env("PLUMB_ACTIVITY_DIR", "off");
    c
}

/// A sysctl of a namespace as the test reads it there itself, its fields
/// joined by single spaces as the environment records them.
fn sysctl_in(ns: &Netns, key: &str) -> String {
    let out = ns.exec("sysctl").args(["-n", key]).output().unwrap();
    assert!(out.status.success(), "sysctl -n {key} in {}", ns.0);
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_sysctl_changed_on_the_server_is_named_as_the_servers_and_not_the_clients() {
    let Some(pair) = NetnsPair::new("ends", 7) else {
        return;
    };
    let db = TempDb::new("ends");
    let journal = std::env::temp_dir().join(format!("plumb-ends-{}.journal", std::process::id()));
    let (_serve, addr) = pair.serve(&journal, &[], Stdio::null());
    let run = |label: &str| -> Value {
        let out = plumb_in(&pair.client, &db)
            .args(["run", "rr", "--server", &addr, "--json", "--label", label])
            .args(["--duration", "300ms", "--warmup", "100ms"])
            .args(["--iterations", "2"])
            .output()
            .unwrap();
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };

    // tcp_rmem is a sysctl of each network namespace: the server's and the
    // client's are set apart.
    let key = "net.ipv4.tcp_rmem";
    let client_value = sysctl_in(&pair.client, key);
    let before = sysctl_in(&pair.server, key);
    let rec = run("before");
    assert_eq!(rec["peer"]["started"], "manual");
    assert!(rec["peer"].get("same_host").is_none(), "{}", rec["peer"]);
    let after = if before == "4096 87380 6291456" {
        "4096 65536 4194304"
    } else {
        "4096 87380 6291456"
    };
    pair.server.sysctl(key, after);
    assert_eq!(sysctl_in(&pair.server, key), after);
    run("after");
    assert_eq!(
        sysctl_in(&pair.client, key),
        client_value,
        "the client's is unchanged"
    );

    let out = plumb_in(&pair.client, &db)
        .args(["env", "--diff", "before", "after", "--db", db.path()])
        .output()
        .unwrap();
    assert_ok(&out);
    let text = stdout(&out);
    let line = format!("server: sysctl.{key}: {before} -> {after}");
    assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    assert!(
        !text.contains(&format!("client: sysctl.{key}")),
        "the client's tcp_rmem did not change:\n{text}"
    );

    let out = plumb_in(&pair.client, &db)
        .args(["env", "--diff", "before", "after", "--json"])
        .args(["--db", db.path()])
        .output()
        .unwrap();
    assert_ok(&out);
    let changes: Value = serde_json::from_slice(&out.stdout).unwrap();
    let named: Vec<&Value> = items(&changes)
        .filter(|c| c["key"] == format!("sysctl.{key}"))
        .collect();
    assert_eq!(named.len(), 1, "{changes}");
    assert_eq!(named[0]["end"], "server");
    assert_eq!(named[0]["a"], before.as_str());

    // compare: the same line under the environment differences, and both
    // ends' kernels in the header.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let release = release.trim();
    for format in ["terminal", "markdown", "mail"] {
        let out = plumb_in(&pair.client, &db)
            .args(["compare", "before", "after", "--db", db.path()])
            .args(["--format", format])
            .output()
            .unwrap();
        let text = stdout(&out);
        let kernels = format!("kernels (A and B): client {release}, server {release}");
        assert!(
            text.contains(&kernels),
            "{format}: no {kernels:?} in:\n{text}"
        );
        if format != "mail" {
            assert!(text.contains(&line), "{format}: no {line:?} in:\n{text}");
        }
    }
}

#[test]
fn an_embedded_server_on_the_same_host_is_said_to_share_it() {
    let rec = workload_json("rr", &["--duration", "300ms"]);
    assert_eq!(rec["peer"]["started"], "embedded");
    assert_eq!(rec["peer"]["same_host"], true);
}

/// A key file of the test's, readable by its owner only.
fn key_file(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("key");
    std::fs::write(&p, "correct horse battery staple\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// `plumb serve` in the server's namespace with `extra` flags and a journal
/// of its own (the client's host shares the file system in this test).

#[test]
fn a_server_knob_is_set_in_the_servers_namespace_for_the_session_and_always_restored() {
    let Some(pair) = NetnsPair::new("sknob", 6) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("plumb-sknob-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = key_file(&dir);
    let key = key.to_str().unwrap();
    let journal = dir.join("journal");
    let db = TempDb::new("sknob");
    let sysctl = "net.ipv4.tcp_rmem";
    let before = sysctl_in(&pair.server, sysctl);
    let client_value = sysctl_in(&pair.client, sysctl);
    let want = if before == "4096 87380 6291456" {
        "4096 65536 4194304"
    } else {
        "4096 87380 6291456"
    };
    let knob = format!("sysctl:{sysctl}={want}");
    // Each iteration is a session of its own, so the knobs go in and out
    // with each: the next session must find them back and the server free.
    let client = |addr: &str, duration: &str, extra: &[&str]| {
        let mut c = plumb_in(&pair.client, &db);
        c.args(["run", "rr", "--server", addr, "--json", "--no-store"])
            .args(["--duration", duration, "--warmup", "100ms"])
            .args(["--iterations", "2"])
            .args(["--server-knob", &knob])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    // Polls the server namespace's value, as the test reads it itself,
    // until it is `value` or 20 s went by.
    let reaches = |value: &str| {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while sysctl_in(&pair.server, sysctl) != value {
            if std::time::Instant::now() > until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        true
    };

    // Set for the session, seen set during it, put back after it.
    let (_serve, addr) = pair.serve(
        &journal,
        &["--psk-file", key, "--allow-knobs"],
        Stdio::null(),
    );
    let run = client(&addr, "3s", &["--psk-file", key]).spawn().unwrap();
    assert!(reaches(want), "the server's {sysctl} never became {want}");
    assert_eq!(
        sysctl_in(&pair.client, sysctl),
        client_value,
        "the client's moved"
    );
    let out = run.wait_with_output().unwrap();
    assert_ok(&out);
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = format!("knob sysctl:{sysctl}@");
    let lines: Vec<&str> = items(&rec["server_knobs"])
        .filter_map(Value::as_str)
        .collect();
    assert!(
        lines.len() == 1
            && lines[0].starts_with(&said)
            && lines[0].ends_with(&format!("{before} -> {want}")),
        "{lines:?}"
    );
    assert!(reaches(&before), "not restored at the end of the session");

    // A client without the key is refused before any knob is set.
    let out = client(&addr, "1s", &[]).output().unwrap();
    assert!(!out.status.success());
    assert_eq!(sysctl_in(&pair.server, sysctl), before);

    // kill -9 of the server mid-run: the next start of plumb serve there
    // puts the value back before it serves.
    let run = client(&addr, "30s", &["--psk-file", key]).spawn().unwrap();
    let _run = Started(run);
    assert!(reaches(want), "the server's {sysctl} never became {want}");
    drop(_serve);
    assert_eq!(
        sysctl_in(&pair.server, sysctl),
        want,
        "kill -9 restores nothing"
    );
    let (_again, _) = pair.serve(
        &journal,
        &["--psk-file", key, "--allow-knobs"],
        Stdio::null(),
    );
    assert_eq!(
        sysctl_in(&pair.server, sysctl),
        before,
        "restored at the next start"
    );
    drop(_run);

    // A server that does not allow knobs, or runs tests side by side,
    // refuses them in one line naming the flags, before any traffic.
    for (server_flags, says) in [
        (&["--psk-file", key][..], "--allow-knobs"),
        (
            &["--psk-file", key, "--allow-knobs", "--concurrent", "2"][..],
            "--concurrent",
        ),
    ] {
        let (_refusing, addr) = pair.serve(&journal, server_flags, Stdio::null());
        let out = client(&addr, "1s", &["--psk-file", key]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.lines()
                .any(|l| l.contains("--server-knob") && l.contains(says)),
            "{server_flags:?}: {err}"
        );
        assert_eq!(sysctl_in(&pair.server, sysctl), before);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn under_veth_a_server_knob_acts_in_the_servers_namespace_only() {
    if !require_root("build the --topology veth namespaces") || !require_tool("ip", "iproute2") {
        return;
    }
    let _alone = measuring_alone();
    let db = TempDb::new("ends-veth");
    let run = |label: &str, extra: &[&str]| -> Value {
        let out = plumb()
            .args(["run", "rr", "--topology", "veth", "--json"])
            .args(["--label", label, "--db", db.path()])
            .args(["--duration", "300ms", "--warmup", "100ms"])
            .args(["--iterations", "1"])
            .args(extra)
            .output()
            .unwrap();
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let host = || std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
    let host_before = host();
    let plain = run("plain", &[]);
    assert!(plain.get("server_knobs").is_none(), "{plain}");
    assert!(
        plain["peer"].get("same_host").is_none(),
        "{}",
        plain["peer"]
    );
    let want = "4096 77777 6291456";
    let set = run(
        "set",
        &["--server-knob", &format!("sysctl:net.ipv4.tcp_rmem={want}")],
    );
    let lines: Vec<&str> = items(&set["server_knobs"])
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("knob sysctl:net.ipv4.tcp_rmem@plumb-")
            && lines[0].contains("-server: ")
            && lines[0].ends_with(&format!("-> {want}")),
        "{lines:?}"
    );
    assert_eq!(host(), host_before, "the host's own tcp_rmem moved");

    let out = plumb()
        .args(["env", "--diff", "plain", "set", "--db", db.path()])
        .output()
        .unwrap();
    assert_ok(&out);
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("server: sysctl.net.ipv4.tcp_rmem: ")
                && l.ends_with(&format!(" -> {want}"))),
        "{text}"
    );
    assert!(!text.contains("client: sysctl.net.ipv4.tcp_rmem"), "{text}");
}

/// `ethtool -S DEV` inside `ns`, read by the test: each statistic's name
/// and value, in the driver's order.
fn ethtool_s(ns: &Netns, dev: &str) -> Vec<(String, u64)> {
    let out = ns.exec("ethtool").args(["-S", dev]).output().unwrap();
    assert!(out.status.success(), "ethtool -S {dev} in {}", ns.0);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (name, v) = l.trim().rsplit_once(':')?;
            Some((name.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn each_ends_driver_statistics_agree_with_ethtool_s_read_around_the_run() {
    if !require_tool("ethtool", "ethtool") {
        return;
    }
    let Some(pair) = NetnsPair::new("drv", 5) else {
        return;
    };
    // A veth counts its packets in its own statistics
    // (rx_queue_0_xdp_packets) only on its NAPI path: GRO on where it
    // receives, TSO off where it sends, set while it is down.
    for (ns, dev) in [
        (&pair.client, &pair.client_dev),
        (&pair.server, &pair.server_dev),
    ] {
        assert!(ok(ns.exec("ip").args(["link", "set", dev, "down"])));
        assert!(ok(ns
            .exec("ethtool")
            .args(["-K", dev, "gro", "on", "tso", "off"])));
        assert!(ok(ns.exec("ip").args(["link", "set", dev, "up"])));
    }
    let journal = std::env::temp_dir().join(format!("plumb-drv-{}.journal", std::process::id()));
    let (_serve, addr) = pair.serve(&journal, &[], Stdio::null());
    let db = TempDb::new("drv");
    let before = [
        ethtool_s(&pair.client, &pair.client_dev),
        ethtool_s(&pair.server, &pair.server_dev),
    ];
    let out = plumb_in(&pair.client, &db)
        .args(["run", "stream", "--server", &addr, "--json", "--no-store"])
        .args(["--duration", "1s", "--warmup", "200ms", "--iterations", "1"])
        .output()
        .unwrap();
    assert_ok(&out);
    let after = [
        ethtool_s(&pair.client, &pair.client_dev),
        ethtool_s(&pair.server, &pair.server_dev),
    ];
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let it = &rec["iterations"][0];
    let ends = [
        (&it["client"], &pair.client_dev),
        (&it["server"], &pair.server_dev),
    ];
    for (k, (end, dev)) in ends.into_iter().enumerate() {
        let iface = items(&end["interfaces"])
            .find(|i| i["name"] == dev.as_str())
            .unwrap_or_else(|| panic!("{dev} carried the test: {}", end["interfaces"]));
        assert_eq!(iface["virtual_device"], true, "{iface}");
        assert_eq!(
            iface["driver_counters"].as_u64(),
            Some(after[k].len() as u64),
            "the driver names what ethtool -S lists: {iface}"
        );
        let driver = iface["driver"]
            .as_object()
            .expect("driver statistics moved");
        let around = |name: &str| {
            let value = |s: &[(String, u64)]| s.iter().find(|(n, _)| n == name).unwrap().1;
            value(&after[k]) - value(&before[k])
        };
        // Packets the veth passed up in the window: some, and no more than
        // ethtool counted over the whole run, warm-up and set-up included.
        let packets = driver["rx_queue_0_xdp_packets"].as_u64().unwrap_or(0);
        assert!(packets > 0, "{dev}: {iface}");
        for (name, v) in driver {
            let v = v.as_u64().unwrap_or_else(|| panic!("{name}: {v}"));
            assert!(
                v <= around(name),
                "{dev} {name}: {v} in the window, {} around it",
                around(name)
            );
        }
    }
    // The receiving end's veth carried the payload, headers on top.
    let bytes = items(&it["server"]["interfaces"])
        .find(|i| i["name"] == pair.server_dev.as_str())
        .map(|i| i["driver"]["rx_queue_0_xdp_bytes"].as_u64().unwrap_or(0))
        .unwrap();
    let payload = it["transfer"]["received_bytes"].as_u64().unwrap();
    let queued = it["transfer"]["in_flight_start_bytes"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        bytes as f64 >= 0.99 * payload.saturating_sub(queued) as f64,
        "the server's veth took {bytes} B, the flows received {payload} B ({queued} B queued first)"
    );
}
