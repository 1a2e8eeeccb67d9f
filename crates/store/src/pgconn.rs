//! Reaching a PostgreSQL server as libpq would: the URL's parameters, then
//! libpq's variables and `.pgpass` (TLS itself in pgtls.rs), and errors
//! that say what to fix. Kept apart from postgres.rs, which is the store's
//! SQL.

use crate::pgtls::{self, MakeRustlsConnect, SslMode};
use crate::StoreError;
use ::postgres::{config::Host, Client, Config};
use std::str::FromStr;

/// The URL as it may be shown: without a password, in the user part or in
/// the query.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let rest = match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{user}@{host}")
        }
        None => rest.to_string(),
    };
    let mut out = format!("{scheme}://{rest}");
    if let Some(q) = query {
        let kept: Vec<&str> = q
            .split('&')
            .filter(|kv| !kv.to_ascii_lowercase().starts_with("password="))
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
    }
    out
}

fn query_param<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    let (_, q) = url.split_once('?')?;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// `url` without the query parameters named in `keys`.
fn without_params(url: &str, keys: &[&str]) -> String {
    let Some((base, q)) = url.split_once('?') else {
        return url.to_string();
    };
    let kept: Vec<&str> = q
        .split('&')
        .filter(|kv| !keys.contains(&kv.split_once('=').map_or(*kv, |(k, _)| k)))
        .collect();
    if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// A URL query value with its %XX escapes read.
fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = || std::str::from_utf8(b.get(i + 1..i + 3)?).ok();
        match (b[i], hex().and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The password of the first line of a `.pgpass` file matching the server,
/// as libpq reads it: `host:port:database:user:password`, `*` matching
/// anything, `\:` and `\\` escaping.
pub fn pgpass_lookup(text: &str, host: &str, port: u16, db: &str, user: &str) -> Option<String> {
    let port = port.to_string();
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut fields = Vec::new();
        let mut cur = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => cur.extend(chars.next()),
                ':' if fields.len() < 4 => fields.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            }
        }
        fields.push(cur);
        if fields.len() != 5 {
            continue;
        }
        let hit = |field: &str, want: &str| field == "*" || field == want;
        if hit(&fields[0], host)
            && hit(&fields[1], &port)
            && hit(&fields[2], db)
            && hit(&fields[3], user)
        {
            return fields.pop();
        }
    }
    None
}

fn pgpass_file() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        return Some(p.into());
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| std::path::Path::new(&h).join(".pgpass"))
}

fn connect_err(shown: &str, message: String) -> StoreError {
    StoreError::Connect {
        path: shown.to_string(),
        message,
    }
}

/// Connects to the server named by `url`; `shown` is the URL without its
/// password, for messages.
pub(crate) fn connect(url: &str, shown: &str) -> Result<Client, StoreError> {
    let (mut config, mode, tls) = configure(url, shown)?;
    let server = Server::of(&config);
    if config.get_password().is_none() {
        if let Some(p) = std::env::var("PGPASSWORD").ok().filter(|p| !p.is_empty()) {
            config.password(p);
        } else if let Some(p) = pgpass_file()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|text| {
                pgpass_lookup(&text, &server.host, server.port, &server.db, &server.user)
            })
        {
            config.password(p);
        }
    }
    config
        .connect(tls)
        .map_err(|e| connect_err(shown, refused(&e, mode, &server)))
}

