//! `plumb doctor`: the host audited against the settings that decide what a
//! network benchmark measures. Every check reads the same facts a run
//! records (see [`crate::env`]), so what doctor says here is what `plumb env
//! --diff` will show later; a short sample of /proc then tells whether other
//! work on the host would make a comparison untrustworthy.

use crate::env;
use plumb_samples::{Audit, BusyProcess, Environment, Finding, Status, AUDIT_SCHEMA};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Socket buffer ceilings below this keep a single flow from filling a
/// 10 Gbit/s path of a few milliseconds (bandwidth times delay).
const BUFFER_FLOOR: u64 = 16 << 20;
const BUFFER_ADVICE: u64 = 64 << 20;
/// Enough option memory for the completions of many outstanding
/// MSG_ZEROCOPY sends.
const OPTMEM_FLOOR: u64 = 1 << 20;
/// Flows scenario S3 needs on each end, plus room for plumb's own files.
const FLOWS_WANTED: u64 = 30_000;
/// Other processes using more than this much of one CPU, together, make a
/// comparison made now suspect.
const NOISY_OTHERS_PERCENT: f64 = 10.0;
const NOISY_STEAL_PERCENT: f64 = 2.0;
/// A process below this share of one CPU is not worth naming.
const BUSY_PROCESS_PERCENT: f64 = 2.0;

/// Audits this host for traffic over `interfaces`, sampling the CPUs and
/// processes for `sample`.
pub fn audit(interfaces: &[String], sample: Duration) -> Audit {
    let names: Vec<&str> = interfaces.iter().map(String::as_str).collect();
    let env = env::capture(&names);
    let load = sample_load(sample);
    let mut findings = Vec::new();
    buffer_checks(&env, &mut findings);
    qdisc_check(&env, interfaces, &mut findings);
    optmem_check(&env, &mut findings);
    uring_check(&mut findings);
    cpu_checks(&env, &mut findings);
    irqbalance_check(&mut findings);
    for name in interfaces {
        interface_checks(&env, name, &mut findings);
    }
    limit_checks(&env, &mut findings);
    load_checks(&load, &mut findings);
    let too_noisy = noise_verdict(&load);
    Audit {
        schema: AUDIT_SCHEMA.to_string(),
        interfaces: interfaces.to_vec(),
        sample_s: load.sample_s,
        steal_percent: load.steal_percent,
        busy_percent: load.busy_percent,
        busy_processes: load.busy,
        findings,
        too_noisy,
    }
}

fn sysctl(env: &Environment, name: &str) -> Option<String> {
    env.facts.get(&format!("sysctl.{name}")).cloned()
}

fn finding(check: &str, status: Status, value: impl Into<String>, why: &str) -> Finding {
    Finding {
        check: check.to_string(),
        status,
        value: value.into(),
        why: why.to_string(),
        advice: None,
        recorded_as: Vec::new(),
    }
}

