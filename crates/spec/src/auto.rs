//! `--io auto`, the default: the engine a spec runs on when none is asked,
//! by a rule of its workload, flows, the host's CPUs and whether the two
//! ends are pinned apart. Each row is what a section of BENCHMARKS.md
//! measured; the first row that fits decides. The rule is applied as the
//! spec is built, before its key is made: a stored key holds the engine
//! that ran, never the rule.

use crate::{Io, Spec, Workload, ZeroCopy};

/// One row of the rule.
pub struct Row {
    pub io: Io,
    /// Where it fits, in words the summary can print.
    pub fits: &'static str,
    /// The section of BENCHMARKS.md whose figures decided it, and what
    /// they were.
    pub because: &'static str,
    applies: fn(&Spec, usize) -> bool,
}

/// Whether both ends are pinned and share no CPU: where the scheduler
/// puts them is then no part of the figures.
fn pinned_apart(s: &Spec) -> bool {
    match (&s.client_cpus, &s.server_cpus) {
        (Some(c), Some(v)) => c.cpus().iter().all(|x| !v.contains(*x)),
        _ => false,
    }
}

pub const ROWS: &[Row] = &[
    Row {
        io: Io::Uring,
        fits: "--zerocopy uring",
        because: "IORING_OP_SEND_ZC is the ring's own operation",
        applies: |s, _| s.zerocopy == ZeroCopy::Uring,
    },
    Row {
        io: Io::Uring,
        fits: "a stream of several flows with its ends pinned apart",
        because: "BENCHMARKS.md \"peers pinned on 2 CPUs, ten repetitions, more cases\": \
                  stream-32 on epoll 0.858 [0.782, 0.942] of iperf3, on the ring 1.072 \
                  [1.008, 1.139]",
        applies: |s, _| s.workload == Workload::Stream && s.flows > 1 && pinned_apart(s),
    },
    Row {
        io: Io::Uring,
        fits: "a stream on a host of 4 CPUs or more",
        because: "BENCHMARKS.md \"peers on 16 CPUs\": stream-1 unpinned, per busy CPU-second \
                  of qperf, the ring 0.903 and epoll 0.821 (in rate 0.921 and 0.858); with a \
                  CPU or more for each end, as there, the scheduler has no end to squeeze",
        applies: |s, cpus| s.workload == Workload::Stream && cpus >= 4,
    },
    Row {
        io: Io::Epoll,
        fits: "a stream on fewer than 4 CPUs, one flow or unpinned",
        because: "BENCHMARKS.md \"peers\": unpinned on 2 CPUs stream-1 on the ring 0.588 \
                  [0.510, 0.678] of epoll (0.722 [0.601, 0.869] of the best peer), stream-32 \
                  0.902 [0.769, 1.058], no difference; \"stream-1, each end on a CPU of its \
                  own\": the ring 0.887 [0.838, 0.939] of epoll",
        applies: |s, _| s.workload == Workload::Stream,
    },
    Row {
        io: Io::Uring,
        fits: "an rr of 1000 flows or more",
        because: "BENCHMARKS.md \"peers\": rr-1000 on the ring 1.064 [1.032, 1.096] of epoll, \
                  rr-10000 1.057 [1.046, 1.069]",
        applies: |s, _| s.workload == Workload::Rr && s.flows >= 1000,
    },
    Row {
        io: Io::Epoll,
        fits: "crr, UDP and an rr of fewer flows",
        because: "BENCHMARKS.md \"peers\": rr-1 on the ring 0.987 [0.952, 1.024] of epoll, no \
                  difference; crr-1 0.944 [0.928, 0.961] per busy CPU-second and \
                  crr-1-server-fin 0.925 [0.912, 0.939], the ring worse; the UDP cases were \
                  measured on epoll alone",
        applies: |_, _| true,
    },
];

/// The row that decides `spec`'s engine on a host of `cpus` CPUs.
pub fn row(spec: &Spec, cpus: usize) -> &'static Row {
    ROWS.iter()
        .find(|r| (r.applies)(spec, cpus))
        .expect("the last row fits every spec")
}

