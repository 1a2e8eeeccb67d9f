//! The io_uring worker loop (`io = "uring"`): the counterpart of
//! [`crate::worker`]'s epoll loop for workloads whose flows can be driven
//! by completions. The flows queue their sends and multishot receives on
//! the worker's ring; one `io_uring_enter` submits everything queued and
//! waits for completions, which go back to the workload's own state
//! machine (the same one its epoll [`crate::flow::Handler`] drives). The
//! sockets are blocking: the ring, not the caller, waits for room or data.

use crate::flow::{fill_pattern, FlowError, Loop, Shared, POLL, WAKE};
use plumb_sys::uring::{Completion, Queue, Ring, CANCEL};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering::Relaxed;

/// What an operation of a flow was, in the low bits of its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Send,
    Receive,
    Connect,
    Accept,
    /// A message spliced from a file into the flow's pipe, on its way to
    /// the socket (sendfile and splice).
    Fill,
    /// The flow's error queue has something: MSG_ZEROCOPY notifications.
    Errors,
    /// A plain send in place of a MSG_ZEROCOPY one when the socket's
    /// optmem has no room for even one notification.
    Copy,
    /// A self probe's token on a stream's idle direction.
    Token,
}

const OPS: [Op; 8] = [
    Op::Send,
    Op::Receive,
    Op::Connect,
    Op::Accept,
    Op::Fill,
    Op::Errors,
    Op::Copy,
    Op::Token,
];

/// The tag of flow `flow`'s operation `op`.
pub(crate) fn tag(flow: usize, op: Op) -> u64 {
    (flow as u64) << 3 | op as u64
}

fn untag(tag: u64) -> (usize, Op) {
    ((tag >> 3) as usize, OPS[(tag & 7) as usize])
}

/// How big a worker's ring is; what a workload leaves out it does not use.
#[derive(Default)]
pub(crate) struct Shape {
    /// Operations the flows keep in flight at once.
    pub ops: u32,
    /// The longest send.
    pub send_len: usize,
    /// Buffers for receives: how many, and bytes each.
    pub receive: Option<(u16, u32)>,
    /// The most bytes a discarding receive (MSG_TRUNC) takes.
    pub discard: Option<usize>,
    /// Where connects go.
    pub peer: Option<std::net::SocketAddr>,
    /// Letters for datagrams answered where they came from: how many, and
    /// bytes each.
    pub letters: Option<(usize, usize)>,
}

/// Operation `op` of flow `flow` completed as `c` says, with a receive's
/// data in `data`.
pub(crate) struct Done<'a> {
    pub flow: usize,
    pub op: Op,
    pub c: Completion,
    pub data: &'a [u8],
}

