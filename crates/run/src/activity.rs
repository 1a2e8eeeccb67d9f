//! Other plumb runs measuring on this host at the same time.
//!
//! Two runs on one host share its CPUs, caches and network stack, so each
//! spoils the other's figures, and nothing in either record would say so.
//! Every measuring run leaves a small file in one directory shared by all
//! users of the host, named by its pid and start time and holding its
//! measuring interval, and holds a lock on that file while it runs. At its
//! start a run can see who is measuring now (to refuse with `--exclusive`);
//! at its end it finds every run whose interval overlapped its own. Files of
//! runs that ended are kept for [`KEEP`], so a short run that came and went
//! inside a long one's window is still seen by the long one; a run killed
//! before it wrote its end counts as running until its file's last change.

use rustix::fs::{flock, FlockOperation};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the file of a finished run is kept for others to see.
pub const KEEP: Duration = Duration::from_secs(3600);

/// The directory all plumb runs of this host share: PLUMB_ACTIVITY_DIR when
/// set, where `off` turns the register off (for a harness that runs plumb
/// beside itself on purpose, such as plumb's own tests).
pub fn default_dir() -> Option<PathBuf> {
    match std::env::var_os("PLUMB_ACTIVITY_DIR") {
        Some(d) if d == "off" => None,
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => Some(std::env::temp_dir().join("plumb-activity")),
    }
}

/// Another run, seen from this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Other {
    pub pid: u32,
    pub start_ns: u64,
    /// None while it is still measuring.
    pub end_ns: Option<u64>,
}

impl Other {
    /// One line for a run's warnings.
    pub fn describe(&self) -> String {
        match self.end_ns {
            None => format!(
                "another plumb run (pid {}) was measuring on this host at the same time; \
                 both results are suspect",
                self.pid
            ),
            Some(_) => format!(
                "another plumb run (pid {}) measured on this host during this run; \
                 both results are suspect",
                self.pid
            ),
        }
    }
}

/// This run's entry in the shared directory, locked while the run lasts.
pub struct Activity {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    start_ns: u64,
}

/// Wall-clock nanoseconds, the time base all runs of the host share.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Activity {
    /// Registers this process as measuring from now on, in `dir`.
    pub fn begin(dir: &Path) -> io::Result<Activity> {
        if !dir.is_dir() {
            fs::create_dir_all(dir)?;
            // Shared by every user of the host, like /tmp itself.
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o1777));
        }
        let start_ns = now_ns();
        let path = dir.join(format!("{}-{start_ns}", std::process::id()));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)?;
        flock(&file, FlockOperation::NonBlockingLockExclusive)?;
        writeln!(file, "{start_ns}")?;
        Ok(Activity {
            dir: dir.to_path_buf(),
            path,
            file,
            start_ns,
        })
    }

    /// The runs measuring now, besides this one.
    pub fn running_now(&self) -> Vec<Other> {
        self.others()
            .into_iter()
            .filter(|o| o.end_ns.is_none())
            .collect()
    }

    /// The runs that measured at some time between `since_ns` (a time of
    /// [`now_ns`]) and now.
    pub fn overlapping(&self, since_ns: u64) -> Vec<Other> {
        let now = now_ns();
        self.others()
            .into_iter()
            .filter(|o| o.start_ns <= now && !matches!(o.end_ns, Some(e) if e < since_ns))
            .collect()
    }

    /// Ends this run's interval and returns the runs that overlapped it.
    /// The file stays for [`KEEP`], unlocked, with its end written.
    pub fn finish(self) -> Vec<Other> {
        self.overlapping(self.start_ns)
    }

    /// Marks this run as still measuring now: a run killed before it wrote
    /// its end counts as measuring until its file's last change.
    pub fn still_here(&self) {
        let _ = self.file.set_modified(SystemTime::now());
    }

    fn others(&self) -> Vec<Other> {
        runs_in(&self.dir, Some(&self.path))
    }
}

