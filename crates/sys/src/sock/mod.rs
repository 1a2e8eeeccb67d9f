//! Socket options and queue ioctls that std does not offer, each read back
//! the way the kernel actually answers (lengths vary across kernel versions).

mod raw;
pub mod rxzc;
mod tcp_info;
#[cfg(test)]
mod tests;
pub mod zerocopy;

pub use tcp_info::{tcp_info, tcp_state};

use socket2::SockRef;
use std::io;
use std::os::fd::AsFd;

// asm-generic/socket.h; sparc numbers its SO_* options on its own.
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_MAX_PACING_RATE: libc::c_int = 47;
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_MAX_PACING_RATE: libc::c_int = 0x31;

// TCP_CA_NAME_MAX in include/net/tcp.h, terminating NUL included.
const TCP_CA_NAME_MAX: usize = 16;

/// Caps the pacing rate of the socket (used by the fq qdisc and TCP's own
/// pacing); `u64::MAX` removes the cap.
pub fn set_max_pacing_rate(fd: impl AsFd, bytes_per_sec: u64) -> io::Result<()> {
    // The kernel reads an unsigned long when the option is that long; on
    // 32-bit targets that is 4 bytes, where a larger rate saturates to
    // "unlimited" instead of being cut to its low 32 bits.
    let value = libc::c_ulong::try_from(bytes_per_sec).unwrap_or(libc::c_ulong::MAX);
    raw::setsockopt(
        fd.as_fd(),
        libc::SOL_SOCKET,
        SO_MAX_PACING_RATE,
        &value.to_ne_bytes(),
    )
}

/// IP_BIND_ADDRESS_NO_PORT: a bind() to port 0 then fixes only the source
/// address, and the port is chosen at connect() time, where one local port
/// may serve several connections to different peers. Without it every bind
/// searches the port range for a port no other socket holds.
pub fn set_bind_address_no_port(fd: impl AsFd) -> io::Result<()> {
    raw::setsockopt(
        fd.as_fd(),
        libc::IPPROTO_IP,
        libc::IP_BIND_ADDRESS_NO_PORT,
        &1i32.to_ne_bytes(),
    )
}

/// The pacing cap in bytes per second; `u64::MAX` when there is none.
pub fn max_pacing_rate(fd: impl AsFd) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    let len = raw::getsockopt(fd.as_fd(), libc::SOL_SOCKET, SO_MAX_PACING_RATE, &mut buf)?;
    decode_pacing_rate(&buf, len)
}

fn decode_pacing_rate(buf: &[u8; 8], len: usize) -> io::Result<u64> {
    match len {
        8 => Ok(u64::from_ne_bytes(*buf)),
        // Kernels before 4.20 (and 32-bit ones) answer with a u32 in which
        // ~0U means unlimited.
        4 => {
            let v = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            Ok(if v == u32::MAX { u64::MAX } else { v.into() })
        }
        n => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("SO_MAX_PACING_RATE returned {n} bytes"),
        )),
    }
}

/// Selects the congestion control algorithm, e.g. "cubic", "bbr", "reno".
pub fn set_congestion(fd: impl AsFd, name: &str) -> io::Result<()> {
    // The kernel silently truncates longer names, which could select a
    // different algorithm than the one asked for.
    if name.is_empty() || name.len() >= TCP_CA_NAME_MAX || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{name}' is not a valid congestion control name"),
        ));
    }
    SockRef::from(&fd).set_tcp_congestion(name.as_bytes())
}

pub fn congestion(fd: impl AsFd) -> io::Result<String> {
    let name = SockRef::from(&fd).tcp_congestion()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

pub fn set_cork(fd: impl AsFd, on: bool) -> io::Result<()> {
    Ok(rustix::net::sockopt::set_tcp_cork(fd, on)?)
}

pub fn cork(fd: impl AsFd) -> io::Result<bool> {
    Ok(rustix::net::sockopt::tcp_cork(fd)?)
}

/// TCP_MAXSEG: before connect it caps the MSS the socket will announce and
/// use; after, it reads the MSS in use.
pub fn set_maxseg(fd: impl AsFd, mss: u32) -> io::Result<()> {
    SockRef::from(&fd).set_tcp_mss(mss)
}

pub fn maxseg(fd: impl AsFd) -> io::Result<u32> {
    SockRef::from(&fd).tcp_mss()
}

/// setsockopt of an option that takes one C int (the options of
/// `plumb_spec::sockopt`, declared there with their level and name).
pub fn set_int_option(fd: impl AsFd, level: i32, name: i32, value: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
    raw::setsockopt(fd.as_fd(), level, name, &value.to_ne_bytes())
}

/// getsockopt of an option that holds one C int, as the kernel's unsigned
/// value: TCP_NOTSENT_LOWAT's "no limit" reads back as `u32::MAX`.
pub fn int_option(fd: impl AsFd, level: i32, name: i32) -> io::Result<u32> {
    let mut buf = [0u8; 4];
    raw::getsockopt(fd.as_fd(), level, name, &mut buf)?;
    Ok(u32::from_ne_bytes(buf))
}

/// Bytes in the send queue not yet acknowledged by the peer (sent or not).
pub fn outq(fd: impl AsFd) -> io::Result<u32> {
    raw::siocoutq(fd.as_fd()).map(saturate_u32)
}

/// Bytes received and not yet read.
pub fn inq(fd: impl AsFd) -> io::Result<u32> {
    Ok(saturate_u32(rustix::io::ioctl_fionread(fd)?))
}

fn saturate_u32<T: TryInto<u32>>(v: T) -> u32 {
    v.try_into().unwrap_or(u32::MAX)
}

/// The algorithms the kernel has loaded, space-separated; empty when the
/// file cannot be read.
pub fn available_congestion_controls() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
