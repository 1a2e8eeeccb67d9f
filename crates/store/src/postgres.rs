//! The result store on a PostgreSQL server, for a lab whose hosts share one
//! database. The layout mirrors the SQLite one (lib.rs) so that both answer
//! every query alike; only the SQL that differs lives here.
//!
//! TLS follows the URL's sslmode and sslrootcert as libpq reads them
//! (pgtls.rs).

use crate::pgtls::{self, SslMode};
use crate::{
    tags::{self, RunTag},
    Columns, Environment, ExportedRun, RunId, RunRecord, RunRow, StoreError, SCHEMA_VERSION,
};
use ::postgres::{config::Host, types::ToSql, Client, Config, GenericClient};
use std::str::FromStr;

/// Versioned steps, each taking the schema to its version. PostgreSQL
/// support began at SQLite's v6, so its first step builds that layout whole.
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (
        6,
        r#"CREATE TABLE environments (
        hash TEXT PRIMARY KEY,
        facts TEXT NOT NULL
    );
    CREATE TABLE runs (
        id BIGSERIAL PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,
        -- byte order, as SQLite compares: the normalised times then sort
        -- as times whatever the database's locale
        started_at TEXT COLLATE "C" NOT NULL,
        label TEXT NOT NULL,
        workload TEXT NOT NULL,
        spec_key TEXT NOT NULL,
        summary TEXT NOT NULL,
        complete BOOLEAN NOT NULL,
        iterations BIGINT NOT NULL,
        throughput_bps DOUBLE PRECISION,
        tps DOUBLE PRECISION,
        env_hash TEXT REFERENCES environments(hash),
        server_env_hash TEXT REFERENCES environments(hash),
        record TEXT NOT NULL
    );
    CREATE INDEX runs_label ON runs(label, started_at);
    CREATE INDEX runs_spec_key ON runs(spec_key);
    CREATE TABLE iterations (
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx BIGINT NOT NULL,
        complete BOOLEAN NOT NULL,
        window_s DOUBLE PRECISION NOT NULL,
        throughput_bps DOUBLE PRECISION NOT NULL,
        client_cpu_s_per_gb DOUBLE PRECISION NOT NULL,
        server_cpu_s_per_gb DOUBLE PRECISION NOT NULL,
        host_cpu_s_per_gb DOUBLE PRECISION NOT NULL,
        retransmits BIGINT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
    CREATE TABLE interval_samples (
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        iteration BIGINT NOT NULL,
        role TEXT NOT NULL,
        t_s DOUBLE PRECISION NOT NULL,
        dt_s DOUBLE PRECISION NOT NULL,
        bytes_sent BIGINT NOT NULL,
        bytes_received BIGINT NOT NULL
    );
    CREATE INDEX interval_samples_run ON interval_samples(run_id, iteration);
    CREATE TABLE run_tags (
        run_id BIGINT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        experiment TEXT NOT NULL,
        point TEXT NOT NULL,
        variant TEXT,
        seed BIGINT
    );
    CREATE INDEX run_tags_experiment ON run_tags(experiment, point);"#,
    ),
    // As SQLite's v7: the variant's place in the experiment file.
    (7, "ALTER TABLE run_tags ADD COLUMN variant_rank BIGINT;"),
];

/// The advisory lock that serialises migrations: two first writers on a new
/// database would otherwise both create the tables and one would fail.
const MIGRATION_LOCK: i64 = 0x706c_756d_6200; // "plumb\0"

/// Taken shared by every write of runs and alone by a delete: a delete
/// drops the environments no run refers to, and must not drop one that a
/// run being written at that moment found already stored. (SQLite has one
/// writer at a time, so there it cannot happen.)
const ENVIRONMENTS_LOCK: i64 = 0x706c_756d_6201;

/// Taken by an import, so that two imports of the same file add each run
/// once, as on SQLite, instead of one failing on the uuid.
const IMPORT_LOCK: i64 = 0x706c_756d_6202;

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
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("").to_string();
    let db = config.get_dbname().unwrap_or(&user).to_string();
    let password_given = config.get_password().is_some();
    if !password_given {
        if let Some(p) = std::env::var("PGPASSWORD").ok().filter(|p| !p.is_empty()) {
            config.password(p);
        } else if let Some(p) = pgpass_file()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|text| pgpass_lookup(&text, &host, port, &db, &user))
        {
            config.password(p);
        }
    }
    config.connect(tls).map_err(|e| {
        let why = chain(&e);
        let auth = "give the password in the URL, in PGPASSWORD, or in ~/.pgpass \
                    (host:port:database:user:password)";
        let message = if let Some(db_err) = e.as_db_error() {
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
        };
        connect_err(shown, message)
    })
}

