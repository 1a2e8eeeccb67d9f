//! A PostgreSQL server of one test (Debian's postgresql package: initdb
//! and pg_ctl, as its unprivileged user when the test runs as root), on a
//! free port of 127.0.0.1, removed when dropped. Shared by the store's
//! tests and the command-line tests of the workspace (by path); the
//! including crate has a `skip`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

// The including test crate's own, so that its skips are counted with the
// others.
use crate::skip;

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The directory with initdb and pg_ctl: PATH first, else Debian's
/// versioned directory (its binaries are not on PATH).
fn pg_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
    });
    on_path.or_else(|| {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|d| d.join("initdb").is_file())
            .collect();
        dirs.sort_by_key(|d| {
            d.parent()
                .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
                .unwrap_or(0)
        });
        dirs.pop()
    })
}

pub const PASSWORD: &str = "pl-umb secret";

/// A PostgreSQL server of this test alone, on a free port of 127.0.0.1,
/// stopped and removed when dropped.
pub struct PgServer {
    pub dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    root: bool,
}

impl PgServer {
    /// `md5`: clients must give the password `PASSWORD`; otherwise trust.
    pub fn start(name: &str, md5: bool) -> Option<PgServer> {
        PgServer::start_with(name, md5, false)
    }

    /// With `tls`, the server has a certificate for `localhost` only,
    /// signed by the CA in `ca.pem` (beside it `other-ca.pem`, a CA that
    /// signed nothing), takes clients of databases other than `postgres`
    /// over TLS alone, and logs each connection.
    pub fn start_with(name: &str, md5: bool, tls: bool) -> Option<PgServer> {
        let Some(bin) = pg_bin() else {
            skip("no initdb/pg_ctl (install Debian's postgresql package)");
            return None;
        };
        let root = is_root();
        let has_user = || {
            Command::new("id")
                .arg("postgres")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if root && !has_user() {
            skip("running as root, and no postgres user to run the server as");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("plumb-pg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if tls && !make_certificates(&dir) {
            return None;
        }
        if root {
            // The server refuses to run as root: its files belong to the
            // package's unprivileged user.
            let ok = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                skip("cannot hand the data directory to the postgres user");
                return None;
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = PgServer {
            dir: dir.clone(),
            bin,
            port,
            root,
        };
        let auth = if md5 { "md5" } else { "trust" };
        succeeds(
            "initdb",
            server
                .command("initdb")
                .arg("-D")
                .arg(dir.join("data"))
                .args(["-U", "plumb", "-A", auth, "--no-sync", "-E", "UTF8"])
                .arg(format!("--pwfile={}", pwfile.display())),
        );
        let mut options = format!(
            "-k {} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.display()
        );
        if tls {
            let data = dir.join("data");
            std::fs::write(
                data.join("pg_hba.conf"),
                format!(
                    "local all all trust\nhostssl all all 127.0.0.1/32 {auth}\n\
                     host postgres all 127.0.0.1/32 {auth}\n"
                ),
            )
            .unwrap();
            options += &format!(
                " -c ssl=on -c ssl_cert_file={d}/server.pem -c ssl_key_file={d}/server.key \
                 -c log_connections=on",
                d = dir.display()
            );
        }
        let out = server
            .command("pg_ctl")
            .arg("-D")
            .arg(dir.join("data"))
            .arg("-l")
            .arg(dir.join("log"))
            .arg("-o")
            .arg(options)
            .args(["-w", "start"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(dir.join("log")).unwrap_or_default()
        );
        Some(server)
    }

    pub fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        if self.root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    /// A new, empty database on this server and its URL.
    pub fn database(&self, name: &str) -> String {
        let mut c = postgres::Client::connect(
            &format!(
                "host=127.0.0.1 port={} user=plumb password='{PASSWORD}' dbname=postgres",
                self.port
            ),
            postgres::NoTls,
        )
        .unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        self.url(name)
    }

    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://plumb@127.0.0.1:{}/{db}?sslmode=disable",
            self.port
        )
    }

    pub fn client(&self, db: &str) -> postgres::Client {
        postgres::Client::connect(
            &format!(
                "host=127.0.0.1 port={} user=plumb password='{PASSWORD}' dbname={db}",
                self.port
            ),
            postgres::NoTls,
        )
        .unwrap()
    }
}

/// Runs a tool of the set-up, which must succeed: else the test fails
/// with `what` and the tool's stderr.
#[track_caller]
fn succeeds(what: &str, cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for `localhost` (no address) that it signs,
/// and a second CA, made with `openssl` in `dir`.
fn make_certificates(dir: &Path) -> bool {
    if !Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        skip(
            "no openssl to make certificates (apt-get install openssl; tests/setup.sh installs it)",
        );
        return false;
    }
    let openssl = |args: &[&str]| {
        succeeds(
            &format!("openssl {args:?}"),
            Command::new("openssl").args(args).current_dir(dir),
        );
    };
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        let (k, c, subj) = (
            format!("{ca}.key"),
            format!("{ca}.pem"),
            format!("/CN=plumb test {ca}"),
        );
        let mut a = vec!["req", "-x509", "-days", "2", "-subj", &subj];
        a.extend(key);
        a.extend(["-keyout", &k, "-out", &c]);
        a.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        a.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(&a);
    }
    let mut a = vec![
        "req",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ];
    a.extend(key);
    openssl(&a);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.pem",
    ]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.join("server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    true
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
