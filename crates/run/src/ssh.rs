//! `--server ssh://[USER@]HOST[:PORT]`: the far end's server, started by
//! plumb itself through the system's `ssh` and gone when the run ends.
//!
//! The far host keeps one copy of each plumb build in a per-user cache,
//! `${XDG_CACHE_HOME:-$HOME/.cache}/plumb/BUILD_ID/plumb`; a build it lacks
//! is copied there (under a temporary name, checked by hash, then renamed).
//! The server, `plumb serve --ssh-session`, takes a fresh key as the first
//! line of its standard input, listens on an ephemeral port, says which on
//! its standard output, and ends when its standard input does: when this
//! side closes it, or when ssh, the client or the connection dies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The word the far end's first line starts with.
const HELLO: &str = "plumb-ssh";

/// How long the far end has to answer a step once ssh is connected
/// (ConnectTimeout bounds the connection itself).
const STEP: Duration = Duration::from_secs(20);

/// How long a copy of the executable may take.
const COPY: Duration = Duration::from_secs(300);

/// How the static build is made, for the refusal to copy another.
pub const STATIC_BUILD: &str = "cargo build --profile dist --target x86_64-unknown-linux-musl";

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SshError(pub String);

/// An `ssh://` server address as the user gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// The address as given, for messages and the record.
    pub given: String,
}

impl SshTarget {
    /// None when `s` is not an `ssh://` address; otherwise the target or why
    /// it is malformed.
    pub fn parse(s: &str) -> Option<Result<SshTarget, String>> {
        let rest = s.strip_prefix("ssh://")?;
        let bad = |why: &str| Err(format!("'{s}' {why}; use ssh://[USER@]HOST[:SSHPORT]"));
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) if !u.is_empty() => (Some(u.to_string()), h),
            Some(_) => return Some(bad("has an empty user")),
            None => (None, rest),
        };
        let (host, port) = if let Some(r) = hostport.strip_prefix('[') {
            match r.split_once(']') {
                Some((h, "")) => (h, None),
                Some((h, p)) => match p.strip_prefix(':') {
                    Some(p) => (h, Some(p)),
                    None => return Some(bad("is not an address")),
                },
                None => return Some(bad("lacks a closing ]")),
            }
        } else if hostport.matches(':').count() == 1 {
            let (h, p) = hostport.split_once(':').expect("one colon");
            (h, Some(p))
        } else {
            // No colon, or a bare IPv6 address (which takes no port).
            (hostport, None)
        };
        if host.is_empty() || host.contains('/') || host.starts_with('-') {
            return Some(bad("has no host"));
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Some(bad(&format!("has a bad port '{p}'"))),
            },
        };
        Some(Ok(SshTarget {
            user,
            host: host.to_string(),
            port,
            given: s.to_string(),
        }))
    }
}

/// The ssh command: `given` (--ssh-command), else $PLUMB_SSH_COMMAND, else
/// `ssh`, split at whitespace (no shell quoting: a word with spaces goes
/// into a wrapper script).
pub fn ssh_command(given: Option<&str>) -> Vec<String> {
    let text = given
        .map(str::to_string)
        .or_else(|| std::env::var("PLUMB_SSH_COMMAND").ok())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "ssh".to_string());
    text.split_whitespace().map(str::to_string).collect()
}

/// The SHA-256 of this executable's bytes, in hex, read once.
pub fn exe_digest() -> Result<&'static str, SshError> {
    static DIGEST: OnceLock<Result<String, String>> = OnceLock::new();
    DIGEST
        .get_or_init(|| {
            use sha2::{Digest, Sha256};
            let mut f = std::fs::File::open("/proc/self/exe")
                .map_err(|e| format!("cannot read this plumb executable: {e}"))?;
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => h.update(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("cannot read this plumb executable: {e}")),
                }
            }
            Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
        })
        .as_deref()
        .map_err(|e| SshError(e.clone()))
}