fn with(mut f: Finding, advice: Option<String>, recorded: &[String]) -> Finding {
    f.advice = advice;
    f.recorded_as = recorded.to_vec();
    f
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes & ((1 << 20) - 1) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes & ((1 << 10) - 1) == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

fn buffer_checks(env: &Environment, out: &mut Vec<Finding>) {
    for (name, opt) in [
        ("net.core.rmem_max", "SO_RCVBUF"),
        ("net.core.wmem_max", "SO_SNDBUF"),
    ] {
        let check = name.rsplit('.').next().unwrap_or(name);
        let Some(v) = sysctl(env, name).and_then(|v| v.parse::<u64>().ok()) else {
            out.push(finding(
                check,
                Status::Info,
                "unreadable",
                "not found in /proc/sys",
            ));
            continue;
        };
        let why = format!(
            "the kernel caps a fixed {opt} (--sndbuf/--rcvbuf) at this, so a larger size \
             asked for is silently clamped (plumb shows asked vs granted)"
        );
        out.push(at_least(check, name, v, BUFFER_FLOOR, BUFFER_ADVICE, &why));
    }
    for (name, dir) in [
        ("net.ipv4.tcp_rmem", "receive"),
        ("net.ipv4.tcp_wmem", "send"),
    ] {
        let check = name.rsplit('.').next().unwrap_or(name);
        let Some(v) = sysctl(env, name) else {
            continue;
        };
        let max = v
            .split_whitespace()
            .nth(2)
            .and_then(|m| m.parse::<u64>().ok());
        let why = format!(
            "the third value is how far autotuning grows a flow's {dir} buffer (--sndbuf/--rcvbuf \
             auto); too small and one flow cannot fill a long fat path"
        );
        let (status, advice) = match max {
            Some(m) if m < BUFFER_FLOOR => (
                Status::Warn,
                Some(format!(
                    "sysctl -w {name}=\"{} {} {BUFFER_ADVICE}\"",
                    v.split_whitespace().next().unwrap_or("4096"),
                    v.split_whitespace().nth(1).unwrap_or("131072"),
                )),
            ),
            Some(_) => (Status::Ok, None),
            None => (Status::Info, None),
        };
        out.push(with(
            finding(check, status, v, &why),
            advice,
            &[format!("sysctl.{name}")],
        ));
    }
}

fn qdisc_check(env: &Environment, interfaces: &[String], out: &mut Vec<Finding>) {
    let Some(v) = sysctl(env, "net.core.default_qdisc") else {
        return;
    };
    let mut recorded = vec!["sysctl.net.core.default_qdisc".to_string()];
    recorded.extend(interfaces.iter().map(|i| format!("if.{i}.qdisc")));
    let why = "fq paces each flow (--pacing-rate, BBR) in the qdisc; without it TCP paces \
               itself with a timer per flow, at more CPU and less exactly";
    let (status, advice) = if v == "fq" {
        (Status::Ok, None)
    } else {
        (
            Status::Warn,
            Some(
                "sysctl -w net.core.default_qdisc=fq (for qdiscs created afterwards; \
                 `tc qdisc replace dev IF root fq` for an existing interface)"
                    .to_string(),
            ),
        )
    };
    out.push(with(
        finding("default_qdisc", status, v, why),
        advice,
        &recorded,
    ));
}

fn optmem_check(env: &Environment, out: &mut Vec<Finding>) {
    let Some(v) = sysctl(env, "net.core.optmem_max").and_then(|v| v.parse::<u64>().ok()) else {
        return;
    };
    let why = "MSG_ZEROCOPY (--zerocopy msg) holds its completion notifications in option \
               memory; once a socket's optmem_max is used up, sends fail with ENOBUFS";
    out.push(at_least(
        "optmem_max",
        "net.core.optmem_max",
        v,
        OPTMEM_FLOOR,
        OPTMEM_FLOOR,
        why,
    ));
}

fn uring_check(out: &mut Vec<Finding>) {
    use plumb_sys::uring::{missing, Needs};
    let why = "--io uring runs the workloads on io_uring and --zerocopy uring sends with \
               IORING_OP_SEND_ZC; without them only the epoll engine runs";
    // Asked once for everything; only what lacks something is asked again
    // for the ring alone.
    let (status, value) = match missing(Needs { send_zc: true }) {
        None => (Status::Ok, "the ring engine and SEND_ZC".to_string()),
        Some(zc) => match missing(Needs { send_zc: false }) {
            None => (
                Status::Info,
                format!("the ring engine; no --zerocopy uring: {zc}"),
            ),
            Some(why) => (Status::Info, why),
        },
    };
    out.push(finding("io_uring", status, value, why));
}

/// A finding on a size sysctl that warns below `floor`, with the command
/// that sets it to `advised`.
fn at_least(check: &str, name: &str, v: u64, floor: u64, advised: u64, why: &str) -> Finding {
    let advice = (v < floor).then(|| format!("sysctl -w {name}={advised}"));
    let status = if advice.is_some() {
        Status::Warn
    } else {
        Status::Ok
    };
    with(
        finding(check, status, format!("{v} ({})", mib(v)), why),
        advice,
        &[format!("sysctl.{name}")],
    )
}

fn cpu_checks(env: &Environment, out: &mut Vec<Finding>) {
    let governor = env.facts.get("cpu.governor").cloned();
    let why = "a governor other than performance changes the clock with the load, so the \
               same test runs at different speeds from one iteration to the next";
    let (status, value, advice) = match governor.as_deref() {
        None => (
            Status::Info,
            "no cpufreq (set by the hypervisor or the firmware)",
            None,
        ),
        Some("performance") => (Status::Ok, "performance", None),
        Some(g) => (
            Status::Warn,
            g,
            Some("cpupower frequency-set -g performance".to_string()),
        ),
    };
    out.push(with(
        finding("governor", status, value, why),
        advice,
        &["cpu.governor".to_string()],
    ));

    let smt = env
        .facts
        .get("cpu.smt")
        .cloned()
        .unwrap_or_else(|| "unknown".into());
    let why = "sibling threads share one core: a client and server pinned to siblings slow \
               each other down, and the CPU a thread lands on changes the result";
    let f = match smt.as_str() {
        "on" | "1" => with(
            finding("smt", Status::Warn, smt.clone(), why),
            Some(
                "pin client and server to different cores (--client-cpus/--server-cpus), \
                 or echo off > /sys/devices/system/cpu/smt/control"
                    .to_string(),
            ),
            &["cpu.smt".to_string()],
        ),
        _ => with(
            finding("smt", Status::Ok, smt.clone(), why),
            None,
            &["cpu.smt".to_string()],
        ),
    };
    out.push(f);
}

fn irqbalance_check(out: &mut Vec<Finding>) {
    let pids: Vec<u32> = processes()
        .into_iter()
        .filter(|p| p.name == "irqbalance")
        .map(|p| p.pid)
        .collect();
    let why = "irqbalance moves interrupts between CPUs while a test runs, so softirq time \
               moves from one CPU to another between iterations";
    out.push(if pids.is_empty() {
        finding("irqbalance", Status::Ok, "not running", why)
    } else {
        with(
            finding(
                "irqbalance",
                Status::Warn,
                format!(
                    "running (pid {})",
                    pids.iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                why,
            ),
            Some(
                "systemctl stop irqbalance, and pin the NIC's IRQs away from the test's CPUs"
                    .to_string(),
            ),
            &[],
        )
    });
}

fn interface_checks(env: &Environment, name: &str, out: &mut Vec<Finding>) {
    let prefix = format!("if.{name}.");
    let mtu = env.facts.get(&format!("{prefix}mtu"));
    let Some(mtu) = mtu else {
        out.push(finding(
            name,
            Status::Warn,
            "not found",
            "no such interface on this host",
        ));
        return;
    };
    out.push(with(
        finding(
            &format!("{name} mtu"),
            Status::Info,
            mtu.clone(),
            "the MTU sets the MSS and so the packets and the per-byte cost of a test; \
             compare only results taken at the same MTU",
        ),
        None,
        &[format!("{prefix}mtu")],
    ));
    let rps: BTreeMap<&String, &String> = env
        .facts
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix) && k.ends_with(".rps_cpus"))
        .collect();
    if !rps.is_empty() {
        let on: Vec<String> = rps
            .iter()
            .filter(|(_, v)| !v.trim_start_matches(['0', ',']).is_empty())
            .map(|(k, v)| {
                format!(
                    "{} {v}",
                    k.trim_start_matches(&prefix).trim_end_matches(".rps_cpus")
                )
            })
            .collect();
        let value = if on.is_empty() {
            "off".to_string()
        } else {
            on.join(", ")
        };
        out.push(with(
            finding(
                &format!("{name} rps"),
                Status::Info,
                value,
                "RPS hands received packets to other CPUs' softirqs: it moves softirq time \
                 between the client's and the server's CPUs (scenario S2)",
            ),
            None,
            &rps.keys().map(|k| k.to_string()).collect::<Vec<_>>(),
        ));
    }
    for (fact, what) in [("gso_max_size", "GSO"), ("gro_max_size", "GRO")] {
        if let Some(v) = env.facts.get(&format!("{prefix}{fact}")) {
            let big = v.parse::<u64>().is_ok_and(|n| n > 65536);
            out.push(with(
                finding(
                    &format!("{name} {fact}"),
                    Status::Info,
                    format!("{v}{}", if big { " (BIG TCP)" } else { "" }),
                    &format!(
                        "the largest {what} packet: above 64 KiB (BIG TCP) fewer, larger \
                         packets cross the stack, at less CPU per byte"
                    ),
                ),
                None,
                &[format!("{prefix}{fact}")],
            ));
        }
    }
}

