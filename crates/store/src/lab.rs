//! A lab of many hosts on the team's PostgreSQL: job sets submitted by
//! anyone, jobs claimed by the agents of the hosts that can run them.
//!
//! The queue is the database itself. An agent claims a job with `SELECT ...
//! FOR UPDATE SKIP LOCKED`, so two agents never take the same one and
//! neither waits on the other's row; it holds the job by a lease it renews,
//! under a token that is new at every claim. Storing a job's runs and
//! finishing the job is one transaction that first checks, under the row's
//! lock, that the token is still the agent's and its lease has not run out:
//! an agent that was stopped past its lease finds its job taken (or back in
//! the queue) and stores nothing, so each job's runs are stored once. Every
//! time is the database's `now()`, one clock for all hosts.

use crate::backend::NewRun;
use crate::pgconn;
use crate::postgres::{err, insert_runs_in, setup, version_of, MIGRATION_LOCK};
use crate::tags::RunTag;
use crate::{Result, RunId, StoreError};
use ::postgres::types::ToSql;
use ::postgres::{Client, GenericClient, Row};
use plumb_samples::RunRecord;
use serde::Serialize;

/// The lab's own versioned steps, apart from the runs' schema (which
/// SQLite shares): a lab lives on PostgreSQL alone.
///
/// An agent changes the queue only through the functions below, which run
/// with their owner's rights (SECURITY DEFINER) and check the token
/// themselves; its role is granted nothing else on the queue (see
/// [`GRANTS`]), and it cannot read the tokens, so it cannot take over
/// another agent's lease.
const MIGRATIONS: &[(i64, &str)] = &[(
    1,
    r#"CREATE TABLE lab_sets (
        id BIGSERIAL PRIMARY KEY,
        experiment TEXT NOT NULL,
        label TEXT NOT NULL,
        class TEXT NOT NULL,
        -- the experiment file as submitted: a job holds specs, never a
        -- command line
        file TEXT NOT NULL,
        quick BOOLEAN NOT NULL,
        seed BIGINT NOT NULL,
        -- the kernels each job boots, one [LABEL=]IMAGE a line (an image's
        -- path on the agents' hosts); none: the agent's own kernel
        kernels TEXT NOT NULL DEFAULT '',
        submitted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        submitted_by TEXT NOT NULL
    );
    CREATE TABLE lab_jobs (
        id BIGSERIAL PRIMARY KEY,
        set_id BIGINT NOT NULL REFERENCES lab_sets(id),
        -- the ids of the points it runs, one per line
        points TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
        agent TEXT,
        token TEXT,
        lease_until TIMESTAMPTZ,
        started_at TIMESTAMPTZ,
        finished_at TIMESTAMPTZ,
        error TEXT,
        runs BIGINT[] NOT NULL DEFAULT '{}'
    );
    CREATE INDEX lab_jobs_state ON lab_jobs(state, id);
    CREATE INDEX lab_jobs_set ON lab_jobs(set_id);
    CREATE TABLE lab_agents (
        name TEXT PRIMARY KEY,
        class TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        seen_at TIMESTAMPTZ NOT NULL,
        word TEXT NOT NULL
    );
    CREATE TABLE plumb_lab_schema (version BIGINT NOT NULL);

    -- The kernels `plumb lab watch` found in a source, in the order it
    -- found them, each with the set it submitted for it.
    CREATE TABLE lab_watch (
        source TEXT NOT NULL,
        image TEXT NOT NULL,
        label TEXT NOT NULL,
        seq BIGSERIAL,
        set_id BIGINT NOT NULL REFERENCES lab_sets(id),
        seen_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (source, image)
    );
    -- The changes it reported, so that each is sent once.
    CREATE TABLE lab_watch_reports (
        source TEXT NOT NULL,
        experiment TEXT NOT NULL,
        point TEXT NOT NULL,
        before_label TEXT NOT NULL,
        after_label TEXT NOT NULL,
        reported_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (source, experiment, point, before_label, after_label)
    );

    -- Claims the oldest job of a class that is queued or whose lease ran
    -- out; a job whose lease ran out on its last attempt is failed first.
    CREATE FUNCTION plumb_lab_claim(p_agent TEXT, p_class TEXT, p_lease FLOAT8, p_token TEXT)
    RETURNS TABLE (r_job BIGINT, r_set BIGINT, r_points TEXT, r_attempt INTEGER)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $f$
    BEGIN
        UPDATE lab_jobs SET state = 'failed', finished_at = now(), token = NULL,
          error = format('its agent %s stopped answering (lease ran out) on the last of %s attempts',
                         agent, attempts)
        WHERE state = 'running' AND lease_until < now() AND attempts >= max_attempts;
        RETURN QUERY
        UPDATE lab_jobs AS j SET state = 'running', agent = p_agent, token = p_token,
          attempts = j.attempts + 1, started_at = now(),
          lease_until = now() + make_interval(secs => p_lease)
        WHERE j.id = (
          SELECT c.id FROM lab_jobs c JOIN lab_sets s ON s.id = c.set_id
          WHERE s.class = p_class
            AND (c.state = 'queued' OR (c.state = 'running' AND c.lease_until < now()))
          ORDER BY c.id
          FOR UPDATE OF c SKIP LOCKED
          LIMIT 1)
        RETURNING j.id, j.set_id, j.points, j.attempts;
    END $f$;

    -- Extends a lease still held under its token; its agent is seen.
    CREATE FUNCTION plumb_lab_renew(p_job BIGINT, p_token TEXT, p_lease FLOAT8)
    RETURNS BOOLEAN LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $f$
    DECLARE v_agent TEXT;
    BEGIN
        UPDATE lab_jobs SET lease_until = now() + make_interval(secs => p_lease)
        WHERE id = p_job AND token = p_token AND state = 'running' AND lease_until > now()
        RETURNING agent INTO v_agent;
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
        UPDATE lab_agents SET seen_at = now() WHERE name = v_agent;
        RETURN TRUE;
    END $f$;

    -- Locks a job held under its token with its lease unexpired, for the
    -- rest of the caller's transaction.
    CREATE FUNCTION plumb_lab_hold(p_job BIGINT, p_token TEXT)
    RETURNS BOOLEAN LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $f$
    BEGIN
        PERFORM 1 FROM lab_jobs
        WHERE id = p_job AND token = p_token AND state = 'running' AND lease_until > now()
        FOR UPDATE;
        RETURN FOUND;
    END $f$;

    -- Marks a held job done with the ids of its stored runs.
    CREATE FUNCTION plumb_lab_done(p_job BIGINT, p_token TEXT, p_runs BIGINT[])
    RETURNS BOOLEAN LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $f$
    BEGIN
        UPDATE lab_jobs SET state = 'done', finished_at = now(), token = NULL,
          lease_until = NULL, error = NULL, runs = p_runs
        WHERE id = p_job AND token = p_token AND state = 'running' AND lease_until > now();
        RETURN FOUND;
    END $f$;

    -- Gives up a held job: with an error, back to the queue while attempts
    -- are left, else failed; without one, back to the queue uncounted.
    CREATE FUNCTION plumb_lab_release(p_job BIGINT, p_token TEXT, p_error TEXT)
    RETURNS TEXT LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $f$
    DECLARE v_state TEXT;
    BEGIN
        UPDATE lab_jobs SET
          state = CASE WHEN p_error IS NOT NULL AND attempts >= max_attempts
                       THEN 'failed' ELSE 'queued' END,
          attempts = CASE WHEN p_error IS NULL THEN attempts - 1 ELSE attempts END,
          error = COALESCE(p_error, error),
          finished_at = CASE WHEN p_error IS NOT NULL AND attempts >= max_attempts
                             THEN now() END,
          token = NULL, lease_until = NULL
        WHERE id = p_job AND token = p_token AND state = 'running'
        RETURNING state INTO v_state;
        RETURN v_state;
    END $f$;

    -- An agent's last word.
    CREATE FUNCTION plumb_lab_say(p_name TEXT, p_class TEXT, p_host TEXT, p_pid INTEGER, p_word TEXT)
    RETURNS VOID LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $f$
    BEGIN
        INSERT INTO lab_agents (name, class, host, pid, seen_at, word)
        VALUES (p_name, p_class, p_host, p_pid, now(), p_word)
        ON CONFLICT (name) DO UPDATE SET class = p_class, host = p_host, pid = p_pid,
          seen_at = now(), word = p_word;
    END $f$;

    REVOKE ALL ON FUNCTION plumb_lab_claim(TEXT, TEXT, FLOAT8, TEXT),
      plumb_lab_renew(BIGINT, TEXT, FLOAT8), plumb_lab_hold(BIGINT, TEXT),
      plumb_lab_done(BIGINT, TEXT, BIGINT[]), plumb_lab_release(BIGINT, TEXT, TEXT),
      plumb_lab_say(TEXT, TEXT, TEXT, INTEGER, TEXT) FROM PUBLIC;"#,
)];

