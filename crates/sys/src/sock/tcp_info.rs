//! TCP_INFO decoded by offset rather than through a fixed struct: the kernel
//! copies min(its struct, our buffer) bytes and says how many, and that size
//! grows with kernel versions (104 bytes in 3.x, 232 in 6.6, more later).

use super::raw;
use plumb_samples::{TcpInfo, TcpState};
use std::io;
use std::os::fd::AsFd;

// Offsets in `struct tcp_info` of include/uapi/linux/tcp.h: eight u8 (state,
// ca_state, retransmits, probes, backoff, options, the snd/rcv_wscale
// bitfield byte and the delivery_rate_app_limited/fastopen_client_fail
// bitfield byte), then u32s, then u64s from tcpi_pacing_rate on.
const STATE: usize = 0; // __u8 tcpi_state
const RETRANSMITS: usize = 2; // __u8 tcpi_retransmits
const SND_MSS: usize = 16; // __u32 tcpi_snd_mss (after tcpi_rto @8, tcpi_ato @12)
const RCV_MSS: usize = 20; // __u32 tcpi_rcv_mss
const UNACKED: usize = 24; // __u32 tcpi_unacked, segments
const SACKED: usize = 28; // __u32 tcpi_sacked
const LOST: usize = 32; // __u32 tcpi_lost
const RETRANS: usize = 36; // __u32 tcpi_retrans (segments retransmitted, not yet acked)
const RTT: usize = 68; // __u32 tcpi_rtt, µs (after fackets..rcv_ssthresh @40..64)
const RTTVAR: usize = 72; // __u32 tcpi_rttvar, µs
const SND_SSTHRESH: usize = 76; // __u32 tcpi_snd_ssthresh
const SND_CWND: usize = 80; // __u32 tcpi_snd_cwnd
const TOTAL_RETRANS: usize = 100; // __u32 tcpi_total_retrans (after rcv_rtt @92, rcv_space @96)
const PACING_RATE: usize = 104; // __u64 tcpi_pacing_rate, bytes/s (Linux 3.15)
const MAX_PACING_RATE: usize = 112; // __u64 tcpi_max_pacing_rate, bytes/s
const BYTES_ACKED: usize = 120; // __u64 tcpi_bytes_acked (4.1)
const BYTES_RECEIVED: usize = 128; // __u64 tcpi_bytes_received (4.1)
const NOTSENT_BYTES: usize = 144; // __u32 tcpi_notsent_bytes (4.6; after segs_out, segs_in)
const DELIVERY_RATE: usize = 160; // __u64 tcpi_delivery_rate, bytes/s (4.9; after segs_out..data_segs_out @136..156)
const BUSY_TIME: usize = 168; // __u64 tcpi_busy_time, µs (4.10)
const RWND_LIMITED: usize = 176; // __u64 tcpi_rwnd_limited, µs
const SNDBUF_LIMITED: usize = 184; // __u64 tcpi_sndbuf_limited, µs
const DELIVERED: usize = 192; // __u32 tcpi_delivered (4.18)
const BYTES_RETRANS: usize = 208; // __u64 tcpi_bytes_retrans (4.19; after delivered_ce @196, bytes_sent @200)
const SND_WND: usize = 228; // __u32 tcpi_snd_wnd, bytes (5.4; after dsack_dups, reord_seen, rcv_ooopack)
const RCV_WND: usize = 232; // __u32 tcpi_rcv_wnd, bytes (6.7)

// Room for growth: the kernel truncates to our buffer, so a larger future
// struct costs nothing but is never an error.
const BUF_LEN: usize = 512;

/// TCP_INFO of a TCP socket. Rates are converted to bits per second; an
/// unlimited max pacing rate stays `u64::MAX`. `flow` is left 0.
pub fn tcp_info(fd: impl AsFd) -> io::Result<TcpInfo> {
    read(fd, decode)
}

/// The state of a TCP socket as the sampler over the window keeps it.
pub fn tcp_state(fd: impl AsFd) -> io::Result<TcpState> {
    read(fd, decode_state)
}

/// TCP_INFO as the kernel copied it, decoded by `as_`.
fn read<T>(fd: impl AsFd, as_: fn(&[u8]) -> T) -> io::Result<T> {
    let mut buf = [0u8; BUF_LEN];
    let len = raw::getsockopt(fd.as_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, &mut buf)?;
    Ok(as_(&buf[..len]))
}

