//! io_uring for the engine's ring loop: a submission and completion ring,
//! one region the sends read from, and a provided buffer ring that
//! multishot receives fill. Every address the kernel is given lives in a
//! [`Ring`] and stays there until the kernel has said it is done with it
//! (a drop cancels what is in flight and waits for it), so the engine above
//! holds no pointer and writes no unsafe code.

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU16, Ordering::Release};
use std::time::Duration;

/// What a ring loop needs of the kernel beyond io_uring itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// IORING_OP_SEND_ZC with usage reports.
    pub send_zc: bool,
}

/// The kernel release that first had multishot receive (IORING_RECV_MULTISHOT);
/// its ring registration and opcode probe cannot tell it apart.
const MULTISHOT_RECV: (u32, u32) = (6, 0);
// include/uapi/linux/io_uring.h: ask a zero-copy send's notification to
// say whether the kernel copied after all, and the bit that says it did.
const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
const NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

/// IORING_SEND_ZC_REPORT_USAGE came a release after SEND_ZC itself.
const SEND_ZC_USAGE: (u32, u32) = (6, 2);

/// Checks that this kernel can run a ring loop with `needs`: None when it
/// can, else one line naming what it lacks.
pub fn missing(needs: Needs) -> Option<String> {
    let ring = match IoUring::new(8) {
        Ok(r) => r,
        Err(e) => return Some(refused_setup(&e)),
    };
    let mut probe = io_uring::Probe::new();
    if ring.submitter().register_probe(&mut probe).is_err() {
        return Some("this kernel's io_uring has no opcode probe (Linux 5.6)".into());
    }
    let mut ops = vec![
        (opcode::Send::CODE, "IORING_OP_SEND"),
        (opcode::Recv::CODE, "IORING_OP_RECV"),
        (opcode::PollAdd::CODE, "IORING_OP_POLL_ADD"),
        (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL"),
        (opcode::RecvMsg::CODE, "IORING_OP_RECVMSG"),
        (opcode::SendMsg::CODE, "IORING_OP_SENDMSG"),
        (opcode::Splice::CODE, "IORING_OP_SPLICE"),
    ];
    if needs.send_zc {
        ops.push((opcode::SendZc::CODE, "IORING_OP_SEND_ZC (Linux 6.0)"));
    }
    if let Some((_, name)) = ops.iter().find(|(code, _)| !probe.is_supported(*code)) {
        return Some(format!("this kernel's io_uring has no {name}"));
    }
    if !ring.params().is_feature_ext_arg() {
        return Some(
            "this kernel's io_uring has no timed waits (IORING_FEAT_EXT_ARG, Linux 5.11)".into(),
        );
    }
    let release = crate::proc::kernel_release();
    let version = parse_release(&release);
    let too_old = |at: (u32, u32)| version.is_some_and(|v| v < at);
    if too_old(MULTISHOT_RECV) {
        return Some(format!(
            "kernel {release} has no multishot receive (IORING_RECV_MULTISHOT, Linux 6.0)"
        ));
    }
    if needs.send_zc && too_old(SEND_ZC_USAGE) {
        return Some(format!(
            "kernel {release} cannot report which IORING_OP_SEND_ZC sends it copied \
             (IORING_SEND_ZC_REPORT_USAGE, Linux 6.2)"
        ));
    }
    match BufRing::new(&ring, 0, 1, 4096) {
        Ok(b) => drop(b),
        Err(e) => {
            return Some(format!(
                "this kernel's io_uring cannot register a provided buffer ring \
                 (IORING_REGISTER_PBUF_RING, Linux 5.19): {}",
                crate::plain_io(&e)
            ))
        }
    }
    None
}

/// Why io_uring_setup failed, in a line that says what to do.
fn refused_setup(e: &io::Error) -> String {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    match (e.raw_os_error(), disabled) {
        (Some(libc::EPERM), Some(n)) if n > 0 => format!(
            "io_uring is disabled on this host (kernel.io_uring_disabled = {n}); \
             sysctl -w kernel.io_uring_disabled=0 allows it"
        ),
        (Some(libc::ENOSYS), _) => "this kernel has no io_uring (CONFIG_IO_URING)".into(),
        _ => format!("io_uring_setup failed: {}", crate::plain_io(e)),
    }
}

/// (major, minor) of a release like `6.12.48+deb13-amd64`.
fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A memory area the kernel may read or write while an operation is in
/// flight: anonymous pages of our own, so that no allocator ever hands them
/// to anything else while the kernel holds their address.
struct Pages {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pages are plain memory owned by this value alone.
unsafe impl Send for Pages {}

impl Pages {
    fn new(len: usize) -> io::Result<Pages> {
        let len = len.max(1).next_multiple_of(4096);
        // SAFETY: an anonymous private mapping at an address of the
        // kernel's choosing touches no existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Pages {
            ptr: ptr.cast(),
            len,
        })
    }

    fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len);
        // SAFETY: within the mapping, which lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    fn slice_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.len);
        // SAFETY: within the mapping; &mut self makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A provided buffer ring: `count` buffers of `size` bytes that the kernel