/// What an agent's role is granted (`plumb lab grant ROLE`): to read the
/// schema's versions, the sets and the jobs (not their tokens), to write
/// runs (never to change or delete one), and the queue's functions.
pub const GRANTS: &[&str] = &[
    "GRANT SELECT ON plumb_schema, plumb_lab_schema, lab_sets, lab_agents TO {role}",
    "GRANT SELECT (id, set_id, points, state, attempts, max_attempts, agent, lease_until,
       started_at, finished_at, error, runs) ON lab_jobs TO {role}",
    "GRANT SELECT, INSERT ON runs, iterations, interval_samples, tcp_samples, run_tags,
       environments TO {role}",
    "GRANT USAGE ON SEQUENCE runs_id_seq TO {role}",
    "GRANT EXECUTE ON FUNCTION plumb_lab_claim(TEXT, TEXT, FLOAT8, TEXT),
       plumb_lab_renew(BIGINT, TEXT, FLOAT8), plumb_lab_hold(BIGINT, TEXT),
       plumb_lab_done(BIGINT, TEXT, BIGINT[]), plumb_lab_release(BIGINT, TEXT, TEXT),
       plumb_lab_say(TEXT, TEXT, TEXT, INTEGER, TEXT) TO {role}",
];

/// A job set as submitted: an experiment file's points, grouped into jobs.
pub struct NewSet<'a> {
    pub experiment: &'a str,
    pub label: &'a str,
    pub class: &'a str,
    pub file: &'a str,
    pub quick: bool,
    pub seed: u64,
    /// `[LABEL=]IMAGE` of each kernel every job boots; empty: none.
    pub kernels: &'a [String],
    pub submitted_by: &'a str,
    /// Each job's point ids: the points to be compared with each other
    /// (one cell's variants) run in one job, so on one host, interleaved.
    pub jobs: Vec<Vec<String>>,
    /// How many times a job is claimed before it is failed.
    pub max_attempts: u32,
}

