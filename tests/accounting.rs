//! What each end accounts beyond its own counters: the scheduler's view of
//! its threads (/proc/PID/task/TID/schedstat), bounded by the window, in
//! agreement with getrusage, and showing the run-queue wait of two ends made
//! to share one CPU; and the interfaces and per-CPU packet processing of the
//! window, against /proc/net/dev and /proc/net/softnet_stat read by the test
//! around the run.

mod common;
use common::*;
use serde_json::Value;

/// Each end's (run, wait) seconds, after checking them against the window
/// and the process's CPU time.
fn sched_of(rec: &Value) -> [(f64, f64); 2] {
    let it = &rec["iterations"][0];
    [&it["client"], &it["server"]].map(|end| {
        let window = f(&end["window_s"]);
        let p = &end["process"];
        let s = &p["sched"];
        assert!(s.is_object(), "no scheduler accounting: {p}");
        let (run, wait) = (f(&s["run_s"]), f(&s["wait_s"]));
        // A thread is on a CPU or waiting for one for at most the window
        // (threads born in it, for the little before it).
        let threads = p["threads"].as_array().unwrap();
        let bound = window * threads.len().max(1) as f64 + 0.05;
        assert!(
            (0.0..=bound).contains(&run),
            "run {run} s, bound {bound}: {s}"
        );
        assert!(
            (0.0..=bound).contains(&wait),
            "wait {wait} s, bound {bound}: {s}"
        );
        // A thread whose accounting the kernel did not show at both edges
        // (one that ended as the window closed) has none in the record.
        for t in threads.iter().filter(|t| !t["sched"].is_null()) {
            let ts = &t["sched"];
            assert!(f(&ts["run_s"]) <= window + 0.05, "{t}");
            assert!(f(&ts["wait_s"]) <= window + 0.05, "{t}");
        }
        // The same CPU time as getrusage's, which the kernel keeps apart
        // from schedstat. getrusage counts threads that have ended; so must
        // the scheduler's sum, from the workers' last figures.
        let cpu = f(&p["user_s"]) + f(&p["system_s"]);
        assert!(
            (run - cpu).abs() <= 0.1 * cpu + 0.03,
            "{}: scheduler {run} s on a CPU, getrusage {cpu} s: {p}",
            end["role"]
        );
        if s.get("migrations").is_some() {
            assert!(u(&s["migrations"]) < 1_000_000, "{s}");
        }
        match kernel_irq_time() {
            Some(b) => assert_eq!(
                end["irq_time_accounting"], b,
                "{}",
                end["irq_time_accounting"]
            ),
            None => assert!(end.get("irq_time_accounting").is_none()),
        }
        (run, wait)
    })
}

/// Whether the running kernel was built with CONFIG_IRQ_TIME_ACCOUNTING,
/// read by zcat or cat; None when it has no config to read.
fn kernel_irq_time() -> Option<bool> {
    let cfg = std::process::Command::new("sh")
        .args([
            "-c",
            "zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r) 2>/dev/null",
        ])
        .output()
        .unwrap();
    let cfg = String::from_utf8_lossy(&cfg.stdout);
    (!cfg.is_empty()).then(|| cfg.lines().any(|l| l == "CONFIG_IRQ_TIME_ACCOUNTING=y"))
}

/// CPU ticks used so far by processes other than plumb and this test, in
/// two ways, of which a caller takes the larger difference: summed over the
/// processes alive now (from /proc/PID/stat), and the host's busy ticks less
/// this test's and its waited-for children's, which also counts processes
/// that came and went in between.
fn others_cpu_ticks() -> (u64, u64) {
    (alive_others_ticks(), host_less_ours_ticks())
}

fn host_less_ours_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_ascii_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    // user nice system idle iowait irq softirq: without IRQ time
    // accounting the ticks that land in a softirq count as softirq here and
    // as the interrupted task's system time, so they are ours to subtract;
    // with it, neither side counts them.
    let host = cpu[0]
        + cpu[1]
        + cpu[2]
        + if kernel_irq_time() == Some(true) {
            0
        } else {
            cpu[5] + cpu[6]
        };
    let me = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<u64> = me
        .rsplit_once(')')
        .unwrap()
        .1
        .split_ascii_whitespace()
        .skip(11)
        .take(4)
        .map(|v| v.parse().unwrap())
        .collect();
    // utime, stime, cutime, cstime: fields 14 to 17.
    host.saturating_sub(f.iter().sum())
}

