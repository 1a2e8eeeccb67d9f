//! `plumb serve` as a long-lived server against hostile, broken, vanishing
//! and unauthorised clients, and a client whose server is killed: each over
//! real loopback sockets against the real binary.

mod common;

use common::{alive, plumb, run};
use plumb_ctl::{CtlError, Session};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `plumb serve` on a free loopback port, killed (by PID) on drop. Its
/// stderr log is collected.
struct Server {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = plumb()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("plumb serve starts");
        let addr: SocketAddr = common::listening_addr(&mut child).parse().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(l + "\n"));
            }
        });
        Server { child, addr, log }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log has a line with all of `words`.
    fn logged(&self, words: &[&str]) -> bool {
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if self
                .log()
                .lines()
                .any(|l| words.iter().all(|w| l.contains(w)))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count()
    }

    fn rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    /// A one-iteration stream run against this server that goes on in the
    /// background for `duration`, with `extra` flags.
    fn stream_in_background(&self, duration: &str, extra: &[&str]) -> std::process::Child {
        let addr = self.addr.to_string();
        let args = [
            "--server",
            &addr,
            "--duration",
            duration,
            "--warmup",
            "200ms",
        ];
        common::stream_in_background(&[&args[..], extra].concat())
    }

    /// `plumb run stream` against this server.
    fn run(&self, extra: &[&str]) -> Output {
        let addr = self.addr.to_string();
        let mut args = vec![
            "run",
            "stream",
            "--server",
            &addr,
            "--duration",
            "1s",
            "--warmup",
            "200ms",
        ];
        args.extend_from_slice(extra);
        run(&args)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn assert_runs(o: &Output) {
    assert!(o.status.success(), "run failed: {}", text(o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("throughput"),
        "{}",
        text(o)
    );
}

fn frame(json: &str) -> Vec<u8> {
    let mut b = (json.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(json.as_bytes());
    b
}

fn hello() -> Vec<u8> {
    frame(r#"{"version":2,"type":"hello","software":"test"}"#)
}

fn setup_frame(spec: &plumb_spec::Spec) -> Vec<u8> {
    let mut v = serde_json::json!({"version": 2, "type": "setup"});
    v["spec"] = serde_json::to_value(spec).unwrap();
    frame(&v.to_string())
}

fn small_spec() -> plumb_spec::Spec {
    let mut s = plumb_spec::Spec::stream();
    s.duration_ms = 1000;
    s.warmup_ms = 100;
    s
}

/// Frames in `bytes`, as far as they are complete.
fn frames(mut bytes: &[u8]) -> Vec<Value> {
    let mut out = Vec::new();
    while bytes.len() >= 4 {
        let n = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        if bytes.len() < 4 + n {
            break;
        }
        out.push(serde_json::from_slice(&bytes[4..4 + n]).unwrap());
        bytes = &bytes[4 + n..];
    }
    out
}

/// Reads until the server closes; None if it kept the connection open
/// past `timeout`. A reset counts as closed.
fn until_closed(s: &mut TcpStream, timeout: Duration) -> Option<Vec<u8>> {
    let until = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return None,
            Err(_) => return Some(got),
        }
    }
}

/// Sends `bytes`, closes the sending side and returns what the server
/// said before it closed the connection (which it must, within 5 s).
fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    until_closed(&mut s, Duration::from_secs(5)).unwrap_or_else(|| {
        panic!(
            "server kept the connection open after {:?}",
            &bytes[..bytes.len().min(40)]
        )
    })
}

fn error_of(bytes: &[u8]) -> Option<(String, String)> {
    frames(bytes)
        .into_iter()
        .find(|f| f["type"] == "error")
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
}

/// A session that gets its data port and cookie, connects data
/// connections with wrong cookies (each must be closed), then vanishes.
fn bad_cookies(addr: SocketAddr, rng: &mut u64) {
    for _ in 0..100 {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&hello()).unwrap();
        c.write_all(&setup_frame(&small_spec())).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let ready = loop {
            let fs = frames(&got);
            if let Some(f) = fs
                .iter()
                .find(|f| f["type"] == "ready" || f["type"] == "error")
            {
                break f.clone();
            }
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).expect("the server answers the setup");
            assert!(n > 0, "closed before ready");
            got.extend_from_slice(&buf[..n]);
        };
        if ready["type"] == "error" {
            // The previous session of this kind may still hold the slot
            // for the moment it takes to notice its client left.
            assert_eq!(ready["code"], "busy", "{ready}");
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let data = SocketAddr::new(addr.ip(), ready["data_port"].as_u64().unwrap() as u16);
        for _ in 0..2 {
            let mut d = TcpStream::connect(data).unwrap();
            let mut wrong = [0u8; 20];
            for b in wrong.iter_mut() {
                *b = next(rng) as u8;
            }
            d.write_all(&wrong).unwrap();
            assert!(
                until_closed(&mut d, Duration::from_secs(5)).is_some(),
                "a data connection with a wrong cookie stayed open"
            );
        }
        return;
    }
    panic!("the server stayed busy");
}

fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn a_thousand_malformed_sessions_leave_the_server_serving_with_no_leak() {
    let server = Server::start(&[]);
    let addr = server.addr;
    // The first run brings in what a run needs once (thread stacks, the
    // allocator's arenas); the baseline is after it.
    assert_runs(&server.run(&[]));
    std::thread::sleep(Duration::from_millis(300));
    let (fds0, rss0) = (server.fds(), server.rss_kib());

    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let started = Instant::now();
    for i in 0..1000u32 {
        match i % 10 {
            0 => {
                let n = (next(&mut rng) % 300) as usize + 1;
                let bytes: Vec<u8> = (0..n).map(|_| next(&mut rng) as u8).collect();
                exchange(addr, &bytes);
            }
            1 => {
                let mut b = vec![0xff, 0xff, 0xff, 0xff];
                b.extend_from_slice(b"{\"version\":1");
                let got = exchange(addr, &b);
                if let Some((code, msg)) = error_of(&got) {
                    assert_eq!(code, "frame");
                    assert!(msg.contains("over the limit"), "{msg}");
                }
            }
            2 => {
                let mut b = ((1u32 << 20) + 1).to_be_bytes().to_vec();
                b.extend(std::iter::repeat_n(b' ', 1000));
                exchange(addr, &b);
            }
            3 => {
                let mut b = 100u32.to_be_bytes().to_vec();
                b.extend_from_slice(b"{\"version\":1,\"ty");
                assert!(error_of(&exchange(addr, &b)).is_none());
            }
            4 => {
                let got = exchange(addr, &frame("{\"version\":1, nope"));
                assert_eq!(error_of(&got).expect("an error frame").0, "frame");
            }
            5 => {
                let got = exchange(addr, &frame(r#"{"version":2,"type":"launch_missiles"}"#));
                assert_eq!(error_of(&got).expect("an error frame").0, "frame");
            }
            6 => {
                let got = exchange(
                    addr,
                    &frame(r#"{"version":99,"type":"hello","software":"x"}"#),
                );
                let (code, msg) = error_of(&got).expect("an error frame");
                assert_eq!(code, "version");
                assert!(msg.contains("99"), "{msg}");
            }
            7 => {
                let got = exchange(addr, &frame(r#"{"version":2,"type":"start"}"#));
                let (code, msg) = error_of(&got).expect("an error frame");
                assert_eq!(code, "order");
                assert!(msg.contains("expected hello, got start"), "{msg}");
            }
            8 => {
                let mut b = hello();
                b.extend(frame(r#"{"version":2,"type":"stop"}"#));
                let got = exchange(addr, &b);
                assert_eq!(frames(&got)[0]["type"], "welcome");
                assert_eq!(error_of(&got).expect("an error frame").0, "order");
            }
            _ => bad_cookies(addr, &mut rng),
        }
    }
    let took = started.elapsed();
    eprintln!("1000 malformed sessions in {took:?}");

    assert_runs(&server.run(&[]));
    assert!(alive(server.pid()));
    let until = Instant::now() + Duration::from_secs(3);
    let mut fds = server.fds();
    while fds > fds0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        fds = server.fds();
    }
    assert!(fds <= fds0, "open descriptors: {fds} now, {fds0} before");
    let rss = server.rss_kib();
    eprintln!("fds {fds0} -> {fds}, RSS {rss0} KiB -> {rss} KiB");
    assert!(
        rss <= rss0 + 16 * 1024,
        "RSS grew from {rss0} KiB to {rss} KiB"
    );
}

#[test]
fn a_client_trickling_one_byte_a_second_is_cut_off() {
    let server = Server::start(&[]);
    let mut s = TcpStream::connect(server.addr).unwrap();
    let t0 = Instant::now();
    let bytes = hello();
    let mut cut = None;
    for b in bytes.iter().cycle() {
        if s.write_all(&[*b]).is_err() {
            cut = Some(t0.elapsed());
            break;
        }
        let mut probe = [0u8; 256];
        // The read's timeout is the trickle's second.
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        match s.read(&mut probe) {
            Ok(0) => {
                cut = Some(t0.elapsed());
                break;
            }
            Ok(n) => {
                let (code, msg) = error_of(&probe[..n]).expect("an error frame");
                assert_eq!(code, "timeout");
                assert!(msg.contains("within 10 s"), "{msg}");
                cut = Some(t0.elapsed());
                break;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                cut = Some(t0.elapsed());
                break;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "never cut off");
    }
    let cut = cut.unwrap();
    eprintln!("cut off after {cut:?}");
    assert!(
        cut >= Duration::from_secs(9) && cut < Duration::from_secs(15),
        "{cut:?}"
    );
    assert!(
        server.logged(&["session from 127.0.0.1", "within 10 s"]),
        "{}",
        server.log()
    );
}

fn key_file(name: &str, key: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("plumb-{name}-{}.key", std::process::id()));
    std::fs::write(&p, key).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[test]
fn the_right_key_is_served_and_a_wrong_or_missing_one_is_refused_and_logged() {
    let right = key_file("right", "correct horse battery staple\n");
    let wrong = key_file("wrong", "incorrect horse battery staple\n");
    let server = Server::start(&["--psk-file", right.to_str().unwrap()]);

    assert_runs(&server.run(&["--psk-file", right.to_str().unwrap()]));

    let o = server.run(&["--psk-file", wrong.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("authentication failed"), "{}", text(&o));
    assert!(
        server.logged(&[
            "session from 127.0.0.1:",
            "authentication failed: wrong key"
        ]),
        "{}",
        server.log()
    );

    let o = server.run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("authentication failed"), "{}", text(&o));
    assert!(
        server.logged(&["authentication failed: no key"]),
        "{}",
        server.log()
    );

    // By hand: a made-up proof gets the message and a closed connection,
    // and nothing the server says carries the key.
    let mut b = frame(&format!(
        r#"{{"version":2,"type":"hello","software":"x","nonce":"{}"}}"#,
        "ab".repeat(16)
    ));
    b.extend(frame(&format!(
        r#"{{"version":2,"type":"auth","proof":"{}"}}"#,
        "00".repeat(32)
    )));
    let got = exchange(server.addr, &b);
    let (code, msg) = error_of(&got).expect("an error frame");
    assert_eq!(
        (code.as_str(), msg.as_str()),
        ("auth", "authentication failed")
    );
    assert!(!String::from_utf8_lossy(&got).contains("horse"));
    let welcome = &frames(&got)[0];
    assert_eq!(welcome["auth"], true);

    // A setup without auth is not served either: no data port is handed out.
    let mut b = hello();
    b.extend(setup_frame(&small_spec()));
    let got = exchange(server.addr, &b);
    assert!(frames(&got).iter().all(|f| f["type"] != "ready"));
    assert_eq!(error_of(&got).unwrap().1, "authentication failed");

    // The library client checks the server's proof too.
    let key = std::fs::read(&right).unwrap();
    let key = String::from_utf8(key).unwrap();
    assert!(Session::connect_with_key(
        server.addr,
        Duration::from_secs(5),
        Some(key.trim().as_bytes())
    )
    .is_ok());
    let open = Server::start(&[]);
    match Session::connect_with_key(
        open.addr,
        Duration::from_secs(5),
        Some(key.trim().as_bytes()),
    ) {
        Err(CtlError::Auth(m)) => assert!(m.contains("does not ask for the key"), "{m}"),
        other => panic!("a server without the key was trusted: {:?}", other.err()),
    }
    let _ = std::fs::remove_file(right);
    let _ = std::fs::remove_file(wrong);
}

#[test]
fn a_world_readable_or_short_key_is_refused() {
    let p = key_file("loose", "correct horse battery staple");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let serve_with_key = |key: &std::path::Path| {
        run(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--psk-file",
            key.to_str().unwrap(),
        ])
    };
    let o = serve_with_key(&p);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--psk-file") && text(&o).contains("any user"),
        "{}",
        text(&o)
    );
    let short = key_file("short", "hunter2");
    let o = serve_with_key(&short);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("at least 16"), "{}", text(&o));
    let _ = std::fs::remove_file(p);
    let _ = std::fs::remove_file(short);
}

#[test]
fn each_limit_refuses_before_anything_starts() {
    let server = Server::start(&[
        "--max-flows",
        "2",
        "--max-duration",
        "5s",
        "--max-buffer",
        "1M",
        "--max-rate",
        "1G",
    ]);
    let cases: [(&[&str], &str); 9] = [
        (
            &["--flows", "3", "--pacing-rate", "100M"],
            "--flows 3 is over this server's limit --max-flows 2",
        ),
        (
            &["--duration", "6s", "--pacing-rate", "100M"],
            "--duration 6s is over this server's limit --max-duration 5s",
        ),
        (
            &["--sndbuf", "2M", "--pacing-rate", "100M"],
            "--sndbuf 2M is over this server's limit --max-buffer 1M",
        ),
        (
            &["--msg-size", "4M", "--pacing-rate", "100M"],
            "--msg-size 4M is over this server's limit --max-buffer 1M",
        ),
        (
            &["--flows", "2", "--pacing-rate", "800M"],
            "over this server's limit --max-rate 1",
        ),
        (
            &[],
            "an unpaced stream is over this server's limit --max-rate 1",
        ),
        // A run of parts: its flows add up, and each part keeps each limit.
        (
            &[
                "--pacing-rate",
                "100M",
                "--part",
                "more=stream:flows=2:pacing_rate=100M",
            ],
            "--flows 3 over the run's parts is over this server's limit --max-flows 2",
        ),
        (
            &["--pacing-rate", "100M", "--part", "bulk=stream"],
            "part bulk: an unpaced stream is over this server's limit --max-rate 1",
        ),
        (
            &[
                "--pacing-rate",
                "600M",
                "--part",
                "bulk=stream:pacing_rate=600M",
            ],
            "over the run's parts is over this server's limit --max-rate 1",
        ),
    ];
    for (args, want) in cases {
        let t = Instant::now();
        let addr = server.addr.to_string();
        let mut all = vec!["run", "stream", "--server", &addr, "--warmup", "200ms"];
        all.extend_from_slice(args);
        if !args.contains(&"--duration") {
            all.extend(["--duration", "1s"]);
        }
        let o = run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        // Refused up front: no warm-up, no window.
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{args:?} took {:?}",
            t.elapsed()
        );
    }
    assert_runs(&server.run(&["--pacing-rate", "100M"]));
}

#[test]
fn a_second_client_hears_who_keeps_the_server_busy() {
    let server = Server::start(&[]);
    let first = server.stream_in_background("4s", &[]);
    std::thread::sleep(Duration::from_millis(1000));
    let o = server.run(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("busy: running a test for 127.0.0.1:"), "{t}");
    assert!(t.contains(" since 20"), "{t}");
    let n: u64 = t
        .split("ends in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 'ends in N s' in {t}"));
    assert!((1..=14).contains(&n), "{t}");
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // Free again once the first test is over.
    assert_runs(&server.run(&[]));
}

#[test]
fn concurrent_tests_are_allowed_when_asked() {
    let server = Server::start(&["--concurrent", "2"]);
    let first = server.stream_in_background("3s", &[]);
    std::thread::sleep(Duration::from_millis(800));
    assert_runs(&server.run(&[]));
    assert!(first.wait_with_output().unwrap().status.success());
}

#[test]
fn peers_outside_allow_are_refused_and_logged() {
    let server = Server::start(&["--allow", "198.18.0.0/15", "--allow", "2001:2::/48"]);
    // A refused peer hears why, and nothing else: no welcome, no nonce.
    let got = exchange(server.addr, &hello());
    let frames = frames(&got);
    assert_eq!(frames.len(), 1, "a refused peer heard {frames:?}");
    let (code, message) = error_of(&got).expect("an error frame");
    assert_eq!(code, "refused");
    assert!(
        message.contains("127.0.0.1") && message.contains("--allow"),
        "{message}"
    );
    assert!(
        server.logged(&["session from 127.0.0.1:", "not in --allow"]),
        "{}",
        server.log()
    );
    let o = server.run(&[]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not in this server's --allow list"), "{err}");

    let server = Server::start(&["--allow", "127.0.0.0/8"]);
    assert_runs(&server.run(&[]));
}

#[test]
fn data_ports_come_from_the_range_given() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let range = format!("{port}-{port}");
    let server = Server::start(&["--data-ports", &range]);
    let mut s = Session::connect(server.addr, Duration::from_secs(5)).unwrap();
    let ready = s.setup(&small_spec(), &[], Default::default()).unwrap();
    assert_eq!(ready.data_port, port);
    drop(s);
    // The port is given back when the client goes.
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let mut s = Session::connect(server.addr, Duration::from_secs(5)).unwrap();
        match s.setup(&small_spec(), &[], Default::default()) {
            Ok(r) => {
                assert_eq!(r.data_port, port);
                break;
            }
            Err(e) => assert!(Instant::now() < until, "{e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_vanished_client_frees_the_server_within_two_seconds() {
    let server = Server::start(&[]);
    assert_runs(&server.run(&[]));
    std::thread::sleep(Duration::from_millis(300));
    let fds0 = server.fds();
    let mut client = server.stream_in_background("30s", &["--flows", "4"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(server.fds() >= fds0 + 4, "the test is not running");
    client.kill().unwrap();
    let t0 = Instant::now();
    client.wait().unwrap();
    // Ready again: a new client gets its data port, not "busy".
    let ready_after = loop {
        let mut s = Session::connect(server.addr, Duration::from_secs(5)).unwrap();
        match s.setup(&small_spec(), &[], Default::default()) {
            Ok(_) => break t0.elapsed(),
            Err(CtlError::Server { code, .. }) if code == "busy" => {}
            Err(e) => panic!("{e}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "still busy");
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("ready again {ready_after:?} after the client was killed");
    assert!(ready_after < Duration::from_secs(2), "{ready_after:?}");
    let until = Instant::now() + Duration::from_secs(2);
    while server.fds() > fds0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        server.fds() <= fds0,
        "flows left open: {} > {fds0}",
        server.fds()
    );
    assert!(
        server.logged(&["session from 127.0.0.1:", "client lost"]),
        "{}",
        server.log()
    );
}

#[test]
fn a_killed_server_is_reported_lost_within_two_seconds_with_partial_results() {
    let mut server = Server::start(&[]);
    let client = server.stream_in_background("30s", &["--json"]);
    std::thread::sleep(Duration::from_millis(2500));
    server.child.kill().unwrap();
    let t0 = Instant::now();
    let out = client.wait_with_output().unwrap();
    let took = t0.elapsed();
    eprintln!("client ended {took:?} after the server was killed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server lost"), "{err}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_ne!(out.status.code(), Some(0));
    let record: Value = serde_json::from_slice(&out.stdout).expect("the partial record on stdout");
    assert_eq!(record["complete"], false);
    let it = &record["iterations"][0];
    assert_eq!(it["complete"], false);
    assert_eq!(
        it["server"]["lost"], true,
        "the server's figures are missing"
    );
    assert!(it["client"]["bytes_sent"].as_u64().unwrap() > 0);
    assert!(it["client"]["window_s"].as_f64().unwrap() > 0.5);
    let warned = it["client"]["warnings"].as_array().unwrap();
    assert!(
        warned
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("server lost")),
        "{warned:?}"
    );
}

/// The summary of a run whose server was killed shows what the client
/// measured and marks the server's figures as missing, never as zero.
#[test]
fn a_partial_record_marks_what_is_missing_as_missing() {
    let mut server = Server::start(&[]);
    let client = server.stream_in_background("30s", &[]);
    std::thread::sleep(Duration::from_millis(2500));
    server.child.kill().unwrap();
    let out = client.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[INCOMPLETE]"), "{text}");
    assert!(
        text.contains("throughput  not measured: the server was lost"),
        "{text}"
    );
    // The CPU table's server row says so where its figures would be.
    assert!(
        text.lines()
            .any(|l| l.starts_with("server ") && l.ends_with("lost: not measured")),
        "{text}"
    );
    assert!(
        !text.contains(" 0 bit/s"),
        "a missing rate shown as zero:\n{text}"
    );
    assert!(!text.contains("server pid 0"), "{text}");
    let sent = text
        .lines()
        .find(|l| l.starts_with("transfer"))
        .unwrap_or_else(|| panic!("no transfer line:\n{text}"));
    assert!(
        sent.contains("client sent") && !sent.contains("sent 0 B"),
        "{sent}"
    );
}