fn limit_checks(env: &Environment, out: &mut Vec<Finding>) {
    let (soft, hard) = plumb_sys::process::nofile_limits();
    let fit = hard.saturating_sub(64);
    let why = "every flow holds a descriptor on each end; plumb raises its soft limit to the \
               hard one, which only CAP_SYS_RESOURCE can raise";
    let (status, advice) = if fit < FLOWS_WANTED {
        (
            Status::Warn,
            Some(format!(
                "at most about {fit} flows per run here; raise the hard limit (ulimit -Hn, \
                 LimitNOFILE= in a systemd unit) to {} for {FLOWS_WANTED} flows",
                FLOWS_WANTED + 100
            )),
        )
    } else {
        (Status::Ok, None)
    };
    out.push(with(
        finding(
            "open files",
            status,
            format!("soft {soft}, hard {hard}"),
            why,
        ),
        advice,
        &[],
    ));
    if let Some(range) = sysctl(env, "net.ipv4.ip_local_port_range") {
        let ports = plumb_engine::local_port_count();
        out.push(with(
            finding(
                "local ports",
                Status::Info,
                format!("{range} ({ports} ports)"),
                "each connection to one server port takes a local port of its source address: \
                 past this many, connects fail (on loopback plumb spreads flows over 127.0.0.x)",
            ),
            None,
            &["sysctl.net.ipv4.ip_local_port_range".to_string()],
        ));
    }
    if let Some(cc) = sysctl(env, "net.ipv4.tcp_congestion_control") {
        let avail = sysctl(env, "net.ipv4.tcp_available_congestion_control").unwrap_or_default();
        out.push(with(
            finding(
                "congestion control",
                Status::Info,
                format!("{cc} (available: {avail})"),
                "the default for flows without --cc; a module not loaded cannot be chosen",
            ),
            None,
            &[
                "sysctl.net.ipv4.tcp_congestion_control".to_string(),
                "sysctl.net.ipv4.tcp_available_congestion_control".to_string(),
            ],
        ));
    }
}

