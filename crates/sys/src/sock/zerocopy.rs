//! The calls of the zero-copy data paths: MSG_ZEROCOPY sends and their
//! completion notifications from the socket's error queue, receives that
//! discard (MSG_TRUNC), sendfile and splice from an in-memory file, and
//! the pipes splice goes through.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

// asm-generic/socket.h (sparc has its own numbering, as with pacing).
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_ZEROCOPY: libc::c_int = 60;
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_ZEROCOPY: libc::c_int = 0x003e;

/// linux/errqueue.h; libc does not carry these two.
pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// Bytes of struct sock_extended_err: errno u32, origin, type, code, pad
/// (u8 each), info u32, data u32.
const EE_LEN: usize = 16;

/// Allows MSG_ZEROCOPY sends on the socket.
pub fn set_zerocopy(fd: impl AsFd) -> io::Result<()> {
    super::raw::setsockopt(
        fd.as_fd(),
        libc::SOL_SOCKET,
        SO_ZEROCOPY,
        &1i32.to_ne_bytes(),
    )
}

/// One message of the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrQueueEntry {
    /// The MSG_ZEROCOPY sends numbered `lo..=hi` (the socket counts its
    /// successful zero-copy sends from 0, wrapping at 2^32) are done with
    /// their user pages. `copied`: the kernel copied the data after all (as
    /// on loopback and veth, or a device without scatter-gather).
    ZeroCopy { lo: u32, hi: u32, copied: bool },
    /// Anything else (an ICMP error, a timestamp): origin and errno.
    Other { origin: u8, errno: u32 },
}

impl ErrQueueEntry {
    /// Sends this notification covers.
    pub fn sends(&self) -> u64 {
        match *self {
            ErrQueueEntry::ZeroCopy { lo, hi, .. } => u64::from(hi.wrapping_sub(lo)) + 1,
            ErrQueueEntry::Other { .. } => 0,
        }
    }
}

/// Sends `buf` with MSG_ZEROCOPY, never blocking. The kernel pins the pages
/// of `buf`: the caller must not change them before the completion of this
/// send has been read.
pub fn send_zerocopy(fd: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd.as_fd(), buf, libc::MSG_ZEROCOPY | libc::MSG_DONTWAIT)
}

