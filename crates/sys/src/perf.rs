//! CPU sampling with perf_event_open(2): one sampling event per CPU, every
//! process on it, with the kernel and user call chains of each sample, read
//! from the event's ring buffer. The hardware cycles event where the CPU
//! has a PMU; the cpu-clock software event (a timer) where it has none, as
//! in most virtual machines.
//!
//! Safe to use: the ring is a mapping owned by [`CpuSampler`], read only
//! between the kernel's head and the tail this side last gave back.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

// linux/perf_event.h
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
const SAMPLE_CPU: u64 = 1 << 7;
const SAMPLE_PERIOD: u64 = 1 << 8;
const SAMPLE_RAW: u64 = 1 << 10;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_FREQ: u64 = 1 << 10;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// PERF_EVENT_IOC_SET_FILTER: _IOW('$', 6, char *).
const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
const RECORD_LOST: u32 = 2;
/// PERF_RECORD_THROTTLE: the kernel stopped the event for the rest of a
/// tick, its samples over kernel.perf_event_max_sample_rate.
const RECORD_THROTTLE: u32 = 5;
const RECORD_SAMPLE: u32 = 9;
/// Call-chain entries at or above this are context markers
/// (PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER, ...), not addresses.
const CONTEXT_MAX: u64 = (-4095i64) as u64;
const CONTEXT_KERNEL: u64 = (-128i64) as u64;
const CONTEXT_USER: u64 = (-512i64) as u64;
/// Where `struct perf_event_mmap_page` keeps data_head and data_tail.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// `struct perf_event_attr` up to PERF_ATTR_SIZE_VER5 (112 bytes): every
/// field plumb sets is in it, and every kernel since 4.1 takes this size.
#[repr(C)]
#[derive(Default)]
pub(crate) struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const _: () = assert!(std::mem::size_of::<Attr>() == 112);

impl Attr {
    /// A counting event: only its type and config.
    pub(crate) fn counting(kind: u32, config: u64) -> Attr {
        Attr {
            kind,
            size: std::mem::size_of::<Attr>() as u32,
            config,
            ..Attr::default()
        }
    }

    /// A sampling event that records the raw data of every event, from
    /// the start.
    pub(crate) fn every_raw(kind: u32, config: u64) -> Attr {
        Attr {
            sample_freq: 1,
            sample_type: SAMPLE_RAW,
            ..Attr::counting(kind, config)
        }
    }
}

/// What a sample counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Cycles of the CPU's PMU: the period of a sample is cycles.
    Cycles,
    /// The cpu-clock timer: the period of a sample is nanoseconds.
    CpuClock,
}

impl Event {
    pub fn name(self) -> &'static str {
        match self {
            Event::Cycles => "cycles",
            Event::CpuClock => "cpu-clock",
        }
    }
}

/// One sample: where the CPU was, on behalf of whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The process (thread group) running; 0 for the idle task.
    pub pid: u32,
    /// The thread running.
    pub tid: u32,
    /// The CPU sampled.
    pub cpu: u32,
    /// Cycles or nanoseconds since the previous sample of this event.
    pub period: u64,
    /// Kernel addresses, innermost first.
    pub kernel: Vec<u64>,
    /// User addresses, innermost first.
    pub user: Vec<u64>,
}

/// A sampling event on one CPU and its ring buffer, read only between the
/// kernel's head and the tail this side last gave back.
pub(crate) struct Ring {
    fd: OwnedFd,
    ring: *mut u8,
    /// Bytes mapped: one metadata page and the data pages.
    len: usize,
    data_size: usize,
    page: usize,
    /// Samples the kernel could not write because the ring was full.
    pub lost: u64,
    /// Times the kernel throttled the event: the events of the rest of
    /// that tick were not sampled, nor counted as lost.
    pub throttled: u64,
}

// SAFETY: the mapping is owned by the ring and only touched through
// `&mut self`; moving it to another thread moves that ownership.
unsafe impl Send for Ring {}

/// Opens the event `attr` describes on `cpu` for every process on it.
pub(crate) fn open_on_cpu(attr: &Attr, cpu: u32) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid perf_event_attr of the size it states,
    // alive for the call; pid -1 with a cpu is every process on it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const Attr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Gives a tracepoint's event `fd` a filter in the kernel's event filter