fn alive_others_ticks() -> u64 {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            if name == me || !name.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let stat = std::fs::read_to_string(format!("/proc/{name}/stat")).ok()?;
            let (comm, rest) = stat.rsplit_once(')')?;
            if comm.ends_with("(plumb") {
                return None;
            }
            let f: Vec<&str> = rest.split_ascii_whitespace().collect();
            // utime and stime are fields 14 and 15; `rest` starts at field 3.
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .sum()
}

#[test]
fn two_ends_sharing_one_cpu_wait_on_its_run_queue() {
    let _alone = measuring_alone();
    let rr = |client: &str, server: &str| {
        let rec = workload_json(
            "rr",
            &[
                "--duration",
                "1s",
                "--iterations",
                "1",
                "--client-cpus",
                client,
                "--server-cpus",
                server,
            ],
        );
        sched_of(&rec)
    };
    let before = others_cpu_ticks();
    let apart = rr("0", "1");
    let after = others_cpu_ticks();
    let others = after
        .0
        .saturating_sub(before.0)
        .max(after.1.saturating_sub(before.1));
    let together = rr("0", "0");
    // Ping-pong on one CPU: each answer wakes the other end, which waits
    // until the one that woke it blocks; apart, each has a CPU of its own
    // and runs as it wakes. Unless another process keeps those CPUs busy
    // (a hog beside the tests): then the ends wait pinned apart too, and
    // all that holds is that together they wait.
    // Read here from /proc, not from plumb: half a CPU-second of ticks
    // (USER_HZ 100) in other processes over the 1.2 s apart run.
    // Apart waits some 5 to 15 ms here, together 190 to 330 ms; a busy
    // host's scheduler once made it 64 ms apart against 188 together,
    // with under 50 ticks in other processes: twice is the bound.
    let contended = others >= 50;
    for (end, (a, t)) in ["client", "server"].iter().zip(apart.iter().zip(&together)) {
        assert!(
            t.1 >= 0.1 && (contended || t.1 >= 2.0 * a.1),
            "{end}: run-queue wait {} s pinned together, {} s pinned apart",
            t.1,
            a.1
        );
    }
    if contended {
        eprintln!(
            "other processes used {others} ticks of CPU: run-queue wait pinned apart {apart:?}"
        );
    }
}

#[test]
fn the_summary_shows_each_ends_scheduling_and_how_softirq_time_is_kept() {
    let out = run(&[
        "run",
        "rr",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--iterations",
        "1",
        "--no-store",
    ]);
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let sched: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("sched "))
        .take(2)
        .collect();
    assert_eq!(sched.len(), 2, "{text}");
    assert!(
        sched[0].contains("client") && sched[1].contains("server"),
        "{text}"
    );
    for l in &sched {
        assert!(
            l.contains("run-queue wait") && l.contains("migrations"),
            "{l}"
        );
        assert!(l.len() <= 80, "{l}");
    }
    let want = match kernel_irq_time() {
        None => "kernel config unreadable",
        Some(true) => "measured exactly",
        Some(false) => "sampled at each tick",
    };
    assert!(text.contains(want), "expected '{want}' in:\n{text}");
}

/// Packets processed by every CPU, from /proc/net/softnet_stat read here.
fn softnet_processed() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap()
        .lines()
        .map(|l| u64::from_str_radix(l.split_ascii_whitespace().next().unwrap(), 16).unwrap())
        .sum()
}

