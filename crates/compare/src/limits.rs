//! What limited the senders on each side: per end, the share of its flows'
//! busy time that the receiver's window, their own send buffer or neither
//! held them back (TCP's chrono counters over each window), and of the
//! last, how often the data in flight filled the congestion window (the
//! sampled TCP state), iteration by iteration, with the interval of its
//! mean and whether the sides differ.

use plumb_samples::{EndResult, Iteration, Role};
use serde::Serialize;

/// The parts of a sender's busy time, as the summary names them, and the
/// share of the samples of the last part with the data in flight at the
/// congestion window.
pub const LIMITS: [&str; 4] = [
    "receive window",
    "send buffer",
    "other",
    "in flight at cwnd",
];

/// One share of one end on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct LimitLine {
    /// `client` or `server`.
    pub end: String,
    /// One of [`LIMITS`].
    pub limit: &'static str,
    pub a: Share,
    pub b: Share,
    /// Welch's p of the difference; absent with fewer than 2 iterations
    /// on a side or none of spread on either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    pub verdict: ShareVerdict,
}

/// A share's mean over a side's iterations, with its interval kept within
/// [0, 1] where a share lies.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Share {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareVerdict {
    /// B's share is larger, beyond the test's level.
    More,
    Less,
    NoDifference,
    /// Fewer than 2 iterations on a side.
    TooFew,
}

impl ShareVerdict {
    pub fn name(self) -> &'static str {
        match self {
            ShareVerdict::More => "more",
            ShareVerdict::Less => "less",
            ShareVerdict::NoDifference => "no difference",
            ShareVerdict::TooFew => "too few",
        }
    }
}

/// Whether B's iterations `xb` lie above or below A's `xa` at `level`,
/// with Welch's p where both sides spread.
pub(crate) fn direction(xa: &[f64], xb: &[f64], level: f64) -> (Option<f64>, ShareVerdict) {
    let (ma, mb) = (plumb_stats::mean(xa), plumb_stats::mean(xb));
    let p_value = plumb_stats::welch(xa, xb)
        .map(|w| w.p)
        .filter(|p| p.is_finite());
    // Sides without spread (a share of exactly 0 or 1, or no event, in
    // every iteration) differ for certain where their means do.
    let certain = p_value.is_none() && ma != mb;
    let verdict = match p_value {
        _ if xa.len() < 2 || xb.len() < 2 => ShareVerdict::TooFew,
        Some(p) if p < 1.0 - level && mb > ma => ShareVerdict::More,
        Some(p) if p < 1.0 - level => ShareVerdict::Less,
        None if certain && mb > ma => ShareVerdict::More,
        None if certain => ShareVerdict::Less,
        _ => ShareVerdict::NoDifference,
    };
    (p_value, verdict)
}

/// Each iteration's share `k` of [`LIMITS`] of `role`'s end, where its
/// flows sent.
fn shares(its: &[&Iteration], role: Role, k: usize) -> Vec<f64> {
    its.iter()
        .filter_map(|i| {
            let end: &EndResult = match role {
                Role::Client => &i.client,
                Role::Server => &i.server,
            };
            match k {
                0..=2 => {
                    let (r, s, o) = end.limited.as_ref()?.shares()?;
                    Some([r, s, o][k])
                }
                _ => end.tcp_series.as_ref()?.at_cwnd_share(),
            }
        })
        .collect()
}

fn share(xs: &[f64], level: f64) -> Share {
    let mean = plumb_stats::mean(xs);
    let (lo, hi) = plumb_stats::t_interval(xs, level).map_or((mean, mean), |i| (i.lo, i.hi));
    Share {
        mean,
        lo: lo.clamp(0.0, 1.0),
        hi: hi.clamp(0.0, 1.0),
        n: xs.len(),
    }
}