/// picks from for each multishot receive, handed back as they are read.
struct BufRing {
    entries: Pages,
    bufs: Pages,
    count: u16,
    size: u32,
    group: u16,
    /// Where the next handed-back buffer goes; published to the kernel by
    /// [`BufRing::publish`].
    tail: u16,
}

impl BufRing {
    fn new(ring: &IoUring, group: u16, count: u16, size: u32) -> io::Result<BufRing> {
        assert!(count.is_power_of_two());
        let entries = Pages::new(count as usize * std::mem::size_of::<types::BufRingEntry>())?;
        let bufs = Pages::new(count as usize * size as usize)?;
        // SAFETY: `entries` is page-aligned, holds `count` entries, and
        // stays mapped until after the ring is unregistered (Drop of Ring
        // unregisters before its fields drop).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries.ptr as u64, count, group, 0)?;
        }
        let mut b = BufRing {
            entries,
            bufs,
            count,
            size,
            group,
            tail: 0,
        };
        for bid in 0..count {
            b.hand_back(bid);
        }
        b.publish();
        Ok(b)
    }

    fn hand_back(&mut self, bid: u16) {
        let mask = self.count - 1;
        let at = (self.tail & mask) as usize;
        let addr = self.bufs.ptr as u64 + bid as u64 * self.size as u64;
        let bytes = self
            .entries
            .slice_mut(at * std::mem::size_of::<types::BufRingEntry>(), 16);
        // struct io_uring_buf: addr u64, len u32, bid u16, resv u16 (the
        // last entry's resv is the ring's tail, which this leaves alone).
        bytes[0..8].copy_from_slice(&addr.to_ne_bytes());
        bytes[8..12].copy_from_slice(&self.size.to_ne_bytes());
        bytes[12..14].copy_from_slice(&bid.to_ne_bytes());
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail is the u16 at offset 14 of the first entry,
        // inside the mapping and 2-byte aligned; the kernel reads it.
        let tail = unsafe {
            &*(types::BufRingEntry::tail(self.entries.ptr as *const types::BufRingEntry)
                as *const AtomicU16)
        };
        tail.store(self.tail, Release);
    }

    fn data(&self, bid: u16, len: usize) -> &[u8] {
        self.bufs.slice(
            bid as usize * self.size as usize,
            len.min(self.size as usize),
        )
    }
}

/// The tag of a cancellation's own completion.
pub const CANCEL: u64 = u64::MAX - 1;

/// One completion, as the engine reads it.
#[derive(Debug)]
pub struct Completion {
    /// The tag the operation was submitted with.
    pub tag: u64,
    /// Bytes moved, or a negative errno.
    pub result: i32,
    /// More completions of the same operation follow (a multishot receive
    /// still armed, a zero-copy send whose notification is to come).
    pub more: bool,
    /// A zero-copy send's notification: the kernel is done with its pages.
    pub notification: bool,
    /// For a notification asked with usage reports: the kernel copied the
    /// data after all.
    pub copied: bool,
    /// An accept's new descriptor, until [`Completion::accepted`] takes it.
    fd: Option<std::os::fd::RawFd>,
}