/// The fields at their offsets; one beyond the end of the struct the
/// kernel copied is one it does not report.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u8_at(&self, off: usize) -> Option<u8> {
        self.0.get(off).copied()
    }
    fn u32_at(&self, off: usize) -> Option<u32> {
        self.0
            .get(off..off + 4)
            .and_then(|s| s.try_into().ok())
            .map(u32::from_ne_bytes)
    }
    fn u64_at(&self, off: usize) -> Option<u64> {
        self.0
            .get(off..off + 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_ne_bytes)
    }
    /// A rate the kernel gives in bytes a second, in bits.
    fn bps(&self, off: usize) -> Option<u64> {
        self.u64_at(off).map(|bytes| bytes.saturating_mul(8))
    }
    fn ssthresh(&self) -> Option<u32> {
        self.u32_at(SND_SSTHRESH)
    }
}

pub(super) fn decode_state(b: &[u8]) -> TcpState {
    let f = Fields(b);
    let u32_or_0 = |off: usize| f.u32_at(off).unwrap_or(0);
    let in_flight = (u32_or_0(UNACKED).saturating_sub(u32_or_0(SACKED) + u32_or_0(LOST)))
        .saturating_add(u32_or_0(RETRANS));
    TcpState {
        mss: u32_or_0(SND_MSS),
        cwnd: u32_or_0(SND_CWND),
        ssthresh: f
            .ssthresh()
            .filter(|&t| t != plumb_samples::INITIAL_SSTHRESH),
        srtt_us: u32_or_0(RTT),
        rttvar_us: u32_or_0(RTTVAR),
        in_flight,
        delivery_rate_bps: f.bps(DELIVERY_RATE),
        notsent_bytes: f.u32_at(NOTSENT_BYTES),
        snd_wnd: f.u32_at(SND_WND),
        rcv_wnd: f.u32_at(RCV_WND),
        total_retrans: u32_or_0(TOTAL_RETRANS),
        busy_us: f.u64_at(BUSY_TIME),
        rwnd_limited_us: f.u64_at(RWND_LIMITED),
        sndbuf_limited_us: f.u64_at(SNDBUF_LIMITED),
        bytes_received: f.u64_at(BYTES_RECEIVED),
    }
}

