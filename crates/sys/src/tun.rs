//! TUN devices for plumb's own delay line: a layer-3 device whose packets
//! the process reads and writes itself, each behind a virtio-net header
//! (IFF_VNET_HDR) so that offloaded packets (GSO, partial checksums) pass
//! whole and unchanged from one device to another.
//!
//! A device is created in the network namespace of the calling thread and
//! lives as long as its descriptor: when the process ends, however it ends,
//! the kernel removes it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

// linux/if_tun.h
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;

/// The size of `struct virtio_net_hdr` before every packet (the kernel's
/// default for IFF_VNET_HDR).
pub const VNET_HDR_LEN: usize = 10;
/// The largest packet a read returns: an IP packet of 64 KiB behind its
/// header.
pub const MAX_PACKET: usize = VNET_HDR_LEN + 65_535;

/// What the device may hand over unfinished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// Packets of the path's MTU with their checksums done: one packet is
    /// one segment on the wire, as loss must count them.
    None,
    /// Partial checksums and TCP segments up to 64 KiB (GSO), segmented
    /// by whoever finally needs them: the fast path.
    Segments,
}

/// `struct ifreq` with `ifr_flags`, the member TUNSETIFF reads.
#[repr(C)]
struct IfreqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _rest: [u8; 22],
}

/// One TUN device and the descriptor that keeps it.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Creates TUN device `name` in this thread's network namespace, its
    /// descriptor non-blocking.
    pub fn create(name: &str, offload: Offload) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['\0', '/']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{name}' is not an interface name"),
            ));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| io::Error::new(e.kind(), format!("/dev/net/tun: {e}")))?;
        let fd = OwnedFd::from(file);
        let mut req = IfreqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: IFF_TUN | IFF_NO_PI | IFF_VNET_HDR,
            _rest: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads a `struct ifreq` (40 bytes, which
        // IfreqFlags is, laid out as the kernel's with the name first and
        // the flags at the union's start) through its argument, a live
        // local; the kernel may write the chosen name back into it. `fd`
        // is open for the call.
        let rc =
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfreqFlags) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e}")));
        }
        let flags: libc::c_uint = match offload {
            Offload::None => 0,
            Offload::Segments => TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6,
        };
        // SAFETY: TUNSETOFFLOAD takes its argument by value, an unsigned
        // int of flags, and reads no memory. `fd` is open for the call.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, flags as libc::c_ulong) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("TUNSETOFFLOAD {name}: {e}"),
            ));
        }
        Ok(Tun {
            fd,
            name: name.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads one packet, its virtio-net header first, into `buf` (at least
    /// [`MAX_PACKET`] long); `WouldBlock` when none is waiting.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        rustix::io::read(&self.fd, buf).map_err(io::Error::from)
    }

    /// Writes one packet as [`read`](Tun::read) gave it: the kernel takes it
    /// as received on this device.
    pub fn write(&self, packet: &[u8]) -> io::Result<usize> {
        rustix::io::write(&self.fd, packet).map_err(io::Error::from)
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_name_is_refused_before_the_kernel_sees_it() {
        for name in ["", "a/b", "a-name-far-too-long"] {
            let e = Tun::create(name, Offload::None).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{name}: {e}");
        }
    }
}
