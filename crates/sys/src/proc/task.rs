use super::num;
use crate::ParseError;
use std::io;

const TASK_STAT: &str = "/proc/[pid]/task/[tid]/stat";

/// CPU time, scheduling and placement of one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSnapshot {
    pub tid: u32,
    pub name: String,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// The CPU the thread last ran on.
    pub last_cpu: u32,
    /// Context switches the thread asked for by blocking, and those forced
    /// on it by preemption (/proc/<pid>/task/<tid>/status).
    pub voluntary_csw: u64,
    pub involuntary_csw: u64,
    /// The CPUs it may run on, as the kernel lists them: 0-3,6.
    pub cpus_allowed_list: String,
    /// None where the kernel keeps no per-task scheduler statistics
    /// (CONFIG_SCHED_INFO off).
    pub schedstat: Option<Schedstat>,
    /// Moves between CPUs (se.nr_migrations); None where the kernel does not
    /// expose /proc/<pid>/task/<tid>/sched (CONFIG_SCHED_DEBUG off).
    pub migrations: Option<u64>,
}

const SCHEDSTAT: &str = "/proc/[pid]/task/[tid]/schedstat";

/// What the scheduler accounted to a task since it started
/// (/proc/<pid>/task/<tid>/schedstat).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Schedstat {
    /// Nanoseconds on a CPU.
    pub run_ns: u64,
    /// Nanoseconds runnable but waiting on a run queue.
    pub wait_ns: u64,
    /// Timeslices run: how often it was put on a CPU.
    pub timeslices: u64,
}

pub fn parse_schedstat(text: &str) -> Result<Schedstat, ParseError> {
    let mut it = text.split_ascii_whitespace();
    let mut next = |what: &str| {
        let v = it.next().ok_or_else(|| {
            ParseError::new(SCHEDSTAT, 1, format!("{what}: missing (3 fields expected)"))
        })?;
        num(SCHEDSTAT, 1, what, v)
    };
    Ok(Schedstat {
        run_ns: next("run time")?,
        wait_ns: next("run-queue wait")?,
        timeslices: next("timeslices")?,
    })
}

/// se.nr_migrations of a /proc/<pid>[/task/<tid>]/sched text; None when the
/// line is not there (its fields vary with the kernel's version).
pub fn parse_sched_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == "se.nr_migrations")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// proc_pid_stat(5) numbers its fields from 1; the state, the first after
/// comm, is field 3.
const FIELD_STATE: usize = 3;

/// The fields plumb uses from a /proc/<pid>[/task/<tid>]/stat line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskStat {
    /// What the task calls itself now: a task may rename itself at any time,
    /// so with the pid it does not identify a task over time; the start time
    /// does.
    pub comm: String,
    /// The parent's pid.
    pub ppid: u32,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// User and system ticks of the children the task has waited for.
    pub cutime_ticks: u64,
    pub cstime_ticks: u64,
    /// Clock ticks after boot at which the task started.
    pub start_ticks: u64,
    /// The CPU the task last ran on.
    pub processor: u32,
}

pub fn parse_task_stat(text: &str) -> Result<TaskStat, ParseError> {
    let err = |m: &str| ParseError::new(TASK_STAT, 1, m);
    // comm is whatever the thread named itself, spaces and parentheses
    // included, so only the first '(' and the last ')' delimit it.
    let open = text.find('(').ok_or_else(|| err("no '(' before comm"))?;
    let close = text.rfind(')').ok_or_else(|| err("no ')' after comm"))?;
    if close < open {
        return Err(err("')' before '('"));
    }
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    // A field by its number in proc_pid_stat(5), named there as here.
    let field = |n: usize| {
        rest.get(n - FIELD_STATE)
            .copied()
            .ok_or_else(|| err(&format!("only {} fields", rest.len() + FIELD_STATE - 1)))
    };
    Ok(TaskStat {
        comm,
        ppid: num(TASK_STAT, 1, "ppid", field(4)?)?,
        utime_ticks: num(TASK_STAT, 1, "utime", field(14)?)?,
        stime_ticks: num(TASK_STAT, 1, "stime", field(15)?)?,
        cutime_ticks: num(TASK_STAT, 1, "cutime", field(16)?)?,
        cstime_ticks: num(TASK_STAT, 1, "cstime", field(17)?)?,
        start_ticks: num(TASK_STAT, 1, "starttime", field(22)?)?,
        processor: num(TASK_STAT, 1, "processor", field(39)?)?,
    })
}

