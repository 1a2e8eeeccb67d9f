//! The profile of a test end: every CPU of the host sampled over the
//! measurement window only, by a thread of its own that is not on the data
//! path, then each sample attributed (this end's process, interrupts on
//! this end's CPUs, another process, idle), named and folded.
//!
//! Both ends profile their own host. Where the other end is a process of
//! this host that this end started (the embedded server), one set of
//! samplers makes both ends' profiles: each CPU is sampled once, where two
//! profilers would sample it twice and each pay for it. A sample of the
//! other end's process is "another process" in this end's profile and its
//! own in the other's.

use plumb_samples::{Profile, ProfileAsk};
use plumb_spec::CpuList;
use plumb_sys::perf::{CpuSampler, Event, Sample};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the thread empties the rings: at 997 Hz and a few hundred
/// bytes a sample, a 64-page ring holds a second; this leaves it mostly
/// empty.
const DRAIN_EVERY: Duration = Duration::from_millis(10);

/// The name of the profiler's thread, so that its own time is visible as
/// such in the process's accounting.
pub const PROFILE_THREAD: &str = "plumb-profile";

/// Kernel functions whose presence in a chain means the sample was taken
/// in interrupt or softirq context.
const IRQ_ENTRIES: &[&str] = &[
    "handle_softirqs",
    "__do_softirq",
    "do_softirq",
    "irq_exit_rcu",
    "__irq_exit_rcu",
    "common_interrupt",
    "asm_common_interrupt",
    "__sysvec_apic_timer_interrupt",
    "sysvec_apic_timer_interrupt",
    "asm_sysvec_apic_timer_interrupt",
    "sysvec_call_function_single",
    "net_rx_action",
];

/// Distinct samples: who, where, and the call chain.
#[derive(Hash, PartialEq, Eq)]
struct Key {
    pid: u32,
    tid: u32,
    cpu: u32,
    kernel: Vec<u64>,
    /// The innermost user address only: plumb is built without frame
    /// pointers, so what the kernel walks beyond it is not a call chain.
    user: Option<u64>,
}

#[derive(Default)]
struct Collected {
    /// Samples and summed period per distinct sample.
    samples: HashMap<Key, (u64, u64)>,
    lost: u64,
}

impl Collected {
    fn add(&mut self, s: Sample) {
        let key = Key {
            pid: s.pid,
            tid: s.tid,
            cpu: s.cpu,
            kernel: s.kernel,
            user: s.user.first().copied(),
        };
        let e = self.samples.entry(key).or_default();
        e.0 += 1;
        e.1 += s.period;
    }
}

/// The other end of the test, a process on this host whose profile this
/// end's samples also make.
pub struct PeerEnd {
    pub pid: u32,
    /// Its own CPUs, where it is pinned.
    pub cpus: Option<CpuList>,
    /// Where its profile (or why there is none) goes as the window closes.
    pub slot: PeerProfile,
}

/// The other end's profile, once made.
pub type PeerProfile = Arc<Mutex<Option<Result<Profile, String>>>>;

/// The other end as the profile needs it: its executable and mappings are
/// held as the samplers open, while it surely runs, and parsed once the
/// window is over.
struct Peer {
    end: PeerEnd,
    exe: Option<plumb_sys::elf::ExeHeld>,
}

/// Samplers opened on every CPU, not yet sampling.
pub struct Profiler {
    ask: ProfileAsk,
    event: Event,
    samplers: Vec<CpuSampler>,
    /// The end's own CPUs, where it is pinned.
    cpus: Option<CpuList>,
    peer: Option<Peer>,
}

/// A profiler sampling.
pub struct Sampling {
    ask: ProfileAsk,
    event: Event,
    stop: Arc<AtomicBool>,
    /// Taken by [`Sampling::finish`]; dropping a sampling that was never
    /// finished (a session that failed) stops the thread, which closes the
    /// events, so that a long-lived `plumb serve` samples nothing after.
    thread: Option<JoinHandle<Result<Collected, String>>>,
    cpus: Option<CpuList>,
    peer: Option<Peer>,
}