/// A kernel a watch found, with its set.
#[derive(Debug, Clone)]
pub struct Watched {
    pub image: String,
    pub label: String,
    pub set_id: i64,
    /// Its set has nothing queued or running.
    pub settled: bool,
}

/// A change a watch reports: a point of an experiment, between two
/// kernels.
#[derive(Debug, Clone)]
pub struct ReportedChange<'a> {
    pub experiment: &'a str,
    pub point: &'a str,
    pub before_label: &'a str,
    pub after_label: &'a str,
}

impl ReportedChange<'_> {
    /// Its row of `lab_watch_reports` under `source`, in the table's order.
    fn row<'a>(&'a self, source: &'a &'a str) -> [&'a (dyn ToSql + Sync); 5] {
        [
            source,
            &self.experiment,
            &self.point,
            &self.before_label,
            &self.after_label,
        ]
    }
}

/// A stored set, as an agent needs it to run one of its jobs.
#[derive(Debug, Clone)]
pub struct SetRow {
    pub id: i64,
    pub experiment: String,
    pub label: String,
    pub class: String,
    pub file: String,
    pub quick: bool,
    pub seed: u64,
    pub kernels: Vec<String>,
}

/// A job an agent has claimed, held while `token` is its own.
#[derive(Debug, Clone)]
pub struct Claim {
    pub job: i64,
    pub token: String,
    pub points: Vec<String>,
    /// This claim's number, from 1.
    pub attempt: u32,
    pub set: SetRow,
}