#[test]
fn interface_and_softnet_deltas_agree_with_proc_read_around_the_run() {
    let _alone = measuring_alone();
    let (lo0, sn0) = (lo_rx(), softnet_processed());
    let rec = workload_json("stream", &["--duration", "1s", "--iterations", "1"]);
    let (lo1, sn1) = (lo_rx(), softnet_processed());
    let it = &rec["iterations"][0];
    for end in [&it["client"], &it["server"]] {
        let lo = end["interfaces"]
            .as_array()
            .expect("interfaces that moved")
            .iter()
            .find(|i| i["name"] == "lo")
            .unwrap_or_else(|| panic!("lo carried the test: {}", end["interfaces"]));
        assert_eq!(lo["virtual_device"], true, "{lo}");
        assert!(lo.get("irqs").is_none(), "lo has no IRQs of its own: {lo}");
        assert_eq!(
            lo["driver_counters"], 0,
            "lo's driver names no statistics: {lo}"
        );
        assert!(lo.get("driver").is_none(), "{lo}");
        let (bytes, packets) = (u(&lo["rx_bytes"]), u(&lo["rx_packets"]));
        // The window's payload, headers on top, less what had crossed lo
        // before the window and sat in the sockets' queues as it opened
        // (1 % for the ends' windows and snapshots not being one moment);
        // at most what the test saw over the whole run, warm-up and set-up
        // included.
        let payload = u(&it["transfer"]["received_bytes"]);
        let queued = u(&it["transfer"]["in_flight_start_bytes"]);
        assert!(
            bytes as f64 >= 0.99 * payload.saturating_sub(queued) as f64,
            "lo received {bytes} B, the flows {payload} B, {queued} B of it queued at the start"
        );
        assert!(
            bytes <= lo1.0 - lo0.0,
            "{bytes} B in the window, {} B around it",
            lo1.0 - lo0.0
        );
        assert!(packets <= lo1.1 - lo0.1);
        // Every packet on lo goes through a CPU's backlog once.
        let processed: u64 = end["softnet"]
            .as_array()
            .expect("softnet rows that moved")
            .iter()
            .map(|r| u(&r["processed"]))
            .sum();
        assert!(
            processed as f64 >= 0.9 * packets as f64,
            "softnet processed {processed}, lo received {packets} packets"
        );
        assert!(
            processed <= sn1 - sn0,
            "{processed} in the window, {} around it",
            sn1 - sn0
        );
    }
}

/// The named lines of `/proc/interrupts` (LOC, CAL, ...), each summed over
/// the CPUs, read here rather than by plumb's parser.
fn named_interrupts() -> std::collections::BTreeMap<String, u64> {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    let cpus = text.lines().next().unwrap().split_whitespace().count();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let (label, rest) = l.split_once(':')?;
            let label = label.trim();
            if label.parse::<u32>().is_ok() {
                return None;
            }
            let counts = rest.split_whitespace().take(cpus);
            let n: u64 = counts.map_while(|c| c.parse::<u64>().ok()).sum();
            Some((label.to_string(), n))
        })
        .collect()
}

#[test]
fn timer_interrupts_and_ipis_are_the_windows_and_within_what_proc_counted_around_it() {
    let _alone = measuring_alone();
    let before = named_interrupts();
    let rec = workload_json("stream", &["--duration", "1s", "--iterations", "1"]);
    let after = named_interrupts();
    let x86 = before.contains_key("LOC");
    if !x86 {
        assert!(std::env::var_os("CI").is_none(), "CI runs on x86");
        eprintln!("no LOC line in /proc/interrupts: not x86, only the bounds are checked");
    }
    let it = &rec["iterations"][0];
    for end in [&it["client"], &it["server"]] {
        let got = end["interrupts"]
            .as_object()
            .unwrap_or_else(|| panic!("interrupts that moved: {end}"));
        for (name, n) in got {
            let around =
                after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
            assert!(
                (1..=around).contains(&u(n)),
                "{name}: {n} in the window, {around} around it"
            );
        }
        if x86 {
            // The sending CPU is busy all the window, and a busy CPU takes
            // its tick (HZ is 100 at least) whatever else it does.
            assert!(u(&got["LOC"]) >= 50, "{got:?}");
        }
    }
    // The host's, so the summary shows them once.
    let out = run(&[&["run", "stream"][..], &ONE_SHORT].concat());
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("interrupts"))
        .collect();
    assert_eq!(lines.len(), usize::from(x86), "{text}");
    if x86 {
        assert_mentions(lines[0], &["client", "timer interrupts"]);
    }
}

