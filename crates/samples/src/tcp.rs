//! TCP's state over the window: each end's flows' TCP_INFO sampled at a
//! stated period, the flows one by one up to a stated count and the sum
//! over all of them. Counters (retransmits, the chrono times) are kept
//! from the window's opening, never over the flow's lifetime: the first
//! sample is the opening, the last the close.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The sampling period, where the flows are few enough to read them all
/// this often.
pub const TCP_SAMPLE_PERIOD_MS: u32 = 100;

/// Flows sampled one by one: every flow up to this many, else this many
/// spread evenly over the flows (flow `i * flows / 64`).
pub const TCP_SERIES_FLOWS: usize = 64;

/// TCP_INFO reads a second, at most: the period is lengthened where the
/// flows are many (1000 flows at 100 ms, 30000 at 3 s), so the cost is
/// bounded whatever the flow count.
pub const TCP_READS_PER_SEC_MAX: u32 = 10_000;

/// Samples a window keeps, at most: a longer window keeps every other
/// sample and doubles its period, so that an end's series holds at most
/// 64 x 300 flow samples (about 90 bytes each as JSON: 1.7 MB at most,
/// about 1 KB per flow and second of window below that).
pub const TCP_SAMPLES_MAX: usize = 300;

/// The period for `flows`: [`TCP_SAMPLE_PERIOD_MS`], or longer so that
/// reading them all stays within [`TCP_READS_PER_SEC_MAX`].
pub fn sample_period_ms(flows: usize) -> u32 {
    let floor = (flows as u64 * 1000).div_ceil(u64::from(TCP_READS_PER_SEC_MAX));
    (TCP_SAMPLE_PERIOD_MS as u64)
        .max(floor)
        .min(u64::from(u32::MAX)) as u32
}

/// The flows sampled one by one out of `flows`.
pub fn sampled_flows(flows: usize) -> Vec<usize> {
    if flows <= TCP_SERIES_FLOWS {
        (0..flows).collect()
    } else {
        (0..TCP_SERIES_FLOWS)
            .map(|i| i * flows / TCP_SERIES_FLOWS)
            .collect()
    }
}

/// The state of one flow at one sample, as the sampler reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpState {
    pub mss: u32,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments; None in the first slow start.
    pub ssthresh: Option<u32>,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    /// Segments in flight: unacked less sacked and lost, plus retransmitted
    /// (the kernel's tcp_packets_in_flight).
    pub in_flight: u32,
    pub delivery_rate_bps: Option<u64>,
    pub notsent_bytes: Option<u32>,
    /// The peer's advertised window, bytes (tcpi_snd_wnd, 5.4).
    pub snd_wnd: Option<u32>,
    /// This end's own advertised window, bytes (tcpi_rcv_wnd, 6.7).
    pub rcv_wnd: Option<u32>,
    /// Lifetime counters; the series keeps them from the window's opening.
    pub total_retrans: u32,
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes received over the flow's life (tcpi_bytes_received, 4.1).
    pub bytes_received: Option<u64>,
}

impl TcpState {
    /// Whether the data in flight fills the congestion window.
    pub fn at_cwnd(&self) -> bool {
        self.cwnd > 0 && self.in_flight >= self.cwnd
    }
}