/// This executable's build id: the first 16 hex digits of its hash. Two
/// executables with the same id are the same bytes.
pub fn build_id() -> Result<&'static str, SshError> {
    exe_digest().map(|d| &d[..16])
}

/// Whether a build string (`plumb --version`'s) names a static executable.
pub fn is_static(build: &str) -> bool {
    build.trim_end().ends_with("static)")
}

pub struct SshOptions {
    /// The ssh command and its own arguments.
    pub command: Vec<String>,
    /// Where the test's connections go, when not to the host ssh reaches.
    pub server_address: Option<IpAddr>,
    /// Copy this executable though it is not static (the far host has the
    /// same C library).
    pub copy_dynamic: bool,
    /// This executable and its build string.
    pub exe: PathBuf,
    pub build: String,
    /// The family to resolve the host in first.
    pub prefer_v6: bool,
    /// Hears what takes time before it starts (a copy).
    pub notify: fn(&str),
}

/// A running far-end server. Dropping it closes the server's standard input,
/// which ends it, and reaps ssh.
pub struct SshServer {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    /// Where the control connection goes.
    pub addr: SocketAddr,
    /// The session's key, never written anywhere but the channel.
    pub key: Vec<u8>,
    /// The far end's build string and build id.
    pub build: String,
    pub build_id: String,
    /// Whether this start copied the executable.
    pub copied: bool,
    stderr: Arc<Said>,
    given: String,
}

/// ssh's standard error, kept as lines (the last few matter).
struct Said {
    lines: Mutex<Vec<String>>,
    ended: AtomicBool,
}

fn collect(pipe: impl Read + Send + 'static) -> Arc<Said> {
    let sink = Arc::new(Said {
        lines: Mutex::new(Vec::new()),
        ended: AtomicBool::new(false),
    });
    let s = Arc::clone(&sink);
    let _ = std::thread::Builder::new()
        .name("plumb-ssh-err".into())
        .spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut v = s.lines.lock().unwrap_or_else(|p| p.into_inner());
                if v.len() >= 200 {
                    v.remove(0);
                }
                v.push(line);
            }
            s.ended.store(true, Ordering::SeqCst);
        });
    sink
}

/// ssh's standard output, line by line, on a channel (for reads with a
/// deadline).
fn lines(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("plumb-ssh-out".into())
        .spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    rx
}

fn wait_deadline(child: &mut Child, until: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            _ => return None,
        }
    }
}

fn last_said(said: &Said) -> Vec<String> {
    // What ssh wrote just before it exited may still be in the reader's
    // hands; a control master that holds the pipe open bounds the wait.
    let until = Instant::now() + Duration::from_secs(1);
    while !said.ended.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    said.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The far-side script's words: the cache directory of this build.
fn cache_dir(id: &str) -> String {
    format!("d=\"${{XDG_CACHE_HOME:-$HOME/.cache}}/plumb/{id}\"")
}

/// A POSIX sh script as one remote command, whatever the login shell: the
/// script has no single quote and no newline.
fn remote(script: &str) -> String {
    debug_assert!(!script.contains('\'') && !script.contains('\n'));
    format!("exec /bin/sh -c '{script}'")
}

struct Ssh<'a> {
    target: &'a SshTarget,
    opts: &'a SshOptions,
}

