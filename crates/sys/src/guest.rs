//! What plumb needs as the init of a guest kernel, where no other program
//! is there to do it: mount the kernel's file systems, load modules, bring
//! loopback up, make a serial port carry bytes as they are, and power off.

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;

fn c(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Mounts a file system of the kernel's (`proc`, `sysfs`, `devtmpfs`,
/// `tracefs`) at `target`, creating the directory.
pub fn mount(kind: &str, target: &str) -> io::Result<()> {
    std::fs::create_dir_all(target)?;
    let (source, fstype, at) = (c(kind)?, c(kind)?, c(target)?);
    // SAFETY: NUL-terminated strings alive for the call; no data.
    let r = unsafe {
        libc::mount(
            source.as_ptr(),
            at.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Loads an uncompressed module image with no parameters. A module the
/// kernel already has (EEXIST) is loaded.
pub fn load_module(image: &[u8]) -> io::Result<()> {
    let params = c("")?;
    // SAFETY: the image and the parameter string outlive the call; the
    // kernel copies both.
    let r = unsafe {
        libc::syscall(
            libc::SYS_init_module,
            image.as_ptr(),
            image.len() as libc::c_ulong,
            params.as_ptr(),
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EEXIST) {
        return Ok(());
    }
    Err(e)
}

/// Sets IFF_UP on interface `name`.
pub fn link_up(name: &str) -> io::Result<()> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    // SAFETY: ifreq is plain old data; zero is a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: a valid socket and an ifreq that lives across both calls.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) != 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Makes the terminal `file` pass bytes unchanged: no line-end
/// translation, no echo, no signals.
pub fn raw_terminal(file: &std::fs::File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: termios is plain old data, filled by tcgetattr before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::cfmakeraw(&mut t);
        if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
            return Err(io::Error::last_os_error());
        }
        // What was written reaches the port before the power goes.
        libc::tcdrain(fd);
    }
    Ok(())
}

/// Waits until what was written to `file` has left the port.
pub fn drain(file: &std::fs::File) {
    // SAFETY: an open descriptor.
    unsafe { libc::tcdrain(file.as_raw_fd()) };
}

/// Flushes the file systems and powers the machine off. As init, plumb
/// must never exit: the kernel panics when it does.
pub fn power_off() -> ! {
    // SAFETY: no arguments; reboot only returns on failure.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    // Not init, or not allowed: nothing else can end the machine.
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
