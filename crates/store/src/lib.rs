//! The result store: a `Store` trait over SQLite (one WAL file, versioned
//! schema with migrations, a run written in one transaction when it finishes)
//! and, behind a cargo feature, PostgreSQL for teams sharing one database.
//!
//! Empty until the regression core lands; `plumb run` prints its record and
//! `--json` is the way to keep it meanwhile.
#![deny(unsafe_code)]
