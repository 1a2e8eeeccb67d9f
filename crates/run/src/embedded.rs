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
use std::time::{Duration, Instant};

pub struct EmbeddedServer {
    child: Option<Child>,
    pub addr: SocketAddr,
}

impl EmbeddedServer {
    pub fn start(exe: &Path, listen: SocketAddr) -> Result<EmbeddedServer, RunError> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--once", "--listen", &listen.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        plumb_sys::process::kill_on_parent_death(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| RunError::Embedded(format!("cannot start {}: {e}", exe.display())))?;
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
        };
        match (read, addr) {
            (Ok(_), Some(a)) => {
                server.addr = a;
                Ok(server)
            }
            _ => {
                server.reap(Duration::from_secs(2));
                Err(RunError::Embedded(
                    "the embedded server did not start (see its message above)".into(),
                ))
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
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
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