fn load_checks(load: &Load, out: &mut Vec<Finding>) {
    let why = "time the hypervisor gave this machine's CPUs to others: it shows up as a \
               slower, noisier result that nothing on the host explains";
    out.push(finding(
        "steal",
        if load.steal_percent > NOISY_STEAL_PERCENT {
            Status::Warn
        } else {
            Status::Ok
        },
        format!("{:.1} % over {:.1} s", load.steal_percent, load.sample_s),
        why,
    ));
    let others: f64 = load.busy.iter().map(|p| p.cpu_percent).sum();
    let value = if load.busy.is_empty() {
        format!("none above {BUSY_PROCESS_PERCENT} % of a CPU")
    } else {
        load.busy
            .iter()
            .take(5)
            .map(|p| format!("{} (pid {}) {:.0} %", p.name, p.pid, p.cpu_percent))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push(finding(
        "other processes",
        if others > NOISY_OTHERS_PERCENT {
            Status::Warn
        } else {
            Status::Ok
        },
        value,
        "other work competes with the test for CPUs and caches; plumb records only its own \
         and the host's totals, so a busy neighbour looks like a regression",
    ));
}

fn noise_verdict(load: &Load) -> Option<String> {
    let others: f64 = load.busy.iter().map(|p| p.cpu_percent).sum();
    let mut why = Vec::new();
    if others > NOISY_OTHERS_PERCENT {
        why.push(format!(
            "{} other process{} used {others:.0} % of a CPU",
            load.busy.len(),
            if load.busy.len() == 1 { "" } else { "es" }
        ));
    }
    if load.steal_percent > NOISY_STEAL_PERCENT {
        why.push(format!(
            "the hypervisor stole {:.1} % of the CPU time",
            load.steal_percent
        ));
    }
    (!why.is_empty()).then(|| {
        format!(
            "too noisy to trust a comparison now: {} during the {:.1} s sample",
            why.join(" and "),
            load.sample_s
        )
    })
}

struct Load {
    sample_s: f64,
    steal_percent: f64,
    busy_percent: f64,
    busy: Vec<BusyProcess>,
}

struct Proc {
    pid: u32,
    name: String,
    /// With the pid, what identifies a process across two readings: pids are
    /// reused, and names change (kernel workers rename themselves as they
    /// take on work), so a name match would charge a renamed process's whole
    /// lifetime to the sample.
    start_ticks: u64,
    ticks: u64,
}

/// Every process's name and CPU ticks, best effort (a process may end while
/// it is read).
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let stat = plumb_sys::proc::parse_task_stat(&text).ok()?;
        Some(Proc {
            pid,
            name: stat.comm,
            start_ticks: stat.start_ticks,
            ticks: stat.utime_ticks + stat.stime_ticks,
        })
    })
    .collect()
}

