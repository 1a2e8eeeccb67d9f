//! `--server ssh://`: a real sshd in a network namespace this test makes,
//! with a host key and an authorized key of its own in a temporary
//! directory, reached from a second namespace over a veth pair. Nothing
//! listens on the host's own addresses; the far end's cache is the lab's
//! directory (sshd hands XDG_CACHE_HOME to its sessions).

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// True when a precondition is missing, after `common::skip` said which
/// (under CI that fails the test instead).
fn preconditions_fail() -> bool {
    if !common::require_root("create network namespaces") {
        return true;
    }
    for (tool, path, package) in [
        ("ip", "/usr/sbin/ip", "iproute2"),
        ("sshd", "/usr/sbin/sshd", "openssh-server"),
        ("ssh", "/usr/bin/ssh", "openssh-client"),
        ("ssh-keygen", "/usr/bin/ssh-keygen", "openssh-client"),
    ] {
        if !Path::new(path).exists() {
            common::skip(&format!(
                "needs {tool} at {path} (apt-get install {package}; tests/setup.sh installs it)"
            ));
            return true;
        }
    }
    false
}

/// The two-namespace lab with a working shell for the far end, unless a
/// precondition is missing (said by the check).
fn lab() -> Option<Lab> {
    (!preconditions_fail()).then(|| Lab::new("", false))
}