/// What became of a job the agent gave up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Back in the queue for any agent.
    Queued,
    /// Out of attempts: failed for good, with the error.
    Failed,
    /// The lease was no longer this agent's: nothing changed.
    NotHeld,
}

/// A job's state, for `plumb lab status` and `wait`.
#[derive(Debug, Clone, Serialize)]
pub struct JobStatus {
    pub id: i64,
    pub points: Vec<String>,
    pub state: String,
    pub attempts: u32,
    pub agent: Option<String>,
    pub error: Option<String>,
    /// Seconds it has run (running) or took (done).
    pub seconds: Option<f64>,
    pub runs: Vec<i64>,
}

/// A set's progress.
#[derive(Debug, Clone, Serialize)]
pub struct SetStatus {
    pub id: i64,
    pub experiment: String,
    pub label: String,
    pub class: String,
    pub submitted_at: String,
    pub jobs: Vec<JobStatus>,
}

impl SetStatus {
    pub fn count(&self, state: &str) -> usize {
        self.jobs.iter().filter(|j| j.state == state).count()
    }

    /// Nothing queued or running.
    pub fn settled(&self) -> bool {
        self.count("queued") + self.count("running") == 0
    }
}

/// An agent's last word.
#[derive(Debug, Clone, Serialize)]
pub struct AgentStatus {
    pub name: String,
    pub class: String,
    pub host: String,
    pub pid: i32,
    pub seen_s_ago: f64,
    pub word: String,
}

/// A connection to a lab's tables.
pub struct Lab {
    client: Client,
    shown: String,
}

fn lab_version(c: &mut impl GenericClient) -> std::result::Result<i64, ::postgres::Error> {
    version_of(c, "plumb_lab_schema")
}

/// Brings the lab's tables to the latest version, under the runs'
/// migration lock so that two first agents do not both create them.
fn migrate(client: &mut Client, shown: &str) -> Result<()> {
    let e = err(shown);
    let latest = MIGRATIONS.last().map_or(0, |m| m.0);
    if lab_version(client).map_err(&e)? < latest {
        let mut tx = client.transaction().map_err(&e)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(&e)?;
        let found = lab_version(&mut tx).map_err(&e)?;
        for (_, sql) in MIGRATIONS.iter().filter(|(to, _)| *to > found) {
            tx.batch_execute(sql).map_err(&e)?;
        }
        if found < latest {
            tx.execute("DELETE FROM plumb_lab_schema", &[])
                .map_err(&e)?;
            tx.execute(
                "INSERT INTO plumb_lab_schema (version) VALUES ($1)",
                &[&latest],
            )
            .map_err(&e)?;
        }
        tx.commit().map_err(&e)?;
    }
    Ok(())
}