/// The fields plumb uses from /proc/<pid>[/task/<tid>]/status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusFields {
    pub voluntary_csw: u64,
    pub involuntary_csw: u64,
    pub cpus_allowed_list: String,
    /// 0 where the kernel prints no VmRSS line (kernel threads).
    pub vm_rss_kb: u64,
}

/// Lenient on purpose: fields vary by kernel version and task kind, and a
/// missing one is better reported as its default than as a failed run.
pub fn parse_status(text: &str) -> StatusFields {
    let mut out = StatusFields::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let first_number = || {
            value
                .split_ascii_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        match key {
            "voluntary_ctxt_switches" => out.voluntary_csw = first_number(),
            "nonvoluntary_ctxt_switches" => out.involuntary_csw = first_number(),
            "Cpus_allowed_list" => out.cpus_allowed_list = value.to_string(),
            "VmRSS" => out.vm_rss_kb = first_number(),
            _ => {}
        }
    }
    out
}

/// Every thread of process `pid` (None: this process).
pub fn read_tasks(pid: Option<u32>) -> io::Result<Vec<TaskSnapshot>> {
    let dir = match pid {
        Some(pid) => format!("/proc/{pid}/task"),
        None => "/proc/self/task".to_string(),
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        match read_task(&dir, tid) {
            Ok(task) => out.push(task),
            Err(e) if thread_is_gone(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// The calling thread, as [`read_tasks`] would list it.
pub fn read_this_thread() -> io::Result<TaskSnapshot> {
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    read_task("/proc/self/task", tid)
}

fn read_task(dir: &str, tid: u32) -> io::Result<TaskSnapshot> {
    let stat = std::fs::read_to_string(format!("{dir}/{tid}/stat"))?;
    let status = std::fs::read_to_string(format!("{dir}/{tid}/status"))?;
    let stat = parse_task_stat(&stat)?;
    let status = parse_status(&status);
    // Both depend on the kernel's configuration: absent, they are unknown,
    // not an error.
    let schedstat = std::fs::read_to_string(format!("{dir}/{tid}/schedstat"))
        .ok()
        .and_then(|t| parse_schedstat(&t).ok());
    let migrations = std::fs::read_to_string(format!("{dir}/{tid}/sched"))
        .ok()
        .and_then(|t| parse_sched_migrations(&t));
    Ok(TaskSnapshot {
        tid,
        name: stat.comm,
        utime_ticks: stat.utime_ticks,
        stime_ticks: stat.stime_ticks,
        last_cpu: stat.processor,
        voluntary_csw: status.voluntary_csw,
        involuntary_csw: status.involuntary_csw,
        cpus_allowed_list: status.cpus_allowed_list,
        schedstat,
        migrations,
    })
}

// A thread that exits after the directory was listed makes open() fail with
// ENOENT, or read() with ESRCH once its files are already open.
fn thread_is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn comm_with_spaces_and_parens() {
        let line = "4242 ((a) b)) S 4200 4200 4200 34817 4200 4194368 171 0 0 0 \
                    17 23 31 7 20 0 3 0 123456 10485760 500 18446744073709551615 \
                    1 1 0 0 0 0 0 4096 1260 0 0 0 -1 5 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let s = parse_task_stat(line).unwrap();
        assert_eq!(s.comm, "(a) b)");
        assert_eq!(
            (s.utime_ticks, s.stime_ticks, s.start_ticks, s.processor),
            (17, 23, 123456, 5)
        );
        assert_eq!((s.ppid, s.cutime_ticks, s.cstime_ticks), (4200, 31, 7));
    }

    #[test]
    fn schedstat_and_migrations() {
        assert_eq!(
            parse_schedstat("1647624 120786 2\n").unwrap(),
            Schedstat {
                run_ns: 1647624,
                wait_ns: 120786,
                timeslices: 2
            }
        );
        assert!(parse_schedstat("1 2").is_err());
        assert!(parse_schedstat("1 x 3").is_err());
        let sched = "plumb-s0 (4242, #threads: 3)\n\
                     -------------------------------------------------------------------\n\
                     se.exec_start                                :      123.456\n\
                     se.nr_migrations                             :                   17\n\
                     numa_pages_migrated                          :                    0\n";
        assert_eq!(parse_sched_migrations(sched), Some(17));
        assert_eq!(parse_sched_migrations("se.exec_start : 1\n"), None);
    }

    #[test]
    fn this_threads_scheduler_accounting_grows_as_it_runs() {
        let me = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let read = || {
            read_tasks(None)
                .unwrap()
                .into_iter()
                .find(|t| t.tid == me)
                .unwrap()
        };
        let a = read();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let b = read();
        // Where the kernel keeps the statistics (it does on any distribution
        // kernel), the thread ran for about the 30 ms it spun.
        if let (Some(a), Some(b)) = (a.schedstat, b.schedstat) {
            let ran = b.run_ns - a.run_ns;
            assert!(ran >= 10_000_000, "ran {ran} ns");
            assert!(b.timeslices >= a.timeslices);
        }
    }

    #[test]
    fn truncated_stat_is_an_error() {
        assert!(parse_task_stat("1 (x) S 0 0").is_err());
        assert!(parse_task_stat("1 x S").is_err());
        assert!(parse_task_stat("1 )x( S").is_err());
    }

    #[test]
    fn status_fields_and_defaults() {
        let text = "Name:\tplumb\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t10\n\
                    VmRSS:\t    5120 kB\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n\
                    voluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t545\n";
        let s = parse_status(text);
        assert_eq!(
            s,
            StatusFields {
                voluntary_csw: 150,
                involuntary_csw: 545,
                cpus_allowed_list: "0-3".into(),
                vm_rss_kb: 5120,
            }
        );
        // Kernel threads print no VmRSS.
        let kthread = parse_status("Name:\tkthreadd\nCpus_allowed_list:\t0\n");
        assert_eq!(kthread.vm_rss_kb, 0);
        assert_eq!(kthread.cpus_allowed_list, "0");
    }

    #[test]
    fn live_finds_a_named_thread() {
        let (started_tx, started_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("plumb-test-x".into())
            .spawn(move || {
                started_tx
                    .send(rustix::thread::gettid().as_raw_pid())
                    .unwrap();
                let _ = stop_rx.recv();
            })
            .unwrap();
        let tid = started_rx.recv().unwrap() as u32;
        // A listing of /proc/self/task can skip a live thread when others
        // (the test harness's) exit while it is read: the kernel walks the
        // list by position. A few tries see it.
        let tasks = (0..5)
            .map(|_| read_tasks(None).unwrap())
            .find(|ts| ts.iter().any(|t| t.name == "plumb-test-x"))
            .expect("the named thread in one of 5 listings");
        stop_tx.send(()).unwrap();
        handle.join().unwrap();
        let task = tasks.iter().find(|t| t.name == "plumb-test-x").unwrap();
        assert_eq!(task.tid, tid);
        assert!(!task.cpus_allowed_list.is_empty());
        let me = std::process::id();
        assert!(tasks.iter().any(|t| t.tid == me));
        assert_eq!(read_tasks(Some(me)).unwrap().first().unwrap().tid, me);
    }

    #[test]
    fn live_missing_process_is_an_error() {
        // Above /proc/sys/kernel/pid_max's ceiling of 2^22.
        assert!(read_tasks(Some(u32::MAX)).is_err());
    }
}