fn sh(cmd: &mut Command) {
    let out = cmd.output().expect("runs");
    common::assert_ok_for(&out, &format!("{cmd:?}"));
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two namespaces joined by a veth pair, an sshd in the server's.
struct Lab {
    dir: PathBuf,
    client_ns: String,
    server_ns: String,
    server_ip: String,
    sshd: Option<Child>,
}

impl Lab {
    /// `extra` lines go into sshd_config; `nologin` gives root a login shell
    /// that runs nothing (in sshd's own mount namespace only).
    fn new(extra: &str, nologin: bool) -> Lab {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let tag = format!("plumb-ssh-{pid}-{n}");
        let dir = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("cache")).expect("temp dir");
        let subnet = 100 + (pid % 50) * 2 + n;
        let mut lab = Lab {
            dir: dir.clone(),
            client_ns: format!("{tag}-c"),
            server_ns: format!("{tag}-s"),
            server_ip: format!("198.18.{subnet}.2"),
            sshd: None,
        };
        for ns in [&lab.client_ns, &lab.server_ns] {
            sh(Command::new("ip").args(["netns", "add", ns]));
            sh(Command::new("ip").args(["-n", ns, "link", "set", "lo", "up"]));
        }
        sh(Command::new("ip").args([
            "link",
            "add",
            "veth0",
            "netns",
            &lab.client_ns,
            "type",
            "veth",
            "peer",
            "name",
            "veth0",
            "netns",
            &lab.server_ns,
        ]));
        for (ns, host) in [(&lab.client_ns, 1), (&lab.server_ns, 2)] {
            let addr = format!("198.18.{subnet}.{host}/24");
            sh(Command::new("ip").args(["-n", ns, "addr", "add", &addr, "dev", "veth0"]));
            sh(Command::new("ip").args(["-n", ns, "link", "set", "veth0", "up"]));
        }
        for key in ["host_key", "client_key", "other_key"] {
            sh(Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", ""])
                .arg("-f")
                .arg(dir.join(key)));
        }
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).expect("key");
        let d = dir.display();
        let config = format!(
            "ListenAddress {}:2222\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\n\
             UsePAM no\nSetEnv XDG_CACHE_HOME={d}/cache\n{extra}\n",
            lab.server_ip
        );
        std::fs::write(dir.join("sshd_config"), config).expect("config");
        // sshd's privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let sshd = format!("exec /usr/sbin/sshd -D -e -f {d}/sshd_config");
        let script = if nologin {
            let passwd = std::fs::read_to_string("/etc/passwd").expect("passwd");
            let changed: String = passwd
                .lines()
                .map(|l| match l.strip_prefix("root:") {
                    Some(_) => {
                        let mut f: Vec<&str> = l.split(':').collect();
                        let last = f.len() - 1;
                        f[last] = "/usr/sbin/nologin";
                        f.join(":") + "\n"
                    }
                    None => format!("{l}\n"),
                })
                .collect();
            std::fs::write(dir.join("passwd"), changed).expect("passwd copy");
            format!("mount --bind {d}/passwd /etc/passwd && {sshd}")
        } else {
            sshd
        };
        let child = Command::new("ip")
            .args(["netns", "exec", &lab.server_ns])
            .args(["unshare", "-m"])
            .args(["--propagation", "private", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd.log")).expect("log"))
            .spawn()
            .expect("sshd starts");
        lab.sshd = Some(child);
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("ip")
                .args(["netns", "exec", &lab.server_ns, "ss", "-ltnH"])
                .output()
                .expect("ss");
            if String::from_utf8_lossy(&out.stdout).contains(":2222") {
                break;
            }
            assert!(
                Instant::now() < until,
                "sshd did not listen: {}",
                std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        lab
    }

    fn ssh_command(&self, key: &str) -> String {
        let d = self.dir.display();
        format!(
            "ssh -F /dev/null -i {d}/{key} -o IdentitiesOnly=yes -o UserKnownHostsFile={d}/known_hosts \
             -o StrictHostKeyChecking=accept-new -o LogLevel=ERROR"
        )
    }

    fn url(&self) -> String {
        format!("ssh://root@{}:2222", self.server_ip)
    }

    /// `plumb run ARGS` from the client's namespace.
    fn plumb(&self, ssh_command: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.client_ns,
            env!("CARGO_BIN_EXE_plumb"),
        ])
        .args(args)
        .env("PLUMB_SSH_COMMAND", ssh_command)
        .env("PLUMB_DB", self.dir.join("plumb.db"))
        .stdin(Stdio::null());
        c
    }

    fn stream(&self, server: &str, duration: &str) -> Vec<String> {
        [
            "run",
            "stream",
            "--duration",
            duration,
            "--warmup",
            "200ms",
            "--iterations",
            "1",
            "--no-store",
            "--json",
            "--ssh-copy-dynamic",
            "--server",
            server,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn run(&self, ssh_command: &str, args: &[String]) -> Output {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.plumb(ssh_command, &args).output().expect("plumb runs")
    }

    /// A 30 s stream run to the far end, 1.5 s after its far end started:
    /// mid-run, for the tests that end one side of it.
    fn mid_run(&self, ssh_command: &str, io: fn() -> Stdio) -> std::process::Child {
        let args = self.stream(&self.url(), "30s");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let client = self
            .plumb(ssh_command, &args)
            .stdout(io())
            .stderr(io())
            .spawn()
            .expect("plumb starts");
        // Mid-run: the far plumb holds a connection of its own (the
        // client's control connection or a flow), not merely a process
        // that may still be starting on a loaded host.
        let until = Instant::now() + Duration::from_secs(20);
        while !self.far_plumbs().iter().any(|&p| connected(p)) {
            assert!(Instant::now() < until, "the far end never served");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(1500));
        client
    }

    /// The plumb processes in the server's namespace.
    fn far_plumbs(&self) -> Vec<u32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.server_ns])
            .output()
            .expect("ip netns pids");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "plumb")
            })
            .collect()
    }

    /// Waits up to `limit` for the far end to have no plumb process.
    fn far_end_clears(&self, limit: Duration) -> Result<Duration, Vec<u32>> {
        let t0 = Instant::now();
        loop {
            let left = self.far_plumbs();
            if left.is_empty() {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > limit {
                return Err(left);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn cached(&self) -> Vec<PathBuf> {
        let root = self.dir.join("cache/plumb");
        std::fs::read_dir(&root)
            .map(|it| {
                it.filter_map(Result::ok)
                    .map(|e| e.path().join("plumb"))
                    .filter(|p| p.exists())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            // The pid is sshd itself: sh and unshare exec it in place.
            let _ = Command::new("kill").arg(c.id().to_string()).status();
            let _ = c.wait();
        }
        // Anything of this test's left in the server's namespace.
        for p in self.far_plumbs() {
            let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
        }
        for ns in [&self.client_ns, &self.server_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_run_over_ssh_measures_and_the_second_reuses_the_cached_copy() {
    let Some(lab) = lab() else {
        return;
    };
    let ssh = lab.ssh_command("client_key");
    let args = lab.stream(&lab.url(), "1s");

    let t0 = Instant::now();
    let first = lab.run(&ssh, &args);
    let took = t0.elapsed();
    let err = text(&first.stderr);
    assert!(first.status.success(), "first run failed: {err}");
    assert!(err.contains("copying plumb"), "the first run copies: {err}");
    let rec: serde_json::Value = serde_json::from_slice(&first.stdout).expect("json");
    let bps = common::f(&rec["iterations"][0]["derived"]["throughput_bps"]);
    assert!(bps > 0.0, "no traffic measured: {rec}");
    let peer = &rec["peer"];
    assert_eq!(peer["started"], "ssh", "{peer}");
    assert_eq!(peer["server"], lab.url().as_str());
    let id = peer["build_id"].as_str().expect("build id");
    assert_eq!(id.len(), 16, "{id}");
    assert!(
        peer["address"]
            .as_str()
            .unwrap_or("")
            .starts_with(&lab.server_ip),
        "{peer}"
    );
    assert!(
        peer["build"].as_str().unwrap_or("").contains("(commit "),
        "{peer}"
    );
    assert_eq!(
        rec["build"], peer["build"],
        "the same executable at both ends"
    );
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../schemas/run.v1.schema.json")).expect("schema");
    let schema = jsonschema::validator_for(&schema).expect("valid schema");
    let wrong: Vec<String> = schema.iter_errors(&rec).map(|e| e.to_string()).collect();
    assert!(wrong.is_empty(), "the record breaks the schema: {wrong:?}");
    let cached = lab.cached();
    assert_eq!(cached.len(), 1, "one cached build: {cached:?}");
    assert!(cached[0].to_string_lossy().contains(id));
    let inode = std::fs::metadata(&cached[0]).expect("cached").ino();
    let cleared = lab.far_end_clears(Duration::from_secs(1));
    assert!(
        cleared.is_ok(),
        "plumb left on the far end after a run: {cleared:?}"
    );
    eprintln!("first run (with copy) took {took:?}");

    // Two iterations: each is a session of the same far-end server, which
    // sets the run's server knob for each (the ssh login is the
    // permission) and puts it back.
    let mut args = args;
    let at = args
        .iter()
        .position(|a| a == "--iterations")
        .expect("iterations")
        + 1;
    args[at] = "2".into();
    let rmem = || {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.server_ns,
                "cat",
                "/proc/sys/net/ipv4/tcp_rmem",
            ])
            .output()
            .expect("ip netns exec");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rmem_before = rmem();
    let want = "4096 77777 6291456";
    args.extend([
        "--server-knob".into(),
        format!("sysctl:net.ipv4.tcp_rmem={want}"),
    ]);
    let t0 = Instant::now();
    let second = lab.run(&ssh, &args);
    let err = text(&second.stderr);
    assert!(second.status.success(), "second run failed: {err}");
    assert!(
        !err.contains("copying"),
        "the second run copied again: {err}"
    );
    assert_eq!(std::fs::metadata(&cached[0]).expect("cached").ino(), inode);
    let rec: serde_json::Value = serde_json::from_slice(&second.stdout).expect("json");
    let its = rec["iterations"].as_array().expect("iterations");
    assert_eq!(its.len(), 2, "{rec}");
    for it in its {
        assert!(common::f(&it["derived"]["throughput_bps"]) > 0.0);
    }
    let said = rec["server_knobs"][0].as_str().unwrap_or("");
    assert!(
        said.starts_with(&format!(
            "knob sysctl:net.ipv4.tcp_rmem@{}: ",
            lab.server_ns
        )) && said.ends_with(&format!("{rmem_before} -> {want}")),
        "{rec}"
    );
    assert_eq!(rmem(), rmem_before, "the far end's knob was not put back");
    assert!(lab.far_end_clears(Duration::from_secs(1)).is_ok());
    eprintln!("second run took {:?}", t0.elapsed());

    // ssh over one address, the test over another of the far host's.
    let net = lab.server_ip.strip_suffix(".2").expect("x.2");
    let test_ip = format!("{net}.20");
    sh(Command::new("ip").args([
        "-n",
        &lab.server_ns,
        "addr",
        "add",
        &format!("{test_ip}/24"),
        "dev",
        "veth0",
    ]));
    let mut args = lab.stream(&lab.url(), "500ms");
    args.extend(["--server-address".to_string(), test_ip.clone()]);
    let third = lab.run(&ssh, &args);
    assert!(third.status.success(), "{}", text(&third.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&third.stdout).expect("json");
    let addr = rec["peer"]["address"].as_str().unwrap_or("");
    assert!(addr.starts_with(&format!("{test_ip}:")), "{addr}");
    assert!(common::f(&rec["iterations"][0]["derived"]["throughput_bps"]) > 0.0);
}

#[test]
fn no_plumb_stays_on_the_far_host_after_a_failed_run_or_a_killed_client() {
    let Some(lab) = lab() else {
        return;
    };
    let ssh = lab.ssh_command("client_key");

    // The far end refuses the spec: the run fails after the server started.
    let mut args = lab.stream(&lab.url(), "1s");
    args.extend(["--server-cpus".to_string(), "4095".to_string()]);
    let failed = lab.run(&ssh, &args);
    let err = text(&failed.stderr);
    assert_eq!(failed.status.code(), Some(2), "{err}");
    assert!(err.contains("4095"), "{err}");
    let cleared = lab.far_end_clears(Duration::from_secs(1));
    assert!(
        cleared.is_ok(),
        "plumb left after a failed run: {cleared:?}"
    );

    // A knob the far host cannot set stops the run in one line naming it.
    let mut args = lab.stream(&lab.url(), "1s");
    args.extend([
        "--server-knob".into(),
        "sysctl:net.core.no_such_knob=1".into(),
    ]);
    let failed = lab.run(&ssh, &args);
    let err = text(&failed.stderr);
    assert_eq!(failed.status.code(), Some(2), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("--server-knob") && l.contains("net.core.no_such_knob")),
        "{err}"
    );
    assert!(lab.far_end_clears(Duration::from_secs(1)).is_ok());

    // Ctrl-C mid-run: the partial result is reported, the far end ends.
    let client = lab.mid_run(&ssh, Stdio::piped);
    sh(Command::new("kill").args(["-INT", &client.id().to_string()]));
    let t0 = Instant::now();
    let out = client.wait_with_output().expect("output");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(rec["complete"], false);
    assert!(common::f(&rec["iterations"][0]["derived"]["throughput_bps"]) > 0.0);
    let cleared = lab.far_end_clears(Duration::from_secs(1));
    assert!(cleared.is_ok(), "plumb left after Ctrl-C: {cleared:?}");

    // The ssh connection drops mid-run: the far end ends, the client keeps
    // what it measured, marked incomplete, and says what happened to ssh.
    let client = lab.mid_run(&ssh, Stdio::piped);
    let ssh_pids: Vec<u32> = common::children(client.id())
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "ssh")
        })
        .collect();
    assert_eq!(ssh_pids.len(), 1, "one ssh: {ssh_pids:?}");
    sh(Command::new("kill").args(["-9", &ssh_pids[0].to_string()]));
    let t0 = Instant::now();
    let out = client.wait_with_output().expect("output");
    let err = text(&out.stderr);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "{:?}: {err}",
        t0.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("ssh was killed"), "{err}");
    let cleared = lab.far_end_clears(Duration::from_secs(5));
    assert!(cleared.is_ok(), "plumb left after ssh dropped: {cleared:?}");

    // kill -9 of the client mid-run.
    let mut client = lab.mid_run(&ssh, Stdio::null);
    assert!(
        client.try_wait().expect("wait").is_none(),
        "the run ended early"
    );
    // ip netns exec runs plumb in place: the child is plumb itself.
    sh(Command::new("kill").args(["-9", &client.id().to_string()]));
    let _ = client.wait();
    let cleared = lab.far_end_clears(Duration::from_secs(5));
    assert!(
        cleared.is_ok(),
        "plumb left 5 s after kill -9 of the client: {cleared:?}"
    );
    eprintln!("far end gone {:?} after kill -9", cleared.unwrap());
}

/// Every command line and environment of the host, as they are now.
fn sample_proc(into: &mut Vec<String>) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.filter_map(Result::ok) {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        for what in ["cmdline", "environ"] {
            if let Ok(b) = std::fs::read(format!("/proc/{pid}/{what}")) {
                if !b.is_empty() {
                    into.push(String::from_utf8_lossy(&b).replace('\0', " "));
                }
            }
        }
    }
}

#[test]
fn the_session_key_is_on_no_command_line_and_in_no_environment() {
    let Some(lab) = lab() else {
        return;
    };
    let ssh = lab.ssh_command("client_key");
    // A first run puts the build in the cache, so that the sampled one's
    // channel carries the key and nothing else. It goes to an ssh_config
    // alias, whose address for the test comes from ssh -G.
    let config = lab.dir.join("ssh_config");
    std::fs::write(
        &config,
        format!(
            "Host plumb-lab\n  HostName {}\n  Port 2222\n  User root\n",
            lab.server_ip
        ),
    )
    .expect("ssh config");
    let aliased = ssh.replace("-F /dev/null", &format!("-F {}", config.display()));
    let first = lab.run(&aliased, &lab.stream("ssh://plumb-lab", "500ms"));
    assert!(first.status.success(), "{}", text(&first.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&first.stdout).expect("json");
    let addr = rec["peer"]["address"].as_str().unwrap_or("");
    assert!(addr.starts_with(&format!("{}:", lab.server_ip)), "{addr}");

    // ssh through a wrapper that keeps what plumb writes on the channel.
    let wrapper = lab.dir.join("ssh-tee");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ntee -a {}/channel | {} \"$@\"\n",
            lab.dir.display(),
            ssh
        ),
    )
    .expect("wrapper");
    sh(Command::new("chmod").arg("700").arg(&wrapper));
    let args = lab.stream(&lab.url(), "2s");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut client = lab
        .plumb(&wrapper.display().to_string(), &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("plumb starts");
    let mut samples = Vec::new();
    let until = Instant::now() + Duration::from_secs(30);
    while client.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < until, "the run did not end");
        sample_proc(&mut samples);
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = client.wait_with_output().expect("output");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let channel = std::fs::read_to_string(lab.dir.join("channel")).expect("channel");
    let key = channel.lines().next().unwrap_or("").trim().to_string();
    assert_eq!(
        key.len(),
        64,
        "the key goes first on the channel: {channel:?}"
    );
    assert!(
        samples.iter().any(|s| s.contains("serve --ssh-session")),
        "the sampling never saw the far end's server"
    );
    let seen: Vec<&String> = samples.iter().filter(|s| s.contains(&key)).collect();
    assert!(seen.is_empty(), "the key was readable in /proc: {seen:?}");
}