impl Drop for Completion {
    fn drop(&mut self) {
        drop(self.accepted());
    }
}

impl Completion {
    /// A multishot receive ended because every buffer of the ring was
    /// taken: it is to be armed again once buffers are handed back.
    pub fn out_of_buffers(&self) -> bool {
        self.result == -libc::ENOBUFS
    }

    /// The operation was cancelled ([`Ring::cancel_all`]) before it
    /// finished; one that had moved some bytes reports those instead.
    pub fn cancelled(&self) -> bool {
        self.result == -libc::ECANCELED
    }

    /// The connection an accept completed with; the descriptor is closed
    /// with the value returned, or with the completion if nobody takes it.
    pub fn accepted(&mut self) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: the kernel installed this descriptor for this completion
        // alone; taking it leaves None, so it is owned once.
        self.fd
            .take()
            .map(|fd| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }

    /// The error of a failed operation.
    pub fn error(&self) -> Option<io::Error> {
        (self.result < 0).then(|| io::Error::from_raw_os_error(-self.result))
    }
}

/// Where a ring's operations are queued; handed to the engine while it
/// reads completions so that it can answer them in the same batch.
pub struct Queue<'a> {
    sq: squeue::SubmissionQueue<'a>,
    submitter: io_uring::Submitter<'a>,
    send: &'a mut Pages,
    send_len: usize,
    letters: Option<&'a mut Letters>,
    group: Option<u16>,
    discard: Option<&'a Pages>,
    peer: Option<&'a socket2::SockAddr>,
    accepting: &'a mut Vec<u64>,
    in_flight: &'a mut usize,
}