pub(super) fn decode(b: &[u8]) -> TcpInfo {
    let f = Fields(b);
    let u8_at = |off: usize| f.u8_at(off);
    let u32_at = |off: usize| f.u32_at(off);
    let u64_at = |off: usize| f.u64_at(off);
    let bps = |off: usize| f.bps(off);
    TcpInfo {
        flow: 0,
        state: u8_at(STATE).unwrap_or(0),
        rtt_us: u32_at(RTT).unwrap_or(0),
        rttvar_us: u32_at(RTTVAR).unwrap_or(0),
        snd_mss: u32_at(SND_MSS).unwrap_or(0),
        rcv_mss: u32_at(RCV_MSS).unwrap_or(0),
        snd_cwnd: u32_at(SND_CWND).unwrap_or(0),
        snd_ssthresh: f.ssthresh(),
        retransmits: u8_at(RETRANSMITS).unwrap_or(0),
        total_retrans: u32_at(TOTAL_RETRANS).unwrap_or(0),
        pacing_rate_bps: bps(PACING_RATE),
        max_pacing_rate_bps: bps(MAX_PACING_RATE),
        bytes_acked: u64_at(BYTES_ACKED),
        bytes_received: u64_at(BYTES_RECEIVED),
        delivery_rate_bps: bps(DELIVERY_RATE),
        busy_time_us: u64_at(BUSY_TIME),
        rwnd_limited_us: u64_at(RWND_LIMITED),
        sndbuf_limited_us: u64_at(SNDBUF_LIMITED),
        bytes_retrans: u64_at(BYTES_RETRANS),
        delivered: u32_at(DELIVERED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn offsets_agree_with_libc() {
        use std::mem::offset_of;
        type T = libc::tcp_info;
        assert_eq!(STATE, offset_of!(T, tcpi_state));
        assert_eq!(RETRANSMITS, offset_of!(T, tcpi_retransmits));
        assert_eq!(SND_MSS, offset_of!(T, tcpi_snd_mss));
        assert_eq!(RCV_MSS, offset_of!(T, tcpi_rcv_mss));
        assert_eq!(UNACKED, offset_of!(T, tcpi_unacked));
        assert_eq!(SACKED, offset_of!(T, tcpi_sacked));
        assert_eq!(LOST, offset_of!(T, tcpi_lost));
        assert_eq!(RETRANS, offset_of!(T, tcpi_retrans));
        assert_eq!(RTT, offset_of!(T, tcpi_rtt));
        assert_eq!(RTTVAR, offset_of!(T, tcpi_rttvar));
        assert_eq!(SND_CWND, offset_of!(T, tcpi_snd_cwnd));
        assert_eq!(TOTAL_RETRANS, offset_of!(T, tcpi_total_retrans));
        assert_eq!(PACING_RATE, offset_of!(T, tcpi_pacing_rate));
        assert_eq!(MAX_PACING_RATE, offset_of!(T, tcpi_max_pacing_rate));
        assert_eq!(BYTES_ACKED, offset_of!(T, tcpi_bytes_acked));
        assert_eq!(BYTES_RECEIVED, offset_of!(T, tcpi_bytes_received));
        // glibc's struct ends at tcpi_data_segs_out, so the later offsets
        // were checked with offsetof() against linux/tcp.h instead.
    }

    fn put32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    fn put64(b: &mut [u8], off: usize, v: u64) {
        b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }

    #[test]
    fn decodes_fields_and_converts_rates() {
        let mut b = vec![0u8; 232];
        b[STATE] = 1;
        b[RETRANSMITS] = 2;
        put32(&mut b, SND_MSS, 1448);
        put32(&mut b, RTT, 250);
        put32(&mut b, SND_CWND, 10);
        put64(&mut b, PACING_RATE, 1_000_000);
        put64(&mut b, MAX_PACING_RATE, u64::MAX);
        put64(&mut b, DELIVERY_RATE, 125_000_000);
        put32(&mut b, DELIVERED, 77);
        put64(&mut b, BYTES_RETRANS, 4096);
        let t = decode(&b);
        assert_eq!((t.state, t.retransmits, t.snd_mss), (1, 2, 1448));
        assert_eq!((t.rtt_us, t.snd_cwnd), (250, 10));
        assert_eq!(t.pacing_rate_bps, Some(8_000_000));
        assert_eq!(t.max_pacing_rate_bps, Some(u64::MAX));
        assert_eq!(t.delivery_rate_bps, Some(1_000_000_000));
        assert_eq!(t.delivered, Some(77));
        assert_eq!(t.bytes_retrans, Some(4096));
    }

    #[test]
    fn a_state_counts_what_is_in_flight_and_its_windows() {
        let mut b = vec![0u8; 236];
        put32(&mut b, SND_MSS, 1448);
        put32(&mut b, UNACKED, 40);
        put32(&mut b, SACKED, 5);
        put32(&mut b, LOST, 3);
        put32(&mut b, RETRANS, 2);
        put32(&mut b, SND_CWND, 34);
        put32(&mut b, SND_SSTHRESH, plumb_samples::INITIAL_SSTHRESH);
        put32(&mut b, NOTSENT_BYTES, 9000);
        put32(&mut b, SND_WND, 65535);
        put32(&mut b, RCV_WND, 131072);
        put64(&mut b, BUSY_TIME, 7);
        let s = decode_state(&b);
        assert_eq!(s.in_flight, 34);
        assert!(s.at_cwnd());
        assert_eq!(s.ssthresh, None, "in the first slow start");
        assert_eq!(
            (s.notsent_bytes, s.snd_wnd, s.rcv_wnd),
            (Some(9000), Some(65535), Some(131072))
        );
        assert_eq!(s.busy_us, Some(7));
        // A 6.6 kernel: no tcpi_rcv_wnd.
        let s = decode_state(&b[..232]);
        assert_eq!((s.snd_wnd, s.rcv_wnd), (Some(65535), None));
    }

    #[test]
    fn short_struct_leaves_newer_fields_absent() {
        // What a 4.1 kernel returns: up to tcpi_bytes_received.
        let mut b = vec![0u8; 136];
        put64(&mut b, BYTES_RECEIVED, 9);
        let t = decode(&b);
        assert_eq!(t.bytes_received, Some(9));
        assert_eq!(t.delivery_rate_bps, None);
        assert_eq!(t.delivered, None);
        assert_eq!(t.bytes_retrans, None);
        // A 3.x kernel: nothing after tcpi_total_retrans.
        let t = decode(&[0u8; 104]);
        assert_eq!(t.pacing_rate_bps, None);
        // A field cut in half is absent too.
        let t = decode(&[0u8; 110]);
        assert_eq!(t.pacing_rate_bps, None);
        assert_eq!(decode(&[]), TcpInfo::default());
    }
}
