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
    // `plumb run stream` with these flags, and what its error must say.
    let cases: [(&[&str], &[&str]); 14] = [
        (&["--msg-size", "8Q"], &["--msg-size", "'8Q'", "8K"]),
        (&["--sndbuf", "big"], &["--sndbuf", "auto"]),
        (&["--rcvbuf", "-4"], &["--rcvbuf"]),
        (&["--pacing-rate", "fast"], &["--pacing-rate", "10G"]),
        (&["--duration", "forever"], &["--duration", "10s"]),
        (&["--warmup", "1x"], &["--warmup"]),
        (&["--flows", "0"], &["--flows"]),
        (&["--client-cpus", "a-b"], &["--client-cpus", "0-3,6"]),
        (
            &["--direction", "sideways"],
            &["--direction", "send", "recv", "both"],
        ),
        (
            &["--flows", "2", "--threads", "3"],
            &["--threads", "at most 2"],
        ),
        (&["--mss", "10"], &["--mss", "88"]),
        (&["--msg-size", "1G"], &["--msg-size", "64M"]),
        (&["-4", "-6"], &["--ipv4", "--ipv6"]),
        (&["--server", "no such host!"], &["--server"]),
    ];
    for (flags, needles) in cases {
        fails_with(&[&["run", "stream"], flags].concat(), needles);
    }
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
    let child = stream_in_background(&["--duration", "30s", "--warmup", "200ms"]);
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

#[test]
fn a_database_path_in_a_directory_that_does_not_exist_is_refused() {
    let missing = std::env::temp_dir().join(format!("plumb-no-such-dir-{}", std::process::id()));
    let db = missing.join("typo").join("plumb.db");
    let db = db.to_str().unwrap();
    fails_with(
        &["list", "--db", db],
        &[&format!("--db {db}: the directory"), "does not exist"],
    );
    fails_with(
        &["run", "stream", "--db", db, "--duration", "1s"],
        &["--db", "does not exist"],
    );
    // The same path from the environment names the variable.
    let out = plumb().args(["list"]).env("PLUMB_DB", db).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("$PLUMB_DB {db}")), "{err}");
    assert!(!missing.exists(), "no directory made for a mistyped path");
}

#[test]
fn a_server_that_is_not_plumb_is_named_with_what_it_said() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    // An HTTP server: whatever comes, a 400 and the connection closed.
    let http = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let out = run(&["run", "stream", "--server", &addr, "--duration", "1s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("did not answer as a plumb server: it sent \"HTTP/1.1 400 Bad Request"),
        "{err}"
    );
    assert!(!err.contains("over the limit"), "{err}");
    http.join().unwrap();
}
