//! The embedded server: `plumb serve --once` started as a child process on
//! loopback, so that client and server CPU are accounted to separate
//! processes as with netperf/netserver. The child is in its own process group
//! (a terminal's Ctrl-C reaches only the client, which winds the server down
//! over the control connection) and dies with its parent.

use crate::RunError;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct EmbeddedServer {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// What the child wrote on stderr. Its session errors reach the client
    /// over the control connection, so this is shown only when the child
    /// could not say anything there (it failed to start).
    stderr: Arc<Mutex<String>>,
}

impl EmbeddedServer {
    pub fn start(exe: &Path, listen: SocketAddr) -> Result<EmbeddedServer, RunError> {
        EmbeddedServer::start_in(exe, listen, None)
    }

    /// Starts the server inside network namespace `netns` (through `ip
    /// netns exec`, which execs plumb in place, so the parent-death signal
    /// and the pid carry over).
    pub fn start_in(
        exe: &Path,
        listen: SocketAddr,
        netns: Option<&str>,
    ) -> Result<EmbeddedServer, RunError> {
        use std::os::unix::process::CommandExt;
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(["serve", "--once", "--listen", &listen.to_string()]);
        if netns.is_none() {
            cmd.arg("--same-host");
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        plumb_sys::process::kill_on_parent_death(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| RunError::Embedded(format!("cannot start {}: {e}", exe.display())))?;
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(pipe) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            let _ = std::thread::Builder::new()
                .name("plumb-srvlog".into())
                .spawn(move || {
                    for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                        let mut s = sink.lock().unwrap_or_else(|p| p.into_inner());
                        if s.len() < 64 * 1024 {
                            s.push_str(&line);
                            s.push('\n');
                        }
                    }
                });
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let addr = line
            .trim()
            .strip_prefix("plumb serve: listening on ")
            .and_then(|a| a.parse::<SocketAddr>().ok());
        let mut server = EmbeddedServer {
            child: Some(child),
            addr: listen,
            stderr,
        };
        match (read, addr) {
            (Ok(_), Some(a)) => {
                server.addr = a;
                Ok(server)
            }
            _ => {
                server.reap(Duration::from_secs(2));
                let why = server
                    .said()
                    .unwrap_or_else(|| "it exited without a word".into());
                Err(RunError::Embedded(format!(
                    "the embedded server did not start: {why}"
                )))
            }
        }
    }

    /// Waits for the child to exit, killing it after `grace`.
    pub fn reap(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let deadline = Instant::now() + grace;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => break,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The first thing a reaped child said on stderr: why it failed to
    /// start, or why it dropped a session without a word on the control
    /// connection.
    pub fn said(&self) -> Option<String> {
        // Let the reader thread drain what the child said before it died.
        std::thread::sleep(Duration::from_millis(50));
        let said = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        said.lines()
            .map(|l| l.trim_start_matches("plumb: error: ").trim())
            .find(|l| !l.is_empty())
            .map(str::to_string)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.reap(Duration::from_millis(500));
    }
}