impl Drop for Sampling {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

impl Profiler {
    /// Opens a sampler on each online CPU; nothing is sampled yet. With
    /// `peer`, the samples make that end's profile too.
    pub fn open(
        ask: ProfileAsk,
        cpus: Option<CpuList>,
        peer: Option<PeerEnd>,
    ) -> Result<Profiler, String> {
        if let Some(why) = plumb_sys::perf::refusal() {
            return Err(why);
        }
        let online = plumb_sys::proc::online_cpus()
            .map_err(|e| format!("--profile: reading the online CPUs: {e}"))?;
        let event = plumb_sys::perf::best_event();
        let samplers = online
            .cpus()
            .iter()
            .map(|&c| {
                CpuSampler::open(event, c, ask.freq_hz, ask.ring_pages as usize).map_err(|e| {
                    format!(
                        "--profile-freq {}: sampling CPU {c} with {} failed: {e} \
                         (kernel.perf_event_max_sample_rate caps the rate)",
                        ask.freq_hz,
                        event.name()
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let peer = peer.map(|end| Peer {
            exe: plumb_sys::elf::ExeHeld::of(end.pid).ok(),
            end,
        });
        Ok(Profiler {
            ask,
            event,
            samplers,
            cpus,
            peer,
        })
    }

    /// Starts sampling now.
    pub fn start(self) -> Result<Sampling, String> {
        let Profiler {
            ask,
            event,
            mut samplers,
            cpus,
            peer,
        } = self;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        // Off the end's own CPUs where it has any to spare.
        let spare: Vec<u32> = match (&cpus, plumb_sys::affinity::allowed_cpus()) {
            (Some(own), Ok(all)) => all.into_iter().filter(|c| !own.contains(*c)).collect(),
            _ => Vec::new(),
        };
        for s in &samplers {
            s.enable()
                .map_err(|e| format!("--profile: enabling a sampler: {e}"))?;
        }
        let thread = std::thread::Builder::new()
            .name(PROFILE_THREAD.into())
            .spawn(move || {
                if !spare.is_empty() {
                    let _ = plumb_sys::affinity::pin_current_thread_to(&spare);
                }
                let mut got = Collected::default();
                loop {
                    let last = stopped.load(Ordering::Acquire);
                    if last {
                        for s in &samplers {
                            let _ = s.disable();
                        }
                    }
                    for s in &mut samplers {
                        s.drain(&mut |smp| got.add(smp));
                    }
                    if last {
                        got.lost = samplers.iter().map(|s| s.lost()).sum();
                        return Ok(got);
                    }
                    std::thread::sleep(DRAIN_EVERY);
                }
            })
            .map_err(|e| format!("--profile: starting the sampling thread: {e}"))?;
        Ok(Sampling {
            ask,
            event,
            stop,
            thread: Some(thread),
            cpus,
            peer,
        })
    }
}

impl Sampling {
    /// Stops sampling and returns this end's profile; the other end's,
    /// where this end samples for it, goes to its slot.
    pub fn finish(mut self) -> Result<Profile, String> {
        self.stop.store(true, Ordering::Release);
        let got = self
            .thread
            .take()
            .expect("finished once")
            .join()
            .map_err(|_| "--profile: the sampling thread panicked".to_string());
        let kernel = plumb_sys::ksyms::KernelSymbols::host();
        if let Some(mut peer) = self.peer.take() {
            let exe = peer.exe.take().and_then(|held| held.load().ok());
            let profile = got.as_ref().map_err(|e| e.clone()).and_then(|got| {
                let got = got.as_ref().map_err(|e| e.clone())?;
                let names = Names {
                    exe: exe.as_ref(),
                    kernel,
                };
                let cpus = peer.end.cpus.as_ref();
                Ok(attribute(
                    got,
                    peer.end.pid,
                    cpus,
                    self.event,
                    self.ask,
                    &names,
                ))
            });
            *peer.end.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(profile);
        }
        let got = got??;
        let names = Names {
            exe: plumb_sys::elf::ExeMap::own_once(),
            kernel,
        };
        Ok(attribute(
            &got,
            std::process::id(),
            self.cpus.as_ref(),
            self.event,
            self.ask,
            &names,
        ))
    }
}

/// What names addresses and processes: the end's executable as loaded in
/// its process, and the kernel.
struct Names<'a> {
    exe: Option<&'a plumb_sys::elf::ExeMap>,
    kernel: &'static plumb_sys::ksyms::KernelSymbols,
}

impl Names<'_> {
    fn kernel(&self, a: u64) -> String {
        self.kernel.lookup(a).unwrap_or("[unknown]").to_string()
    }

    fn user(&self, a: u64) -> String {
        self.exe
            .and_then(|e| e.symbol(a))
            .unwrap_or("[unknown]")
            .to_string()
    }
}

fn is_ksoftirqd(pid: u32, memo: &mut HashMap<u32, bool>) -> bool {
    *memo.entry(pid).or_insert_with(|| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.starts_with("ksoftirqd/"))
    })
}

/// Puts each distinct sample where it belongs and folds this end's.
fn attribute(
    got: &Collected,
    own_pid: u32,
    own_cpus: Option<&CpuList>,
    event: Event,
    ask: ProfileAsk,
    names: &Names<'_>,
) -> Profile {
    // A cycles sample stands for 1/freq of a busy CPU; a cpu-clock
    // sample's period is its nanoseconds.
    let weight = |count: u64, period: u64| match event {
        Event::CpuClock => period,
        Event::Cycles => count * 1_000_000_000 / ask.freq_hz.max(1),
    };
    let mut header = Profile::empty(event.name(), ask.freq_hz);
    header.lost = got.lost;
    let mut kernel_names: HashMap<u64, String> = HashMap::new();
    let mut user_names: HashMap<u64, String> = HashMap::new();
    let mut ksoftirqd = HashMap::new();
    let mut folded: HashMap<Vec<String>, u64> = HashMap::new();
    for (k, &(count, period)) in &got.samples {
        let ns = weight(count, period);
        let s = ns as f64 / 1e9;
        let kernel: Vec<String> = k
            .kernel
            .iter()
            .map(|&a| {
                kernel_names
                    .entry(a)
                    .or_insert_with(|| names.kernel(a))
                    .clone()
            })
            .collect();
        let mine = k.pid == own_pid;
        let in_irq = kernel.iter().any(|f| IRQ_ENTRIES.contains(&f.as_str()));
        // The CPU's own interrupt work: taken while it idled, or handed to
        // ksoftirqd. Interrupts taken inside another process are that
        // process's time (the kernel charges it so), not this end's.
        let irq = (k.pid == 0 && in_irq) || (k.pid != 0 && is_ksoftirqd(k.pid, &mut ksoftirqd));
        let on_own_cpu = own_cpus.is_some_and(|c| c.contains(k.cpu));
        let root = if mine {
            header.process_s += s;
            if in_irq {
                header.process_irq_s += s;
            }
            None
        } else if irq && on_own_cpu {
            header.irq_s += s;
            Some("[interrupts]")
        } else {
            if k.pid == 0 && !irq {
                header.idle_s += s;
            } else {
                header.other_s += s;
            }
            continue;
        };
        header.samples += count;
        let mut stack: Vec<String> = root.into_iter().map(String::from).collect();
        if let (true, Some(a)) = (mine, k.user) {
            stack.push(user_names.entry(a).or_insert_with(|| names.user(a)).clone());
        }
        for f in kernel.into_iter().rev() {
            // Runs of unknown frames say no more than one.
            if f == "[unknown]" && stack.last().is_some_and(|l| l == "[unknown]") {
                continue;
            }
            stack.push(f);
        }
        *folded.entry(stack).or_default() += ns;
    }
    Profile::from_stacks(folded.into_iter().collect(), header)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names<'static> {
        Names {
            exe: None,
            kernel: Box::leak(Box::new(plumb_sys::ksyms::KernelSymbols::parse(
                "ffffffff81000000 T net_rx_action\n\
                 ffffffff81001000 T tcp_recvmsg\n\
                 ffffffff81002000 T handle_softirqs\n\
                 ffffffff81003000 T default_idle\n",
            ))),
        }
    }