fn send_flags(fd: BorrowedFd<'_>, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, live for the call; the
    // kernel only reads from it (a zero-copy send keeps referencing the
    // pages afterwards, which is the caller's documented contract, not a
    // memory-safety matter: the pages stay mapped while `buf` lives, and
    // the kernel holds its own reference on them). `fd` is borrowed.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            flags | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Reads one message of the socket's error queue, never blocking; None when
/// the queue is empty.
pub fn read_errqueue(fd: impl AsFd) -> io::Result<Option<ErrQueueEntry>> {
    // Room for one cmsghdr with a sock_extended_err and the offender's
    // sockaddr_in6 behind it, aligned as the kernel writes it.
    let mut control = Control([0u8; 128]);
    let mut msg: libc::msghdr = msghdr_zeroed();
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: `msg` points at no data buffers (iovlen 0) and at `control`,
    // live and exclusively borrowed, whose size is msg_controllen; the
    // kernel writes at most that many bytes there and updates `msg`, a
    // valid local. `fd` is borrowed, so it stays open.
    let n = unsafe {
        libc::recvmsg(
            fd.as_fd().as_raw_fd(),
            &mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    // socklen_t-sized on musl, size_t on glibc.
    #[allow(clippy::unnecessary_cast)]
    let len = (msg.msg_controllen as usize).min(control.0.len());
    Ok(parse_errqueue_cmsgs(&control.0[..len]))
}

/// A control buffer aligned as cmsghdrs must be.
#[repr(C, align(8))]
struct Control([u8; 128]);

fn msghdr_zeroed() -> libc::msghdr {
    // SAFETY: msghdr is plain C data (integers and raw pointers) for which
    // all-zero bytes are a valid value: null pointers, zero lengths.
    unsafe { std::mem::zeroed() }
}

/// The error-queue entry in a control buffer as recvmsg(MSG_ERRQUEUE) fills
/// it: cmsghdrs (len: usize, level: i32, type: i32, then data, each padded
/// to the alignment of usize), one of which is IP_RECVERR or IPV6_RECVERR
/// with a sock_extended_err. None when no such message is there.
pub fn parse_errqueue_cmsgs(control: &[u8]) -> Option<ErrQueueEntry> {
    let word = std::mem::size_of::<usize>();
    let hdr = word + 8;
    let align = |n: usize| n.div_ceil(word) * word;
    let mut at = 0usize;
    while at + hdr <= control.len() {
        let mut lenb = [0u8; 8];
        lenb[..word].copy_from_slice(&control[at..at + word]);
        let clen = usize::try_from(u64::from_ne_bytes(lenb)).ok()?;
        let level = i32::from_ne_bytes(control[at + word..at + word + 4].try_into().ok()?);
        let ty = i32::from_ne_bytes(control[at + word + 4..at + hdr].try_into().ok()?);
        if clen < hdr || at + clen > control.len() {
            return None;
        }
        let data = &control[at + align(hdr)..at + clen];
        let is_recverr = (level == libc::SOL_IP && ty == libc::IP_RECVERR)
            || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR);
        if is_recverr && data.len() >= EE_LEN {
            let u32_at =
                |i: usize| u32::from_ne_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
            let errno = u32_at(0);
            let origin = data[4];
            let code = data[6];
            let info = u32_at(8);
            let edata = u32_at(12);
            return Some(if origin == SO_EE_ORIGIN_ZEROCOPY && errno == 0 {
                ErrQueueEntry::ZeroCopy {
                    lo: info,
                    hi: edata,
                    copied: code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                }
            } else {
                ErrQueueEntry::Other { origin, errno }
            });
        }
        at += align(clen);
    }
    None
}

/// Receives up to `buf.len()` bytes and drops them in the kernel
/// (MSG_TRUNC on TCP): nothing is copied into `buf`. Never blocks. Returns
/// how many bytes were consumed; 0 at end of stream.
pub fn recv_discard(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, live and exclusively
    // borrowed; with MSG_TRUNC a TCP socket writes nothing to it, and any
    // other socket writes at most `len` bytes. `fd` is borrowed.
    let n = unsafe {
        libc::recv(
            fd.as_fd().as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A pipe, both ends non-blocking and close-on-exec: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    pipe_with(libc::O_NONBLOCK)
}

/// A pipe whose ends block, close-on-exec: for splices queued on a ring,
/// which wait in the kernel rather than fail with EAGAIN.
pub fn blocking_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    pipe_with(0)
}

fn pipe_with(flags: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the two-int array, a live
    // local.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created by pipe2 and are owned by
    // nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets a pipe's capacity (F_SETPIPE_SZ); returns the capacity granted,
/// which the kernel rounds up to a power-of-two number of pages.
pub fn set_pipe_size(fd: impl AsFd, bytes: usize) -> io::Result<usize> {
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: F_SETPIPE_SZ takes an int argument by value; `fd` is borrowed.
    let rc = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// splice(2) of up to `len` bytes, never blocking on the pipe: from `from`
/// at `*from_offset` (advanced by the kernel) when given, else at its
/// position, into `to`.
pub fn splice(
    from: impl AsFd,
    from_offset: Option<&mut u64>,
    to: impl AsFd,
    len: usize,
) -> io::Result<usize> {
    let mut off: libc::loff_t = 0;
    let offp = match &from_offset {
        Some(o) => {
            off = libc::loff_t::try_from(**o)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            &mut off as *mut libc::loff_t
        }
        None => std::ptr::null_mut(),
    };
    // SAFETY: `offp` is null or points at `off`, a live local the kernel
    // reads and updates; no other pointers are passed. Both descriptors
    // are borrowed, so they stay open.
    let n = unsafe {
        libc::splice(
            from.as_fd().as_raw_fd(),
            offp,
            to.as_fd().as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if let Some(o) = from_offset {
        *o = off as u64;
    }
    Ok(n as usize)
}

/// /proc/sys/net/core/optmem_max of this network namespace: the socket
/// option memory that bounds how many zero-copy sends may be outstanding.
pub fn optmem_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/net/core/optmem_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    fn cmsg(level: i32, ty: i32, data: &[u8]) -> Vec<u8> {
        let word = std::mem::size_of::<usize>();
        let hdr = word + 8;
        let len = hdr + data.len();
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_ne_bytes());
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(data);
        while v.len() % word != 0 {
            v.push(0);
        }
        v
    }

    fn ee(errno: u32, origin: u8, code: u8, info: u32, data: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&errno.to_ne_bytes());
        v.extend_from_slice(&[origin, 0, code, 0]);
        v.extend_from_slice(&info.to_ne_bytes());
        v.extend_from_slice(&data.to_ne_bytes());
        v
    }

    #[test]
    fn parses_zerocopy_ranges_and_skips_other_cmsgs() {
        let mut buf = cmsg(libc::SOL_SOCKET, 29, &[1, 2, 3, 4, 5, 6, 7, 8]);
        buf.extend(cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee(0, 5, 1, 7, 9)));
        let e = parse_errqueue_cmsgs(&buf).unwrap();
        assert_eq!(
            e,
            ErrQueueEntry::ZeroCopy {
                lo: 7,
                hi: 9,
                copied: true
            }
        );
        assert_eq!(e.sends(), 3);
        let v6 = cmsg(
            libc::SOL_IPV6,
            libc::IPV6_RECVERR,
            &ee(0, 5, 0, u32::MAX, 1),
        );
        let e = parse_errqueue_cmsgs(&v6).unwrap();
        assert_eq!(e.sends(), 3, "a range that wraps at 2^32");
        assert!(matches!(e, ErrQueueEntry::ZeroCopy { copied: false, .. }));
        let icmp = cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee(111, 2, 3, 0, 0));
        assert_eq!(
            parse_errqueue_cmsgs(&icmp),
            Some(ErrQueueEntry::Other {
                origin: 2,
                errno: 111
            })
        );
        // Truncated or lying lengths are refused, never read past.
        assert_eq!(parse_errqueue_cmsgs(&buf[..buf.len() - 3]), None);
        let mut lying = cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee(0, 5, 0, 0, 0));
        lying[0] = 0xff;
        assert_eq!(parse_errqueue_cmsgs(&lying), None);
        assert_eq!(parse_errqueue_cmsgs(&[]), None);
    }

    #[test]
    fn zerocopy_sends_complete_as_copied_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        set_zerocopy(&tx).unwrap();
        let buf = vec![7u8; 64 * 1024];
        let mut sends = 0u64;
        for _ in 0..4 {
            let n = send_zerocopy(&tx, &buf).unwrap();
            assert!(n > 0);
            sends += 1;
            let mut sink = vec![0u8; n];
            rx.read_exact(&mut sink).unwrap();
        }
        let (mut done, mut copied) = (0u64, 0u64);
        let deadline = Instant::now() + Duration::from_secs(5);
        while done < sends && Instant::now() < deadline {
            match read_errqueue(&tx).unwrap() {
                Some(e @ ErrQueueEntry::ZeroCopy { copied: c, .. }) => {
                    done += e.sends();
                    if c {
                        copied += e.sends();
                    }
                }
                Some(other) => panic!("unexpected {other:?}"),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        assert_eq!(done, sends);
        assert_eq!(copied, sends, "loopback copies every zero-copy send");
        assert_eq!(read_errqueue(&tx).unwrap(), None);
    }

    #[test]
    fn discard_receive_and_splice_move_bytes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        let (pr, pw) = pipe().unwrap();
        assert!(set_pipe_size(&pw, 128 * 1024).unwrap() >= 128 * 1024);
        let mut f = tempfile_in_shm();
        std::io::Write::write_all(&mut f, &[3u8; 10_000]).unwrap();
        let mut off = 0u64;
        let n = splice(&f, Some(&mut off), &pw, 10_000).unwrap();
        assert_eq!((n, off), (10_000, 10_000));
        let m = splice(&pr, None, &tx, n).unwrap();
        assert_eq!(m, 10_000);
        let mut got = 0;
        let mut buf = vec![0u8; 4096];
        let deadline = Instant::now() + Duration::from_secs(5);
        while got < 10_000 && Instant::now() < deadline {
            match recv_discard(&rx, &mut buf) {
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, 10_000);
        assert!(buf.iter().all(|&b| b == 0), "MSG_TRUNC copied nothing");
    }

    fn tempfile_in_shm() -> std::fs::File {
        let p = std::env::temp_dir().join(format!("plumb-sys-splice-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        let _ = std::fs::remove_file(&p);
        f
    }

    #[test]
    fn optmem_max_reads() {
        assert!(optmem_max().unwrap() > 0);
    }
}