/// The URL's configuration with libpq's defaults, the TLS mode and the
/// connector for it.
fn configure(url: &str, shown: &str) -> Result<(Config, SslMode, MakeRustlsConnect), StoreError> {
    // The URL first, then libpq's variables; each value with its source.
    let param = |key: &'static str, var: &'static str| {
        query_param(url, key)
            .map(|v| (percent_decode(v), key))
            .or_else(|| {
                std::env::var(var)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .map(|v| (v, var))
            })
    };
    let mode = param("sslmode", "PGSSLMODE")
        .map(|(m, from)| SslMode::parse(&m, from))
        .transpose()
        .map_err(|e| connect_err(shown, e))?
        .unwrap_or(SslMode::Prefer);
    let rootcert = param("sslrootcert", "PGSSLROOTCERT").map(|(v, _)| v);
    let tls = pgtls::connector(mode, rootcert.as_deref()).map_err(|e| connect_err(shown, e))?;
    // The postgres crate knows neither verify-* nor sslrootcert: both are
    // taken here, and it is told only whether to insist on TLS.
    let url = &without_params(url, &["sslmode", "sslrootcert"]);
    let mut config = Config::from_str(url)
        .map_err(|e| connect_err(shown, format!("not a PostgreSQL URL: {e}")))?;
    config.ssl_mode(mode.wire());
    if config.get_user().is_none() {
        if let Some(u) = ["PGUSER", "USER"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        {
            config.user(&u);
        }
    }
    if config.get_hosts().is_empty() {
        config.host("localhost");
    }
    if config.get_ports().is_empty() {
        config.port(5432);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    Ok((config, mode, tls))
}

/// Whom a connection is for, as `.pgpass` matches it and errors name it.
struct Server {
    host: String,
    port: u16,
    db: String,
    user: String,
}

impl Server {
    fn of(config: &Config) -> Server {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let user = config.get_user().unwrap_or("").to_string();
        Server {
            host,
            port: config.get_ports().first().copied().unwrap_or(5432),
            db: config.get_dbname().unwrap_or(&user).to_string(),
            user,
        }
    }
}

/// What to do about a connection the server or TLS refused.
fn refused(e: &::postgres::Error, mode: SslMode, server: &Server) -> String {
    let Server {
        host,
        port,
        db,
        user,
    } = server;
    let why = chain(e);
    let auth = "give the password in the URL, in PGPASSWORD, or in ~/.pgpass \
                (host:port:database:user:password)";
    if let Some(db_err) = e.as_db_error() {
        use ::postgres::error::SqlState;
        match db_err.code() {
            // What pg_hba.conf refuses, the password aside: often a
            // connection in the clear where the server wants TLS.
            c if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
                && db_err.message().contains("pg_hba.conf") =>
            {
                format!(
                    "the server refuses this connection ({}); where it asks for TLS, \
                     use sslmode=require or verify-full",
                    db_err.message()
                )
            }
            c if *c == SqlState::INVALID_PASSWORD
                || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
            {
                format!(
                    "authentication failed for user '{user}' ({}); {auth}",
                    db_err.message()
                )
            }
            c if *c == SqlState::INVALID_CATALOG_NAME => format!(
                "database '{db}' does not exist on the server; create it (createdb {db}) or fix the URL"
            ),
            _ => db_err.message().to_string(),
        }
    } else if why.contains("server does not support TLS") {
        format!(
            "sslmode={} needs TLS and the server at {host}:{port} does not offer it; \
             turn ssl on in its postgresql.conf, or use sslmode=prefer",
            mode.name()
        )
    } else if why.contains("certificate") {
        format!(
            "TLS with {host}:{port} failed: {}; sslrootcert must be the CA that signed \
             the server's certificate, and for verify-full the URL's host one it names \
             (verify-ca checks the CA only)",
            why
        )
    } else if why.contains("password missing") {
        format!("the server asks user '{user}' for a password and none was given; {auth}")
    } else {
        format!(
            "cannot reach the PostgreSQL server at {host}:{port} ({}); \
             check that it runs there and accepts TCP connections from this host",
            why
        )
    }
}

/// An error with its causes: the postgres crate's own text is often just
/// the kind ("invalid configuration", "error connecting to server").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_lines_match_like_libpq() {
        let text = "# comment\n\
                    db1.lab:5432:plumb:ann:secret1\n\
                    *:5433:*:ann:sec\\:ret2\n\
                    *:*:*:*:fallback\\\\\n";
        assert_eq!(
            pgpass_lookup(text, "db1.lab", 5432, "plumb", "ann").as_deref(),
            Some("secret1")
        );
        assert_eq!(
            pgpass_lookup(text, "other", 5433, "x", "ann").as_deref(),
            Some("sec:ret2")
        );
        assert_eq!(
            pgpass_lookup(text, "db1.lab", 5432, "plumb", "bob").as_deref(),
            Some("fallback\\")
        );
        assert_eq!(pgpass_lookup("h:1:d:u\n", "h", 1, "d", "u"), None);
        assert_eq!(pgpass_lookup("", "h", 1, "d", "u"), None);
    }

    #[test]
    fn urls_are_shown_without_their_password() {
        assert_eq!(
            redact("postgres://ann:s3cret@db.lab:5433/plumb?sslmode=disable"),
            "postgres://ann@db.lab:5433/plumb?sslmode=disable"
        );
        assert_eq!(
            redact("postgresql://db.lab/plumb?password=x&sslmode=prefer"),
            "postgresql://db.lab/plumb?sslmode=prefer"
        );
        assert_eq!(redact("postgres://ann@h/db"), "postgres://ann@h/db");
    }

    #[test]
    fn tls_parameters_are_read_here_and_kept_from_the_postgres_crate() {
        let e = connect("postgres://a@127.0.0.1:1/d?sslmode=verify", "shown")
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("sslmode=verify is not a mode"),
            "{e}"
        );
        assert_eq!(
            without_params(
                "postgres://a@h/d?sslmode=require&application_name=x&sslrootcert=%2Fca.pem",
                &["sslmode", "sslrootcert"]
            ),
            "postgres://a@h/d?application_name=x"
        );
        assert_eq!(
            without_params("postgres://a@h/d?sslmode=disable", &["sslmode"]),
            "postgres://a@h/d"
        );
        assert_eq!(percent_decode("%2Fetc%2Fca%201.pem%"), "/etc/ca 1.pem%");
    }
}
