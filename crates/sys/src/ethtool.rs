//! The driver's own statistics of an interface, what `ethtool -S` prints:
//! ETHTOOL_GSSET_INFO for how many the driver names, ETHTOOL_GSTRINGS for
//! their names and ETHTOOL_GSTATS for their values, through SIOCETHTOOL on a
//! datagram socket of the calling thread's network namespace (so an end in
//! a namespace reads its own interfaces).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
/// The string set of the statistics (`enum ethtool_stringset`).
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// No driver names this many; a count above it is a broken driver, not a
/// reason to allocate.
const MOST_COUNTERS: u32 = 1 << 16;

/// `struct ifreq` with `ifr_data`, the only member SIOCETHTOOL reads.
#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    /// The rest of the union, which the kernel copies in whole.
    _rest: [u8; 16],
}

/// One SIOCETHTOOL command on interface `name`, with `buf` as the command's
/// structure (its first 4 bytes the command). The kernel reads and writes
/// within the structure's own declared size, which each caller sizes `buf`
/// for.
fn ethtool(sock: &OwnedFd, name: &str, buf: &mut [u8]) -> io::Result<()> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{name}' is not an interface name"),
        ));
    }
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: buf.as_mut_ptr().cast(),
        _rest: [0; 16],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: `req` is a live, NUL-terminated ifreq whose data pointer is
    // `buf`, exclusively borrowed for the call; each caller sizes `buf` for
    // the structure of its command (header plus the counts it asks for, and
    // headroom past them, see `driver_stats`), and the kernel copies no
    // more than that structure. `sock` is borrowed, so it stays open.
    let rc = unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            libc::SIOCETHTOOL as _,
            &mut req as *mut IfreqData,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// A socket to issue ethtool requests on, in this thread's namespace.
pub fn socket() -> io::Result<OwnedFd> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    Ok(s.into())
}

/// How many statistics the driver of `name` names: 0 when it names none
/// (lo, a bridge), or has no statistics operation at all.
fn count(sock: &OwnedFd, name: &str) -> io::Result<u32> {
    // struct ethtool_sset_info: cmd, reserved, the u64 mask of string sets
    // asked for, then one u32 per set the driver answers.
    let mut info = [0u8; 4 + 4 + 8 + 4];
    put_u32(&mut info, 0, ETHTOOL_GSSET_INFO);
    info[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
    match ethtool(sock, name, &mut info) {
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(0),
        r => r?,
    }
    let answered = u64::from_ne_bytes(info[8..16].try_into().expect("8 bytes"));
    Ok(if answered & (1 << ETH_SS_STATS) == 0 {
        0
    } else {
        u32_at(&info, 16)
    })
}

/// The driver's statistics of interface `name`, by the names it gives them
/// (per queue where it names queues), in its order; empty when the driver
/// names none.
pub fn driver_stats(sock: &OwnedFd, name: &str) -> io::Result<Vec<(String, u64)>> {
    let n = count(sock, name)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if n > MOST_COUNTERS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name}: the driver names {n} statistics"),
        ));
    }
    // Older kernels write as many entries as the driver counts at the time
    // of each call, whatever length was asked; a driver whose count grew
    // between the calls (channels added) fits in the headroom, and a count
    // beyond it is refused below rather than read.
    let room = n as usize * 2 + 64;
    // struct ethtool_gstrings: cmd, string_set, len, then len names of 32
    // bytes each.
    let mut strings = vec![0u8; 12 + room * ETH_GSTRING_LEN];
    put_u32(&mut strings, 0, ETHTOOL_GSTRINGS);
    put_u32(&mut strings, 4, ETH_SS_STATS);
    put_u32(&mut strings, 8, n);
    ethtool(sock, name, &mut strings)?;
    // struct ethtool_stats: cmd, n_stats, then n_stats u64 values.
    let mut stats = vec![0u8; 8 + room * 8];
    put_u32(&mut stats, 0, ETHTOOL_GSTATS);
    put_u32(&mut stats, 4, n);
    ethtool(sock, name, &mut stats)?;
    let (names, values) = (u32_at(&strings, 8), u32_at(&stats, 4));
    if names != n || values != n {
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!("{name}: the driver's statistics changed while read ({n}, {names}, {values})"),
        ));
    }
    Ok((0..n as usize)
        .map(|k| {
            let raw = &strings[12 + k * ETH_GSTRING_LEN..12 + (k + 1) * ETH_GSTRING_LEN];
            let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            let value = u64::from_ne_bytes(stats[8 + k * 8..16 + k * 8].try_into().expect("8"));
            (String::from_utf8_lossy(&raw[..len]).into_owned(), value)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lo_names_no_statistics() {
        let s = socket().unwrap();
        assert_eq!(driver_stats(&s, "lo").unwrap(), Vec::new());
    }

    #[test]
    fn a_missing_interface_or_a_bad_name_is_an_error() {
        let s = socket().unwrap();
        let e = driver_stats(&s, "plumb-none0").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
        assert!(driver_stats(&s, "a-name-far-too-long").is_err());
        assert!(driver_stats(&s, "").is_err());
    }

    /// The names `ethtool -S` prints for each interface of this host, read
    /// only (`None` without the tool, outside CI).
    fn ethtool_s(name: &str) -> Option<Vec<String>> {
        let out = match std::process::Command::new("ethtool")
            .args(["-S", name])
            .output()
        {
            Ok(out) => out,
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("skipped: ethtool: {e}");
                return None;
            }
            Err(e) => panic!("ethtool: {e} (CI installs it)"),
        };
        let text = String::from_utf8_lossy(&out.stdout);
        Some(
            text.lines()
                .skip(1)
                .filter_map(|l| Some(l.trim().rsplit_once(':')?.0.to_string()))
                .collect(),
        )
    }

    #[test]
    fn every_interface_of_this_host_names_what_ethtool_s_names() {
        let s = socket().unwrap();
        for dev in std::fs::read_dir("/sys/class/net").unwrap() {
            let name = dev.unwrap().file_name().into_string().unwrap();
            let Some(want) = ethtool_s(&name) else {
                return;
            };
            let got: Vec<String> = driver_stats(&s, &name)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }
}
