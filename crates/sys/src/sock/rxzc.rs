//! TCP_ZEROCOPY_RECEIVE: received payload pages mapped into a region of the
//! socket's own mmap() instead of copied, and the facts that decide whether
//! a path can deliver such pages at all.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};

/// struct tcp_zerocopy_receive of linux/tcp.h (the 64-byte version of 5.11
/// and later; older kernels read the leading fields they know).
#[repr(C)]
#[derive(Default)]
struct TcpZerocopyReceive {
    address: u64,
    length: u32,
    recv_skip_hint: u32,
    inq: u32,
    err: i32,
    copybuf_address: u64,
    copybuf_len: i32,
    flags: u32,
    msg_control: u64,
    msg_controllen: u64,
    msg_flags: u32,
    reserved: u32,
}

/// A read-only mapping of a TCP socket that TCP_ZEROCOPY_RECEIVE fills
/// with received pages. Its memory is never read through a Rust reference:
/// plumb only counts the bytes, as a receiver that discards them.
pub struct ReceiveMap {
    addr: *mut libc::c_void,
    len: usize,
}

impl ReceiveMap {
    /// Maps `len` bytes (rounded up to whole pages) of the socket.
    pub fn new(fd: impl AsFd, len: usize) -> io::Result<ReceiveMap> {
        let page = rustix::param::page_size();
        let len = len.max(page).div_ceil(page) * page;
        // SAFETY: a fresh shared read-only mapping of the socket at an
        // address the kernel chooses; nothing else refers to it. The
        // result is checked for MAP_FAILED.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_fd().as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(ReceiveMap { addr, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maps what the socket has received into the region (replacing what
    /// the previous call mapped). Returns (bytes mapped, bytes that cannot
    /// be mapped and must be read with an ordinary receive first).
    pub fn receive(&mut self, fd: impl AsFd) -> io::Result<(usize, usize)> {
        let mut zc = TcpZerocopyReceive {
            address: self.addr as u64,
            length: u32::try_from(self.len).unwrap_or(u32::MAX),
            ..Default::default()
        };
        let mut optlen = std::mem::size_of::<TcpZerocopyReceive>() as libc::socklen_t;
        // SAFETY: `zc` is a live local of the size passed; the kernel reads
        // and writes it within that size, and maps pages only into the
        // region named in it, which this value owns and nothing reads.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_fd().as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_ZEROCOPY_RECEIVE,
                (&mut zc as *mut TcpZerocopyReceive).cast(),
                &mut optlen,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // EIO: nothing to map and the peer has closed; an ordinary
            // read then reports the end of the stream.
            if e.raw_os_error() == Some(libc::EIO) {
                return Ok((0, 0));
            }
            return Err(e);
        }
        if zc.err != 0 {
            return Err(io::Error::from_raw_os_error(zc.err.abs()));
        }
        Ok((zc.length as usize, zc.recv_skip_hint as usize))
    }
}

impl Drop for ReceiveMap {
    fn drop(&mut self) {
        // SAFETY: the region was mapped by `new` with this length and is
        // unmapped once, here.
        unsafe {
            libc::munmap(self.addr, self.len);
        }
    }
}

/// The interface that holds `ip` on this host (in this namespace).
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs stores a list it allocated in `head`, a live
    // local; it is freed below with freeifaddrs and not used after.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, which
        // stays valid until freeifaddrs; ifa_addr is null or points at a
        // sockaddr whose family says its real type; ifa_name is a C string.
        unsafe {
            let ifa = &*p;
            let addr = ifa.ifa_addr;
            if !addr.is_null() {
                let got = match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let a = &*(addr as *const libc::sockaddr_in);
                        Some(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()))
                    }
                    libc::AF_INET6 => {
                        let a = &*(addr as *const libc::sockaddr_in6);
                        Some(IpAddr::from(a.sin6_addr.s6_addr))
                    }
                    _ => None,
                };
                if got == Some(ip) {
                    found = Some(
                        std::ffi::CStr::from_ptr(ifa.ifa_name)
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
            p = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found
}

/// Why TCP_ZEROCOPY_RECEIVE cannot map anything on a flow whose local
/// address is `local`; None where the interface is a device that may
/// split headers from page-sized payloads.
pub fn rx_zerocopy_obstacle(local: IpAddr) -> Option<String> {
    if local.is_loopback() {
        return Some("loopback".to_string());
    }
    let dev = interface_of(local)?;
    // Virtual devices (lo, veth, bridges, tunnels) have no `device` link:
    // their payloads sit in compound page fragments, never in the whole,
    // unshared pages TCP_ZEROCOPY_RECEIVE can map.
    let physical = std::path::Path::new("/sys/class/net")
        .join(&dev)
        .join("device")
        .exists();
    (!physical).then(|| {
        let kind = std::fs::read_link(format!("/sys/class/net/{dev}"))
            .map(|p| p.to_string_lossy().contains("/virtual/"))
            .unwrap_or(false);
        format!("{dev}{}", if kind { ", a virtual device" } else { "" })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn loopback_maps_nothing_and_hints_to_copy() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        tx.write_all(&[5u8; 100_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut map = ReceiveMap::new(&rx, 256 * 1024).unwrap();
        assert_eq!(map.len() % rustix::param::page_size(), 0);
        let (mapped, skip) = map.receive(&rx).unwrap();
        // Loopback payloads live in compound pages: nothing is mapped and
        // the kernel says how much to read the ordinary way.
        assert_eq!(mapped, 0);
        assert!(skip > 0, "no skip hint");
    }

    #[test]
    fn obstacles_name_loopback_and_virtual_devices() {
        assert_eq!(
            rx_zerocopy_obstacle("127.0.0.1".parse().unwrap()).as_deref(),
            Some("loopback")
        );
        assert_eq!(
            interface_of("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(interface_of("192.0.2.77".parse().unwrap()), None);
    }
}
