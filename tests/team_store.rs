//! One PostgreSQL store shared by a team, from the command line: the runs
//! of a host's SQLite file copied over with `plumb db copy`, and their
//! comparison saying the same from either store.

mod common;
#[path = "../crates/store/tests/shared/pgserver.rs"]
mod pgserver;

use common::{assert_ok, assert_ok_for, plumb, skip, TempDb};
use pgserver::PgServer;

#[test]
fn compare_says_the_same_from_sqlite_and_from_postgresql() {
    let Some(server) = PgServer::start("cli", false) else {
        return;
    };
    let pg = server.database("cli");
    let db = TempDb::new("team-store");
    {
        let _alone = common::measuring_alone();
        for label in ["before", "after"] {
            let out = plumb()
                .args(["run", "stream", "--label", label])
                .args(["--duration", "300ms", "--warmup", "100ms"])
                .args(["--iterations", "4", "--db", db.path()])
                .output()
                .unwrap();
            assert_ok_for(&out, label);
        }
    }
    let out = plumb()
        .args(["db", "copy", db.path(), &pg])
        .output()
        .unwrap();
    assert_ok(&out);
    let said = |store: &str, args: &[&str]| {
        let out = plumb().args(args).args(["--db", store]).output().unwrap();
        assert_ok(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    for format in ["terminal", "markdown", "json"] {
        let args = ["compare", "before", "after", "--format", format];
        let (sqlite, postgres) = (said(db.path(), &args), said(&pg, &args));
        assert!(
            sqlite.contains("before") && sqlite.contains("after"),
            "{sqlite}"
        );
        // A verdict and the CPU budget: the comparison was made.
        if format == "terminal" {
            assert!(
                sqlite.contains("=> ") && sqlite.contains("CPU seconds per GB"),
                "{sqlite}"
            );
        }
        assert_eq!(sqlite, postgres, "compare --format {format}");
    }
    // The runs themselves, one by one, under the same numbers.
    let list = ["list"];
    assert_eq!(said(db.path(), &list), said(&pg, &list));
    let show = ["show", "2", "--json"];
    assert_eq!(said(db.path(), &show), said(&pg, &show));
}

#[test]
fn libpq_variables_set_tls_where_the_url_does_not() {
    let Some(server) = PgServer::start_with("cli-tls", false, true) else {
        return;
    };
    server.database("lab");
    let ca = server.dir.join("ca.pem");
    let list = |host: &str, mode: &str| {
        plumb()
            .args(["list", "--db"])
            .arg(format!("postgres://plumb@{host}:{}/lab", server.port))
            .env("PGSSLMODE", mode)
            .env("PGSSLROOTCERT", &ca)
            .output()
            .unwrap()
    };
    // The certificate names localhost, and the CA signed it.
    assert_ok(&list("localhost", "verify-full"));
    assert_ok(&list("127.0.0.1", "verify-ca"));
    for (host, mode, said) in [
        ("127.0.0.1", "verify-full", "certificate not valid for name"),
        ("127.0.0.1", "disable", "pg_hba.conf"),
        ("127.0.0.1", "verify-everything", "PGSSLMODE"),
    ] {
        let out = list(host, mode);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{mode}: {err}");
        assert!(err.contains(said), "{mode}: {err}");
    }
}