/// The lines of every end whose flows sent on both sides.
pub(crate) fn lines(a: &[&Iteration], b: &[&Iteration], level: f64) -> Vec<LimitLine> {
    let mut out = Vec::new();
    for role in [Role::Client, Role::Server] {
        for (k, limit) in LIMITS.iter().enumerate() {
            let (xa, xb) = (shares(a, role, k), shares(b, role, k));
            if xa.is_empty() || xb.is_empty() {
                continue;
            }
            let (a, b) = (share(&xa, level), share(&xb, level));
            let (p_value, verdict) = direction(&xa, &xb, level);
            out.push(LimitLine {
                end: role.name().to_string(),
                limit,
                a,
                b,
                p_value,
                verdict,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_samples::SenderLimits;

    fn iteration(rwnd: f64) -> Iteration {
        let mut it = plumb_samples::testing::example().iterations[0].clone();
        it.client.limited = Some(SenderLimits {
            flows: 1,
            busy_s: 1.0,
            rwnd_limited_s: rwnd,
            sndbuf_limited_s: 0.0,
            slow_start_flows: 0,
        });
        it.server.limited = None;
        // Without sampled state: the tests that want it add it.
        it.client.tcp_series = None;
        it.server.tcp_series = None;
        it
    }

    #[test]
    fn a_sender_held_back_by_the_window_on_one_side_only_reads_so() {
        let a: Vec<Iteration> = [0.0, 0.01, 0.0].map(iteration).to_vec();
        let b: Vec<Iteration> = [0.85, 0.9, 0.88].map(iteration).to_vec();
        let (ra, rb): (Vec<&Iteration>, Vec<&Iteration>) = (a.iter().collect(), b.iter().collect());
        let l = lines(&ra, &rb, 0.95);
        // The client's three shares; the server sent nothing.
        assert_eq!(l.len(), 3);
        let rwnd = &l[0];
        assert_eq!(
            (rwnd.end.as_str(), rwnd.limit),
            ("client", "receive window")
        );
        assert_eq!(rwnd.verdict, ShareVerdict::More);
        assert!(rwnd.a.lo >= 0.0 && rwnd.a.mean < 0.01 && rwnd.b.mean > 0.85);
        assert!(rwnd.b.hi <= 1.0);
        assert_eq!(l[2].verdict, ShareVerdict::Less, "other: {:?}", l[2]);
        // The same on both sides is no difference; one iteration, too few.
        let same = lines(&ra, &ra, 0.95);
        assert!(
            same.iter().all(|x| x.verdict == ShareVerdict::NoDifference),
            "{same:?}"
        );
        assert_eq!(lines(&ra[..1], &rb, 0.95)[0].verdict, ShareVerdict::TooFew);
        // No spread on either side, and apart: certainly more.
        let none: Vec<Iteration> = [0.0, 0.0].map(iteration).to_vec();
        let all: Vec<Iteration> = [1.0, 1.0].map(iteration).to_vec();
        let (rn, rall): (Vec<&Iteration>, Vec<&Iteration>) =
            (none.iter().collect(), all.iter().collect());
        assert_eq!(lines(&rn, &rall, 0.95)[0].verdict, ShareVerdict::More);
    }

    #[test]
    fn the_share_at_the_congestion_window_is_compared_where_both_sides_sampled() {
        let sampled = |at: u32| {
            let mut it = iteration(0.0);
            it.client.tcp_series = Some(plumb_samples::TcpSeries {
                all: plumb_samples::tcp::AllSeries {
                    busy_other: vec![0, 10, 10],
                    at_cwnd: vec![0, at, at],
                    ..Default::default()
                },
                ..Default::default()
            });
            it
        };
        let a: Vec<Iteration> = [1, 2, 1].map(sampled).to_vec();
        let b: Vec<Iteration> = [9, 9, 10].map(sampled).to_vec();
        let (ra, rb): (Vec<&Iteration>, Vec<&Iteration>) = (a.iter().collect(), b.iter().collect());
        let l = lines(&ra, &rb, 0.95);
        let cwnd = l.iter().find(|x| x.limit == "in flight at cwnd").unwrap();
        assert_eq!(cwnd.verdict, ShareVerdict::More);
        assert!((cwnd.a.mean - 4.0 / 30.0).abs() < 1e-9, "{cwnd:?}");
        // Without samples on one side, no line.
        let plain: Vec<Iteration> = [0.0, 0.0].map(iteration).to_vec();
        let rp: Vec<&Iteration> = plain.iter().collect();
        assert_eq!(lines(&ra, &rp, 0.95).len(), 3);
    }
}