/// language (`sport == 5001 || dport == 5001`): only the events that match
/// count or are sampled.
pub(crate) fn set_filter(fd: &impl AsRawFd, filter: &str) -> io::Result<()> {
    let filter = std::ffi::CString::new(filter)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a filter with a NUL byte"))?;
    // SAFETY: a NUL-terminated string alive for the call, which the kernel
    // copies.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_FILTER as _, filter.as_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Ring {
    /// Opens the sampling event `attr` describes on `cpu` for every
    /// process, with a ring of `pages` data pages (a power of two).
    pub(crate) fn open(attr: &Attr, cpu: u32, pages: usize) -> io::Result<Ring> {
        if !pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring of {pages} pages: a power of two is needed"),
            ));
        }
        let fd = open_on_cpu(attr, cpu)?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (pages + 1);
        // SAFETY: a fresh shared mapping of the event's ring, of the size
        // perf_event_open rings take (1 + 2^n pages); checked below.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            fd,
            ring: ring as *mut u8,
            len,
            data_size: page * pages,
            page,
            lost: 0,
            throttled: 0,
        })
    }

    fn ioctl(&self, request: libc::c_ulong) -> io::Result<()> {
        // SAFETY: ENABLE and DISABLE take no argument beyond the flag 0.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), request as _, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Samples only the events that match `filter` (see [`set_filter`]).
    pub(crate) fn set_filter(&self, filter: &str) -> io::Result<()> {
        set_filter(&self.fd, filter)
    }

    pub(crate) fn enable(&self) -> io::Result<()> {
        self.ioctl(IOC_ENABLE)
    }

    pub(crate) fn disable(&self) -> io::Result<()> {
        self.ioctl(IOC_DISABLE)
    }

    /// Hands the body of every sample record the ring holds to `each`,
    /// counts the lost ones, and gives the space back to the kernel.
    pub(crate) fn drain(&mut self, each: &mut dyn FnMut(&[u8])) {
        // SAFETY: data_head is a u64 of the metadata page the kernel
        // writes; read volatile, then fenced so the records it covers are
        // read after it (the acquire the kernel's documentation asks for).
        let head = unsafe { std::ptr::read_volatile(self.ring.add(DATA_HEAD) as *const u64) };
        fence(Ordering::Acquire);
        // SAFETY: data_tail is ours to read and write.
        let mut tail = unsafe { std::ptr::read_volatile(self.ring.add(DATA_TAIL) as *const u64) };
        let mut record = Vec::new();
        while tail < head {
            let mut header = [0u8; 8];
            self.copy_out(tail, &mut header);
            let size = u16::from_ne_bytes([header[6], header[7]]) as usize;
            if size < 8 {
                break;
            }
            record.resize(size, 0);
            self.copy_out(tail, &mut record);
            let kind = u32::from_ne_bytes(header[0..4].try_into().unwrap());
            match kind {
                RECORD_SAMPLE => each(&record[8..]),
                RECORD_LOST => self.lost += read_u64(&record, 16).unwrap_or(0),
                RECORD_THROTTLE => self.throttled += 1,
                _ => {}
            }
            tail += size as u64;
        }
        // Every record up to `tail` is read before the kernel may reuse it.
        fence(Ordering::Release);
        // SAFETY: as above; the kernel only reads data_tail.
        unsafe { std::ptr::write_volatile(self.ring.add(DATA_TAIL) as *mut u64, tail) };
    }

    /// Copies `out.len()` bytes of the data area from ring position `at`,
    /// across its end where a record wraps.
    fn copy_out(&self, at: u64, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            let off = (at as usize + i) % self.data_size;
            // SAFETY: `off` is inside the data area, which starts one page
            // into the mapping of `len` = page + data_size bytes.
            *b = unsafe { std::ptr::read_volatile(self.ring.add(self.page + off)) };
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, of `len` bytes, unused after.
        unsafe { libc::munmap(self.ring as *mut libc::c_void, self.len) };
    }
}

/// One CPU's sampling event and its ring buffer.
pub struct CpuSampler {
    ring: Ring,
}

impl CpuSampler {
    /// Opens a disabled sampling event on `cpu` for every process, at
    /// `freq` samples per second, with a ring of `pages` data pages (a
    /// power of two).
    pub fn open(event: Event, cpu: u32, freq: u64, pages: usize) -> io::Result<CpuSampler> {
        let (kind, config) = match event {
            Event::Cycles => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
            Event::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK),
        };
        let attr = Attr {
            kind,
            size: std::mem::size_of::<Attr>() as u32,
            config,
            sample_freq: freq,
            sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_CPU | SAMPLE_PERIOD | SAMPLE_CALLCHAIN,
            flags: FLAG_DISABLED | FLAG_FREQ,
            wakeup_events: 0,
            ..Attr::default()
        };
        Ok(CpuSampler {
            ring: Ring::open(&attr, cpu, pages)?,
        })
    }

    pub fn enable(&self) -> io::Result<()> {
        self.ring.enable()
    }

    pub fn disable(&self) -> io::Result<()> {
        self.ring.disable()
    }

    /// Samples the kernel could not write because the ring was full.
    pub fn lost(&self) -> u64 {
        self.ring.lost
    }

    /// Hands every sample the ring holds to `each` and gives the space
    /// back to the kernel.
    pub fn drain(&mut self, each: &mut dyn FnMut(Sample)) {
        self.ring.drain(&mut |body| {
            if let Some(s) = parse_sample(body) {
                each(s);
            }
        });
    }
}

fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A PERF_RECORD_SAMPLE's body for the sample type `open` asks for: ip,
/// pid and tid, cpu, period, then the call chain.
fn parse_sample(b: &[u8]) -> Option<Sample> {
    let ip = read_u64(b, 0)?;
    let pid = read_u32(b, 8)?;
    let tid = read_u32(b, 12)?;
    let cpu = read_u32(b, 16)?;
    let period = read_u64(b, 24)?;
    let nr = read_u64(b, 32)? as usize;
    let mut kernel = Vec::new();
    let mut user = Vec::new();
    let mut in_user = false;
    for i in 0..nr.min(512) {
        let a = read_u64(b, 40 + 8 * i)?;
        if a >= CONTEXT_MAX {
            in_user = a == CONTEXT_USER;
            if a != CONTEXT_KERNEL && a != CONTEXT_USER {
                // Guest or hypervisor chains are not followed.
                in_user = false;
            }
            continue;
        }
        if in_user {
            user.push(a);
        } else {
            kernel.push(a);
        }
    }
    if kernel.is_empty() && user.is_empty() {
        // No chain: the sampled address alone says where it was.
        if ip >= 1 << 63 {
            kernel.push(ip);
        } else {
            user.push(ip);
        }
    }
    Some(Sample {
        pid,
        tid,
        cpu,
        period,
        kernel,
        user,
    })
}

/// The event to sample with on this host: cycles where opening it works,
/// cpu-clock otherwise.
/// A host's PMU does not come or go, so this is asked once per process.
pub fn best_event() -> Event {
    static BEST: std::sync::OnceLock<Event> = std::sync::OnceLock::new();
    *BEST.get_or_init(|| match CpuSampler::open(Event::Cycles, 0, 100, 1) {
        Ok(_) => Event::Cycles,
        Err(_) => Event::CpuClock,
    })
}

/// Why this process may not profile every CPU, as one line naming the
/// setting to change; None when it may.
pub fn refusal() -> Option<String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if let Err(e) = CpuSampler::open(Event::CpuClock, 0, 100, 1) {
        let paranoid = read("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
        return Some(match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => format!(
                "--profile: perf_event_open refused ({e}): kernel.perf_event_paranoid is {paranoid}; \
                 run as root (or with CAP_PERFMON) or set kernel.perf_event_paranoid=-1"
            ),
            Some(libc::ENOSYS) | Some(libc::ENOENT) => format!(
                "--profile: this kernel has no perf events ({e}): it needs CONFIG_PERF_EVENTS"
            ),
            _ => format!("--profile: perf_event_open failed: {e}"),
        });
    }
    if !crate::ksyms::addresses_visible() {
        let restrict = read("/proc/sys/kernel/kptr_restrict").unwrap_or_default();
        return Some(format!(
            "--profile: kernel addresses are hidden (/proc/kallsyms shows zeros): \
             kernel.kptr_restrict is {restrict}; run as root or set kernel.kptr_restrict=0"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_bytes(chain: &[u64]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0xffff_ffff_8100_0000u64.to_ne_bytes());
        b.extend(42u32.to_ne_bytes());
        b.extend(43u32.to_ne_bytes());
        b.extend(1u32.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        b.extend(1_000_000u64.to_ne_bytes());
        b.extend((chain.len() as u64).to_ne_bytes());
        for a in chain {
            b.extend(a.to_ne_bytes());
        }
        b
    }

    #[test]
    fn a_sample_splits_its_chain_at_the_context_markers() {
        let b = sample_bytes(&[
            CONTEXT_KERNEL,
            0xffff_ffff_8100_0001,
            0xffff_ffff_8100_0002,
            CONTEXT_USER,
            0x401000,
        ]);
        let s = parse_sample(&b).unwrap();
        assert_eq!((s.pid, s.tid, s.cpu, s.period), (42, 43, 1, 1_000_000));
        assert_eq!(s.kernel, vec![0xffff_ffff_8100_0001, 0xffff_ffff_8100_0002]);
        assert_eq!(s.user, vec![0x401000]);
        // A chain cut short by the record's end is no sample.
        assert!(parse_sample(&b[..b.len() - 4]).is_none());
    }

    #[test]
    fn the_ring_returns_the_samples_of_a_busy_thread() {
        if let Some(why) = crate::perf::refusal() {
            // Under CI, which is root, a missing permission is a failure.
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
                "precondition missing under CI: {why}"
            );
            eprintln!("skipped: {why}");
            return;
        }
        let cpu = 0;
        crate::affinity::pin_current_thread(cpu).unwrap();
        let mut s = CpuSampler::open(Event::CpuClock, cpu, 1000, 16).unwrap();
        s.enable().unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
        let mut x = 0u64;
        while std::time::Instant::now() < until {
            x = x.wrapping_mul(31).wrapping_add(1);
        }
        std::hint::black_box(x);
        s.disable().unwrap();
        let me = std::process::id();
        let mut mine = 0;
        let mut ns = 0;
        s.drain(&mut |smp| {
            if smp.pid == me {
                mine += 1;
                ns += smp.period;
                assert_eq!(smp.cpu, cpu);
            }
        });
        // 200 ms at 1 kHz, give or take what the scheduler took away.
        assert!(mine > 100, "{mine} samples");
        assert!((1e8..3e8).contains(&(ns as f64)), "{ns} ns");
    }
}
