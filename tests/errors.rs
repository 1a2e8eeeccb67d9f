//! Bad input and failures: a one-line error that names the flag or the cause,
//! and exit status 2.

mod common;
use common::*;

fn fails_with(args: &[&str], needles: &[&str]) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?} should exit 2; stderr: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: stderr lacks {n:?}: {err}");
    }
    let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    assert!(
        first.contains("error"),
        "first line is not the error: {err}"
    );
}

#[test]
fn invalid_values_name_the_flag_and_the_accepted_forms() {
    fails_with(
        &["run", "stream", "--msg-size", "8Q"],
        &["--msg-size", "'8Q'", "8K"],
    );
    fails_with(&["run", "stream", "--sndbuf", "big"], &["--sndbuf", "auto"]);
    fails_with(&["run", "stream", "--rcvbuf", "-4"], &["--rcvbuf"]);
    fails_with(
        &["run", "stream", "--pacing-rate", "fast"],
        &["--pacing-rate", "10G"],
    );
    fails_with(
        &["run", "stream", "--duration", "forever"],
        &["--duration", "10s"],
    );
    fails_with(&["run", "stream", "--warmup", "1x"], &["--warmup"]);
    fails_with(&["run", "stream", "--flows", "0"], &["--flows"]);
    fails_with(
        &["run", "stream", "--client-cpus", "a-b"],
        &["--client-cpus", "0-3,6"],
    );
    fails_with(
        &["run", "stream", "--direction", "sideways"],
        &["--direction", "send", "recv", "both"],
    );
    fails_with(
        &["run", "stream", "--flows", "2", "--threads", "3"],
        &["--threads", "at most 2"],
    );
    fails_with(&["run", "stream", "--mss", "10"], &["--mss", "88"]);
    fails_with(
        &["run", "stream", "--msg-size", "1G"],
        &["--msg-size", "64M"],
    );
    fails_with(&["run", "stream", "-4", "-6"], &["--ipv4", "--ipv6"]);
    fails_with(
        &["run", "stream", "--server", "no such host!"],
        &["--server"],
    );
}

#[test]
fn pinning_to_a_cpu_that_does_not_exist() {
    fails_with(
        &["run", "stream", "--client-cpus", "4000", "--duration", "1s"],
        &["--client-cpus", "CPU 4000 does not exist", "online"],
    );
    fails_with(
        &["run", "stream", "--server-cpus", "4000", "--duration", "1s"],
        &["--server-cpus", "CPU 4000 does not exist on the server"],
    );
}

#[test]
fn a_congestion_control_the_kernel_lacks() {
    fails_with(
        &["run", "stream", "--cc", "nosuchcc", "--duration", "1s"],
        &["--cc", "nosuchcc", "available"],
    );
}

#[test]
fn connection_refused() {
    // A port just freed by this test has nobody listening on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    fails_with(
        &[
            "run",
            "stream",
            "--server",
            &format!("127.0.0.1:{port}"),
            "--duration",
            "1s",
        ],
        &["connection refused", "plumb serve"],
    );
}

#[test]
fn port_in_use() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    fails_with(
        &["serve", "--listen", &addr],
        &["cannot listen on", &addr, "address already in use"],
    );
}

#[test]
fn ctrl_c_stops_cleanly_prints_partial_results_and_leaves_no_child() {
    use std::time::{Duration, Instant};
    let child = plumb()
        .args([
            "run",
            "stream",
            "--no-store",
            "--iterations",
            "1",
            "--duration",
            "30s",
            "--warmup",
            "200ms",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(2000));
    let servers = children(pid);
    assert_eq!(servers.len(), 1, "embedded server running: {servers:?}");
    let t = Instant::now();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let took = t.elapsed();
    assert!(took < Duration::from_millis(1500), "took {took:?} to stop");
    assert_eq!(out.status.code(), Some(130));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("INCOMPLETE"), "{text}");
    assert!(text.contains("throughput"), "{text}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !alive(servers[0]),
        "embedded server {} left behind",
        servers[0]
    );
}