/// Runs a doomed `plumb run` and returns its stderr, checking the exit
/// status, the time it took and that it said one line.
fn fails_in_one_line(lab: &Lab, ssh: &str, server: &str) -> String {
    let t0 = Instant::now();
    let out = lab.run(ssh, &lab.stream(server, "1s"));
    let took = t0.elapsed();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(server), "names the server: {err}");
    assert!(lab.far_end_clears(Duration::from_secs(1)).is_ok());
    eprintln!("{took:?}: {}", err.trim());
    err
}

#[test]
fn a_wrong_host_a_refused_key_and_a_missing_shell_end_in_one_line() {
    let Some(lab) = lab() else {
        return;
    };
    let net = lab.server_ip.strip_suffix(".2").expect("x.2");
    let wrong = format!("ssh://root@{net}.3:2222");
    let err = fails_in_one_line(&lab, &lab.ssh_command("client_key"), &wrong);
    assert!(err.contains("ssh failed (exit 255)"), "{err}");
    assert!(err.contains("198.18."), "ssh's own word on the host: {err}");

    let err = fails_in_one_line(&lab, &lab.ssh_command("other_key"), &lab.url());
    assert!(err.contains("ssh failed (exit 255)"), "{err}");
    assert!(err.contains("Permission denied"), "{err}");

    // A host key other than the one known: ssh's word and the key it saw.
    let known = lab.dir.join("known_wrong");
    let other = std::fs::read_to_string(lab.dir.join("other_key.pub")).expect("key");
    std::fs::write(&known, format!("[{}]:2222 {other}", lab.server_ip)).expect("known");
    let strict = format!(
        "{} -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes",
        lab.ssh_command("client_key")
            .replace(" -o LogLevel=ERROR", "")
            .split(" -o UserKnownHostsFile")
            .next()
            .expect("words"),
        known.display()
    );
    let err = fails_in_one_line(&lab, &strict, &lab.url());
    assert!(err.contains("ssh failed (exit 255)"), "{err}");
    assert!(err.contains("SHA256:"), "the host key's fingerprint: {err}");

    // A dynamic build is not copied without being asked to.
    let args: Vec<String> = lab
        .stream(&lab.url(), "1s")
        .into_iter()
        .filter(|a| a != "--ssh-copy-dynamic")
        .collect();
    let out = lab.run(&lab.ssh_command("client_key"), &args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("not static") && err.contains("--target x86_64-unknown-linux-musl"),
        "{err}"
    );
    assert!(lab.cached().is_empty(), "nothing was copied");

    let nologin = Lab::new("", true);
    let err = fails_in_one_line(&nologin, &nologin.ssh_command("client_key"), &nologin.url());
    assert!(
        err.contains("not available"),
        "the login shell's word: {err}"
    );
    assert!(nologin.cached().is_empty(), "nothing was copied");
}

