//! The parts of an end's record that the kernel's counters and
//! tracepoints fill: the flows' events and what limited the senders, the
//! sockets in use, the interfaces, their IRQs and root qdiscs.

use super::*;

/// The events of an end's own flows over a window, from the tracepoints
/// whose records carry the socket's ports, counted with a filter on this
/// end's side of them: the server's port as the source on the server, as
/// the destination on the client. Events whose records carry no ports
/// (skb:kfree_skb, and tcp:tcp_send_reset since 6.10) are host-wide only,
/// in [`Tracepoints`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowEvents {
    /// The filter the events were counted with (`dport == 5201`).
    pub filter: String,
    /// Events by tracepoint (`tcp:tcp_retransmit_skb`).
    pub counts: BTreeMap<String, u64>,
    /// Tracepoints that could not be counted for the flows, with why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub unavailable: BTreeMap<String, String>,
    /// The flows' receive buffers each time the kernel tuned them
    /// (tcp:tcp_rcvbuf_grow, 6.18 and later).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rcvbuf_grow: Option<RcvbufGrowth>,
}

/// The receive buffer's tunings a window's samples read (each time a
/// round trip's data outgrew the space the receiver had measured, whether
/// the kernel could grow the buffer or the application had locked it), as
/// sums over them (a mean is the sum over `read`): the buffer, the window clamp
/// and the advertised window as they stood, and the scaling ratio (in
/// 256ths: the share of the buffer's memory the kernel expects to be
/// payload).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RcvbufGrowth {
    /// Tunings read; fewer than counted where a ring overflowed.
    pub read: u64,
    /// The receive buffers as they stood, bytes, summed.
    pub rcvbuf_sum: u64,
    /// The window clamps, bytes, summed.
    pub window_clamp_sum: u64,
    /// The advertised windows, bytes, summed.
    pub rcv_wnd_sum: u64,
    /// The scaling ratios in 256ths (the share of the buffer's memory the
    /// kernel expects to be payload), summed.
    pub scaling_ratio_sum: u64,
}

impl RcvbufGrowth {
    /// The means at each tuning: buffer, window clamp and advertised
    /// window in bytes, and the scaling ratio as a share; None when none
    /// was read.
    pub fn means(&self) -> Option<(f64, f64, f64, f64)> {
        let n = self.read as f64;
        (self.read > 0).then(|| {
            (
                self.rcvbuf_sum as f64 / n,
                self.window_clamp_sum as f64 / n,
                self.rcv_wnd_sum as f64 / n,
                self.scaling_ratio_sum as f64 / n / 256.0,
            )
        })
    }
}

/// Tracepoints counted over a window, host-wide, and those that could not
/// be, each with why (missing from the records' counts, never zero).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tracepoints {
    /// Events by tracepoint (`tcp:tcp_retransmit_skb`).
    pub counts: BTreeMap<String, u64>,
    /// Tracepoints that could not be counted here, each with why: missing,
    /// never zero.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub unavailable: BTreeMap<String, String>,
    /// Packets dropped (skb:kfree_skb) by the kernel's reason, named from
    /// its format file; where the reasons read are not those of every drop
    /// counted, an estimate scaled to the count (see `drop_reasons_read`):
    /// its sum is the count, never more.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub drop_reasons: BTreeMap<String, u64>,
    /// The drops whose reason was read: fewer than counted where the
    /// sampler's rings overflowed (or more, by those dropped between the
    /// count's reading and the records'), and `drop_reasons` is then an
    /// estimate.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub drop_reasons_read: Option<u64>,
    /// Times the kernel throttled the sampling of the drops' records
    /// (over kernel.perf_event_max_sample_rate, through a burst): each lost
    /// the rest of a tick's reasons, which is then why fewer were read
    /// than counted. Absent where never.
    #[serde(skip_serializing_if = "super::end::is_zero", default)]
    pub drop_reasons_throttled: u64,
    /// Drops' records the kernel could not write because the sampler's
    /// ring on their CPU was full (its PERF_RECORD_LOST), between two reads
    /// of the rings: why fewer were read than counted, through a flood.
    /// Where the sampler was not throttled, every drop counted and not
    /// read, since the kernel tells of its last losses only in a later
    /// record. Absent where none, and in older records.
    #[serde(skip_serializing_if = "super::end::is_zero", default)]
    pub drop_reasons_lost: u64,
    /// Where `drop_reasons` is an estimate, the reasons as read, which it
    /// was scaled from. Absent in older records and where every drop's
    /// reason was read.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub drop_reasons_as_read: BTreeMap<String, u64>,
}

