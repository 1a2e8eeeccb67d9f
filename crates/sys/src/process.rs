//! Resource accounting and limits of this process, and the tie that makes an
//! embedded server child die with its parent.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// getrusage(2) figures with times in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rusage {
    pub user_ns: u64,
    pub system_ns: u64,
    pub voluntary_csw: u64,
    pub involuntary_csw: u64,
    /// Peak resident set size; for RUSAGE_THREAD the process's.
    pub max_rss_kb: u64,
    pub minflt: u64,
    pub majflt: u64,
}

/// The whole process, all threads (live and exited) included.
pub fn rusage_self() -> Rusage {
    rusage(libc::RUSAGE_SELF)
}

/// The calling thread only.
pub fn rusage_thread() -> Rusage {
    rusage(libc::RUSAGE_THREAD)
}

fn rusage(who: libc::c_int) -> Rusage {
    let mut ru = MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a live, writable rusage for the kernel to fill.
    let rc = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
    // Only an invalid `who` fails, and both callers pass valid constants.
    if rc != 0 {
        return Rusage::default();
    }
    // SAFETY: zeroed is already a valid rusage (plain integers), and
    // getrusage succeeded in filling it.
    let ru = unsafe { ru.assume_init() };
    let count = |v: libc::c_long| u64::try_from(v).unwrap_or(0);
    Rusage {
        user_ns: timeval_ns(ru.ru_utime),
        system_ns: timeval_ns(ru.ru_stime),
        voluntary_csw: count(ru.ru_nvcsw),
        involuntary_csw: count(ru.ru_nivcsw),
        max_rss_kb: count(ru.ru_maxrss),
        minflt: count(ru.ru_minflt),
        majflt: count(ru.ru_majflt),
    }
}

fn timeval_ns(tv: libc::timeval) -> u64 {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let usecs = u64::try_from(tv.tv_usec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000)
        .saturating_add(usecs.saturating_mul(1_000))
}

/// Makes the child `cmd` spawns receive SIGTERM when its parent goes away,
/// so an embedded server never outlives a crashed or killed plumb.
///
/// The kernel sends the signal when the *thread* that spawned the child
/// exits, not only the process: spawn from a thread that lives as long as the
/// child should.
pub fn kill_on_parent_death(cmd: &mut Command) {
    let parent = std::process::id();
    let hook = move || -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
        // If the parent died between fork and prctl, the child has already
        // been reparented and no signal will ever come: give up on exec.
        let ppid = rustix::process::getppid().map(|p| p.as_raw_pid());
        if ppid.and_then(|p| u32::try_from(p).ok()) != Some(parent) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec, where only
    // async-signal-safe work is allowed: it makes two raw syscalls (prctl,
    // getppid) through rustix, compares integers captured by value, and
    // builds an io::Error from an errno, which does not allocate. It takes
    // no locks and touches no memory shared with the parent's other threads.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// Sends SIGTERM to every process of group `pgid`: a child spawned as
/// the leader of a group of its own, and all it started (a kernel build's
/// make and compilers), which a signal to the child alone would leave
/// running.
pub fn terminate_group(pgid: u32) -> io::Result<()> {
    let pid = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    rustix::process::kill_process_group(pid, rustix::process::Signal::TERM)?;
    Ok(())
}

/// RLIMIT_NOFILE as (soft, hard), `u64::MAX` meaning unlimited.
pub fn nofile_limits() -> (u64, u64) {
    let now = getrlimit(Resource::Nofile);
    (
        now.current.unwrap_or(u64::MAX),
        now.maximum.unwrap_or(u64::MAX),
    )
}

/// Raises the soft RLIMIT_NOFILE to the hard limit, for runs with thousands
/// of flows; when `want` descriptors are more than that and the process may
/// raise the hard limit too (root, CAP_SYS_RESOURCE), raises both to `want`
/// (at most fs.nr_open). Returns (soft, hard) as they are afterwards,
/// `u64::MAX` meaning unlimited. Only this process's limit changes.
pub fn raise_nofile_limit(want: u64) -> io::Result<(u64, u64)> {
    let now = getrlimit(Resource::Nofile);
    let hard = now.maximum.unwrap_or(u64::MAX);
    if want > hard {
        let cap = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(1 << 20);
        let target = want.min(cap);
        if target > hard
            && setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(target),
                    maximum: Some(target),
                },
            )
            .is_ok()
        {
            let after = getrlimit(Resource::Nofile);
            return Ok((
                after.current.unwrap_or(u64::MAX),
                after.maximum.unwrap_or(u64::MAX),
            ));
        }
    }
    if now.current != now.maximum {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: now.maximum,
                maximum: now.maximum,
            },
        )?;
    }
    let after = getrlimit(Resource::Nofile);
    Ok((
        after.current.unwrap_or(u64::MAX),
        after.maximum.unwrap_or(u64::MAX),
    ))
}

/// Whether the effective uid is 0. Capabilities (CAP_NET_ADMIN) may allow
/// what root can without it; this only answers the uid question.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    fn busy(d: Duration) {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < d {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        black_box(x);
    }

    #[test]
    fn user_time_grows_with_work() {
        let before = rusage_self();
        busy(Duration::from_millis(50));
        let after = rusage_self();
        assert!(after.user_ns > before.user_ns, "{before:?} -> {after:?}");
        assert!(after.max_rss_kb > 0);

        let before = rusage_thread();
        busy(Duration::from_millis(50));
        let after = rusage_thread();
        assert!(after.user_ns > before.user_ns);
        assert!(after.user_ns + after.system_ns <= rusage_self().user_ns + rusage_self().system_ns);
    }

    #[test]
    fn nofile_soft_reaches_hard() {
        let (soft, hard) = raise_nofile_limit(0).unwrap();
        assert_eq!(soft, hard);
        assert!(soft > 0);
    }

    #[test]
    fn is_root_matches_proc() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let euid: u32 = uid_line
            .split_ascii_whitespace()
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(is_root(), euid == 0);
    }

    #[test]
    fn child_dies_with_the_thread_that_spawned_it() {
        // The death signal follows the spawning thread, which makes it
        // testable without killing the test process itself.
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        kill_on_parent_death(&mut cmd);
        let child = std::thread::spawn(move || cmd.spawn().unwrap())
            .join()
            .unwrap();
        let pid = child.id();
        let mut child = child;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(status.signal(), Some(libc::SIGTERM), "pid {pid}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "child {pid} outlived its parent thread"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