impl Queue<'_> {
    fn push(&mut self, e: squeue::Entry) -> io::Result<()> {
        // SAFETY: every entry built below points only into memory of the
        // Ring (its send region, its buffer ring, its discard region), which
        // outlives every operation (see Ring's Drop).
        while unsafe { self.sq.push(&e) }.is_err() {
            self.sq.sync();
            self.submitter.submit()?;
            self.sq.sync();
        }
        *self.in_flight += 1;
        Ok(())
    }

    /// Sends the first `len` bytes of the send region on `fd`, whole
    /// (MSG_WAITALL); with `zc` as IORING_OP_SEND_ZC with usage reports.
    pub fn send(&mut self, fd: BorrowedFd, len: usize, zc: bool, tag: u64) -> io::Result<()> {
        let len = len.min(self.send_len);
        let fd = types::Fd(fd.as_raw_fd());
        let e = if zc {
            opcode::SendZc::new(fd, self.send.ptr, len as u32)
                .flags(libc::MSG_WAITALL)
                .zc_flags(SEND_ZC_REPORT_USAGE)
                .build()
        } else {
            opcode::Send::new(fd, self.send.ptr, len as u32)
                .flags(libc::MSG_WAITALL)
                .build()
        };
        self.push(e.user_data(tag))
    }

    /// Sends up to `len` bytes of the send region on `fd` with MSG_ZEROCOPY
    /// (the socket has SO_ZEROCOPY), in one call: a send that moves bytes
    /// takes exactly one of the socket's notification numbers, which
    /// MSG_WAITALL's retries would make several.
    pub fn send_msg_zerocopy(&mut self, fd: BorrowedFd, len: usize, tag: u64) -> io::Result<()> {
        let len = len.min(self.send_len);
        let e = opcode::Send::new(types::Fd(fd.as_raw_fd()), self.send.ptr, len as u32)
            .flags(libc::MSG_ZEROCOPY)
            .build();
        self.push(e.user_data(tag))
    }

    /// Completes once `fd`'s error queue holds something (POLLERR): the
    /// notifications of MSG_ZEROCOPY sends, read beside the ring.
    pub fn poll_errors(&mut self, fd: BorrowedFd, tag: u64) -> io::Result<()> {
        let e = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLERR as u32).build();
        self.push(e.user_data(tag))
    }

    /// Completes once `fd` is readable (POLLIN, or its end or error): for
    /// receives the ring has no operation for, made beside it.
    pub fn poll_in(&mut self, fd: BorrowedFd, tag: u64) -> io::Result<()> {
        let e = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLIN as u32).build();
        self.push(e.user_data(tag))
    }

    /// `len` bytes of the send region from `at`, to write a datagram's own
    /// header into before [`Queue::send_datagram`] sends it. Which parts of
    /// the region are in flight is the caller's to track: one written while
    /// a send of it is in flight changes what that send carries.
    pub fn send_region(&mut self, at: usize, len: usize) -> &mut [u8] {
        assert!(at + len <= self.send_len, "past the send region");
        self.send.slice_mut(at, len)
    }

    /// Sends `len` bytes of the send region from `at` on `fd` as one
    /// datagram (a connected UDP socket).
    pub fn send_datagram(
        &mut self,
        fd: BorrowedFd,
        at: usize,
        len: usize,
        tag: u64,
    ) -> io::Result<()> {
        assert!(at + len <= self.send_len, "past the send region");
        let ptr = self.send.slice(at, len).as_ptr();
        let e = opcode::Send::new(types::Fd(fd.as_raw_fd()), ptr, len as u32).build();
        self.push(e.user_data(tag))
    }

    /// Sends `len` bytes of the send region from `at` on a stream socket
    /// `fd`, whole (MSG_WAITALL); `then` links the next operation queued to
    /// it, so that the two go out in order, one after the other.
    pub fn send_part(
        &mut self,
        fd: BorrowedFd,
        at: usize,
        len: usize,
        then: bool,
        tag: u64,
    ) -> io::Result<()> {
        assert!(at + len <= self.send_len, "past the send region");
        let ptr = self.send.slice(at, len).as_ptr();
        let e = opcode::Send::new(types::Fd(fd.as_raw_fd()), ptr, len as u32)
            .flags(libc::MSG_WAITALL)
            .build();
        let e = if then {
            e.flags(squeue::Flags::IO_LINK)
        } else {
            e
        };
        self.push(e.user_data(tag))
    }

    /// Receives one datagram on `fd` into letter `slot` with its sender's
    /// address (IORING_OP_RECVMSG; see [`Ring::set_letters`]).
    pub fn receive_letter(&mut self, fd: BorrowedFd, slot: usize, tag: u64) -> io::Result<()> {
        let letters = self.letters.as_deref_mut().expect("a ring with letters");
        let hdr = letters.arm(slot, None);
        let e = opcode::RecvMsg::new(types::Fd(fd.as_raw_fd()), hdr).build();
        self.push(e.user_data(tag))
    }

    /// Letter `slot`'s data: the datagram [`Queue::receive_letter`] took
    /// in (its completion says how long), and what an answer sends.
    pub fn letter(&mut self, slot: usize) -> &mut [u8] {
        let letters = self.letters.as_deref_mut().expect("a ring with letters");
        let size = letters.size;
        letters.data.slice_mut(slot * size, size)
    }

    /// Sends the first `len` bytes of letter `slot` on `fd` to the address
    /// its datagram came from (IORING_OP_SENDMSG).
    pub fn answer_letter(
        &mut self,
        fd: BorrowedFd,
        slot: usize,
        len: usize,
        tag: u64,
    ) -> io::Result<()> {
        let letters = self.letters.as_deref_mut().expect("a ring with letters");
        let hdr = letters.arm(slot, Some(len));
        let e = opcode::SendMsg::new(types::Fd(fd.as_raw_fd()), hdr).build();
        self.push(e.user_data(tag))
    }

    /// splice(2) of `len` bytes from `from` (at `offset` where given: a
    /// file) into `to`; `then` links the next operation queued to it, which
    /// starts only once this one has completed whole and fails with it.
    pub fn splice(
        &mut self,
        from: BorrowedFd,
        offset: Option<u64>,
        to: BorrowedFd,
        len: usize,
        then: bool,
        tag: u64,
    ) -> io::Result<()> {
        let off = offset.map_or(-1, |o| i64::try_from(o).unwrap_or(i64::MAX));
        let e = opcode::Splice::new(
            types::Fd(from.as_raw_fd()),
            off,
            types::Fd(to.as_raw_fd()),
            -1,
            u32::try_from(len).unwrap_or(u32::MAX),
        )
        .build();
        let e = if then {
            e.flags(squeue::Flags::IO_LINK)
        } else {
            e
        };
        self.push(e.user_data(tag))
    }

    /// One receive on `fd` into a buffer of the ring: for a connection that
    /// is closed once its exchange is done, which a multishot receive still
    /// armed would keep open.
    pub fn receive_once(&mut self, fd: BorrowedFd, tag: u64) -> io::Result<()> {
        let group = self.group.expect("a ring that receives has a buffer ring");
        let e = opcode::Recv::new(types::Fd(fd.as_raw_fd()), std::ptr::null_mut(), 0)
            .buf_group(group)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        self.push(e.user_data(tag))
    }

    /// One receive on `fd` of up to the discard region's length with
    /// MSG_TRUNC: a TCP socket drops the bytes in the kernel and copies
    /// nothing (see [`Ring::set_discard`]).
    pub fn discard(&mut self, fd: BorrowedFd, tag: u64) -> io::Result<()> {
        let region = self
            .discard
            .expect("a ring that discards has a region for it");
        let len = u32::try_from(region.len).unwrap_or(u32::MAX);
        let e = opcode::Recv::new(types::Fd(fd.as_raw_fd()), region.ptr, len)
            .flags(libc::MSG_TRUNC)
            .build();
        self.push(e.user_data(tag))
    }

    /// Connects `fd` to the ring's peer (see [`Ring::set_peer`]).
    pub fn connect(&mut self, fd: BorrowedFd, tag: u64) -> io::Result<()> {
        let peer = self.peer.expect("a ring that connects has a peer");
        let e = opcode::Connect::new(types::Fd(fd.as_raw_fd()), peer.as_ptr().cast(), peer.len())
            .build();
        self.push(e.user_data(tag))
    }

    /// Accepts connections on `listener`, one completion each, until a
    /// completion says no more follow; see [`Completion::accepted`].
    pub fn accept(&mut self, listener: BorrowedFd, tag: u64) -> io::Result<()> {
        let e = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.push(e.user_data(tag))?;
        self.accepting.push(tag);
        Ok(())
    }

    /// Arms a multishot receive on `fd` into the buffer ring.
    pub fn receive(&mut self, fd: BorrowedFd, tag: u64) -> io::Result<()> {
        let group = self.group.expect("a ring that receives has a buffer ring");
        let e = opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), group).build();
        self.push(e.user_data(tag))
    }
}