#[test]
fn ssh_flags_are_checked_before_anything_runs() {
    for (args, says) in [
        (vec!["--server", "ssh://"], "--server"),
        (vec!["--server", "ssh://h:0"], "--server"),
        (
            vec!["--server", "127.0.0.1:1", "--ssh-command", "ssh"],
            "--ssh-command",
        ),
        (
            vec!["--server", "ssh://h", "--server-address", "nowhere"],
            "--server-address",
        ),
    ] {
        let mut all = vec!["run", "stream", "--no-store"];
        all.extend(args.iter());
        let out = common::plumb().args(&all).output().expect("runs");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn a_sweep_and_a_check_run_their_points_against_a_server_started_over_ssh() {
    let Some(lab) = lab() else {
        return;
    };
    let ssh = lab.ssh_command("client_key");
    let file = lab.dir.join("over-ssh.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"over-ssh\"\niterations = 1\nserver = \"{}\"\n\
             [base]\nworkload = \"rr\"\nduration = \"300ms\"\nwarmup = \"100ms\"\n\
             [matrix]\nreq_size = [1, 100]\n",
            lab.url()
        ),
    )
    .unwrap();
    let sweep = lab
        .plumb(
            &ssh,
            &[
                "sweep",
                file.to_str().unwrap(),
                "--label",
                "far",
                "--ssh-copy-dynamic",
            ],
        )
        .output()
        .expect("plumb runs");
    assert!(sweep.status.success(), "sweep: {}", text(&sweep.stderr));
    assert!(lab.far_end_clears(Duration::from_secs(1)).is_ok());

    // `check` runs the stored points again, against the far host too.
    let check = lab
        .plumb(
            &ssh,
            &[
                "check",
                "--baseline",
                "far",
                "--label",
                "again",
                "--iterations",
                "2",
                "--server",
                &lab.url(),
                "--ssh-copy-dynamic",
            ],
        )
        .output()
        .expect("plumb runs");
    let err = text(&check.stderr);
    // A verdict, whichever (one iteration a point may not tell), not an
    // error (128).
    assert!(
        matches!(check.status.code(), Some(0 | 1 | 125)),
        "check: {:?} {err}",
        check.status
    );
    assert!(lab.far_end_clears(Duration::from_secs(1)).is_ok());

    let export = lab.plumb(&ssh, &["export"]).output().expect("plumb runs");
    assert!(export.status.success(), "{}", text(&export.stderr));
    let all: serde_json::Value = serde_json::from_slice(&export.stdout).expect("json");
    let runs = all["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4, "2 points swept, 2 checked: {all}");
    for r in runs {
        let rec = &r["record"];
        assert_eq!(rec["peer"]["started"], "ssh", "{}", rec["label"]);
        assert!(
            rec["peer"]["address"]
                .as_str()
                .unwrap_or("")
                .starts_with(&lab.server_ip),
            "{}",
            rec["peer"]
        );
        assert!(common::f(&rec["iterations"][0]["derived"]["tps"]) > 0.0);
        // The spec names the far host, as a run with --server would.
        assert_eq!(
            rec["spec"]["server_host"],
            lab.server_ip.as_str(),
            "{}",
            rec["spec"]
        );
    }
}

/// Whether process `pid` holds an established TCP connection: one of its
/// descriptors is a socket that its namespace's /proc/net/tcp{,6} lists in
/// state 01.
fn connected(pid: u32) -> bool {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let link = std::fs::read_link(e.path()).ok()?;
            let link = link.to_string_lossy();
            Some(
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    ["tcp", "tcp6"].iter().any(|t| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{t}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .any(|f| f.len() > 9 && f[3] == "01" && inodes.iter().any(|i| i == f[9]))
    })
}
