//! A test whose precondition is missing: `skip`. Shared by path by the
//! store's tests and the command-line tests of the workspace, so that every
//! skip of `tests/setup.sh`'s run is said and counted the same way.

/// A test whose precondition is missing. Under CI (`CI=true`) that is a
/// failure naming the precondition: CI installs everything, so a missing
/// tool there is a broken image, not a reason to pass. Elsewhere the test
/// returns early after one `skipped: <test>: <why>` line.
///
/// The line goes straight to file descriptor 2: libtest captures only what
/// `print!`/`eprint!` write, so the line shows in a plain `cargo test` run
/// between the `test ... ok` lines. It is also appended to
/// `target/tmp/skipped.txt`, which `tests/setup.sh` (the README's test
/// command) empties before the run and counts after it.
pub fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("precondition missing under CI: {test}: {why}");
    }
    let line = format!("skipped: {test}: {why}\n");
    use std::io::Write;
    let _ = std::io::stderr().write_all(line.as_bytes());
    let _ = std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR"));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(skipped_file())
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Where skips are recorded for the count at the end of the run.
pub fn skipped_file() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped.txt")
}