impl Tracepoints {
    /// Drops by reason from the reasons `read`, scaled to the `counted`
    /// where their sum is not the count: each reason's exact share rounded
    /// down, and the drops left over by the rounding given to the reasons
    /// with the largest remainders, so that the estimate adds up to the
    /// count exactly and no reason takes more than its share rounded up.
    pub fn scale_reasons(read: &BTreeMap<String, u64>, counted: u64) -> BTreeMap<String, u64> {
        let n: u128 = read.values().map(|&v| u128::from(v)).sum();
        if n == 0 || n == u128::from(counted) {
            return read.clone();
        }
        // In integers: v * counted / n with its remainder, exact at any size.
        let share = |v: u64| {
            let p = u128::from(v) * u128::from(counted);
            ((p / n) as u64, p % n)
        };
        let mut scaled: BTreeMap<String, u64> =
            read.iter().map(|(k, &v)| (k.clone(), share(v).0)).collect();
        let left = counted - scaled.values().sum::<u64>();
        let mut by_remainder: Vec<(&String, u128)> =
            read.iter().map(|(k, &v)| (k, share(v).1)).collect();
        by_remainder.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (k, _) in by_remainder.into_iter().take(left as usize) {
            *scaled.get_mut(k).expect("every reason read is scaled") += 1;
        }
        scaled
    }

    /// The record's figures from the reasons read and the drops counted:
    /// the reasons as read where they are every drop, else the estimate
    /// with the reasons read beside it.
    pub fn reasons(
        read: BTreeMap<String, u64>,
        counted: u64,
    ) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
        let estimate = Tracepoints::scale_reasons(&read, counted);
        match estimate == read {
            true => (read, BTreeMap::new()),
            false => (estimate, read),
        }
    }
}

/// TCP's own accounting of a sender's time (tcpi_busy_time,
/// tcpi_rwnd_limited, tcpi_sndbuf_limited), over the window: the
/// differences of each flow's counters between the window's edges, summed
/// over the flows that sent in it. The kernel keeps them in jiffies (1 to
/// 10 ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SenderLimits {
    /// Flows that sent data in the window.
    #[schemars(range(min = 1))]
    pub flows: u32,
    /// Seconds the flows had data to send, summed over them.
    #[schemars(range(min = 0))]
    pub busy_s: f64,
    /// Of those, seconds the receiver's advertised window held them back.
    #[schemars(range(min = 0))]
    pub rwnd_limited_s: f64,
    /// Seconds their own send buffer held them back.
    #[schemars(range(min = 0))]
    pub sndbuf_limited_s: f64,
    /// Of the flows, those still in their first slow start as the window
    /// opened whose congestion window then more than doubled in it: the
    /// warm-up was too short for them.
    #[serde(default)]
    pub slow_start_flows: u32,
}

impl SenderLimits {
    /// Shares of the busy time: (receive window, send buffer, neither);
    /// None without busy time.
    pub fn shares(&self) -> Option<(f64, f64, f64)> {
        crate::tcp::shares(self.busy_s, self.rwnd_limited_s, self.sndbuf_limited_s)
    }
}

/// /proc/net/sockstat at one moment: levels, not counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Sockstat {
    /// Sockets of every family allocated in the namespace.
    pub sockets_used: u64,
    /// TCP sockets in use (not closed, not in TIME_WAIT), orphaned (closed
    /// by their process, still sending), in TIME_WAIT, and allocated.
    pub tcp_inuse: u64,
    /// TCP sockets closed by their process and still sending.
    pub tcp_orphan: u64,
    /// TCP sockets in TIME_WAIT.
    pub tcp_tw: u64,
    /// TCP sockets allocated.
    pub tcp_alloc: u64,
    /// Pages of memory TCP holds for socket buffers, host-wide: what
    /// net.ipv4.tcp_mem's thresholds are compared with.
    pub tcp_mem_pages: u64,
    /// UDP sockets in use in the namespace.
    pub udp_inuse: u64,
    /// Pages UDP holds, compared with net.ipv4.udp_mem.
    pub udp_mem_pages: u64,
}