/// One letter's message header, its one iovec and the peer's address,
/// which the header points at: they stay put in a box of their own.
#[repr(C)]
struct Envelope {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
}

/// Places for datagrams taken in with their sender's address and answered
/// to it: an envelope each, and `size` bytes of data each in `data`.
struct Letters {
    envelopes: Box<[Envelope]>,
    data: Pages,
    size: usize,
}

// SAFETY: the envelopes point only into this value's own allocations.
unsafe impl Send for Letters {}

impl Letters {
    fn new(count: usize, size: usize) -> io::Result<Letters> {
        let data = Pages::new(count * size)?;
        // SAFETY: msghdr, iovec and sockaddr_storage are plain C structs
        // for which all zeroes is a valid value.
        let envelopes = (0..count)
            .map(|_| unsafe { std::mem::zeroed::<Envelope>() })
            .collect();
        Ok(Letters {
            envelopes,
            data,
            size,
        })
    }

    /// Letter `slot`'s header, pointed at its data and address: to receive
    /// into (None: the whole letter, any address) or to answer from (the
    /// first `len` bytes, to the address received).
    fn arm(&mut self, slot: usize, answer: Option<usize>) -> *mut libc::msghdr {
        let base = self
            .data
            .slice_mut(slot * self.size, self.size)
            .as_mut_ptr();
        let e = &mut self.envelopes[slot];
        e.iov.iov_base = base.cast();
        e.iov.iov_len = answer.unwrap_or(self.size).min(self.size);
        e.hdr.msg_iov = &mut e.iov;
        e.hdr.msg_iovlen = 1;
        e.hdr.msg_name = (&mut e.addr as *mut libc::sockaddr_storage).cast();
        if answer.is_none() {
            e.hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
        }
        e.hdr.msg_control = std::ptr::null_mut();
        e.hdr.msg_controllen = 0;
        e.hdr.msg_flags = 0;
        &mut e.hdr
    }
}

