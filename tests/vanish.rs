//! A peer whose host vanishes (its link goes down: no FIN, no RST) is
//! noticed within seconds by the other end's control connection, on the
//! client's side and on the server's, instead of after the window and its
//! grace time. Two namespaces joined by a veth pair that the test creates.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The window the client asks for: far longer than noticing may take.
const WINDOW: &str = "40s";
/// What noticing may take: keepalive and user timeouts of a few seconds,
/// and a busy machine's slack.
const NOTICE: Duration = Duration::from_secs(12);

/// `plumb serve` in the server's namespace, its log collected.
fn serve(pair: &NetnsPair) -> (Started, String, Arc<Mutex<String>>) {
    let journal = std::env::temp_dir().join(format!("plumb-vanish-{}.journal", std::process::id()));
    let (mut child, addr) = pair.serve(&journal, &[], Stdio::piped());
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    let err = child.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            sink.lock().unwrap().push_str(&(l + "\n"));
        }
    });
    (child, addr, log)
}

/// Runs a long stream against the server, takes the link of `side` down
/// once the window is open, and returns how long the client and the server
/// took to notice, with the client's stderr.
fn vanish(side: &str) -> Option<(Duration, Option<Duration>, String)> {
    let pair = NetnsPair::new(&format!("vn{side}"), 9)?;
    let (_server, addr, log) = serve(&pair);
    let client = pair
        .client
        .exec(env!("CARGO_BIN_EXE_plumb"))
        .args(["run", "stream", "--server", &addr, "--no-store"])
        .args(["--iterations", "1"])
        .args(["--duration", WINDOW, "--warmup", "200ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut client = Started(client);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        client.0.try_wait().unwrap().is_none(),
        "the run ended early"
    );
    let (ns, dev) = if side == "client" {
        (&pair.client, pair.client_dev.as_str())
    } else {
        (&pair.server, pair.server_dev.as_str())
    };
    assert!(ok(
        Command::new("ip").args(["-n", &ns.0, "link", "set", dev, "down"])
    ));
    let down = Instant::now();
    let mut client_noticed = None;
    let mut server_noticed = None;
    while down.elapsed() < NOTICE + Duration::from_secs(5)
        && (client_noticed.is_none() || server_noticed.is_none())
    {
        if client_noticed.is_none() && client.0.try_wait().unwrap().is_some() {
            client_noticed = Some(down.elapsed());
        }
        if server_noticed.is_none() && log.lock().unwrap().contains("client lost") {
            server_noticed = Some(down.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let client_noticed = client_noticed.unwrap_or_else(|| {
        panic!(
            "the client did not notice within {:?}",
            NOTICE + Duration::from_secs(5)
        )
    });
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut client.0.stderr.take().unwrap(), &mut err);
    Some((client_noticed, server_noticed, err))
}

#[test]
fn a_vanished_server_host_is_noticed_within_seconds() {
    let Some((client, server, err)) = vanish("server") else {
        return;
    };
    assert!(client < NOTICE, "the client took {client:?}: {err}");
    assert!(err.contains("server lost"), "{err}");
    let server = server.expect("the server noticed its client was gone");
    assert!(server < NOTICE, "the server took {server:?}");
}

#[test]
fn a_vanished_client_host_is_noticed_within_seconds() {
    let Some((client, server, err)) = vanish("client") else {
        return;
    };
    assert!(client < NOTICE, "the client took {client:?}: {err}");
    let server = server.expect("the server noticed its client was gone");
    assert!(server < NOTICE, "the server took {server:?}");
}