/// An error with its causes: the postgres crate's own text is often just
/// the kind ("invalid configuration", "error connecting to server").
fn chain(e: &dyn std::error::Error) -> String {
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

fn err(shown: &str) -> impl Fn(::postgres::Error) -> StoreError + '_ {
    move |e| StoreError::Postgres {
        path: shown.to_string(),
        message: match e.as_db_error() {
            Some(db) => db.message().to_string(),
            None => chain(&e),
        },
    }
}

fn version_in(c: &mut impl GenericClient) -> Result<i64, ::postgres::Error> {
    // Read from pg_class itself, not through to_regclass: the catalog cache
    // is not refreshed by an advisory lock, so after waiting for another
    // plumb's migration it can still say the table is missing.
    let exists: bool = c
        .query_one(
            "SELECT EXISTS(SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relname = 'plumb_schema' AND n.nspname = current_schema())",
            &[],
        )?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i64> = c
        .query_one("SELECT max(version) FROM plumb_schema", &[])?
        .get(0);
    Ok(v.unwrap_or(0))
}

pub(crate) fn schema_version(c: &mut Client, shown: &str) -> Result<i64, StoreError> {
    version_in(c).map_err(err(shown))
}

/// Brings the database to the current schema, refusing one from a newer
/// plumb.
pub(crate) fn setup(c: &mut Client, shown: &str) -> Result<(), StoreError> {
    let too_new = |found| StoreError::TooNew {
        path: shown.to_string(),
        found,
        known: SCHEMA_VERSION,
    };
    // The common case, an up-to-date database, takes no lock and needs no
    // right to create tables.
    let found = schema_version(c, shown)?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let e = err(shown);
    let mut tx = c.transaction().map_err(&e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(&e)?;
    // Read again under the lock: another plumb may have migrated meanwhile.
    let found = version_in(&mut tx).map_err(&e)?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    tx.batch_execute("CREATE TABLE IF NOT EXISTS plumb_schema (version BIGINT NOT NULL)")
        .map_err(&e)?;
    let mut version = found;
    for (to, sql) in MIGRATIONS.iter().filter(|(to, _)| *to > found) {
        tx.batch_execute(sql).map_err(&e)?;
        version = *to;
    }
    tx.execute("DELETE FROM plumb_schema", &[]).map_err(&e)?;
    tx.execute(
        "INSERT INTO plumb_schema (version) VALUES ($1)",
        &[&version],
    )
    .map_err(&e)?;
    tx.commit().map_err(&e)
}

/// Writes runs (each with its tag, if any) in one transaction. With
/// `skip_known`, a run already stored (by uuid, else by time, label and
/// spec key) is left out, as an import does.
pub(crate) fn insert_runs(
    c: &mut Client,
    shown: &str,
    runs: &[(&RunRecord, Option<&Environment>, Option<&RunTag>)],
    skip_known: bool,
) -> Result<Vec<RunId>, StoreError> {
    let e = err(shown);
    let mut tx = c.transaction().map_err(&e)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock_shared($1)",
        &[&ENVIRONMENTS_LOCK],
    )
    .map_err(&e)?;
    if skip_known {
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&IMPORT_LOCK])
            .map_err(&e)?;
    }
    let mut ids = Vec::new();
    for (record, env, tag) in runs {
        if skip_known {
            let exists: bool = match &record.uuid {
                Some(u) => tx.query_one("SELECT EXISTS(SELECT 1 FROM runs WHERE uuid = $1)", &[u]),
                None => tx.query_one(
                    "SELECT EXISTS(SELECT 1 FROM runs WHERE started_at = $1 AND label = $2 AND spec_key = $3)",
                    &[&record.started_at, &record.label, &record.spec_key],
                ),
            }
            .map_err(&e)?
            .get(0);
            if exists {
                continue;
            }
        }
        let id = insert_in(&mut tx, shown, record, *env)?;
        if let Some(tag) = tag {
            tx.execute(
                "INSERT INTO run_tags (run_id, experiment, point, variant, seed, variant_rank)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id.0,
                    &tag.experiment,
                    &tag.point,
                    &tag.variant,
                    &tag.seed.map(|s| s as i64),
                    &tag.variant_rank.map(i64::from),
                ],
            )
            .map_err(&e)?;
        }
        ids.push(id);
    }
    tx.commit().map_err(&e)?;
    Ok(ids)
}

