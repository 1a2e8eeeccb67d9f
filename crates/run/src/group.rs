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
    let mut offset = 0u32;
    out.flows.clear();
    let mut infos = Vec::new();
    for p in parts {
        out.flows.extend(p.flows.iter().map(|f| {
            let mut f = f.clone();
            f.flow += offset;
            f
        }));
        infos.extend(p.tcp_info.iter().map(|t| {
            let mut t = t.clone();
            t.flow += offset;
            t
        }));
        offset += p.flows.len() as u32;
    }

    out.process.user_s = parts.iter().map(|p| p.process.user_s).sum();
    out.process.system_s = parts.iter().map(|p| p.process.system_s).sum();
    out.process.voluntary_csw = sum(&|p| p.process.voluntary_csw);
    out.process.involuntary_csw = sum(&|p| p.process.involuntary_csw);
    out.process.rss_bytes = sum(&|p| p.process.rss_bytes);
    out.process.threads = parts
        .iter()
        .flat_map(|p| p.process.threads.iter().cloned())
        .collect();

    // Per-flow TCP_INFO where every process kept it; else the distributions,
    // combined conservatively (min of minima, max of p99s and maxima, the
    // flow-weighted mean of the medians).
    let all_kept = parts
        .iter()
        .all(|p| p.tcp_info.len() as u32 == p.tcp_info_summary.as_ref().map_or(0, |s| s.flows));
    if all_kept {
        out.tcp_info_summary = TcpInfoSummary::of(&infos);
        out.tcp_info = if infos.len() > TCP_INFO_PER_FLOW_MAX {
            Vec::new()
        } else {
            infos
        };
    } else {
        out.tcp_info.clear();
        let sums: Vec<&TcpInfoSummary> = parts
            .iter()
            .filter_map(|p| p.tcp_info_summary.as_ref())
            .collect();
        out.tcp_info_summary = combine_summaries(&sums);
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
    Some(out)
}

fn combine_summaries(parts: &[&TcpInfoSummary]) -> Option<TcpInfoSummary> {
    let flows: u32 = parts.iter().map(|s| s.flows).sum();
    if flows == 0 {
        return None;
    }
    let dist = |f: &dyn Fn(&TcpInfoSummary) -> [f64; 4]| -> [f64; 4] {
        let min = parts.iter().map(|s| f(s)[0]).fold(f64::INFINITY, f64::min);
        let median = parts.iter().map(|s| f(s)[1] * s.flows as f64).sum::<f64>() / flows as f64;
        let p99 = parts.iter().map(|s| f(s)[2]).fold(0.0, f64::max);
        let max = parts.iter().map(|s| f(s)[3]).fold(0.0, f64::max);
        [min, median, p99, max]
    };
    Some(TcpInfoSummary {
        flows,
        rtt_us: dist(&|s| s.rtt_us),
        snd_cwnd: dist(&|s| s.snd_cwnd),
        total_retrans: dist(&|s| s.total_retrans),
        retrans_sum: parts.iter().map(|s| s.retrans_sum).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_samples::{FlowTotals, IntervalSample, Role};

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
