//! What plumb's rtnetlink requests share: the socket, the header, and the
//! reading of a reply's attributes.

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{
    sendto, socket_with, sockopt, AddressFamily, SendFlags, SocketFlags, SocketType,
};
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

// The kernel's netlink constants as libc spells them; the message types
// and flags are u16 on the wire whatever C type libc gives them.
pub(crate) const NLMSG_HDR: usize = std::mem::size_of::<libc::nlmsghdr>();
pub(crate) const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;
pub(crate) const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;
pub(crate) const NLM_F_REQUEST: u16 = libc::NLM_F_REQUEST as u16;
pub(crate) const NLM_F_DUMP: u16 = libc::NLM_F_DUMP as u16;

/// A NETLINK_ROUTE socket of the calling thread's network namespace that
/// has sent `request` to the kernel; a reply that takes over a second is
/// an error.
pub(crate) fn ask(request: &[u8]) -> io::Result<OwnedFd> {
    let fd = socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None, // NETLINK_ROUTE
    )?;
    sockopt::set_socket_timeout(&fd, sockopt::Timeout::Recv, Some(Duration::from_secs(1)))?;
    sendto(
        &fd,
        request,
        SendFlags::empty(),
        &SocketAddrNetlink::new(0, 0),
    )?;
    Ok(fd)
}

/// A request of message type `kind` with `flags`, its body (the family's
/// header and any attributes) after the netlink header.
pub(crate) fn request(kind: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let total = NLMSG_HDR + body.len();
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    m.extend_from_slice(body);
    m
}

pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The attributes in `b`, as (type without the nested and byte-order
/// flags, payload); a malformed one ends the list.
pub(crate) fn attributes(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = u16_at(b, at)? as usize;
        let kind = u16_at(b, at + 2)? & 0x3fff;
        if len < 4 || at + len > b.len() {
            return None;
        }
        let payload = &b[at + 4..at + len];
        at += align4(len);
        Some((kind, payload))
    })
}

/// The messages in one datagram of replies, as (type, the message with
/// its header); a malformed one ends the list.
pub(crate) fn messages(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = u32_at(b, at)? as usize;
        let kind = u16_at(b, at + 4)?;
        if len < NLMSG_HDR || at + len > b.len() {
            return None;
        }
        let msg = &b[at..at + len];
        at += align4(len);
        Some((kind, msg))
    })
}

/// The error an NLMSG_ERROR message carries (none for an acknowledgement).
pub(crate) fn error_of(msg: &[u8]) -> Option<io::Error> {
    let errno = u32_at(msg, NLMSG_HDR)? as i32;
    // The kernel sends a negative errno; a malformed reply may send any.
    (errno != 0).then(|| io::Error::from_raw_os_error(errno.saturating_neg()))
}