/// An interface's counters (/proc/net/dev): since it came up, or over a
/// window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetDevCounters {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors the driver counted.
    pub rx_errors: u64,
    /// Received packets dropped before they reached the stack (no buffer, a
    /// full backlog, a filter).
    pub rx_dropped: u64,
    /// Receive FIFO overruns.
    pub rx_fifo: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Transmit errors the driver counted.
    pub tx_errors: u64,
    /// Packets dropped on the way out (a full queue, no carrier).
    pub tx_dropped: u64,
    /// Transmit FIFO underruns.
    pub tx_fifo: u64,
}

impl NetDevCounters {
    /// What was counted since `earlier` (a counter that went back, as a
    /// device that was reset does, counts from zero).
    pub fn since(&self, earlier: &NetDevCounters) -> NetDevCounters {
        let d = |x: u64, y: u64| if x >= y { x - y } else { x };
        NetDevCounters {
            rx_bytes: d(self.rx_bytes, earlier.rx_bytes),
            rx_packets: d(self.rx_packets, earlier.rx_packets),
            rx_errors: d(self.rx_errors, earlier.rx_errors),
            rx_dropped: d(self.rx_dropped, earlier.rx_dropped),
            rx_fifo: d(self.rx_fifo, earlier.rx_fifo),
            tx_bytes: d(self.tx_bytes, earlier.tx_bytes),
            tx_packets: d(self.tx_packets, earlier.tx_packets),
            tx_errors: d(self.tx_errors, earlier.tx_errors),
            tx_dropped: d(self.tx_dropped, earlier.tx_dropped),
            tx_fifo: d(self.tx_fifo, earlier.tx_fifo),
        }
    }

    /// Whether a packet, an error or a drop was counted.
    pub fn moved(&self) -> bool {
        *self
            != NetDevCounters {
                rx_bytes: self.rx_bytes,
                tx_bytes: self.tx_bytes,
                ..Default::default()
            }
    }
}

/// A root queueing discipline over a window, in the end's network
/// namespace: what it sent, dropped and held back, and what it held as
/// the window closed. A classful one's figures cover its children's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QdiscCounts {
    /// The interface it is the root of.
    pub interface: String,
    /// Its kind, as tc names it (pfifo, tbf, fq_codel, netem, noqueue).
    pub kind: String,
    /// Its handle as tc writes it (`8001:`).
    pub handle: String,
    #[serde(flatten)]
    pub stats: QdiscStats,
}

/// A queueing discipline's counters (since it was made, or over a window)
/// and what it holds, as `tc -s qdisc show` gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QdiscStats {
    /// Bytes and packets it sent (a GSO packet counts its segments).
    pub bytes: u64,
    pub packets: u64,
    /// Packets it dropped: its queue was full, or its algorithm chose to.
    pub drops: u64,
    /// Times a packet waited because the qdisc was over its limit (a
    /// shaper's rate).
    pub overlimits: u64,
    /// Packets the device gave back to it to send again.
    pub requeues: u64,
    /// Packets it marked Congestion Experienced instead of dropping them
    /// (an AQM's ECN marks, and those over a `ce_threshold`), its
    /// children's included; 0 for a kind that never marks.
    #[serde(default)]
    pub ecn_marks: u64,
    /// Packets and bytes it held (as the window closed).
    pub qlen: u64,
    pub backlog_bytes: u64,
}

impl QdiscStats {
    /// What was counted since `earlier`, and what it holds now.
    pub fn since(&self, earlier: &QdiscStats) -> QdiscStats {
        QdiscStats {
            bytes: self.bytes.saturating_sub(earlier.bytes),
            packets: self.packets.saturating_sub(earlier.packets),
            drops: self.drops.saturating_sub(earlier.drops),
            overlimits: self.overlimits.saturating_sub(earlier.overlimits),
            requeues: self.requeues.saturating_sub(earlier.requeues),
            ecn_marks: self.ecn_marks.saturating_sub(earlier.ecn_marks),
            ..*self
        }
    }

    /// Whether it sent, dropped or held anything.
    pub fn moved(&self) -> bool {
        self.packets > 0 || self.drops > 0 || self.qlen > 0
    }
}

/// One transmit queue of a NIC over a window, by its byte queue limits
/// (`/sys/class/net/DEV/queues/tx-N/byte_queue_limits`), sampled at a
/// fixed period.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NicQueue {
    /// The interface, and N of its `tx-N`.
    pub interface: String,
    pub queue: u32,
    /// The limit the kernel had tuned as the window closed, bytes.
    pub limit_bytes: u64,
    /// The most bytes in flight at any sample.
    pub peak_inflight_bytes: u64,
    /// The period of the samples, in milliseconds.
    #[schemars(range(min = 1))]
    pub period_ms: u32,
    /// Bytes in flight at each sample, the first as the window opened and
    /// one a period after another, the last as it closed.
    pub inflight_series: Vec<u64>,
}