/// A ring with its send region and buffer ring.
pub struct Ring {
    // Dropped explicitly before the memory it points into (see Drop).
    ring: std::mem::ManuallyDrop<IoUring>,
    send: Pages,
    send_len: usize,
    bufs: Option<BufRing>,
    /// What discarding receives point at; nothing is written there.
    discard: Option<Pages>,
    /// Datagrams taken in with their sender's address (see
    /// [`Ring::set_letters`]).
    letters: Option<Letters>,
    /// Where connects go, boxed so that its address stays put.
    peer: Option<Box<socket2::SockAddr>>,
    /// Tags of operations whose result is a new descriptor, which a
    /// completion owns.
    accepting: Vec<u64>,
    in_flight: usize,
}

impl Ring {
    /// A ring for `ops` operations in flight at once, sends of up to
    /// `send_len` bytes filled by `fill`, and, when `receive` is given,
    /// (buffers, bytes each) for multishot receives.
    pub fn new(
        ops: u32,
        send_len: usize,
        fill: impl FnOnce(&mut [u8]),
        receive: Option<(u16, u32)>,
    ) -> io::Result<Ring> {
        let entries = ops.clamp(8, 4096).next_power_of_two();
        // One thread submits and reaps: the kernel runs completion work
        // when it waits rather than by interrupting it.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(entries * 4)
            .build(entries)
            .or_else(|_| IoUring::builder().setup_cqsize(entries * 4).build(entries))?;
        let mut send = Pages::new(send_len)?;
        fill(send.slice_mut(0, send_len));
        let bufs = match receive {
            Some((count, size)) => Some(BufRing::new(&ring, 0, count.next_power_of_two(), size)?),
            None => None,
        };
        Ok(Ring {
            ring: std::mem::ManuallyDrop::new(ring),
            send,
            send_len,
            bufs,
            discard: None,
            letters: None,
            peer: None,
            accepting: Vec::new(),
            in_flight: 0,
        })
    }