fn insert_in(
    tx: &mut ::postgres::Transaction<'_>,
    shown: &str,
    record: &RunRecord,
    env: Option<&Environment>,
) -> Result<RunId, StoreError> {
    let e = err(shown);
    let mut put = |env: Option<Environment>| -> Result<Option<String>, StoreError> {
        let Some(env) = env else { return Ok(None) };
        let hash = env.hash();
        let facts = crate::json(&env.facts).map_err(|m| corrupt(shown, m))?;
        // Another plumb may store the same host's environment at the same
        // moment: the second waits for the first and then adds nothing.
        tx.execute(
            "INSERT INTO environments (hash, facts) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
            &[&hash, &facts],
        )
        .map_err(&e)?;
        Ok(Some(hash))
    };
    let env_hash = put(env.map(Environment::client_end))?;
    let server_env_hash = put(env.and_then(Environment::server_end))?;
    let uuid: String = match &record.uuid {
        Some(u) => u.clone(),
        None => tx
            .query_one("SELECT gen_random_uuid()::text", &[])
            .map_err(&e)?
            .get(0),
    };
    let cols = Columns::new(record, uuid).map_err(|m| corrupt(shown, m))?;
    let r = &cols.record;
    let id: i64 = tx
        .query_one(
            "INSERT INTO runs (started_at, label, workload, spec_key, summary, complete, iterations,
                               throughput_bps, env_hash, record, tps, server_env_hash, uuid)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
            &[
                &cols.started_at,
                &r.label,
                &cols.workload,
                &r.spec_key,
                &cols.summary,
                &r.complete,
                &(r.iterations.len() as i64),
                &cols.throughput_bps,
                &env_hash,
                &cols.json,
                &cols.tps,
                &server_env_hash,
                &cols.uuid,
            ],
        )
        .map_err(&e)?
        .get(0);
    let stmt = tx
        .prepare(
            "INSERT INTO iterations (run_id, idx, complete, window_s, throughput_bps, client_cpu_s_per_gb,
                                     server_cpu_s_per_gb, host_cpu_s_per_gb, retransmits)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .map_err(&e)?;
    for it in &r.iterations {
        let d = &it.derived;
        tx.execute(
            &stmt,
            &[
                &id,
                &i64::from(it.index),
                &it.complete,
                &it.window_s,
                &d.throughput_bps,
                &d.client_cpu_s_per_gb,
                &d.server_cpu_s_per_gb,
                &d.host_cpu_s_per_gb,
                &(d.retransmits as i64),
            ],
        )
        .map_err(&e)?;
    }
    // All samples in one statement: a run has thousands, and one round trip
    // each would dominate the write.
    let (mut iter, mut role, mut t, mut dt, mut sent, mut recv) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for it in &r.iterations {
        for (name, end) in [("client", &it.client), ("server", &it.server)] {
            for s in &end.intervals {
                iter.push(i64::from(it.index));
                role.push(name);
                t.push(s.t_s);
                dt.push(s.dt_s);
                sent.push(s.bytes_sent as i64);
                recv.push(s.bytes_received as i64);
            }
        }
    }
    if !iter.is_empty() {
        tx.execute(
            "INSERT INTO interval_samples (run_id, iteration, role, t_s, dt_s, bytes_sent, bytes_received)
             SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::float8[], $5::float8[], $6::bigint[], $7::bigint[])",
            &[&id, &iter, &role, &t, &dt, &sent, &recv],
        )
        .map_err(&e)?;
    }
    Ok(RunId(id))
}

fn corrupt(shown: &str, message: String) -> StoreError {
    StoreError::Postgres {
        path: shown.to_string(),
        message,
    }
}

/// A stored run as its columns hold it: record, both ends' facts, uuid.
pub(crate) type RawRun = (String, Option<String>, Option<String>, Option<String>);

pub(crate) fn get(c: &mut Client, shown: &str, id: RunId) -> Result<Option<RawRun>, StoreError> {
    let row = c
        .query_opt(
            "SELECT r.record, e.facts, s.facts, r.uuid FROM runs r
             LEFT JOIN environments e ON e.hash = r.env_hash
             LEFT JOIN environments s ON s.hash = r.server_env_hash
             WHERE r.id = $1",
            &[&id.0],
        )
        .map_err(err(shown))?;
    Ok(row.map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))))
}

/// The runs of `sql` (id, record, both environments, uuid) with `args` and
/// the limit, in one query.
pub(crate) fn raw_runs(
    c: &mut Client,
    shown: &str,
    sql: &str,
    args: &[String],
    limit: Option<i64>,
) -> Result<Vec<(i64, RawRun)>, StoreError> {
    Ok(filtered(c, shown, sql, args, limit)?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3), r.get(4))))
        .collect())
}