/// A workload's flows as the ring loop drives them.
pub(crate) trait RingFlows {
    fn shape(&self, lp: &Loop) -> Shape;
    /// Queues what the flows open with; sets [`Loop::live`].
    fn start(&mut self, lp: &mut Loop, q: &mut Queue) -> io::Result<()>;
    /// Operation `op` of flow `flow` completed; a receive's data is in a
    /// buffer of the ring, `data`, which a TCP workload does not read (as
    /// the epoll engine's reads into one buffer) and a UDP one reads the
    /// header of. While the test stops, nothing more is queued.
    fn complete(&mut self, lp: &mut Loop, q: &mut Queue, done: Done<'_>) -> io::Result<()>;
    /// Completions still owed to the counts once the loop has stopped (a
    /// send's, for what it moved before the stop cancelled it; a zero-copy
    /// send's notification).
    fn owed(&self) -> u64 {
        0
    }
    /// Operations queued or in flight whose completions will leave the
    /// flows nothing to do (an rr send after which nothing is owed until
    /// the peer answers): the loop waits for these and one more, rather
    /// than coming back for a completion it only takes note of.
    fn quiet(&self) -> usize {
        0
    }
    /// Queues what a schedule has made due (an open loop's requests); the
    /// nanoseconds until more is, or None where nothing is scheduled.
    fn on_timer(&mut self, _lp: &mut Loop, _q: &mut Queue) -> io::Result<Option<u64>> {
        Ok(None)
    }
    /// Whether what arrived before a hand-over of the counts belongs before
    /// it: a stream receiver's datagrams (as
    /// [`crate::flow::Handler::settle`] reads them off the socket). The
    /// completions already waiting are taken first, then [`Self::settle`].
    fn settles(&self) -> bool {
        false
    }
    /// What a receiver that [`Self::settles`] reads off its sockets
    /// before the hand-over, past what the ring took in; how many messages.
    fn settle(&mut self, _lp: &mut Loop) -> u64 {
        0
    }
}

/// What a pass over the completions saw besides the flows'.
#[derive(Default)]
struct Seen {
    woken: bool,
    rewatch: bool,
    failed: Option<io::Error>,
}

/// Hands the completions waiting on `ring` to the flows; how many were
/// theirs.
fn take<R: RingFlows>(ring: &mut Ring, r: &mut R, lp: &mut Loop, seen: &mut Seen) -> u64 {
    let mut n = 0;
    ring.complete(|q, c, data| {
        if c.tag == WAKE {
            seen.woken = true;
            seen.rewatch |= !c.more;
            return;
        }
        if c.tag == CANCEL {
            return;
        }
        n += 1;
        let (flow, op) = untag(c.tag);
        if let Err(e) = r.complete(lp, q, Done { flow, op, c, data }) {
            seen.failed = Some(e);
        }
    });
    n
}

/// The size of a ring's receive buffers where the user asked none: a
/// message's, within [`RECEIVE_BUFFER`].
pub(crate) fn fitted(message: usize) -> usize {
    let (least, most) = RECEIVE_BUFFER;
    message.clamp(least, most)
}

/// The smallest and largest receive buffer [`fitted`] gives, in bytes.
const RECEIVE_BUFFER: (usize, usize) = (512, 1 << 20);

/// The buffers of a ring's receives, each `size` bytes: four per flow, as
/// many as `total` bytes hold, at least 16 where they fit in it and two
/// where not (one the kernel fills while the other is handed back), a
/// power of two as the kernel takes them.
pub(crate) fn receive_buffers(flows: usize, size: usize, total: usize) -> (u16, u32) {
    let size = size.max(1);
    let fits = (total / size).max(2);
    let count = fits
        .min(4 * flows.max(1))
        .max(fits.min(16))
        .next_power_of_two()
        .min(1 << 15);
    (count as u16, u32::try_from(size).unwrap_or(u32::MAX))
}

/// Whether a flow goes on queueing: alive and the test not stopping.
pub(crate) fn going(lp: &Loop, dead: bool) -> bool {
    !dead && !lp.sh.stop.load(Relaxed)
}

/// Arms a multishot receive on `fd` again once the last one ended, which
/// its completion `c` says (its final one, or one that found every buffer
/// taken), and the test goes on.
pub(crate) fn receive_again(
    lp: &Loop,
    q: &mut Queue,
    c: &Completion,
    fd: BorrowedFd,
    tag: u64,
) -> io::Result<()> {
    if !c.more && going(lp, false) {
        q.receive(fd, tag)?;
    }
    Ok(())
}

/// Makes the flows' sockets blocking, so that a send waits in the ring for
/// room rather than failing with EAGAIN.
pub(crate) fn block_flows(lp: &Loop) -> io::Result<()> {
    for i in lp.sh.range.clone() {
        lp.sh.flows[i].set_nonblocking(false)?;
    }
    Ok(())
}

/// How long a stopping worker waits for what [`RingFlows::owed`] counts.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// The loop, the same for every workload that runs on a ring.
pub(crate) fn drive<R: RingFlows>(sh: Shared, mut r: R) -> io::Result<Vec<FlowError>> {
    let mut lp = Loop::on_ring(sh);
    let shape = r.shape(&lp);
    let mut ring = Ring::new(shape.ops + 2, shape.send_len, fill_pattern, shape.receive)?;
    if let Some(peer) = shape.peer {
        ring.set_peer(peer);
    }
    if let Some(len) = shape.discard {
        ring.set_discard(len)?;
    }
    if let Some((count, size)) = shape.letters {
        ring.set_letters(count, size)?;
    }
    let wake = lp.sh.nudge.wake.clone();
    ring.watch(wake.as_fd(), WAKE)?;
    r.start(&mut lp, &mut ring.queue())?;
    let mut seen = Seen::default();
    while lp.live > 0 && !lp.sh.stop.load(Relaxed) && seen.failed.is_none() {
        let due = r.on_timer(&mut lp, &mut ring.queue())?;
        let wait = due.map_or(POLL, |ns| POLL.min(std::time::Duration::from_nanos(ns)));
        ring.submit_and_wait_for(r.quiet() + 1, wait)?;
        // Before the batch, as in the epoll loop: what it moves belongs
        // after a hand-over asked for meanwhile; but a receiver that
        // settles counts it first, as having arrived before.
        match lp.owed_hand_over() {
            Some(epoch) if r.settles() => {
                let settled = take(&mut ring, &mut r, &mut lp, &mut seen) + r.settle(&mut lp);
                lp.hand_over(epoch, settled);
            }
            Some(epoch) => {
                lp.hand_over(epoch, 0);
                take(&mut ring, &mut r, &mut lp, &mut seen);
            }
            None => {
                take(&mut ring, &mut r, &mut lp, &mut seen);
            }
        }
        if std::mem::take(&mut seen.woken) {
            lp.drain_wake();
        }
        if std::mem::take(&mut seen.rewatch) {
            ring.watch(wake.as_fd(), WAKE)?;
        }
    }
    if let Some(e) = seen.failed {
        return Err(e);
    }
    // Blocked sends and armed receives end now; what they owe (the
    // notifications of zero-copy sends) still comes.
    ring.cancel_all()?;
    let deadline = std::time::Instant::now() + DRAIN;
    while ring.in_flight() > 0 && r.owed() > 0 && std::time::Instant::now() < deadline {
        ring.submit_and_wait(POLL)?;
        // What fails now fails a test that is over.
        take(&mut ring, &mut r, &mut lp, &mut Seen::default());
    }
    drop(ring);
    lp.hand_over_final();
    Ok(lp.errors)
}

/// Whether this kernel runs the ring loop; says why not otherwise (a
/// failure under CI, whose kernel has it).
#[cfg(test)]
pub(crate) fn ring_here() -> bool {
    match plumb_sys::uring::missing(plumb_sys::uring::Needs { send_zc: true }) {
        None => true,
        Some(why) => {
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("skipped: {why}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_carry_the_flow_and_the_operation() {
        for flow in [0, 1, 9999, 1 << 40] {
            for op in OPS {
                assert_eq!(untag(tag(flow, op)), (flow, op));
                assert_ne!(tag(flow, op), WAKE);
                assert_ne!(tag(flow, op), CANCEL);
            }
        }
    }

    #[test]
    fn receive_buffers_are_a_power_of_two_within_the_total() {
        assert_eq!(receive_buffers(1, 128 << 10, 16 << 20), (16, 128 << 10));
        assert_eq!(receive_buffers(5000, fitted(1), 8 << 20), (16384, 512));
        assert_eq!(receive_buffers(100_000, 64, 1 << 30), (1 << 15, 64));
        assert_eq!(
            receive_buffers(32, fitted(4 << 20), 16 << 20),
            (16, 1 << 20)
        );
        // A size asked for is kept: the count gives way, down to two.
        assert_eq!(receive_buffers(32, 4 << 20, 16 << 20), (4, 4 << 20));
        assert_eq!(receive_buffers(1, 64 << 20, 16 << 20), (2, 64 << 20));
        assert_eq!(receive_buffers(1, 100, 16 << 20), (16, 100));
    }
}