    fn key(pid: u32, cpu: u32, kernel: &[u64]) -> Key {
        Key {
            pid,
            tid: pid,
            cpu,
            kernel: kernel.to_vec(),
            user: None,
        }
    }

    /// Whether this process may profile every CPU; outside CI a test that
    /// may not says so and passes, under CI (root) it fails.
    fn may_profile() -> bool {
        match plumb_sys::perf::refusal() {
            None => true,
            Some(why) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
                panic!("precondition missing under CI: {why}")
            }
            Some(why) => {
                eprintln!("skipped: {why}");
                false
            }
        }
    }

    fn profile_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|c| c.trim() == PROFILE_THREAD)
            .count()
    }

    #[test]
    fn a_sampling_dropped_unfinished_stops_its_thread() {
        if !may_profile() {
            return;
        }
        let s = Profiler::open(ProfileAsk::default(), None, None)
            .unwrap()
            .start()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(profile_threads() >= 1);
        drop(s);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while profile_threads() > 0 && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(
            profile_threads(),
            0,
            "the sampling thread outlived its sampling"
        );
    }

    #[test]
    fn each_sample_goes_to_the_process_its_cpus_interrupts_another_or_idle() {
        let mut got = Collected::default();
        let ms = 1_000_000;
        // Own process, in tcp_recvmsg: 3 ms.
        got.samples
            .insert(key(10, 0, &[0xffff_ffff_8100_1010]), (3, 3 * ms));
        // A softirq on the end's CPU interrupting idle: 2 ms.
        got.samples.insert(
            key(0, 1, &[0xffff_ffff_8100_0010, 0xffff_ffff_8100_2010]),
            (2, 2 * ms),
        );
        // The same on a CPU not the end's: elsewhere.
        got.samples.insert(
            key(0, 3, &[0xffff_ffff_8100_0010, 0xffff_ffff_8100_2010]),
            (1, ms),
        );
        // Idle: 5 ms. Another process: 7 ms, 4 of them in a softirq it
        // took on the end's CPU (its time, not the end's).
        got.samples
            .insert(key(0, 1, &[0xffff_ffff_8100_3010]), (5, 5 * ms));
        got.samples
            .insert(key(99, 1, &[0xffff_ffff_8100_1010]), (3, 3 * ms));
        got.samples.insert(
            key(99, 1, &[0xffff_ffff_8100_0010, 0xffff_ffff_8100_2010]),
            (4, 4 * ms),
        );
        let cpus = CpuList::new(vec![0, 1]);
        let p = attribute(
            &got,
            10,
            Some(&cpus),
            Event::CpuClock,
            ProfileAsk::default(),
            &names(),
        );
        assert!((p.process_s - 0.003).abs() < 1e-12, "{}", p.process_s);
        assert!((p.irq_s - 0.002).abs() < 1e-12);
        assert!((p.idle_s - 0.005).abs() < 1e-12);
        assert!((p.other_s - 0.008).abs() < 1e-12, "{}", p.other_s);
        assert_eq!(p.samples, 5);
        let f = p.functions();
        assert!((f["tcp_recvmsg"].self_s - 0.003).abs() < 1e-12);
        assert!((f["net_rx_action"].self_s - 0.002).abs() < 1e-12);
        assert!((f["[interrupts]"].total_s - 0.002).abs() < 1e-12);
        // An unpinned end claims no interrupts.
        let p = attribute(
            &got,
            10,
            None,
            Event::CpuClock,
            ProfileAsk::default(),
            &names(),
        );
        assert_eq!(p.irq_s, 0.0);
    }
}
