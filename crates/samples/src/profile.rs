//! Where one end's CPU time went over a measurement window, function by
//! function: the call stacks sampled on its host, attributed to the end,
//! named, and folded (one line a distinct stack, with its time).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many distinct stacks an end's profile keeps per iteration; the rest
/// are folded into [`Profile::rest_ns`], so the total is kept.
pub const PROFILE_STACKS_MAX: usize = 1000;

/// The frame that stands for the stacks folded away by the bound.
pub const REST_FRAME: &str = "[other stacks]";

/// What `--profile` asks of each end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileAsk {
    /// Samples per second and CPU (`--profile-freq`).
    pub freq_hz: u64,
    /// Data pages of each CPU's ring buffer, a power of two
    /// (`--profile-ring`).
    pub ring_pages: u32,
}

impl Default for ProfileAsk {
    fn default() -> Self {
        // 997, not 1000: a rate prime to the timer tick does not sample
        // in step with work the tick itself starts.
        ProfileAsk {
            freq_hz: 997,
            ring_pages: 64,
        }
    }
}

/// One end's profile of one iteration's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Profile {
    /// `cycles` (the CPU's PMU) or `cpu-clock` (a timer: no PMU, as in
    /// most virtual machines).
    pub event: String,
    /// Samples asked per second and CPU.
    #[schemars(range(min = 1))]
    pub freq_hz: u64,
    /// Samples attributed to this end.
    pub samples: u64,
    /// Samples the kernel dropped because a ring was full, host-wide.
    pub lost: u64,
    /// CPU seconds sampled in this end's process.
    #[schemars(range(min = 0))]
    pub process_s: f64,
    /// Of `process_s`, the seconds in interrupt or softirq context (the
    /// receive path that loopback runs inside the sender's system call):
    /// a kernel with CONFIG_IRQ_TIME_ACCOUNTING charges them as softirq
    /// time, not the process's.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub process_irq_s: f64,
    /// CPU seconds sampled in interrupt and softirq context on this end's
    /// CPUs (where it is pinned) while they idled, and in ksoftirqd there.
    #[schemars(range(min = 0))]
    pub irq_s: f64,
    /// CPU seconds sampled elsewhere on the host: other processes (the
    /// interrupts they took included), and interrupts on other CPUs.
    #[schemars(range(min = 0))]
    pub other_s: f64,
    /// CPU seconds sampled idle.
    #[schemars(range(min = 0))]
    pub idle_s: f64,
    /// Every function name the stacks use, once.
    pub frames: Vec<String>,
    /// The stacks, heaviest first.
    pub stacks: Vec<ProfileStack>,
    /// Nanoseconds of the stacks beyond [`PROFILE_STACKS_MAX`].
    #[serde(default)]
    pub rest_ns: u64,
}

/// One distinct call stack and the time sampled in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileStack {
    /// Indices into [`Profile::frames`], outermost first.
    pub frames: Vec<u32>,
    /// Nanoseconds of CPU time sampled with this stack.
    pub ns: u64,
}

/// A function's time in a profile.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FunctionTime {
    /// Seconds with the function innermost.
    pub self_s: f64,
    /// Seconds with the function anywhere on the stack (once per stack).
    pub total_s: f64,
}

impl Profile {
    /// A profile of `event` at `freq_hz` that sampled nothing yet.
    pub fn empty(event: &str, freq_hz: u64) -> Profile {
        Profile {
            event: event.to_string(),
            freq_hz,
            samples: 0,
            lost: 0,
            process_s: 0.0,
            process_irq_s: 0.0,
            irq_s: 0.0,
            other_s: 0.0,
            idle_s: 0.0,
            frames: Vec::new(),
            stacks: Vec::new(),
            rest_ns: 0,
        }
    }