/// `/proc/net/sockstat` as seen from inside `ns`: (TCP sockets in use, all
/// sockets).
fn sockstat_in(ns: &Netns) -> (u64, u64) {
    let out = ns.exec("cat").arg("/proc/net/sockstat").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let word = |line: &str, key: &str| -> u64 {
        let l = text.lines().find(|l| l.starts_with(line)).expect(line);
        let w: Vec<&str> = l.split_whitespace().collect();
        let i = w.iter().position(|x| *x == key).expect(key);
        w[i + 1].parse().unwrap()
    };
    (word("TCP:", "inuse"), word("sockets:", "used"))
}

#[test]
fn sockstat_holds_the_runs_flows_and_the_namespace_has_none_left_after() {
    let _alone = measuring_alone();
    // A namespace of its own: no other test's sockets are counted in it.
    let Some(ns) = Netns::new("sockstat") else {
        return;
    };
    // One short stream in the namespace, which must succeed.
    let stream = |extra: &[&str]| {
        let out = ns
            .exec(env!("CARGO_BIN_EXE_plumb"))
            .env("PLUMB_ACTIVITY_DIR", "off")
            .args(["run", "stream"])
            .args(ONE_SHORT)
            .args(extra)
            .output()
            .unwrap();
        assert_ok(&out);
        out
    };
    let (before, _) = sockstat_in(&ns);
    let flows = 8u64;
    let out = stream(&["--flows", "8", "--json"]);
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let client = &rec["iterations"][0]["client"];
    let s = &client["sockstat"];
    // Both ends' flows are open as the window closes, beside at most a few
    // of plumb's own (the control connection's two ends, the listeners).
    let tcp = u(&s["tcp_inuse"]) - before;
    assert!(
        (2 * flows..=2 * flows + 6).contains(&tcp),
        "{tcp} TCP sockets in use for {flows} flows: {s}"
    );
    assert!(u(&s["sockets_used"]) >= u(&s["tcp_inuse"]), "{s}");
    // A stream keeps data queued in its sockets: TCP holds memory.
    assert!(u(&s["tcp_mem_pages"]) > 0, "{s}");
    // The kernel, read here: every one of them closed with the run.
    let (after, _) = sockstat_in(&ns);
    assert_eq!(after, before, "TCP sockets left in use in the namespace");

    // The summary shows the levels once: both ends shared the namespace.
    let out = stream(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("sockstat")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    // TCP's memory is a level: a quiet moment at the close can hold none.
    assert_mentions(lines[0], &["client", "tcp sockets"]);
    assert!(!text.contains("sockstat    server"), "{text}");
}

#[test]
fn retransmits_are_the_windows_and_the_namespaces_kernel_counts_them_too() {
    let _alone = measuring_alone();
    let Some(ns) = Netns::new("retrans") else {
        return;
    };
    // A lossy loopback of the test's own: every retransmission in this
    // namespace is the run's.
    if !drop_every(&ns.0, "tcp", 500) {
        return;
    }
    let before = snmp_in(&ns, "Tcp", "RetransSegs");
    let out = ns
        .exec(env!("CARGO_BIN_EXE_plumb"))
        .env("PLUMB_ACTIVITY_DIR", "off")
        .args(["run", "stream", "--json"])
        .args(ONE_SHORT)
        .output()
        .unwrap();
    assert_ok(&out);
    let kernel = snmp_in(&ns, "Tcp", "RetransSegs") - before;
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let it = &rec["iterations"][0];
    let ours = u(&it["derived"]["retransmits"]);
    assert_eq!(ours, u(&it["client"]["window_retransmits"]));
    // Without a warm-up the window is nearly the whole of the flow's life:
    // the kernel's count holds the window's and a little more.
    assert!(
        ours > 0 && ours <= kernel,
        "{ours} in the window, {kernel} in the namespace"
    );
    assert!(
        ours * 10 >= kernel * 7,
        "{ours} in the window, {kernel} in the namespace"
    );

    // The tracepoints, counted host-wide: the run's retransmissions are
    // among tcp:tcp_retransmit_skb's, and the packets the rule dropped
    // (its own counter, read here) among skb:kfree_skb's.
    let t = &it["client"]["tracepoints"];
    assert!(t["unavailable"].is_null(), "{t}");
    assert!(u(&t["counts"]["tcp:tcp_retransmit_skb"]) > 0, "{t}");
    let dropped = dropped_by_filter(&ns.0);
    assert!(dropped > 0);
    assert!(
        u(&t["counts"]["skb:kfree_skb"]) * 2 >= dropped,
        "{t}: the rule dropped {dropped} packets over the run"
    );

    // The flows' own: the client's filter keeps its sockets' skbs, each
    // retransmitted once or more segments at a time, so at least one and
    // at most the segments the kernel counted in the namespace; the host's
    // count holds them. The server sent no data: none of its own.
    let own = |end: &str| u(&it[end]["flow_events"]["counts"]["tcp:tcp_retransmit_skb"]);
    let filter = |end: &str| {
        it[end]["flow_events"]["filter"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let port = filter("server").replace("sport == ", "");
    assert!(
        port.parse::<u16>().is_ok_and(|p| p > 0),
        "{}",
        filter("server")
    );
    assert_eq!(filter("client"), format!("dport == {port}"));
    assert!(
        own("client") > 0 && own("client") <= kernel,
        "{} skbs of the client's flows, {kernel} segments in the namespace",
        own("client")
    );
    // The host's count and the flows' are two counters read one after the
    // other at each edge: a retransmission between the two reads falls in
    // one window and not the other.
    let host = u(&t["counts"]["tcp:tcp_retransmit_skb"]);
    assert!(
        own("client") <= host + host / 10 + 2,
        "{} skbs of the client's flows, {host} on the host",
        own("client")
    );
    assert_eq!(own("server"), 0, "{}", it["server"]["flow_events"]);
}

/// The receive buffer's tuning, where the kernel has the event (6.18):
/// an autotuned receiver's buffer stays within tcp_rmem's ceiling, with a
/// ratio below one; one whose SO_RCVBUF is set is tuned too, but its
/// buffer stands at what was set (doubled, as SO_RCVBUF does) every time,
/// since the kernel leaves a buffer the application locked alone.
#[test]
fn the_receivers_buffer_is_tuned_within_its_ceiling_and_left_alone_when_set() {
    let _alone = measuring_alone();
    if !require_root("count tracepoints") {
        return;
    }
    let run = |extra: &[&str]| -> Value {
        let out = plumb()
            .args(["run", "stream", "--json", "--flows", "2"])
            .args(ONE_SHORT)
            .args(extra)
            .output()
            .unwrap();
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let auto = run(&[]);
    let own = &auto["iterations"][0]["server"]["flow_events"];
    if let Some(why) = own["unavailable"]["tcp:tcp_rcvbuf_grow"].as_str() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        if !why.contains("perf_event_open") {
            println!("tcp:tcp_rcvbuf_grow is not on {}: {why}", release.trim());
            return;
        }
        panic!("{own}");
    }
    let rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem")
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let g = &own["rcvbuf_grow"];
    let read = u(&g["read"]);
    assert!(read > 0, "{own}");
    assert!(read <= u(&own["counts"]["tcp:tcp_rcvbuf_grow"]), "{own}");
    let mean = |k: &str| u(&g[k]) as f64 / read as f64;
    assert!(
        mean("rcvbuf_sum") <= rmem_max as f64,
        "{own}: tcp_rmem max {rmem_max}"
    );
    assert!(mean("window_clamp_sum") <= mean("rcvbuf_sum"), "{own}");
    let ratio = mean("scaling_ratio_sum") / 256.0;
    assert!(ratio > 0.0 && ratio < 1.0, "{own}");
    // The client received only ACKs: no data to tune a buffer for.
    let client = &auto["iterations"][0]["client"]["flow_events"];
    assert_eq!(u(&client["counts"]["tcp:tcp_rcvbuf_grow"]), 0, "{client}");

    let set = run(&["--rcvbuf", "64K"]);
    let own = &set["iterations"][0]["server"]["flow_events"];
    let g = &own["rcvbuf_grow"];
    assert_eq!(u(&g["rcvbuf_sum"]), u(&g["read"]) * 2 * 65536, "{own}");
}