    /// The queue, for operations outside a completion batch.
    pub fn queue(&mut self) -> Queue<'_> {
        self.split().0
    }

    /// The queue and the completions, borrowed at once.
    fn split(&mut self) -> (Queue<'_>, cqueue::CompletionQueue<'_>, Option<&mut BufRing>) {
        let (submitter, sq, cq) = self.ring.split();
        let q = Queue {
            sq,
            submitter,
            send: &mut self.send,
            send_len: self.send_len,
            letters: self.letters.as_mut(),
            group: self.bufs.as_ref().map(|b| b.group),
            discard: self.discard.as_ref(),
            peer: self.peer.as_deref(),
            accepting: &mut self.accepting,
            in_flight: &mut self.in_flight,
        };
        (q, cq, self.bufs.as_mut())
    }

    /// Watches the eventfd `fd` (a worker's wake-up) for readability: one
    /// completion each time it is written, until one says no more follow.
    pub fn watch(&mut self, fd: BorrowedFd, tag: u64) -> io::Result<()> {
        let e = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(tag);
        self.queue().push(e)
    }

    /// Cancels every operation in flight; each still completes, with
    /// ECANCELED, and a zero-copy send's notification still follows.
    pub fn cancel_all(&mut self) -> io::Result<()> {
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL);
        self.queue().push(e)
    }

    /// Submits what is queued and waits for at least one completion, or
    /// `timeout`: one system call for both.
    pub fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()> {
        self.submit_and_wait_for(1, timeout)
    }

    /// As [`Ring::submit_and_wait`], waiting for `want` completions: those
    /// the caller knows are coming and has nothing to do about, and one
    /// more.
    pub fn submit_and_wait_for(&mut self, want: usize, timeout: Duration) -> io::Result<()> {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(want.max(1), &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Hands each completion waiting, with the data of a receive, to `f`,
    /// which may queue more; a receive's buffer goes back to the ring
    /// after `f` returns.
    pub fn complete(&mut self, mut f: impl FnMut(&mut Queue, Completion, &[u8])) {
        let (mut q, mut cq, mut bufs) = self.split();
        let mut handed_back = false;
        loop {
            cq.sync();
            let Some(cqe) = cq.next() else { break };
            let flags = cqe.flags();
            let notification = cqueue::notif(flags);
            let more = cqueue::more(flags);
            let mut c = Completion {
                tag: cqe.user_data(),
                // A notification's result is its usage bits, not a count.
                result: if notification { 0 } else { cqe.result() },
                more,
                notification,
                copied: notification && (cqe.result() as u32) & NOTIF_USAGE_ZC_COPIED != 0,
                fd: None,
            };
            if let Some(at) = q.accepting.iter().position(|t| *t == c.tag) {
                if c.result >= 0 {
                    c.fd = Some(c.result);
                }
                if !more {
                    q.accepting.swap_remove(at);
                }
            }
            if !more {
                *q.in_flight -= 1;
            }
            match (cqueue::buffer_select(flags), bufs.as_deref_mut()) {
                (Some(bid), Some(b)) => {
                    let len = c.result.max(0) as usize;
                    f(&mut q, c, b.data(bid, len));
                    b.hand_back(bid);
                    handed_back = true;
                }
                _ => f(&mut q, c, &[]),
            }
        }
        if let Some(b) = bufs.filter(|_| handed_back) {
            b.publish();
        }
    }

    /// Gives the ring `count` letters of `size` bytes, for datagrams
    /// received with their sender's address and answered to it
    /// ([`Queue::receive_letter`], [`Queue::answer_letter`]).
    pub fn set_letters(&mut self, count: usize, size: usize) -> io::Result<()> {
        self.letters = Some(Letters::new(count, size)?);
        Ok(())
    }

    /// Gives the ring a region of `len` bytes for discarding receives
    /// ([`Queue::discard`]): the length each takes at most.
    pub fn set_discard(&mut self, len: usize) -> io::Result<()> {
        self.discard = Some(Pages::new(len.max(1))?);
        Ok(())
    }

    /// Where [`Queue::connect`] connects.
    pub fn set_peer(&mut self, peer: std::net::SocketAddr) {
        self.peer = Some(Box::new(peer.into()));
    }

    /// Operations submitted whose last completion has not been read.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Cancel everything and wait for it, so that no operation still
        // points into the send region or the buffers when they are unmapped.
        let _ = self.cancel_all();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while self.in_flight > 0 && std::time::Instant::now() < deadline {
            if self.submit_and_wait(Duration::from_millis(20)).is_err() {
                break;
            }
            self.complete(|_, _, _| {});
        }
        if let Some(b) = &self.bufs {
            let _ = self.ring.submitter().unregister_buf_ring(b.group);
        }
        if self.in_flight > 0 {
            // The kernel may still touch them: leak the pages rather than
            // hand them back to be reused.
            if let Some(b) = self.bufs.take() {
                std::mem::forget(b);
            }
            if let Some(d) = self.discard.take() {
                std::mem::forget(d);
            }
            if let Some(l) = self.letters.take() {
                std::mem::forget(l);
            }
            std::mem::forget(std::mem::replace(
                &mut self.send,
                Pages {
                    ptr: std::ptr::null_mut(),
                    len: 0,
                },
            ));
        }
        // SAFETY: dropped once, here; nothing uses the ring after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.ring) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (a, l.accept().unwrap().0)
    }

    #[test]
    fn releases_parse_to_major_and_minor() {
        assert_eq!(parse_release("6.12.48+deb13-amd64"), Some((6, 12)));
        assert_eq!(parse_release("5.19.0"), Some((5, 19)));
        assert_eq!(parse_release("x"), None);
    }

    #[test]
    fn sends_go_out_whole_and_receives_come_back_in_ring_buffers() {
        if let Some(why) = missing(Needs { send_zc: true }) {
            eprintln!("skipped: {why}");
            assert!(std::env::var_os("CI").is_none(), "{why}");
            return;
        }
        let (a, mut b) = pair();
        let mut ring = Ring::new(16, 10_000, |s| s.fill(7), Some((4, 4096))).unwrap();
        ring.queue().send(a.as_fd(), 10_000, false, 1).unwrap();
        ring.queue().send(a.as_fd(), 3000, true, 2).unwrap();
        let mut got = vec![0u8; 13_000];
        let (mut sent, mut notified) = (0, false);
        while sent < 13_000 || !notified {
            ring.submit_and_wait(Duration::from_millis(100)).unwrap();
            ring.complete(|_, c, _| {
                assert!(c.result >= 0, "{c:?}");
                if c.notification {
                    // Loopback copies at delivery, and says so.
                    assert!(c.copied, "{c:?}");
                    notified = true;
                } else {
                    sent += c.result;
                }
            });
        }
        b.read_exact(&mut got).unwrap();
        assert!(got.iter().all(|&x| x == 7));
        assert_eq!(ring.in_flight(), 0);

        // Into the ring: four buffers of 4 KiB, so 20 000 bytes need them
        // handed back as they are read.
        let (c, mut d) = pair();
        ring.queue().receive(c.as_fd(), 9).unwrap();
        d.write_all(&[5u8; 20_000]).unwrap();
        let mut received = 0;
        let mut rearms = 0;
        while received < 20_000 {
            ring.submit_and_wait(Duration::from_millis(100)).unwrap();
            ring.complete(|q, c2, data| {
                if c2.result == -libc::ENOBUFS {
                    rearms += 1;
                } else {
                    assert!(c2.result > 0, "{c2:?}");
                    assert!(data.iter().all(|&x| x == 5));
                    received += data.len();
                }
                if !c2.more {
                    q.receive(c.as_fd(), 9).unwrap();
                }
            });
        }
        assert_eq!(received, 20_000, "re-armed {rearms} times");
        drop(ring);
    }

    #[test]
    fn datagrams_go_out_from_their_slots_and_letters_are_answered_where_they_came_from() {
        if let Some(why) = missing(Needs { send_zc: false }) {
            eprintln!("skipped: {why}");
            assert!(std::env::var_os("CI").is_none(), "{why}");
            return;
        }
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let mut ring = Ring::new(16, 200, |s| s.fill(0), None).unwrap();
        ring.set_letters(2, 1000).unwrap();
        // Two datagrams from two slots of the send region, each with its
        // own first byte.
        for (slot, byte) in [(0usize, 1u8), (1, 2)] {
            let mut q = ring.queue();
            q.send_region(slot * 100, 100).fill(byte);
            q.send_datagram(client.as_fd(), slot * 100, 100, slot as u64)
                .unwrap();
        }
        ring.queue().receive_letter(server.as_fd(), 1, 10).unwrap();
        let mut answered = 0;
        while answered < 1 {
            ring.submit_and_wait(Duration::from_millis(100)).unwrap();
            ring.complete(|q, c, _| {
                assert!(c.result >= 0, "{c:?}");
                if c.tag == 10 {
                    // The first datagram, whole, into letter 1; answered
                    // with its first 40 bytes, marked.
                    assert_eq!(c.result, 100);
                    assert!(q.letter(1)[..100].iter().all(|&x| x == 1));
                    q.letter(1)[0] = 9;
                    q.answer_letter(server.as_fd(), 1, 40, 11).unwrap();
                } else if c.tag == 11 {
                    assert_eq!(c.result, 40);
                    answered += 1;
                }
            });
        }
        let mut b = [0u8; 1000];
        let got = client.recv(&mut b).unwrap();
        assert_eq!((got, b[0], b[1]), (40, 9, 1));
        let mut b = [0u8; 1000];
        assert_eq!(server.recv(&mut b).unwrap(), 100);
        assert!(b[..100].iter().all(|&x| x == 2));
        drop(ring);
    }
}