/// One flow over the window, a value per sample in each list. A figure
/// the kernel does not report is absent, never zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowSeries {
    /// The flow's number, as in flows and tcp_info.
    pub flow: u32,
    /// Its send MSS as the window opened, bytes: segments times this are
    /// bytes.
    pub mss: u32,
    /// Congestion window, segments.
    pub cwnd: Vec<u32>,
    /// Slow-start threshold, segments; null while in the first slow start.
    pub ssthresh: Vec<Option<u32>>,
    /// Smoothed RTT, µs.
    pub srtt_us: Vec<u32>,
    /// RTT variation, µs.
    pub rttvar_us: Vec<u32>,
    /// Segments in flight.
    pub in_flight: Vec<u32>,
    /// Delivery rate, bit/s (4.9).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery_rate_bps: Option<Vec<u64>>,
    /// Bytes written but not yet sent (4.6).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub notsent_bytes: Option<Vec<u32>>,
    /// The peer's advertised receive window, bytes (tcpi_snd_wnd, 5.4).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub snd_wnd: Option<Vec<u32>>,
    /// This end's own advertised receive window, bytes (tcpi_rcv_wnd, 6.7).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rcv_wnd: Option<Vec<u32>>,
    /// Segments retransmitted since the window opened.
    pub retrans: Vec<u32>,
    /// µs busy, held back by the receive window and by the send buffer,
    /// since the window opened.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub busy_us: Option<Vec<u64>>,
    /// Of those, µs the receiver's window held it back.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rwnd_limited_us: Option<Vec<u64>>,
    /// Of those, µs its own send buffer held it back.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sndbuf_limited_us: Option<Vec<u64>>,
    /// Bytes received since the window opened (4.1): what the flow
    /// delivered to this end, its goodput sample to sample.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_received: Option<Vec<u64>>,
}

/// Sums over every flow of the end at each sample (the mean srtt is
/// `srtt_us / flows`), so that two flow groups' series add up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AllSeries {
    /// Congestion windows, segments.
    pub cwnd: Vec<u64>,
    /// Segments in flight.
    pub in_flight: Vec<u64>,
    /// Bytes in flight: each flow's segments times its MSS.
    pub in_flight_bytes: Vec<u64>,
    /// Bytes not yet sent.
    pub notsent_bytes: Vec<u64>,
    /// Delivery rates, bit/s.
    pub delivery_rate_bps: Vec<u64>,
    /// Smoothed RTTs, µs, summed.
    pub srtt_us: Vec<u64>,
    /// Segments retransmitted since the window opened.
    pub retrans: Vec<u64>,
    /// µs busy since the window opened.
    pub busy_us: Vec<u64>,
    /// µs held back by the receive window since the window opened.
    pub rwnd_limited_us: Vec<u64>,
    /// µs held back by the send buffer since the window opened.
    pub sndbuf_limited_us: Vec<u64>,
    /// Bytes received since the window opened: the end's goodput sample
    /// to sample. Absent in records from before it was kept.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub bytes_received: Vec<u64>,
    /// Flows that were busy since the sample before, limited by neither
    /// window nor buffer for part of it.
    pub busy_other: Vec<u32>,
    /// Of those, the flows whose data in flight filled the congestion
    /// window at the sample.
    pub at_cwnd: Vec<u32>,
}

impl AllSeries {
    /// The sums, in the order the builder adds them up: cwnd, in flight,
    /// bytes in flight, not sent, delivery rate, srtt, then the counters
    /// from the opening (retransmits, busy, rwnd-limited, sndbuf-limited,
    /// bytes received).
    fn sums_mut(&mut self) -> [&mut Vec<u64>; 11] {
        [
            &mut self.cwnd,
            &mut self.in_flight,
            &mut self.in_flight_bytes,
            &mut self.notsent_bytes,
            &mut self.delivery_rate_bps,
            &mut self.srtt_us,
            &mut self.retrans,
            &mut self.busy_us,
            &mut self.rwnd_limited_us,
            &mut self.sndbuf_limited_us,
            &mut self.bytes_received,
        ]
    }
}

/// An end's flows' TCP state over its window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TcpSeries {
    /// The period the samples were taken at, ms.
    #[schemars(range(min = 1))]
    pub period_ms: u32,
    /// The end's TCP flows.
    pub flows: u32,
    /// Each sample's time from the window's opening, ms: the first is the
    /// opening, the last the close.
    pub t_ms: Vec<u32>,
    /// The flows sampled one by one (see [`TCP_SERIES_FLOWS`]).
    pub sampled: Vec<FlowSeries>,
    /// Sums over every flow of the end at each sample (the mean srtt is srtt_us
    /// / flows); two flow groups' sums add up sample by sample.
    pub all: AllSeries,
    /// CPU seconds the sampling took (its thread's, user and system): what
    /// the series cost the end.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub sampler_cpu_s: f64,
}