/// The lines of a list column (points, kernels).
fn points_of(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

impl Lab {
    /// Connects to the lab at `url` (a PostgreSQL URL, as `--db` takes),
    /// making the runs' and the lab's tables where they are missing.
    pub fn open(url: &str) -> Result<Lab> {
        let shown = pgconn::redact(url);
        let mut client = pgconn::connect(url, &shown)?;
        setup(&mut client, &shown)?;
        migrate(&mut client, &shown)?;
        Ok(Lab { client, shown })
    }

    fn e(&self) -> impl Fn(::postgres::Error) -> StoreError + '_ {
        err(&self.shown)
    }

    /// Stores a set and its jobs in one transaction; the set's id.
    pub fn submit(&mut self, set: &NewSet<'_>) -> Result<i64> {
        let e = err(&self.shown);
        let mut tx = self.client.transaction().map_err(&e)?;
        let id = submit_in(&mut tx, set).map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(id)
    }

    /// Submits `set` for a kernel `plumb lab watch` found at `image` in
    /// `source`, and notes the kernel as found, in one transaction: a watch
    /// that dies between the two neither loses the kernel nor submits it
    /// twice.
    pub fn watch_submit(
        &mut self,
        source: &str,
        image: &str,
        label: &str,
        set: &NewSet<'_>,
    ) -> Result<i64> {
        let e = err(&self.shown);
        let mut tx = self.client.transaction().map_err(&e)?;
        let id = submit_in(&mut tx, set).map_err(&e)?;
        tx.execute(
            "INSERT INTO lab_watch (source, image, label, set_id) VALUES ($1, $2, $3, $4)",
            &[&source, &image, &label, &id],
        )
        .map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(id)
    }

    /// The kernels found in `source`, in the order they were found.
    pub fn watched(&mut self, source: &str) -> Result<Vec<Watched>> {
        let rows = self
            .client
            .query(
                "SELECT w.image, w.label, w.set_id,
                   NOT EXISTS (SELECT 1 FROM lab_jobs j WHERE j.set_id = w.set_id
                               AND j.state IN ('queued', 'running'))
                 FROM lab_watch w WHERE w.source = $1 ORDER BY w.seq",
                &[&source],
            )
            .map_err(self.e())?;
        Ok(rows
            .iter()
            .map(|r| Watched {
                image: r.get(0),
                label: r.get(1),
                set_id: r.get(2),
                settled: r.get(3),
            })
            .collect())
    }

    /// Whether a change of a watch was reported already.
    pub fn reported(&mut self, source: &str, change: &ReportedChange<'_>) -> Result<bool> {
        let row = self
            .client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM lab_watch_reports WHERE source = $1
                   AND experiment = $2 AND point = $3 AND before_label = $4 AND after_label = $5)",
                &change.row(&source),
            )
            .map_err(self.e())?;
        Ok(row.get(0))
    }

    /// Notes a change of a watch as reported, once it was sent.
    pub fn note_reported(&mut self, source: &str, change: &ReportedChange<'_>) -> Result<()> {
        self.client
            .execute(
                "INSERT INTO lab_watch_reports (source, experiment, point, before_label, after_label)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                &change.row(&source),
            )
            .map_err(self.e())?;
        Ok(())
    }

    /// Claims the oldest job of `class` that is queued or whose holder's
    /// lease ran out, for `lease_ms`; None when there is none. A job whose
    /// lease ran out on its last attempt is failed instead, with why.
    pub fn claim(&mut self, agent: &str, class: &str, lease_ms: u64) -> Result<Option<Claim>> {
        let e = err(&self.shown);
        let token = new_token(agent);
        let lease = lease_ms as f64 / 1000.0;
        let mut tx = self.client.transaction().map_err(&e)?;
        let row = tx
            .query_opt(
                "SELECT r_job, r_set, r_points, r_attempt FROM plumb_lab_claim($1, $2, $3, $4)",
                &[&agent, &class, &lease, &token],
            )
            .map_err(&e)?;
        let Some(row) = row else {
            tx.commit().map_err(&e)?;
            return Ok(None);
        };
        let set = set_in(&mut tx, row.get(1)).map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(Some(Claim {
            job: row.get(0),
            token,
            points: points_of(row.get(2)),
            attempt: row.get::<_, i32>(3) as u32,
            set,
        }))
    }

    /// Jobs of `class` queued, or running on any agent: what may still
    /// come to an agent of that class (a running job, once its lease runs
    /// out).
    pub fn unsettled(&mut self, class: &str) -> Result<i64> {
        let row = self
            .client
            .query_one(
                "SELECT COUNT(*) FROM lab_jobs j JOIN lab_sets s ON s.id = j.set_id
                 WHERE s.class = $1 AND j.state IN ('queued', 'running')",
                &[&class],
            )
            .map_err(self.e())?;
        Ok(row.get(0))
    }

    /// Extends the lease by `lease_ms` from now, while it is still held:
    /// false once the token is not the agent's or the lease ran out (the
    /// job may be another agent's by now).
    pub fn renew(&mut self, job: i64, token: &str, lease_ms: u64) -> Result<bool> {
        let lease = lease_ms as f64 / 1000.0;
        let n = self
            .client
            .query_one(
                "SELECT plumb_lab_renew($1, $2, $3)",
                &[&job, &token, &lease],
            )
            .map_err(self.e())?
            .get(0);
        Ok(n)
    }

    /// Stores the job's runs and marks it done, in one transaction, if the
    /// job is still held under `token` with its lease unexpired: the runs'
    /// ids, or None (nothing stored) when it is not.
    pub fn finish(
        &mut self,
        job: i64,
        token: &str,
        runs: &[(RunRecord, RunTag)],
    ) -> Result<Option<Vec<RunId>>> {
        let e = err(&self.shown);
        let mut tx = self.client.transaction().map_err(&e)?;
        let held: bool = tx
            .query_one("SELECT plumb_lab_hold($1, $2)", &[&job, &token])
            .map_err(&e)?
            .get(0);
        if !held {
            tx.rollback().map_err(&e)?;
            return Ok(None);
        }
        let new: Vec<NewRun<'_>> = runs
            .iter()
            .map(|(record, tag)| NewRun {
                record,
                env: record.environment.as_ref(),
                tag: Some(tag),
            })
            .collect();
        let ids = insert_runs_in(&mut tx, &self.shown, &new, false)?;
        let raw: Vec<i64> = ids.iter().map(|i| i.0).collect();
        // Held under the lock taken above, so it cannot be refused now.
        tx.execute("SELECT plumb_lab_done($1, $2, $3)", &[&job, &token, &raw])
            .map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(Some(ids))
    }

    /// Gives up a held job. With an error it counts as an attempt: back in
    /// the queue while attempts are left, else failed with the error.
    /// Without one (the agent was asked to stop) it goes back to the queue
    /// and the attempt is not counted.
    pub fn release(&mut self, job: i64, token: &str, error: Option<&str>) -> Result<Released> {
        let state: Option<String> = self
            .client
            .query_one(
                "SELECT plumb_lab_release($1, $2, $3)",
                &[&job, &token, &error],
            )
            .map_err(self.e())?
            .get(0);
        Ok(match state {
            None => Released::NotHeld,
            Some(s) if s == "failed" => Released::Failed,
            Some(_) => Released::Queued,
        })
    }

    /// Records what an agent is doing, for `status`.
    pub fn say(&mut self, agent: &str, class: &str, host: &str, word: &str) -> Result<()> {
        self.client
            .execute(
                "SELECT plumb_lab_say($1, $2, $3, $4, $5)",
                &[&agent, &class, &host, &(std::process::id() as i32), &word],
            )
            .map_err(self.e())?;
        Ok(())
    }

    /// Grants `role` what an agent needs and nothing more ([`GRANTS`]);
    /// run by the lab's owner, whose rights the queue's functions have.
    pub fn grant(&mut self, role: &str) -> Result<()> {
        let e = err(&self.shown);
        let quoted = format!("\"{}\"", role.replace('"', "\"\""));
        let mut tx = self.client.transaction().map_err(&e)?;
        for g in GRANTS {
            tx.batch_execute(&g.replace("{role}", &quoted))
                .map_err(&e)?;
        }
        tx.commit().map_err(&e)
    }

    /// A set by its id.
    pub fn set(&mut self, id: i64) -> Result<Option<SetRow>> {
        let e = err(&self.shown);
        let exists = self
            .client
            .query_opt("SELECT 1 FROM lab_sets WHERE id = $1", &[&id])
            .map_err(&e)?
            .is_some();
        if !exists {
            return Ok(None);
        }
        set_in(&mut self.client, id).map(Some).map_err(&e)
    }

    /// The sets' progress: `id`'s alone, else the `last` newest.
    pub fn status(&mut self, id: Option<i64>, last: i64) -> Result<Vec<SetStatus>> {
        let e = err(&self.shown);
        let sets = self
            .client
            .query(
                "SELECT id, experiment, label, class,
                   to_char(submitted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')
                 FROM lab_sets WHERE $1::BIGINT IS NULL OR id = $1
                 ORDER BY id DESC LIMIT $2",
                &[&id, &last],
            )
            .map_err(&e)?;
        let mut out = Vec::new();
        for s in sets.iter().rev() {
            let set_id: i64 = s.get(0);
            let jobs = self
                .client
                .query(
                    "SELECT id, points, state, attempts, agent, error,
                       EXTRACT(EPOCH FROM (COALESCE(finished_at, now()) - started_at))::FLOAT8,
                       runs
                     FROM lab_jobs WHERE set_id = $1 ORDER BY id",
                    &[&set_id],
                )
                .map_err(&e)?;
            out.push(SetStatus {
                id: set_id,
                experiment: s.get(1),
                label: s.get(2),
                class: s.get(3),
                submitted_at: s.get(4),
                jobs: jobs.iter().map(job_status).collect(),
            });
        }
        Ok(out)
    }

    /// Every agent's last word, most recently seen first.
    pub fn agents(&mut self) -> Result<Vec<AgentStatus>> {
        let rows = self
            .client
            .query(
                "SELECT name, class, host, pid,
                   EXTRACT(EPOCH FROM (now() - seen_at))::FLOAT8, word
                 FROM lab_agents ORDER BY seen_at DESC",
                &[],
            )
            .map_err(self.e())?;
        Ok(rows
            .iter()
            .map(|r| AgentStatus {
                name: r.get(0),
                class: r.get(1),
                host: r.get(2),
                pid: r.get(3),
                seen_s_ago: r.get(4),
                word: r.get(5),
            })
            .collect())
    }
}

