//! Flow groups: when one process may not open a descriptor for every flow
//! (RLIMIT_NOFILE, whose hard limit only CAP_SYS_RESOURCE raises), the flows
//! of a test are split over several client processes, each with its own
//! embedded server, started together behind a barrier so that their warm-ups
//! and windows coincide. What each end measured is then put together here as
//! if one process had run every flow: counts, CPU and memory add up over the
//! processes; the host-wide figures (per-CPU time, softirqs, kernel counters)
//! are the host's, taken once; latency histograms merge bucket by bucket.

use crate::{derive, run_iteration_at, RunError, RunOptions};
use plumb_engine::latency::{from_buckets, new_histogram, summarize};
use plumb_engine::meter::NoSink;
use plumb_samples::figure;
use plumb_samples::{EndResult, Iteration, TcpInfoSummary, TCP_INFO_PER_FLOW_MAX};
use plumb_spec::Spec;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The hidden subcommand a member of a flow group runs as.
pub const MEMBER_COMMAND: &str = "flow-group-member";

struct Member {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The members still running when the group gives up are ended, by PID.
struct Members(Vec<Member>);

impl Drop for Members {
    fn drop(&mut self) {
        for m in &mut self.0 {
            if let Ok(None) = m.child.try_wait() {
                let _ = m.child.kill();
            }
            let _ = m.child.wait();
        }
    }
}

fn group_err(message: String) -> RunError {
    RunError::Setup {
        flag: Some(plumb_spec::Field::Flows.flag()),
        message,
    }
}

/// One iteration of `spec` over `groups` client processes, each running its
/// share of the flows (and of the threads) against its own embedded server,
/// all started together once every one has its flows up.
pub(crate) fn run_iteration(
    spec: &Spec,
    opts: &RunOptions,
    groups: u32,
) -> Result<Iteration, RunError> {
    let flows = split(spec.flows, groups);
    let threads = split(spec.threads.max(groups), groups);
    let mut members = Members(Vec::new());
    for (f, t) in flows.iter().zip(&threads) {
        let mut sub = spec.clone();
        sub.flows = *f;
        sub.threads = (*t).clamp(1, *f);
        let mut cmd = Command::new(&opts.server_exe);
        cmd.arg(MEMBER_COMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        plumb_sys::process::kill_on_parent_death(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| group_err(format!("cannot start a flow group process: {e}")))?;
        let mut stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let line = serde_json::to_string(&sub).expect("a spec serializes");
        let sent = writeln!(stdin, "{line}");
        members.0.push(Member {
            child,
            stdin,
            stdout,
        });
        sent.map_err(|e| group_err(format!("a flow group process went away: {e}")))?;
    }
    for (i, m) in members.0.iter_mut().enumerate() {
        let mut line = String::new();
        let _ = m.stdout.read_line(&mut line);
        if line.trim() != "ready" {
            return Err(group_err(format!(
                "flow group {} of {groups} ({} flows) could not set its flows up (its error is above)",
                i + 1,
                flows[i]
            )));
        }
    }
    for m in &mut members.0 {
        // A member that is gone says so when its result is read.
        let _ = writeln!(m.stdin, "go");
        let _ = m.stdin.flush();
    }
    let mut parts = Vec::new();
    for (i, m) in members.0.iter_mut().enumerate() {
        let mut out = String::new();
        let _ = m.stdout.read_to_string(&mut out);
        let _ = m.child.wait();
        let it: Iteration = serde_json::from_str(&out).map_err(|_| {
            group_err(format!(
                "flow group {} of {groups} ended without its results (its error is above)",
                i + 1
            ))
        })?;
        parts.push(it);
    }
    let clients: Vec<EndResult> = parts.iter().map(|p| p.client.clone()).collect();
    let servers: Vec<EndResult> = parts.iter().map(|p| p.server.clone()).collect();
    let client = merge_ends(&clients).expect("at least one group");
    let mut server = merge_ends(&servers).expect("at least one group");
    server.warnings.push(format!(
        "{} flows ran in {groups} client processes, each with its own server, as one process \
         may open only so many descriptors",
        spec.flows
    ));
    let first = &parts[0];
    Ok(Iteration {
        index: 0,
        complete: parts.iter().all(|p| p.complete),
        warmup_s: first.warmup_s,
        window_s: client.window_s,
        transfer: derive::transfer(&client, &server),
        derived: derive::derive(spec, &client, &server),
        client,
        server,
        parts: Vec::new(),
        responsiveness: Vec::new(),
    })
}

/// The member's side: reads its spec from stdin, sets its flows up, says
/// `ready` on stdout, waits for `go` on stdin, runs the iteration and
/// returns it for the caller to print.
pub fn member(opts: &RunOptions) -> Result<Iteration, RunError> {
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    stdin
        .read_line(&mut line)
        .map_err(|e| group_err(format!("reading the spec: {e}")))?;
    let spec: Spec = serde_json::from_str(&line)
        .map_err(|e| group_err(format!("the spec of a flow group member: {e}")))?;
    spec.validate()?;
    let _ = plumb_sys::process::raise_nofile_limit(spec.flows as u64 + 64);
    let mut ready = || -> Result<(), RunError> {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
        let mut go = String::new();
        let _ = stdin.read_line(&mut go);
        if go.trim() == "go" {
            Ok(())
        } else {
            Err(group_err("the flow group was called off".into()))
        }
    };
    // Each member has an embedded server on this host: no environment.
    run_iteration_at(&spec, opts, &mut NoSink, None, &mut ready).map(|(it, _)| it)
}

/// How many processes the flows need, given the descriptors one process may
/// open and the ones it keeps for itself.
pub fn groups_needed(flows: u64, per_process: u64, spare: u64) -> u64 {
    let room = per_process.saturating_sub(spare).max(1);
    flows.div_ceil(room).max(1)
}

/// Splits `total` into `groups` parts that differ by at most one, larger first.
pub fn split(total: u32, groups: u32) -> Vec<u32> {
    let groups = groups.max(1);
    (0..groups)
        .map(|i| total / groups + u32::from(i < total % groups))
        .collect()
}

/// One end's results from the processes of a flow group, as one end. None
/// when there are none.
pub fn merge_ends(parts: &[EndResult]) -> Option<EndResult> {
    let (first, rest) = parts.split_first()?;
    let mut out = first.clone();
    if rest.is_empty() {
        return Some(out);
    }
    let sum = |f: &dyn Fn(&EndResult) -> u64| parts.iter().map(f).sum::<u64>();
    out.threads = parts.iter().map(|p| p.threads).sum();
    // The windows open and close together behind the barrier; their mean
    // is the group's window.
    out.window_s = plumb_stats::mean(&parts.iter().map(|p| p.window_s).collect::<Vec<_>>());
    out.bytes_sent = sum(&|p| p.bytes_sent);
    out.bytes_received = sum(&|p| p.bytes_received);
    out.queued_start_bytes = sum(&|p| p.queued_start_bytes);
    out.queued_end_bytes = sum(&|p| p.queued_end_bytes);
    out.transactions = sum(&|p| p.transactions);

    // Interval samples line up by index; a process with fewer (its window
    // cut short) leaves the rest to the others.
    for p in rest {
        for (i, s) in p.intervals.iter().enumerate() {
            match out.intervals.get_mut(i) {
                Some(o) => {
                    o.bytes_sent += s.bytes_sent;
                    o.bytes_received += s.bytes_received;
                    o.transactions += s.transactions;
                    // The worst group's p99 bounds the merged one from below;
                    // the exact one needs the interval's histograms.
                    o.p99_us = match (o.p99_us, s.p99_us) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => out.intervals.push(s.clone()),
            }
        }
    }

    // Flows are numbered on across the processes, in group order.
    let mut offsets = Vec::new();
    out.flows.clear();
    for p in parts {
        let first = out.flows.len() as u32;
        offsets.push(first as u64);
        out.flows.extend(p.flows.iter().map(|f| {
            let mut f = f.clone();
            f.flow += first;
            f
        }));
    }

    for p in rest {
        for w in &p.warnings {
            if !out.warnings.contains(w) {
                out.warnings.push(w.clone());
            }
        }
    }

    let latencies: Vec<_> = parts.iter().filter_map(|p| p.latency.as_ref()).collect();
    if !latencies.is_empty() {
        let mut h = new_histogram();
        for l in latencies {
            let _ = h.add(from_buckets(l));
        }
        out.latency = Some(summarize(&h));
    }

    for p in rest {
        if let (Some(z), Some(v)) = (out.zerocopy.as_mut(), &p.zerocopy) {
            z.merge(v);
        }
        if let (Some(z), Some(v)) = (out.rx_zerocopy.as_mut(), &p.rx_zerocopy) {
            z.merge(v);
        }
        if let (Some(u), Some(v)) = (out.udp.as_mut(), &p.udp) {
            u.merge(v);
        }
    }

    // What the probes wrote merges by the rule each part declares.
    let json = |e: &EndResult| serde_json::to_value(e).expect("an end serializes");
    let groups: Vec<serde_json::Value> = parts.iter().map(json).collect();
    let mut merged = json(&out);
    figure::merge_parts(&mut merged, &groups, &offsets);
    let mut out: EndResult = serde_json::from_value(merged).expect("a merged end reads back");
    // Where every process kept its flows' TCP_INFO, their distribution is
    // exact, not combined.
    let kept = |p: &EndResult| {
        p.tcp_info.len() as u32 == p.tcp_info_summary.as_ref().map_or(0, |s| s.flows)
    };
    if parts.iter().all(kept) {
        out.tcp_info_summary = TcpInfoSummary::of(&out.tcp_info);
    }
    if !parts.iter().all(kept) || out.tcp_info.len() > TCP_INFO_PER_FLOW_MAX {
        out.tcp_info.clear();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_samples::{FlowTotals, IntervalSample, Role, SoftnetCounts};

    fn end(pid: u32, flows: u32, tx_per_flow: u64, latency_ns: &[u64]) -> EndResult {
        let mut h = new_histogram();
        for &v in latency_ns {
            h.record(v).unwrap();
        }
        let mut e: EndResult = serde_json::from_value(serde_json::json!({
            "role": "client", "hostname": "h", "kernel": "k", "online_cpus": 2,
            "threads": 1, "window_s": 2.0, "bytes_sent": 0, "bytes_received": 0,
            "queued_start_bytes": 0, "queued_end_bytes": 0, "intervals": [], "flows": [],
            "process": {"pid": pid, "user_s": 0.5, "system_s": 1.0, "voluntary_csw": 10,
                        "involuntary_csw": 1, "rss_bytes": 1000, "threads": []},
            "cpus": [], "softirqs": [], "counters": {"Tcp.RetransSegs": 3},
            "tcp_info": [], "socket_options": [], "warnings": [], "transactions": 0
        }))
        .unwrap();
        e.role = Role::Client;
        e.flows = (0..flows)
            .map(|i| FlowTotals {
                flow: i,
                bytes_sent: tx_per_flow,
                bytes_received: tx_per_flow,
                transactions: Some(tx_per_flow),
            })
            .collect();
        e.transactions = flows as u64 * tx_per_flow;
        e.bytes_sent = e.transactions;
        e.intervals = vec![IntervalSample {
            t_s: 1.0,
            dt_s: 1.0,
            bytes_sent: e.transactions,
            bytes_received: e.transactions,
            transactions: e.transactions,
            p99_us: Some(latency_ns.iter().max().copied().unwrap_or(0) as f64 / 1000.0),
            ..Default::default()
        }];
        e.latency = Some(summarize(&h));
        e
    }

    #[test]
    fn counts_cpu_and_memory_add_up_and_host_figures_are_taken_once() {
        let a = end(10, 3, 100, &[1000, 2000, 3000]);
        let b = end(20, 2, 50, &[4000, 5000]);
        let m = merge_ends(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(m.transactions, 400);
        assert_eq!(m.bytes_sent, 400);
        assert_eq!(m.flows.len(), 5);
        let ids: Vec<u32> = m.flows.iter().map(|f| f.flow).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        assert_eq!(m.flows[4].transactions, Some(50));
        assert_eq!(m.threads, 2);
        assert_eq!(m.process.pid, 10);
        assert!((m.process.system_s - 2.0).abs() < 1e-12);
        assert_eq!(m.process.rss_bytes, 2000);
        assert_eq!(m.process.voluntary_csw, 20);
        // Host-wide counters are the host's, not twice the host's.
        assert_eq!(m.counters["Tcp.RetransSegs"], 3);
        assert_eq!(m.intervals[0].transactions, 400);
        assert_eq!(m.intervals[0].p99_us, Some(5.0));
        // The merged histogram holds every transaction of both.
        let l = m.latency.unwrap();
        assert_eq!(l.count, 5);
        assert!((l.mean_us - 3.0).abs() < 0.01, "{}", l.mean_us);
        assert!((l.max_us - 5.0).abs() < 0.01);
        assert!((l.p50_us - 3.0).abs() < 0.01);
        // Datagram and zero-copy counts add up over the processes too.
        let (mut a2, mut b2) = (a.clone(), b.clone());
        for (e, n) in [(&mut a2, 3u64), (&mut b2, 4)] {
            e.udp = Some(plumb_samples::UdpTotals {
                packets_sent: n,
                lost: 1,
                ..Default::default()
            });
            e.zerocopy = Some(plumb_samples::ZeroCopyTotals {
                sends: n,
                fallback_copies: 1,
                ..Default::default()
            });
        }
        let m2 = merge_ends(&[a2, b2]).unwrap();
        assert_eq!(m2.udp.as_ref().unwrap().packets_sent, 7);
        assert_eq!(m2.udp.as_ref().unwrap().lost, 2);
        assert_eq!(m2.zerocopy.as_ref().unwrap().sends, 7);
        assert_eq!(m2.zerocopy.as_ref().unwrap().fallback_copies, 2);
        // One part is itself.
        assert_eq!(merge_ends(std::slice::from_ref(&a)).unwrap(), a);
        assert!(merge_ends(&[]).is_none());
    }

    /// An end with every part a probe declares filled, each group's
    /// numbers its own.
    fn probed(n: u64) -> EndResult {
        let mut e = end(n as u32, 2, 10 * n, &[1000 * n]);
        let parts = serde_json::json!({
            "cpus": [{"cpu": 0, "user_s": 0.1, "nice_s": 0.0, "system_s": 0.2, "idle_s": 0.5,
                      "iowait_s": 0.0, "irq_s": 0.0, "softirq_s": 0.1, "steal_s": 0.0}],
            "irq_time_accounting": true,
            "softirqs": [{"cpu": 0, "net_rx": 5 * n, "net_tx": n}],
            "counters": {"Tcp.RetransSegs": n},
            "softnet": [{"cpu": 0, "processed": 9 * n, "dropped": n, "time_squeeze": n,
                         "received_rps": 0, "flow_limit_count": 0}],
            "interfaces": [{"name": "lo", "rx_bytes": n, "rx_packets": n, "rx_errors": 0,
                            "rx_dropped": n, "rx_fifo": 0, "tx_bytes": n, "tx_packets": n,
                            "tx_errors": 0, "tx_dropped": 0, "tx_fifo": 0,
                            "virtual_device": true}],
            "qdiscs": [{"interface": "plumb-s", "kind": "tbf", "handle": "8001:",
                        "bytes": 1500 * n, "packets": n, "drops": n, "overlimits": 2 * n,
                        "requeues": 0, "qlen": 1, "backlog_bytes": 1500}],
            "path_queues": [{"toward": "to_server", "interface": "plumb-rs", "kind": "htb",
                             "bytes": 1500 * n, "packets": n, "drops": n, "overlimits": n,
                             "requeues": 0, "qlen": 1, "backlog_bytes": 1500,
                             "peak_backlog_bytes": 3000, "peak_qlen": 2, "period_ms": 100,
                             "backlog_series": [0, 1500 * n]}],
            "nic_queues": [{"interface": "eth0", "queue": 0, "limit_bytes": 6000,
                            "peak_inflight_bytes": 1500 * n, "period_ms": 100,
                            "inflight_series": [0, 1500 * n]}],
            "interrupts": {"LOC": 250 * n, "CAL": 40 * n},
            "process": {"pid": n, "user_s": 0.5, "system_s": 1.0, "voluntary_csw": 10 * n,
                        "involuntary_csw": n, "rss_bytes": 1000 * n,
                        "threads": [{"tid": n, "name": "plumb-c0", "user_s": 0.5,
                                     "system_s": 1.0, "voluntary_csw": n,
                                     "involuntary_csw": 0, "cpus_allowed": "0",
                                     "last_cpu": 0}],
                        "sched": {"run_s": 1.0, "wait_s": 0.25, "timeslices": n,
                                  "migrations": n}},
            "path_cpu_s": 0.25,
            "tcp_info": [
                {"flow": 0, "state": 1, "rtt_us": 10 * n, "rttvar_us": 1, "snd_mss": 1448,
                 "rcv_mss": 1448, "snd_cwnd": 10, "retransmits": 0, "total_retrans": n},
                {"flow": 1, "state": 1, "rtt_us": 20 * n, "rttvar_us": 1, "snd_mss": 1448,
                 "rcv_mss": 1448, "snd_cwnd": 20, "retransmits": 0, "total_retrans": 0}],
            "limited": {"flows": n, "busy_s": 1.0, "rwnd_limited_s": 0.5,
                        "sndbuf_limited_s": 0.25},
            "window_retransmits": 3 * n,
            "tcp_series": {"period_ms": 100, "flows": 2, "t_ms": [0, 100 + n],
                           "sampled": [{"flow": 0, "mss": 1448, "cwnd": [10, 10 * n],
                                        "ssthresh": [null, 8], "srtt_us": [n, n],
                                        "rttvar_us": [1, 1], "in_flight": [0, n],
                                        "retrans": [0, n]}],
                           "all": {"cwnd": [10, 20 * n], "in_flight": [0, n],
                                   "in_flight_bytes": [0, 1448 * n], "notsent_bytes": [0, 0],
                                   "delivery_rate_bps": [0, n], "srtt_us": [2 * n, 2 * n],
                                   "retrans": [0, n], "busy_us": [0, 100_000],
                                   "rwnd_limited_us": [0, n], "sndbuf_limited_us": [0, 0],
                                   "busy_other": [0, 1], "at_cwnd": [0, 1]},
                           "sampler_cpu_s": 0.001},
            "tracepoints": {"counts": {"tcp:tcp_retransmit_skb": n, "skb:kfree_skb": 2 * n}},
            "acks": {"filter": "dport == 5201", "counted": 100 * n, "read": 90 * n, "kept": 90 * n,
                     "srtt_us": [1.0, 2.0, 3.0, 4.0], "cwnd": [10.0, 10.0, 20.0, 20.0],
                     "snd_wnd": [0.0, 1.0, 2.0, 3.0], "in_flight_bytes": [0.0, 1.0, 2.0, 3.0],
                     "sampler_cpu_s": 0.01},
            "flow_events": {"filter": "dport == 5201", "counts": {"tcp:tcp_retransmit_skb": n},
                            "rcvbuf_grow": {"read": n, "rcvbuf_sum": 1000 * n,
                                            "window_clamp_sum": 900 * n, "rcv_wnd_sum": 800 * n,
                                            "scaling_ratio_sum": 128 * n}},
            "sockstat": {"sockets_used": 40 + n, "tcp_inuse": 4, "tcp_orphan": 0, "tcp_tw": 0,
                         "tcp_alloc": 6, "tcp_mem_pages": 100 * n, "udp_inuse": 1,
                         "udp_mem_pages": 0},
            "profile": {"event": "cpu-clock", "freq_hz": 99, "samples": n, "lost": 0,
                        "process_s": 0.1, "process_irq_s": 0.0, "irq_s": 0.0,
                        "other_s": 0.0, "idle_s": 0.0, "frames": ["f"],
                        "stacks": [{"frames": [0], "ns": 1000}], "rest_ns": 0}
        });
        let mut v = serde_json::to_value(&e).unwrap();
        for (k, x) in parts.as_object().unwrap() {
            v[k] = x.clone();
        }
        e = serde_json::from_value(v).unwrap();
        e.tcp_info_summary = TcpInfoSummary::of(&e.tcp_info);
        e
    }

    /// The keys of an end's record that are the engine's own counts and
    /// the end's identity, merged in `merge_ends` itself; every other key
    /// is a part some probe declares.
    const OWN: &[&str] = &[
        "role",
        "hostname",
        "kernel",
        "online_cpus",
        "threads",
        "pinned_cpus",
        "window_s",
        "bytes_sent",
        "bytes_received",
        "queued_start_bytes",
        "queued_end_bytes",
        "intervals",
        "flows",
        "socket_options",
        "warnings",
        "lost",
        "build",
        "transactions",
        "latency",
        "udp",
        "zerocopy",
        "rx_zerocopy",
    ];

    #[test]
    fn no_declared_part_is_lost_in_the_group_merge() {
        let (a, b) = (probed(1), probed(2));
        let m = merge_ends(&[a.clone(), b.clone()]).unwrap();
        let json = |e: &EndResult| serde_json::to_value(e).unwrap();
        let (ja, jb, jm) = (json(&a), json(&b), json(&m));
        for (probe, p) in figure::parts() {
            let at = |v: &serde_json::Value| figure::part_of(v, p.key).cloned();
            let (pa, pb) = (at(&ja), at(&jb));
            let filled = |v: &Option<serde_json::Value>| match v {
                None | Some(serde_json::Value::Null) => false,
                Some(serde_json::Value::Array(a)) => !a.is_empty(),
                Some(serde_json::Value::Object(o)) => !o.is_empty(),
                Some(_) => true,
            };
            assert!(
                filled(&pa) && filled(&pb),
                "the test's ends leave {} of probe {} empty: fill it in `probed`",
                p.key,
                probe.name()
            );
            let got = at(&jm).unwrap_or_else(|| panic!("{} is lost in the merge", p.key));
            let (pa, pb) = (pa.unwrap(), pb.unwrap());
            let len = |v: &serde_json::Value| v.as_array().map_or(0, Vec::len);
            match p.merge {
                figure::Merge::OncePerHost
                | figure::Merge::OncePerNamespace
                | figure::Merge::OncePerEnd => {
                    assert_eq!(got, pa, "{}: the first group's", p.key)
                }
                figure::Merge::Sum => {
                    for f in p.figures {
                        let v = |x: &serde_json::Value| figure::figure_value(x, f.path);
                        let sum = v(&pa).zip(v(&pb)).map(|(x, y)| x + y);
                        assert_eq!(v(&got), sum, "{} {}: summed", p.key, f.path);
                    }
                }
                figure::Merge::PerGroup | figure::Merge::PerFlow => {
                    assert_eq!(len(&got), len(&pa) + len(&pb), "{}: every entry", p.key)
                }
                figure::Merge::Distribution => {
                    assert_eq!(got["flows"], serde_json::json!(4), "{}: every flow", p.key)
                }
            }
        }
        // Flows numbered on: the second group's first flow is the third.
        assert_eq!(m.tcp_info[2].flow, 2);
        // Sampled TCP state: the sums add up sample by sample.
        let series = m.tcp_series.as_ref().unwrap();
        assert_eq!((series.flows, series.sampled[1].flow), (4, 2));
        assert_eq!(series.all.cwnd, [20, 60]);
        assert_eq!(series.t_ms, [0, 101], "the first group's clock");
        assert_eq!(series.at_cwnd_share(), Some(1.0));
        assert_eq!(m.process.sched.unwrap().migrations, Some(3));
        assert_eq!(
            SoftnetCounts::total(&m.softnet).dropped,
            1,
            "the host's, once"
        );

        // Every key of a record is the engine's own or a declared part.
        let declared: Vec<&str> = figure::parts().map(|(_, p)| p.key).collect();
        let mut keys = Vec::new();
        for (k, v) in ja.as_object().unwrap() {
            match (v, declared.iter().any(|d| d.starts_with(&format!("{k}.")))) {
                (serde_json::Value::Object(o), true) => {
                    keys.extend(o.keys().map(|c| format!("{k}.{c}")))
                }
                _ => keys.push(k.clone()),
            }
        }
        for k in keys {
            assert!(
                OWN.contains(&k.as_str()) || declared.contains(&k.as_str()),
                "{k} is in an end's record but no probe declares it (plumb_samples::figure) \
                 and merge_ends does not merge it"
            );
        }
    }

    #[test]
    fn groups_split_the_flows_evenly() {
        assert_eq!(groups_needed(30_000, 20_000, 64), 2);
        assert_eq!(groups_needed(19_936, 20_000, 64), 1);
        assert_eq!(groups_needed(19_937, 20_000, 64), 2);
        assert_eq!(split(30_001, 2), vec![15_001, 15_000]);
        assert_eq!(split(2, 3), vec![1, 1, 0]);
        assert_eq!(split(7, 1), vec![7]);
    }
}