/// Shares of a sender's busy time (receive window, send buffer, neither).
pub type Shares = (f64, f64, f64);

impl TcpSeries {
    /// Of the flow-samples busy but limited by neither window nor buffer,
    /// the share with their data in flight at the congestion window; None
    /// without any.
    pub fn at_cwnd_share(&self) -> Option<f64> {
        let n: u64 = self.all.busy_other.iter().map(|&v| u64::from(v)).sum();
        let at: u64 = self.all.at_cwnd.iter().map(|&v| u64::from(v)).sum();
        (n > 0).then(|| at as f64 / n as f64)
    }

    /// The shares of the senders' busy time between the samples nearest
    /// `from_s` and `to_s` after the opening; None where they were not busy.
    pub fn shares_between(&self, from_s: f64, to_s: f64) -> Option<Shares> {
        let at = |s: f64| {
            let ms = (s * 1000.0).max(0.0);
            self.t_ms
                .iter()
                .enumerate()
                .min_by(|a, b| {
                    (f64::from(*a.1) - ms)
                        .abs()
                        .total_cmp(&(f64::from(*b.1) - ms).abs())
                })
                .map(|(i, _)| i)
        };
        let (a, b) = (at(from_s)?, at(to_s)?);
        let d = |v: &[u64]| v.get(b).zip(v.get(a)).map(|(y, x)| y.saturating_sub(*x));
        let busy = d(&self.all.busy_us)?;
        shares(
            busy as f64,
            d(&self.all.rwnd_limited_us)? as f64,
            d(&self.all.sndbuf_limited_us)? as f64,
        )
    }

    /// The limited-by shares of each interval `(t_s, dt_s)` of the window.
    pub fn interval_shares(&self, intervals: &[(f64, f64)]) -> Vec<Option<Shares>> {
        intervals
            .iter()
            .map(|&(t, dt)| self.shares_between(t - dt, t))
            .collect()
    }

    /// The median over the samples of one sampled flow figure, all flows
    /// pooled.
    pub fn median_of(&self, of: impl Fn(&FlowSeries) -> Vec<f64>) -> Option<f64> {
        let mut xs: Vec<f64> = self.sampled.iter().flat_map(of).collect();
        if xs.is_empty() {
            return None;
        }
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        Some(if n % 2 == 1 {
            xs[n / 2]
        } else {
            (xs[n / 2 - 1] + xs[n / 2]) / 2.0
        })
    }
}

/// (receive window, send buffer, neither) as shares of `busy`.
pub fn shares(busy: f64, rwnd: f64, sndbuf: f64) -> Option<Shares> {
    (busy > 0.0).then(|| {
        let r = (rwnd / busy).clamp(0.0, 1.0);
        let s = (sndbuf / busy).clamp(0.0, 1.0 - r);
        (r, s, 1.0 - r - s)
    })
}

/// Builds an end's series sample by sample.
#[derive(Debug)]
pub struct SeriesBuilder {
    series: TcpSeries,
    /// Each flow's lifetime counters at the opening: (retransmits, busy,
    /// rwnd-limited, sndbuf-limited, bytes received).
    opening: Vec<Option<[u64; 5]>>,
    /// Each flow's state as read at the sample before, repeated where its
    /// socket stops answering.
    last: Vec<Option<TcpState>>,
    sampled: Vec<usize>,
}

fn counters(s: &TcpState) -> [u64; 5] {
    [
        u64::from(s.total_retrans),
        s.busy_us.unwrap_or(0),
        s.rwnd_limited_us.unwrap_or(0),
        s.sndbuf_limited_us.unwrap_or(0),
        s.bytes_received.unwrap_or(0),
    ]
}

impl SeriesBuilder {
    pub fn new(flows: usize, period_ms: u32) -> SeriesBuilder {
        let sampled = sampled_flows(flows);
        SeriesBuilder {
            series: TcpSeries {
                period_ms,
                flows: flows as u32,
                sampled: sampled
                    .iter()
                    .map(|&f| FlowSeries {
                        flow: f as u32,
                        ..FlowSeries::default()
                    })
                    .collect(),
                ..TcpSeries::default()
            },
            opening: vec![None; flows],
            last: vec![None; flows],
            sampled,
        }
    }