impl Ssh<'_> {
    fn command(&self, remote_command: &str) -> Command {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(&self.opts.command[0]);
        c.args(&self.opts.command[1..]);
        // After the user's own words, which ssh lets win: the first value of
        // an option is the one it keeps.
        c.args([
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]);
        if let Some(p) = self.target.port {
            c.arg("-p").arg(p.to_string());
        }
        if let Some(u) = &self.target.user {
            c.arg("-l").arg(u);
        }
        c.arg("--").arg(&self.target.host).arg(remote_command);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A terminal's Ctrl-C reaches only plumb, which ends the test
            // over the control connection before it lets ssh go.
            .process_group(0);
        plumb_sys::process::kill_on_parent_death(&mut c);
        c
    }

    fn spawn(&self, remote_command: &str) -> Result<Child, SshError> {
        self.command(remote_command).spawn().map_err(|e| {
            SshError(format!(
                "{}: cannot run '{}': {} (set --ssh-command or PLUMB_SSH_COMMAND)",
                self.target.given,
                self.opts.command[0],
                plumb_sys::plain_io(&e)
            ))
        })
    }

    /// One line that says why a step ended with `status`.
    fn failure(&self, what: &str, status: Option<ExitStatus>, said: &[String]) -> SshError {
        use std::os::unix::process::ExitStatusExt;
        let said: Vec<&str> = said
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
            .collect();
        let last = said.last().copied().unwrap_or("");
        let fingerprint = said
            .iter()
            .flat_map(|l| l.split_whitespace())
            .find(|w| w.starts_with("SHA256:"))
            .filter(|f| !last.contains(*f));
        let mut why = last.trim_start_matches("plumb: error: ").to_string();
        if last == "Host key verification failed." {
            // The line before says which key and why it was not accepted.
            if let Some(before) = said.iter().rev().nth(1) {
                why = format!("{}: {why}", before.trim_end_matches('.'));
            }
        }
        if let Some(f) = fingerprint {
            why = format!("{why} (host key {f})");
        }
        let g = &self.target.given;
        let msg = match status {
            None => format!(
                "{g}: ssh gave no answer within {} s while {what}",
                STEP.as_secs()
            ),
            Some(s) => match (s.code(), s.signal()) {
                (Some(255), _) => format!("{g}: ssh failed (exit 255): {why}"),
                (Some(127), _) => format!(
                    "{g}: the far host has no shell or command to run plumb with (exit 127): {why}"
                ),
                (Some(126), _) => format!(
                    "{g}: the far host cannot execute plumb (exit 126; is it {} Linux?): {why}",
                    std::env::consts::ARCH
                ),
                (Some(c), _) if why.is_empty() => {
                    format!("{g}: the far host ended while {what} (exit {c})")
                }
                (Some(c), _) => format!("{g}: the far host ended while {what} (exit {c}): {why}"),
                (None, Some(sig)) => format!("{g}: ssh was killed by signal {sig} while {what}"),
                (None, None) => format!("{g}: ssh ended while {what}"),
            },
        };
        SshError(msg)
    }

    /// Copies this executable into the far host's cache.
    fn copy(&self, id: &str) -> Result<(), SshError> {
        let digest = exe_digest()?;
        let script = format!(
            "umask 077; {}; mkdir -p \"$d\" || exit 3; t=\"$d/plumb.tmp.$$\"; \
             cat > \"$t\" || {{ rm -f \"$t\"; exit 3; }}; set -- $(sha256sum \"$t\"); \
             if [ \"$1\" = {digest} ]; then chmod 700 \"$t\" && mv -f \"$t\" \"$d/plumb\" && echo {HELLO} copied; \
             else rm -f \"$t\"; echo \"{HELLO} corrupt $1\" >&2; exit 4; fi",
            cache_dir(id)
        );
        let mut child = self.spawn(&remote(&script))?;
        let said = collect(child.stderr.take().expect("piped"));
        let out = lines(child.stdout.take().expect("piped"));
        let mut stdin = child.stdin.take().expect("piped");
        let exe = self.opts.exe.clone();
        let feeder = std::thread::Builder::new()
            .name("plumb-ssh-copy".into())
            .spawn(move || -> std::io::Result<u64> {
                let mut f = std::fs::File::open(exe)?;
                std::io::copy(&mut f, &mut stdin)
                // stdin is dropped here: the far side's cat sees the end.
            })
            .map_err(|e| SshError(format!("cannot start a thread: {e}")))?;
        let status = wait_deadline(&mut child, Instant::now() + COPY);
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = feeder.join();
        // The reader may still hold the last line when ssh has exited: read
        // to the end of the pipe.
        let drain = Instant::now() + Duration::from_secs(2);
        let mut copied = false;
        while let Ok(l) = out.recv_timeout(drain.saturating_duration_since(Instant::now())) {
            copied |= l == format!("{HELLO} copied");
        }
        match status {
            Some(s) if s.success() && copied => Ok(()),
            s => Err(self.failure("copying plumb", s, &last_said(&said))),
        }
    }

    /// Starts the cached server, or says it is missing (and the far host's
    /// machine and system).
    fn start(&self, id: &str) -> Result<Started, SshError> {
        let script = format!(
            "umask 077; {}; if [ -x \"$d/plumb\" ]; then exec \"$d/plumb\" serve --ssh-session; fi; \
             echo \"{HELLO} missing $(uname -m) $(uname -s)\"",
            cache_dir(id)
        );
        let mut child = self.spawn(&remote(&script))?;
        let said = collect(child.stderr.take().expect("piped"));
        let out = lines(child.stdout.take().expect("piped"));
        let until = Instant::now() + STEP + Duration::from_secs(5);
        let mut stdin = child.stdin.take();
        let fail = |child: &mut Child, what: &str| -> SshError {
            // Whatever ssh says when it ends is the reason.
            let status = wait_deadline(child, Instant::now() + Duration::from_secs(2));
            if status.is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
            self.failure(what, status, &last_said(&said))
        };
        let next = |child: &mut Child| -> Result<String, SshError> {
            match out.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(l) => Ok(l),
                Err(RecvTimeoutError::Disconnected) => Err(fail(child, "starting plumb")),
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    Err(self.failure("starting plumb", None, &last_said(&said)))
                }
            }
        };
        let first = next(&mut child)?;
        let words: Vec<&str> = first.splitn(5, ' ').collect();
        match words.as_slice() {
            [HELLO, "missing", machine, system] => {
                let _ = wait_deadline(&mut child, Instant::now() + Duration::from_secs(2));
                let _ = child.kill();
                let _ = child.wait();
                Ok(Started::Missing {
                    machine: machine.to_string(),
                    system: system.to_string(),
                })
            }
            [HELLO, "serve", far_id, seen, build] => {
                let key = session_key()?;
                let sent = stdin.as_mut().map(|s| {
                    s.write_all(&key)
                        .and_then(|_| s.write_all(b"\n"))
                        .and_then(|_| s.flush())
                });
                if let Some(Err(_)) = sent {
                    return Err(fail(&mut child, "handing over the session key"));
                }
                let listening = next(&mut child)?;
                let port = listening
                    .strip_prefix("plumb serve: listening on ")
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                    .map(|a| a.port());
                let Some(port) = port else {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SshError(format!(
                        "{}: the far end's plumb said '{listening}' instead of its port",
                        self.target.given
                    )));
                };
                Ok(Started::Serving(Box::new(Serving {
                    child,
                    stdin: stdin.take(),
                    stderr: said,
                    key,
                    port,
                    build_id: far_id.to_string(),
                    seen: seen.parse().ok(),
                    build: build.to_string(),
                })))
            }
            _ => {
                // A login shell that runs nothing (nologin) says why and exits.
                let status = wait_deadline(&mut child, Instant::now() + Duration::from_secs(2));
                if status.is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                let said: String = first.trim().chars().take(200).collect();
                Err(SshError(match status.and_then(|s| s.code()) {
                    Some(c) => format!(
                        "{}: the far host did not start plumb (exit {c}): {said}",
                        self.target.given
                    ),
                    None => format!(
                        "{}: the far host said '{said}' instead of starting plumb",
                        self.target.given
                    ),
                }))
            }
        }
    }

    /// The address the test's connections go to.
    fn data_ip(&self, seen: Option<IpAddr>) -> Result<IpAddr, SshError> {
        if let Some(a) = self.opts.server_address {
            return Ok(a);
        }
        if let Ok(ip) = self.target.host.parse::<IpAddr>() {
            return Ok(ip);
        }
        // An ssh_config alias names its host in HostName.
        let host = self
            .configured_hostname()
            .unwrap_or(self.target.host.clone());
        let found: Vec<IpAddr> = (host.as_str(), 0)
            .to_socket_addrs()
            .map(|it| it.map(|a| a.ip()).collect())
            .unwrap_or_default();
        let pick = found
            .iter()
            .find(|ip| ip.is_ipv6() == self.opts.prefer_v6)
            .or(found.first())
            .copied();
        pick.or(seen).ok_or_else(|| {
            SshError(format!(
                "{}: cannot tell the far host's address for the test's connections; give it with --server-address",
                self.target.given
            ))
        })
    }

    fn configured_hostname(&self) -> Option<String> {
        // Only OpenSSH's own client is known to print its configuration
        // with -G; a wrapper might connect instead.
        let program = Path::new(&self.opts.command[0]).file_name()?;
        if program != "ssh" {
            return None;
        }
        let mut c = Command::new(&self.opts.command[0]);
        c.args(&self.opts.command[1..]).arg("-G");
        if let Some(p) = self.target.port {
            c.arg("-p").arg(p.to_string());
        }
        let out = c
            .arg("--")
            .arg(&self.target.host)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("hostname ").map(str::to_string))
    }
}

