//! The few raw calls neither rustix nor socket2 wrap, behind safe functions
//! over borrowed descriptors and byte slices.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// getsockopt into `buf`; returns how many bytes the kernel wrote.
pub(super) fn getsockopt(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut len = libc::socklen_t::try_from(buf.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the pointer and length describe `buf`, which is live and
    // exclusively borrowed for the call; the kernel writes at most `len`
    // bytes there and stores the count in `len`, a valid local. `fd` is
    // borrowed, so it stays open throughout.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // Never trust a length beyond the buffer, whatever the kernel says.
    Ok((len as usize).min(buf.len()))
}

/// setsockopt with a value that is plain bytes (no pointers inside).
pub(super) fn setsockopt(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &[u8],
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(value.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the pointer and length describe `value`, live for the call;
    // the kernel only reads from it. `fd` is borrowed, so it stays open.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, value.as_ptr().cast(), len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SIOCOUTQ: bytes in the send queue not yet acknowledged.
pub(super) fn siocoutq(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (defined as TIOCOUTQ in linux/sockios.h) writes one
    // int through its argument, which points at a live local of that type;
    // `fd` is borrowed, so it stays open. On a non-socket the kernel fails
    // with ENOTTY instead of writing.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TIOCOUTQ,
            &mut value as *mut libc::c_int,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}