/// The CPU ticks `p` used since `before` was read: all of its ticks when it
/// started after that reading, for it used them all during the sample.
fn ticks_since(p: &Proc, before: &BTreeMap<u32, Proc>) -> u64 {
    let earlier = before
        .get(&p.pid)
        .filter(|q| q.start_ticks == p.start_ticks)
        .map_or(0, |q| q.ticks);
    p.ticks.saturating_sub(earlier)
}

fn sample_load(sample: Duration) -> Load {
    let me = std::process::id();
    let stat0 = plumb_sys::proc::read_stat().unwrap_or_default();
    let t0 = Instant::now();
    let procs0: BTreeMap<u32, Proc> = processes().into_iter().map(|p| (p.pid, p)).collect();
    std::thread::sleep(sample);
    let procs1 = processes();
    let stat1 = plumb_sys::proc::read_stat().unwrap_or_default();
    let sample_s = t0.elapsed().as_secs_f64();
    let hz = plumb_sys::proc::clock_ticks_per_sec().max(1) as f64;

    // Busy and steal as a record counts them (CpuTimes::busy_s), of each
    // CPU's sample: its span, or its states where they add up to more.
    let cpus = plumb_engine::probe::cpu_deltas(&stat0, &stat1, hz, sample_s);
    let total: f64 = cpus.iter().map(|c| c.total_s().max(sample_s)).sum();
    let steal: f64 = cpus.iter().map(|c| c.steal_s).sum();
    let busy_s: f64 = cpus.iter().map(|c| c.busy_s()).sum();
    let pct = |x: f64| {
        if total > 0.0 {
            100.0 * x / total
        } else {
            0.0
        }
    };
    let mut busy: Vec<BusyProcess> = procs1
        .into_iter()
        .filter(|p| p.pid != me)
        .filter_map(|p| {
            let cpu_percent = 100.0 * ticks_since(&p, &procs0) as f64 / hz / sample_s;
            (cpu_percent >= BUSY_PROCESS_PERCENT).then_some(BusyProcess {
                pid: p.pid,
                name: p.name,
                cpu_percent,
            })
        })
        .collect();
    busy.sort_by(|a, b| b.cpu_percent.total_cmp(&a.cpu_percent));
    Load {
        sample_s,
        steal_percent: pct(steal),
        busy_percent: pct(busy_s),
        busy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, name: &str, start_ticks: u64, ticks: u64) -> Proc {
        Proc {
            pid,
            name: name.to_string(),
            start_ticks,
            ticks,
        }
    }

    #[test]
    fn a_renamed_process_counts_only_what_it_used_during_the_sample() {
        let before: BTreeMap<u32, Proc> = [(7, proc(7, "kworker/0:1", 100, 5000))].into();
        assert_eq!(
            ticks_since(&proc(7, "kworker/0:1-events", 100, 5003), &before),
            3
        );
        // The pid reused by a process started since: all its ticks are new.
        assert_eq!(ticks_since(&proc(7, "kworker/0:1", 900, 40), &before), 40);
        assert_eq!(ticks_since(&proc(8, "new", 950, 12), &before), 12);
    }
}