/// Sets `spec`'s engine by the rule, where the rule chose it
/// (`io_auto`), for a host of `cpus` CPUs: again where the run is made (in
/// a guest, with the guest's CPUs), so that the record holds the engine
/// that ran. Where this kernel's ring lacks what the engine needs
/// (`ring_works` false) the ring's rows give way to epoll, except for
/// `--zerocopy uring`, which only the ring runs and whose refusal names it.
/// Each part of a run of parts is its own spec, decided as it runs (with
/// the run's CPUs and path). A spec for a guest (`machine`) is decided by
/// the guest's vCPUs, wherever it is resolved.
pub fn resolve(spec: &mut Spec, cpus: usize, ring_works: bool) {
    let cpus = spec.machine.as_ref().map_or(cpus, |m| m.vcpus as usize);
    let pick = |s: &Spec| match row(s, cpus).io {
        Io::Uring if !ring_works && s.zerocopy != ZeroCopy::Uring => Io::Epoll,
        io => io,
    };
    if spec.io_auto {
        spec.io = pick(spec);
    }
    for i in 0..spec.parts.len() {
        if spec.parts[i].spec.io_auto {
            spec.parts[i].spec.io = pick(&spec.part_spec(&spec.parts[i]));
        }
    }
}

/// The CPUs online on the host the spec is built or run on, which the rule
/// reads: the machine's, as the record's `online_cpus` gives them (not
/// those a CPU mask leaves this process, which pinning speaks for).
pub fn host_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| s.parse::<crate::cpulist::CpuList>().ok())
        .map(|c| c.cpus().len())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpulist::CpuList;

    #[test]
    fn each_row_decides_where_its_section_measured() {
        let mut s = Spec::stream();
        assert_eq!(row(&s, 2).io, Io::Epoll);
        assert_eq!(row(&s, 16).io, Io::Uring);
        s.client_cpus = Some(CpuList::new(vec![0]));
        assert_eq!(row(&s, 2).io, Io::Epoll, "one end pinned is not apart");
        s.server_cpus = Some(CpuList::new(vec![0, 1]));
        assert_eq!(row(&s, 2).io, Io::Epoll, "sharing CPU 0 is not apart");
        s.server_cpus = Some(CpuList::new(vec![1]));
        assert_eq!(row(&s, 2).io, Io::Epoll, "one flow pinned apart");
        s.flows = 32;
        assert_eq!(row(&s, 2).io, Io::Uring, "several flows pinned apart");
        let mut rr = Spec::rr();
        assert_eq!(row(&rr, 16).io, Io::Epoll);
        rr.flows = 1000;
        assert_eq!(row(&rr, 2).io, Io::Uring);
        let mut zc = Spec::stream();
        zc.zerocopy = ZeroCopy::Uring;
        assert_eq!(row(&zc, 2).io, Io::Uring);
        // Only where the rule chose, and epoll where the ring cannot run.
        let mut s = Spec::stream();
        resolve(&mut s, 16, true);
        assert_eq!(s.io, Io::Epoll, "not chosen by the rule");
        s.io_auto = true;
        resolve(&mut s, 16, true);
        assert_eq!(s.io, Io::Uring);
        resolve(&mut s, 16, false);
        assert_eq!(s.io, Io::Epoll);
        s.zerocopy = ZeroCopy::Uring;
        resolve(&mut s, 2, false);
        assert_eq!(s.io, Io::Uring, "only the ring runs SEND_ZC");
        // A guest's spec by the guest's vCPUs, whatever the host has.
        let mut g = Spec::stream();
        g.io_auto = true;
        g.machine = Some(crate::Machine {
            accel: "kvm".into(),
            vcpus: 2,
            memory_mib: 1024,
            link: None,
        });
        resolve(&mut g, 64, true);
        assert_eq!(g.io, Io::Epoll);
        for w in ["crr", "udp-stream", "udp-rr"] {
            let s = crate::build::defaults(w).unwrap();
            assert_eq!(row(&s, 64).io, Io::Epoll, "{w}");
        }
    }

    #[test]
    fn the_key_holds_the_engine_not_how_it_was_chosen() {
        let mut asked = Spec::stream();
        asked.io = Io::Uring;
        let mut chosen = asked.clone();
        chosen.io_auto = true;
        let mut part = crate::part::Part::parse("bulk=stream:flows=4").unwrap();
        part.spec.io_auto = true;
        chosen.parts.push(part.clone());
        part.spec.io_auto = false;
        asked.parts.push(part);
        assert_eq!(asked.key(), chosen.key());
        // Run again as it ran: the rule does not choose again.
        let again = chosen.as_it_ran();
        assert!(!again.io_auto && !again.parts[0].spec.io_auto);
        let mut here = again.clone();
        resolve(&mut here, 2, true);
        assert_eq!(here.io, Io::Uring, "kept, though 2 CPUs would choose epoll");
        let mut other = Spec::stream();
        other.io_auto = true;
        resolve(&mut other, 2, true);
        assert_ne!(other.key(), chosen.key(), "another engine, another point");
    }
}
