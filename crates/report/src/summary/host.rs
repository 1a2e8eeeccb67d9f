//! The processes of the ends and their host: threads, pinning, how busy
//! the host was with others, and the socket options as granted.

use super::*;

/// The worker threads pinned to each CPU of the client's host, by CPU:
/// `client` where an end's one thread is, its threads by name where it has
/// more (`plumb-c0 plumb-c2`), or how many where that is long. An end on
/// another host pins CPUs of that host, which this table does not show.
pub(super) fn pinned_threads(it: &Iteration) -> BTreeMap<u32, String> {
    let mut by: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for end in [&it.client, &it.server] {
        if end.lost || end.hostname != it.client.hostname {
            continue;
        }
        let Some(cpus) = end
            .pinned_cpus
            .as_deref()
            .and_then(|c| c.parse::<plumb_spec::CpuList>().ok())
            .filter(|c| !c.is_empty())
        else {
            continue;
        };
        // As the engine pins them: worker w to the w-th CPU of the list,
        // round and round.
        let threads = end.threads.max(1) as usize;
        let mut on: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for w in 0..threads {
            on.entry(cpus.cpus()[w % cpus.len()]).or_default().push(w);
        }
        // The workers' thread names, as ps and top show them.
        let prefix = match end.role {
            plumb_samples::Role::Client => "plumb-c",
            plumb_samples::Role::Server => "plumb-s",
        };
        for (cpu, workers) in on {
            let who = match workers.len() {
                _ if threads == 1 => end.role.to_string(),
                1 | 2 => workers
                    .iter()
                    .map(|w| format!("{prefix}{w}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                n => format!("{} {n} threads", end.role),
            };
            by.entry(cpu).or_default().push(who);
        }
    }
    by.into_iter().map(|(cpu, v)| (cpu, v.join(", "))).collect()
}

/// Each end's process and the host: CPU seconds over the window, how busy,
/// per unit of work, and context switches (the host's softirq seconds).
pub(super) fn processes(o: &mut String, it: &Iteration, transactional: bool) {
    let d = &it.derived;
    let mut t = Table::new([
        ("CPU", Align::Left, 13),
        ("user", Align::Right, 9),
        ("system", Align::Right, 8),
        ("total", Align::Right, 8),
        ("util", Align::Right, 7),
        (
            if transactional { "per tx" } else { "per GB" },
            Align::Right,
            9,
        ),
        ("ctx vol/invol", Align::Left, 0),
    ])
    .gap(6, 2);
    let cost = |per_gb: f64, per_tx: Option<f64>| {
        if transactional {
            per_tx.map(micros).unwrap_or_else(|| "-".into())
        } else {
            secs(per_gb)
        }
    };
    for (end, per_unit) in [
        (
            &it.client,
            cost(d.client_cpu_s_per_gb, d.client_cpu_s_per_tx),
        ),
        (
            &it.server,
            cost(d.server_cpu_s_per_gb, d.server_cpu_s_per_tx),
        ),
    ] {
        if end.lost {
            let mut cells = vec![end.role.to_string()];
            cells.resize(6, String::new());
            cells.push("lost: not measured".into());
            t.row(cells);
            continue;
        }
        let p = &end.process;
        let util = if end.window_s > 0.0 {
            p.total_s() / end.window_s
        } else {
            0.0
        };
        t.row([
            format!("{} pid {}", end.role, p.pid),
            secs(p.user_s),
            secs(p.system_s),
            secs(p.total_s()),
            pct(util),
            per_unit,
            format!("{}/{}", p.voluntary_csw, p.involuntary_csw),
        ]);
    }
    let ncpu = it.client.cpus.len().max(1) as f64;
    t.row([
        format!("host {} CPUs", it.client.cpus.len()),
        String::new(),
        String::new(),
        secs(d.host_busy_s),
        pct(d.host_busy_s / (it.window_s * ncpu).max(f64::EPSILON)),
        cost(d.host_cpu_s_per_gb, d.host_cpu_s_per_tx),
        format!("softirq {}", secs(d.host_softirq_s)),
    ]);
    o.push_str(&t.terminal(""));
    if let Some(w) = busy_host(it) {
        for line in wrap(&format!("warning: {w}"), 80, "         ") {
            let _ = writeln!(o, "{line}");
        }
    }
}

/// Whether other processes took more of the host over the window than the
/// ends did: then the figures measure a busy host as much as the test.
pub(super) fn busy_host(it: &Iteration) -> Option<String> {
    let mut ends = vec![&it.client];
    // A server on another host spends nothing of this one's.
    if !it.server.lost && it.server.hostname == it.client.hostname {
        ends.push(&it.server);
    }
    let ours: f64 = ends.iter().map(|e| e.process.total_s()).sum();
    let others = it.derived.host_busy_s - ours;
    (others > ours && others > 0.0).then(|| {
        format!(
            "other processes took {} of the host's CPU time over the window, more than \
             the ends' {}: the figures measure a busy host as well as the test \
             (plumb doctor lists the busiest)",
            secs(others),
            secs(ours)
        )
    })
}

/// The socket options as asked and as each end read them back, in columns
/// sized from their cells: a value wider than its column (a pacing rate in
/// bit/s) would otherwise run into the next one.
pub(super) fn options(o: &mut String, it: &Iteration) {
    let mut table = Table::new([
        ("option", Align::Left, 12),
        ("asked", Align::Left, 15),
        ("client granted", Align::Left, 24),
        ("server granted", Align::Left, 0),
    ]);
    let show = |r: &plumb_samples::OptionRecord| -> String {
        match (r.status, &r.at_close) {
            (OptionStatus::Unsupported, _) => "unsupported".into(),
            // Autotuned over the run: where it began, and where it ended.
            (_, Some(tuned)) => format!("{} -> {tuned}", r.granted),
            _ => r.granted.clone(),
        }
    };
    for c in &it.client.socket_options {
        let s = it.server.socket_options.iter().find(|s| s.name == c.name);
        table.row([
            c.name.clone(),
            c.asked.clone(),
            show(c),
            s.map(show).unwrap_or_else(|| "-".into()),
        ]);
    }
    o.push_str(&table.terminal(""));
    let ends = [&it.client, &it.server];
    if ends
        .iter()
        .any(|e| e.socket_options.iter().any(|r| r.at_close.is_some()))
    {
        let _ = writeln!(
            o,
            "(A -> B: read back as the flows were set up, and as the window closed)"
        );
    }
}

#[cfg(test)]
mod busy_host_tests {
    use super::busy_host;

    #[test]
    fn a_host_busier_with_others_than_with_the_ends_is_said() {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        it.server.hostname = it.client.hostname.clone();
        it.server.lost = false;
        let ours = it.client.process.total_s() + it.server.process.total_s();
        // Others took a little: nothing said.
        it.derived.host_busy_s = ours * 1.2;
        assert_eq!(busy_host(&it), None);
        // 20 CPU-seconds busy while the ends used 9.7 of them.
        it.derived.host_busy_s = ours / 9.7 * 20.0;
        let w = busy_host(&it).expect("a warning");
        assert!(w.contains("more than the ends'"), "{w}");
        // A server on another host is not this host's: only the client is
        // the test's here.
        it.server.hostname = "elsewhere".into();
        it.derived.host_busy_s = it.client.process.total_s() * 2.5;
        assert!(busy_host(&it).is_some());
    }
}