/// The kind a [`PathQueue`] of plumb's delay line has where a qdisc's
/// stands: its queue is the line's own, reported as a qdisc's would be
/// (sent as it releases a packet, dropped at the tail of a full queue,
/// held behind the link rate).
pub const DELAY_LINE: &str = "delay line";

impl PathQueue {
    /// What holds the queue, as the summary names it.
    pub fn holder(&self) -> &'static str {
        if self.kind == DELAY_LINE {
            "plumb's delay line"
        } else {
            "the router's qdisc"
        }
    }
}

/// One way of a path's bottleneck over a window: the root qdisc of the
/// router's egress that way (`--qdisc`), or plumb's delay line's queue
/// behind its link rate (`--emulator plumb`, kind [`DELAY_LINE`]), as its
/// counters and its queue sampled at a fixed period say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PathQueue {
    /// The way its packets go: toward the server or toward the client.
    #[schemars(extend("enum" = ["to_server", "to_client"]))]
    pub toward: String,
    /// The router's interface it is the root of; for the delay line, the
    /// device it writes that way's packets to.
    pub interface: String,
    /// The root's kind, as tc names it (htb over the asked qdisc where the
    /// path has a rate, else the asked one).
    pub kind: String,
    /// Counted over the window; what it held as the window closed.
    #[serde(flatten)]
    pub stats: QdiscStats,
    /// The most bytes and packets it held at any sample.
    pub peak_backlog_bytes: u64,
    pub peak_qlen: u64,
    /// The period of the samples, in milliseconds.
    #[schemars(range(min = 1))]
    pub period_ms: u32,
    /// Bytes it held at each sample, the first as the window opened and
    /// one a period after another, the last as it closed.
    pub backlog_series: Vec<u64>,
    /// At the same samples: the packets it held, and what it counted since
    /// the window opened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<QueueSample>,
}

/// A bottleneck's queue at one sample of a [`PathQueue`]'s period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueueSample {
    /// Packets it held.
    pub qlen: u64,
    /// Packets it dropped, times it held one back over its limit, packets
    /// requeued and packets ECN-marked, since the window opened.
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub ecn_marks: u64,
}

impl QueueSample {
    /// What was counted since `earlier`, and what it held at this sample.
    pub fn since(&self, earlier: &QueueSample) -> QueueSample {
        QueueSample {
            qlen: self.qlen,
            drops: self.drops.saturating_sub(earlier.drops),
            overlimits: self.overlimits.saturating_sub(earlier.overlimits),
            requeues: self.requeues.saturating_sub(earlier.requeues),
            ecn_marks: self.ecn_marks.saturating_sub(earlier.ecn_marks),
        }
    }
}

impl From<QdiscStats> for QueueSample {
    fn from(s: QdiscStats) -> QueueSample {
        QueueSample {
            qlen: s.qlen,
            drops: s.drops,
            overlimits: s.overlimits,
            requeues: s.requeues,
            ecn_marks: s.ecn_marks,
        }
    }
}

/// One interface over a window, in the end's network namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InterfaceCounts {
    /// Interface name.
    pub name: String,
    #[serde(flatten)]
    pub counters: NetDevCounters,
    /// No device of its own (lo, veth, a bridge, a TUN device), so no IRQs
    /// of its own: its packets are processed in softirqs of the CPUs that
    /// send them.
    #[serde(default)]
    pub virtual_device: bool,
    /// The device's IRQs that fired in the window, with the CPUs that took
    /// them.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub irqs: Vec<IrqCounts>,
    /// How many statistics the driver names (what `ethtool -S` lists): 0
    /// for one that names none (lo); absent where they could not be read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub driver_counters: Option<u32>,
    /// The driver's statistics that moved in the window, by the driver's
    /// names (per queue where it names queues). A gauge can go down.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub driver: BTreeMap<String, i64>,
}

/// One IRQ of an interface's device over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IrqCounts {
    /// The IRQ's number.
    pub irq: u32,
    /// Its handler's name as /proc/interrupts gives it (e.g. eth0-TxRx-3).
    pub name: String,
    /// The interrupts each CPU took, for the CPUs that took any.
    pub cpus: Vec<IrqCpu>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IrqCpu {
    /// CPU number.
    pub cpu: u32,
    /// Interrupts this CPU took over the window.
    pub count: u64,
}