/// The rows of a filtered query (`Store::filtered`): its arguments, then
/// the limit where there is one.
fn filtered(
    c: &mut Client,
    shown: &str,
    sql: &str,
    args: &[String],
    limit: Option<i64>,
) -> Result<Vec<::postgres::Row>, StoreError> {
    let mut params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
    if let Some(n) = &limit {
        params.push(n);
    }
    c.query(sql, &params).map_err(err(shown))
}

pub(crate) fn list(
    c: &mut Client,
    shown: &str,
    sql: &str,
    args: &[String],
    limit: Option<i64>,
) -> Result<Vec<RunRow>, StoreError> {
    Ok(filtered(c, shown, sql, args, limit)?
        .iter()
        .map(|r| RunRow {
            id: RunId(r.get(0)),
            started_at: r.get(1),
            label: r.get(2),
            workload: r.get(3),
            spec_key: r.get(4),
            complete: r.get(5),
            iterations: r.get::<_, i64>(6) as u32,
            summary: r.get(7),
            throughput_bps: r.get(8),
            tps: r.get(9),
        })
        .collect())
}

pub(crate) fn counted(
    c: &mut Client,
    shown: &str,
    sql: &str,
) -> Result<Vec<(String, u64)>, StoreError> {
    let rows = c.query(sql, &[]).map_err(err(shown))?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
        .collect())
}

pub(crate) fn delete(c: &mut Client, shown: &str, id: RunId) -> Result<bool, StoreError> {
    let e = err(shown);
    let mut tx = c.transaction().map_err(&e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ENVIRONMENTS_LOCK])
        .map_err(&e)?;
    // The run's rows go with it (ON DELETE CASCADE); its environments only
    // when no other run refers to them.
    let n = tx
        .execute("DELETE FROM runs WHERE id = $1", &[&id.0])
        .map_err(&e)?;
    tx.execute(
        "DELETE FROM environments WHERE hash NOT IN
         (SELECT env_hash FROM runs WHERE env_hash IS NOT NULL
          UNION SELECT server_env_hash FROM runs WHERE server_env_hash IS NOT NULL)",
        &[],
    )
    .map_err(&e)?;
    tx.commit().map_err(&e)?;
    Ok(n > 0)
}

pub(crate) fn tag_of(c: &mut Client, shown: &str, id: RunId) -> Result<Option<RunTag>, StoreError> {
    let row = c
        .query_opt(
            "SELECT experiment, point, variant, seed, variant_rank FROM run_tags WHERE run_id = $1",
            &[&id.0],
        )
        .map_err(err(shown))?;
    Ok(row.map(|r| RunTag {
        experiment: r.get(0),
        point: r.get(1),
        variant: r.get(2),
        seed: r.get::<_, Option<i64>>(3).map(|s| s as u64),
        variant_rank: tags::rank(r.get(4)),
    }))
}

pub(crate) fn experiment_tags(
    c: &mut Client,
    shown: &str,
    experiment: &str,
    label: Option<&str>,
) -> Result<Vec<(RunId, RunTag)>, StoreError> {
    let rows = c
        .query(
            "SELECT t.run_id, t.point, t.variant, t.seed, t.variant_rank
             FROM run_tags t JOIN runs r ON r.id = t.run_id
             WHERE t.experiment = $1 AND ($2::text IS NULL OR r.label = $2)
             ORDER BY r.started_at, r.id",
            &[&experiment, &label],
        )
        .map_err(err(shown))?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                RunId(r.get(0)),
                RunTag {
                    experiment: experiment.to_string(),
                    point: r.get(1),
                    variant: r.get(2),
                    seed: r.get::<_, Option<i64>>(3).map(|s| s as u64),
                    variant_rank: tags::rank(r.get(4)),
                },
            )
        })
        .collect())
}

/// Import: the runs of an export not stored yet, in one transaction.
pub(crate) fn import(
    c: &mut Client,
    shown: &str,
    runs: &[ExportedRun],
) -> Result<Vec<RunId>, StoreError> {
    let runs: Vec<_> = runs
        .iter()
        .map(|r| (&r.record, r.env.as_ref(), r.tag.as_ref()))
        .collect();
    insert_runs(c, shown, &runs, true)
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

    #[test]
    fn the_migrations_end_at_the_current_schema() {
        assert_eq!(MIGRATIONS.last().unwrap().0, SCHEMA_VERSION);
    }
}