struct Serving {
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Arc<Said>,
    key: Vec<u8>,
    port: u16,
    build_id: String,
    seen: Option<IpAddr>,
    build: String,
}

enum Started {
    Missing { machine: String, system: String },
    Serving(Box<Serving>),
}

/// 32 random bytes in hex: a key `plumb serve` takes (printable, one line).
fn session_key() -> Result<Vec<u8>, SshError> {
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| SshError(format!("cannot draw a session key: {e}")))?;
    Ok(b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<String>()
        .into_bytes())
}

impl SshServer {
    /// Finds or copies this build on the far host and starts its server.
    pub fn start(target: &SshTarget, opts: &SshOptions) -> Result<SshServer, SshError> {
        if opts.command.is_empty() {
            return Err(SshError("--ssh-command: empty".into()));
        }
        let id = build_id()?;
        let ssh = Ssh { target, opts };
        let mut copied = false;
        let serving = loop {
            match ssh.start(id)? {
                Started::Serving(s) => break s,
                Started::Missing { .. } if copied => {
                    return Err(SshError(format!(
                        "{}: the copied plumb is not in the far host's cache",
                        target.given
                    )))
                }
                Started::Missing { machine, system } => {
                    if system != "Linux" || machine != std::env::consts::ARCH {
                        return Err(SshError(format!(
                            "{}: the far host is {machine} {system}; this plumb runs on {} Linux only",
                            target.given,
                            std::env::consts::ARCH
                        )));
                    }
                    if !is_static(&opts.build) && !opts.copy_dynamic {
                        return Err(SshError(format!(
                            "{}: this plumb is not static and cannot be copied to the far host; \
                             build one that can with `{STATIC_BUILD}` (or pass --ssh-copy-dynamic \
                             when the far host has the same C library)",
                            target.given
                        )));
                    }
                    (opts.notify)(&format!("copying plumb (build {id}) to {}", target.given));
                    ssh.copy(id)?;
                    copied = true;
                }
            }
        };
        let s = *serving;
        let mut server = SshServer {
            child: Some(s.child),
            stdin: s.stdin,
            addr: SocketAddr::new(IpAddr::from([0, 0, 0, 0]), s.port),
            key: s.key,
            build: s.build,
            build_id: s.build_id,
            copied,
            stderr: s.stderr,
            given: target.given.clone(),
        };
        server.addr = SocketAddr::new(ssh.data_ip(s.seen)?, s.port);
        Ok(server)
    }