fn job_status(r: &Row) -> JobStatus {
    let state: String = r.get(2);
    JobStatus {
        id: r.get(0),
        points: points_of(r.get(1)),
        attempts: r.get::<_, i32>(3) as u32,
        agent: r.get(4),
        error: r.get(5),
        seconds: (state == "running" || state == "done")
            .then(|| r.get::<_, Option<f64>>(6))
            .flatten(),
        runs: r.get(7),
        state,
    }
}

fn submit_in(
    c: &mut impl GenericClient,
    set: &NewSet<'_>,
) -> std::result::Result<i64, ::postgres::Error> {
    let id: i64 = c
        .query_one(
            "INSERT INTO lab_sets (experiment, label, class, file, quick, seed, submitted_by, kernels)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            &[
                &set.experiment,
                &set.label,
                &set.class,
                &set.file,
                &set.quick,
                &(set.seed as i64),
                &set.submitted_by,
                &set.kernels.join("\n"),
            ],
        )?
        .get(0);
    let attempts = set.max_attempts.max(1) as i32;
    for points in &set.jobs {
        c.execute(
            "INSERT INTO lab_jobs (set_id, points, state, max_attempts)
             VALUES ($1, $2, 'queued', $3)",
            &[&id, &points.join("\n"), &attempts],
        )?;
    }
    Ok(id)
}

fn set_in(c: &mut impl GenericClient, id: i64) -> std::result::Result<SetRow, ::postgres::Error> {
    let r = c.query_one(
        "SELECT id, experiment, label, class, file, quick, seed, kernels FROM lab_sets WHERE id = $1",
        &[&id],
    )?;
    Ok(SetRow {
        id: r.get(0),
        experiment: r.get(1),
        label: r.get(2),
        class: r.get(3),
        file: r.get(4),
        quick: r.get(5),
        seed: r.get::<_, i64>(6) as u64,
        kernels: points_of(r.get(7)),
    })
}

/// A claim's token: unique per claim, and saying whose it is when read in
/// the table.
fn new_token(agent: &str) -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut random = [0u8; 8];
    // The kernel's randomness; the time and pid alone would do on one
    // host, not across hosts whose clocks agree.
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut random);
    }
    format!(
        "{agent}-{}-{ns:x}-{}",
        std::process::id(),
        random
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}