    /// Adds the sample taken `t_ms` after the opening: `states[i]` is flow
    /// i's, None where its socket did not answer (its last state stands).
    pub fn push(&mut self, t_ms: u32, states: &[Option<TcpState>]) {
        let first = self.series.t_ms.is_empty();
        self.series.t_ms.push(t_ms);
        let all = &mut self.series.all;
        let mut sum = [0u64; 11];
        let (mut busy_other, mut at_cwnd) = (0u32, 0u32);
        for (i, s) in states.iter().enumerate().take(self.opening.len()) {
            let Some(s) = s.or(self.last[i]) else {
                continue;
            };
            let s = &s;
            let now = counters(s);
            let open = *self.opening[i].get_or_insert(now);
            let since = |k: usize| now[k].saturating_sub(open[k]);
            if let Some(before) = self.last[i].replace(*s).as_ref().map(counters) {
                let d = |k: usize| now[k].saturating_sub(before[k]);
                if !first && d(1) > d(2) + d(3) {
                    busy_other += 1;
                    at_cwnd += u32::from(s.at_cwnd());
                }
            }
            for (k, v) in [
                u64::from(s.cwnd),
                u64::from(s.in_flight),
                u64::from(s.in_flight) * u64::from(s.mss),
                u64::from(s.notsent_bytes.unwrap_or(0)),
                s.delivery_rate_bps.unwrap_or(0),
                u64::from(s.srtt_us),
                since(0),
                since(1),
                since(2),
                since(3),
                since(4),
            ]
            .into_iter()
            .enumerate()
            {
                sum[k] += v;
            }
        }
        for (list, v) in all.sums_mut().into_iter().zip(sum) {
            list.push(v);
        }
        all.busy_other.push(busy_other);
        all.at_cwnd.push(at_cwnd);

        for (f, &i) in self.series.sampled.iter_mut().zip(&self.sampled) {
            let s = self.last[i].unwrap_or_default();
            let open = self.opening[i].unwrap_or_else(|| counters(&s));
            if f.cwnd.is_empty() {
                f.mss = s.mss;
            }
            push_flow(f, &s, open, first);
        }
        if self.series.t_ms.len() >= TCP_SAMPLES_MAX {
            self.thin();
        }
    }

    /// The period samples are taken at from now on: doubled each time the
    /// window's samples reach [`TCP_SAMPLES_MAX`] and are thinned.
    pub fn period_ms(&self) -> u32 {
        self.series.period_ms
    }

    /// The series, with the CPU seconds taking it cost.
    pub fn finish(mut self, sampler_cpu_s: f64) -> TcpSeries {
        self.series.sampler_cpu_s = sampler_cpu_s;
        self.series
    }

    /// Keeps the first, every other and the last sample; what a dropped
    /// sample counted since the one before goes to the sample after it.
    fn thin(&mut self) {
        let n = self.series.t_ms.len();
        let keep = |i: usize| i & 1 == 0 || i == n - 1;
        fn keep_of<T: Copy>(v: &mut Vec<T>, keep: impl Fn(usize) -> bool) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                keep(i - 1)
            });
        }
        let all = &mut self.series.all;
        for counts in [&mut all.busy_other, &mut all.at_cwnd] {
            for i in (1..n).filter(|&i| !keep(i)) {
                if i + 1 < n {
                    counts[i + 1] += counts[i];
                }
            }
            keep_of(counts, keep);
        }
        keep_of(&mut self.series.t_ms, keep);
        for v in all.sums_mut() {
            keep_of(v, keep);
        }
        for f in &mut self.series.sampled {
            keep_of(&mut f.cwnd, keep);
            keep_of(&mut f.ssthresh, keep);
            keep_of(&mut f.srtt_us, keep);
            keep_of(&mut f.rttvar_us, keep);
            keep_of(&mut f.in_flight, keep);
            keep_of(&mut f.retrans, keep);
            for v in [&mut f.notsent_bytes, &mut f.snd_wnd, &mut f.rcv_wnd]
                .into_iter()
                .flatten()
            {
                keep_of(v, keep);
            }
            for v in [
                &mut f.delivery_rate_bps,
                &mut f.busy_us,
                &mut f.rwnd_limited_us,
                &mut f.sndbuf_limited_us,
                &mut f.bytes_received,
            ]
            .into_iter()
            .flatten()
            {
                keep_of(v, keep);
            }
        }
        self.series.period_ms = self.series.period_ms.saturating_mul(2);
    }
}