    /// Why the server's ssh ended, when it has: ssh's or the far end's last
    /// word, on one line.
    pub fn gone(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        // A run that failed because the connection dropped fails about when
        // ssh notices: give ssh a moment to end too.
        let status = wait_deadline(child, Instant::now() + Duration::from_millis(500))?;
        let said = last_said(&self.stderr);
        let last = said
            .iter()
            .rev()
            .map(|l| l.trim().trim_start_matches("plumb: error: "))
            .find(|l| !l.is_empty())
            .unwrap_or("it said nothing");
        Some(match status.code() {
            Some(255) => format!("{}: ssh failed (exit 255): {last}", self.given),
            Some(c) => format!(
                "{}: the far end's plumb ended (exit {c}): {last}",
                self.given
            ),
            None => format!("{}: ssh was killed: {last}", self.given),
        })
    }

    /// The ssh process, for tests and diagnostics.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Ends the far end's server: its standard input closes, it exits, and
    /// ssh with it; ssh is killed after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        drop(self.stdin.take());
        let Some(mut child) = self.child.take() else {
            return;
        };
        if wait_deadline(&mut child, Instant::now() + grace).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

/// The far end of `--server ssh://`: reads the session key from the first
/// line of `input`, and the build id and build string say which plumb this
/// is. Returns the key.
pub fn far_end_hello(build: &str) -> Result<Vec<u8>, SshError> {
    let seen = std::env::var("SSH_CONNECTION")
        .ok()
        .and_then(|c| c.split_whitespace().nth(2).map(str::to_string))
        .filter(|ip| ip.parse::<IpAddr>().is_ok())
        .unwrap_or_else(|| "-".to_string());
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{HELLO} serve {} {seen} {build}", build_id()?)
            .and_then(|_| out.flush())
            .map_err(|e| SshError(format!("cannot write to ssh: {e}")))?;
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| SshError(format!("cannot read the session key: {e}")))?;
    let key = line.trim().as_bytes().to_vec();
    if key.len() < 32 {
        return Err(SshError(
            "no session key on standard input (plumb serve --ssh-session is started by plumb run --server ssh://)".into(),
        ));
    }
    Ok(key)
}