/// The runs measuring now in `dir`, before this one registers: what
/// `--exclusive` refuses to start beside.
pub fn running_in(dir: &Path) -> Vec<Other> {
    runs_in(dir, None)
        .into_iter()
        .filter(|o| o.end_ns.is_none())
        .collect()
}

/// Every run with a file in `dir` but `me`, pruning those of runs that
/// ended longer than [`KEEP`] ago (where this user may remove them).
fn runs_in(dir: &Path, me: Option<&Path>) -> Vec<Other> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let now = now_ns();
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if Some(path.as_path()) == me {
            continue;
        }
        let Some(other) = read_other(&path) else {
            continue;
        };
        if other
            .end_ns
            .is_some_and(|end| now.saturating_sub(end) > KEEP.as_nanos() as u64)
        {
            let _ = fs::remove_file(&path);
            continue;
        }
        out.push(other);
    }
    out.sort_by_key(|o| (o.start_ns, o.pid));
    out
}

impl Drop for Activity {
    /// Writes the end of the interval, also for a run that ends in an
    /// error: it measured, and whoever overlapped it should know.
    fn drop(&mut self) {
        let _ = writeln!(self.file, "{}", now_ns());
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}

/// The run a file describes: "PID-START" with its start and, once it ended,
/// its end on the second line. A file nobody holds a lock on, without an
/// end, belongs to a run that died: it ended at the file's last change.
fn read_other(path: &Path) -> Option<Other> {
    let name = path.file_name()?.to_str()?;
    let (pid, start) = name.split_once('-')?;
    let pid: u32 = pid.parse().ok()?;
    let start_ns: u64 = start.parse().ok()?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .ok()?;
    let text = fs::read_to_string(path).ok()?;
    let mut end_ns = text.lines().nth(1).and_then(|l| l.trim().parse().ok());
    if end_ns.is_none() {
        let held = flock(&file, FlockOperation::NonBlockingLockShared).is_err();
        if !held {
            let _ = flock(&file, FlockOperation::Unlock);
            let changed = file.metadata().ok()?.modified().ok()?;
            end_ns = Some(changed.duration_since(UNIX_EPOCH).ok()?.as_nanos() as u64);
        }
    }
    Some(Other {
        pid,
        start_ns,
        end_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("plumb-activity-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn overlapping_runs_see_each_other_and_a_later_one_does_not() {
        let dir = temp_dir("overlap");
        let long = Activity::begin(&dir).unwrap();
        // Two entries of one process: name them apart by their start time.
        std::thread::sleep(Duration::from_millis(2));
        let short = Activity::begin(&dir).unwrap();
        assert_eq!(short.running_now().len(), 1, "the long run is measuring");
        let seen_by_short = short.finish();
        assert_eq!(seen_by_short.len(), 1);
        assert_eq!(seen_by_short[0].end_ns, None, "still running");
        // The short one came and went inside the long one's window.
        let seen_by_long = long.finish();
        assert_eq!(seen_by_long.len(), 1);
        assert!(seen_by_long[0].end_ns.is_some());
        assert_eq!(seen_by_long[0].pid, std::process::id());
        let later = Activity::begin(&dir).unwrap();
        assert!(later.running_now().is_empty());
        assert!(later.finish().is_empty(), "both ended before it began");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_that_died_without_its_end_counts_until_its_last_change() {
        let dir = temp_dir("died");
        let dead = Activity::begin(&dir).unwrap();
        let path = dead.path.clone();
        // What a kill -9 leaves: the lock goes with the process, the file
        // has no end.
        let _ = flock(&dead.file, FlockOperation::Unlock);
        std::mem::forget(dead);
        let other = read_other(&path).unwrap();
        assert!(other.end_ns.is_some(), "not held: it ended");
        assert!(other.end_ns.unwrap() >= other.start_ns - 1_000_000_000);
        let now = Activity::begin(&dir).unwrap();
        assert!(now.running_now().is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }
}