    /// Builds a profile from stacks of names, outermost first, bounding
    /// the stacks kept.
    pub fn from_stacks(mut stacks: Vec<(Vec<String>, u64)>, header: Profile) -> Profile {
        stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut p = header;
        p.frames.clear();
        p.stacks.clear();
        p.rest_ns = 0;
        let mut index: BTreeMap<String, u32> = BTreeMap::new();
        for (i, (names, ns)) in stacks.into_iter().enumerate() {
            if i >= PROFILE_STACKS_MAX {
                p.rest_ns += ns;
                continue;
            }
            let frames = names
                .into_iter()
                .map(|n| {
                    let next = index.len() as u32;
                    *index.entry(n).or_insert(next)
                })
                .collect();
            p.stacks.push(ProfileStack { frames, ns });
        }
        p.frames = vec![String::new(); index.len()];
        for (name, i) in index {
            p.frames[i as usize] = name;
        }
        p
    }

    /// Seconds attributed to this end: its process and its interrupts.
    pub fn end_s(&self) -> f64 {
        self.process_s + self.irq_s
    }

    /// The seconds of the process that its kernel charges to it (what
    /// /proc/PID/stat counts): without the interrupt work inside it where
    /// interrupt time is accounted apart.
    pub fn charged_s(&self, irq_time_accounting: Option<bool>) -> f64 {
        match irq_time_accounting {
            Some(true) => self.process_s - self.process_irq_s,
            _ => self.process_s,
        }
    }

    /// Each stack as names, outermost first, with its seconds; the folded
    /// rest as one stack of [`REST_FRAME`].
    pub fn named_stacks(&self) -> Vec<(Vec<&str>, f64)> {
        let mut out: Vec<(Vec<&str>, f64)> = self
            .stacks
            .iter()
            .map(|s| {
                let names = s
                    .frames
                    .iter()
                    .map(|&f| {
                        self.frames
                            .get(f as usize)
                            .map_or("[unknown]", |n| n.as_str())
                    })
                    .collect();
                (names, s.ns as f64 / 1e9)
            })
            .collect();
        if self.rest_ns > 0 {
            out.push((vec![REST_FRAME], self.rest_ns as f64 / 1e9));
        }
        out
    }

    /// Each function's self and total seconds.
    pub fn functions(&self) -> BTreeMap<String, FunctionTime> {
        let mut out: BTreeMap<String, FunctionTime> = BTreeMap::new();
        for (names, s) in self.named_stacks() {
            if let Some(leaf) = names.last() {
                out.entry(leaf.to_string()).or_default().self_s += s;
            }
            let mut seen: Vec<&str> = Vec::with_capacity(names.len());
            for n in names {
                if !seen.contains(&n) {
                    seen.push(n);
                    out.entry(n.to_string()).or_default().total_s += s;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Profile {
        Profile::empty("cpu-clock", 997)
    }

    fn names(s: &str) -> Vec<String> {
        s.split(';').map(String::from).collect()
    }

    #[test]
    fn functions_count_self_at_the_leaf_and_total_once_per_stack() {
        let p = Profile::from_stacks(
            vec![
                (names("a;b;c"), 3_000_000_000),
                (names("a;b"), 1_000_000_000),
                // Recursion counts once in the total.
                (names("a;b;b"), 1_000_000_000),
            ],
            header(),
        );
        let f = p.functions();
        assert_eq!(f["c"].self_s, 3.0);
        assert_eq!(f["b"].self_s, 2.0);
        assert_eq!(f["b"].total_s, 5.0);
        assert_eq!(f["a"].total_s, 5.0);
        assert_eq!(f["a"].self_s, 0.0);
        assert_eq!(p.frames.len(), 3);
    }

    #[test]
    fn stacks_beyond_the_bound_fold_into_the_rest_and_keep_the_total() {
        let stacks: Vec<(Vec<String>, u64)> = (0..PROFILE_STACKS_MAX + 10)
            .map(|i| (vec![format!("f{i}")], 1000 + i as u64))
            .collect();
        let total: u64 = stacks.iter().map(|s| s.1).sum();
        let p = Profile::from_stacks(stacks, header());
        assert_eq!(p.stacks.len(), PROFILE_STACKS_MAX);
        // The heaviest are kept.
        assert_eq!(p.stacks[0].ns, 1000 + PROFILE_STACKS_MAX as u64 + 9);
        let kept: u64 = p.stacks.iter().map(|s| s.ns).sum();
        assert_eq!(kept + p.rest_ns, total);
        assert_eq!(p.rest_ns, (1000..1010).sum::<u64>());
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Profile>(&json).unwrap(), p);
    }
}