/// Ends this process when standard input ends: the client closed it, or
/// ssh, the client or the connection went away.
pub fn exit_at_end_of_input() -> Result<(), SshError> {
    std::thread::Builder::new()
        .name("plumb-ssh-eof".into())
        .spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            std::process::exit(0);
        })
        .map(|_| ())
        .map_err(|e| SshError(format!("cannot start a thread: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> SshTarget {
        SshTarget::parse(s).expect("ssh://").expect("valid")
    }

    #[test]
    fn parses_targets() {
        let a = t("ssh://root@198.18.7.2:2222");
        assert_eq!(a.user.as_deref(), Some("root"));
        assert_eq!(a.host, "198.18.7.2");
        assert_eq!(a.port, Some(2222));
        let b = t("ssh://lab3");
        assert_eq!((b.user, b.host.as_str(), b.port), (None, "lab3", None));
        let c = t("ssh://me@[2001:2::2]:22");
        assert_eq!((c.host.as_str(), c.port), ("2001:2::2", Some(22)));
        let d = t("ssh://2001:2::2");
        assert_eq!((d.host.as_str(), d.port), ("2001:2::2", None));
        assert!(SshTarget::parse("198.18.7.2:12867").is_none());
        for bad in [
            "ssh://",
            "ssh://@h",
            "ssh://h:0",
            "ssh://h:x",
            "ssh://[::1",
            "ssh://-oProxyCommand=x",
        ] {
            assert!(SshTarget::parse(bad).expect("ssh://").is_err(), "{bad}");
        }
    }

    #[test]
    fn static_builds() {
        assert!(is_static(
            "plumb 0.1.0 (commit abc, x86_64-unknown-linux-musl, dist, static)"
        ));
        assert!(!is_static(
            "plumb 0.1.0 (commit abc, x86_64-unknown-linux-gnu, debug, dynamic)"
        ));
    }

    #[test]
    fn remote_scripts_survive_any_login_shell() {
        let s = remote(&format!("{}; echo x", cache_dir("0123456789abcdef")));
        assert!(s.starts_with("exec /bin/sh -c '") && s.ends_with('\''));
        assert_eq!(s.matches('\'').count(), 2);
    }
}