fn push_flow(f: &mut FlowSeries, s: &TcpState, open: [u64; 5], first: bool) {
    let since = |v: u64, k: usize| v.saturating_sub(open[k]);
    f.cwnd.push(s.cwnd);
    f.ssthresh.push(s.ssthresh);
    f.srtt_us.push(s.srtt_us);
    f.rttvar_us.push(s.rttvar_us);
    f.in_flight.push(s.in_flight);
    f.retrans
        .push(since(u64::from(s.total_retrans), 0).min(u64::from(u32::MAX)) as u32);
    // A figure the kernel lacks at the first sample stays absent.
    fn opt<T: Copy>(list: &mut Option<Vec<T>>, v: Option<T>, first: bool, fill: T) {
        match (list.as_mut(), v) {
            (Some(l), v) => l.push(v.unwrap_or(fill)),
            (None, Some(v)) if first => *list = Some(vec![v]),
            (None, _) => {}
        }
    }
    opt(&mut f.delivery_rate_bps, s.delivery_rate_bps, first, 0);
    opt(&mut f.notsent_bytes, s.notsent_bytes, first, 0);
    opt(&mut f.snd_wnd, s.snd_wnd, first, 0);
    opt(&mut f.rcv_wnd, s.rcv_wnd, first, 0);
    opt(&mut f.busy_us, s.busy_us.map(|v| since(v, 1)), first, 0);
    opt(
        &mut f.rwnd_limited_us,
        s.rwnd_limited_us.map(|v| since(v, 2)),
        first,
        0,
    );
    opt(
        &mut f.sndbuf_limited_us,
        s.sndbuf_limited_us.map(|v| since(v, 3)),
        first,
        0,
    );
    opt(
        &mut f.bytes_received,
        s.bytes_received.map(|v| since(v, 4)),
        first,
        0,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(cwnd: u32, in_flight: u32, retrans: u32, busy: u64, rwnd: u64) -> TcpState {
        TcpState {
            mss: 1000,
            cwnd,
            in_flight,
            srtt_us: 100,
            total_retrans: retrans,
            busy_us: Some(busy),
            rwnd_limited_us: Some(rwnd),
            sndbuf_limited_us: Some(0),
            snd_wnd: Some(65535),
            // Whatever it delivered: twice its busy µs in bytes.
            bytes_received: Some(2 * busy),
            ..TcpState::default()
        }
    }

    #[test]
    fn counters_start_at_the_opening_and_sums_cover_every_flow() {
        let mut b = SeriesBuilder::new(2, 100);
        // Lifetime counters at the opening: 7 retransmits, 5 s busy.
        b.push(
            0,
            &[
                Some(state(10, 10, 7, 5_000_000, 1_000_000)),
                Some(state(20, 5, 3, 2_000_000, 0)),
            ],
        );
        b.push(
            100,
            &[
                Some(state(12, 12, 9, 5_100_000, 1_000_000)),
                Some(state(20, 5, 4, 2_050_000, 0)),
            ],
        );
        b.push(200, &[Some(state(14, 3, 9, 5_200_000, 1_080_000)), None]);
        let s = b.finish(0.0);
        assert_eq!(s.t_ms, [0, 100, 200]);
        let f = &s.sampled[0];
        assert_eq!(f.retrans, [0, 2, 2]);
        assert_eq!(f.busy_us.as_deref(), Some(&[0, 100_000, 200_000][..]));
        assert_eq!(f.rwnd_limited_us.as_deref(), Some(&[0, 0, 80_000][..]));
        assert_eq!(f.mss, 1000);
        // The flow that stopped answering repeats its last state, its
        // counters still from the opening, in its series and in the sums.
        let quiet = &s.sampled[1];
        assert_eq!(quiet.cwnd, [20, 20, 20]);
        assert_eq!(quiet.retrans, [0, 1, 1]);
        assert_eq!(quiet.busy_us.as_deref(), Some(&[0, 50_000, 50_000][..]));
        assert_eq!(s.all.cwnd, [30, 32, 34]);
        assert_eq!(s.all.in_flight_bytes, [15_000, 17_000, 8000]);
        assert_eq!(s.all.retrans, [0, 3, 3]);
        assert_eq!(s.all.busy_us, [0, 150_000, 250_000]);
        assert_eq!(
            f.bytes_received.as_deref(),
            Some(&[0, 200_000, 400_000][..])
        );
        assert_eq!(s.all.bytes_received, [0, 300_000, 500_000]);
        // Busy and limited by neither: both flows at 100 ms, flow 0 at its
        // cwnd; at 200 ms flow 0, not at its cwnd, and the quiet flow not
        // at all.
        assert_eq!(s.all.busy_other, [0, 2, 1]);
        assert_eq!(s.all.at_cwnd, [0, 1, 0]);
        assert_eq!(s.at_cwnd_share(), Some(1.0 / 3.0));
        let (r, _, o) = s.shares_between(0.0, 0.2).unwrap();
        assert!((r - 0.32).abs() < 1e-9 && (o - 0.68).abs() < 1e-9);
        let per = s.interval_shares(&[(0.1, 0.1), (0.2, 0.1)]);
        assert_eq!(per[0], Some((0.0, 0.0, 1.0)));
        assert!((per[1].unwrap().0 - 0.8).abs() < 1e-9);
    }

    #[test]
    fn many_flows_are_sampled_evenly_and_read_less_often() {
        assert_eq!(sampled_flows(3), [0, 1, 2]);
        let s = sampled_flows(1000);
        assert_eq!(s.len(), TCP_SERIES_FLOWS);
        assert_eq!((s[0], s[1], s[63]), (0, 15, 984));
        assert_eq!(sample_period_ms(1), 100);
        assert_eq!(sample_period_ms(1000), 100);
        assert_eq!(sample_period_ms(30_000), 3000);
    }

    #[test]
    fn a_long_window_keeps_every_other_sample_and_every_count() {
        let mut b = SeriesBuilder::new(1, 100);
        let (mut t, pushes) = (0, 400);
        for i in 0..pushes {
            b.push(t, &[Some(state(10, 10, 0, i * 50_000, 0))]);
            t += b.period_ms();
        }
        let s = b.finish(0.0);
        assert_eq!(s.t_ms.len(), 151 + (pushes as usize - TCP_SAMPLES_MAX));
        assert_eq!(s.period_ms, 200);
        assert_eq!(s.t_ms[0], 0);
        assert!(s.t_ms.windows(2).all(|w| w[1] > w[0]));
        assert_eq!(s.sampled[0].cwnd.len(), s.t_ms.len());
        // Every busy sample after the first is still counted, once.
        let counted: u32 = s.all.busy_other.iter().sum();
        assert_eq!(counted, pushes as u32 - 1);
        assert_eq!(s.at_cwnd_share(), Some(1.0));
        assert_eq!(s.all.busy_us.last(), Some(&((pushes - 1) * 50_000)));
    }

    #[test]
    fn a_figure_the_kernel_lacks_stays_absent() {
        let mut b = SeriesBuilder::new(1, 100);
        let old = TcpState {
            cwnd: 10,
            ..TcpState::default()
        };
        b.push(0, &[Some(old)]);
        b.push(100, &[Some(old)]);
        let s = b.finish(0.0);
        let f = &s.sampled[0];
        assert_eq!(f.snd_wnd, None);
        assert_eq!(f.busy_us, None);
        assert_eq!(s.shares_between(0.0, 0.1), None);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["sampled"][0].get("rcv_wnd").is_none());
        let back: TcpSeries = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }
}
