//! Counting the kernel's tracepoints with perf_event_open(2): one counting
//! event per online CPU, every process on it, read as a sum. A tracepoint
//! is named `system:event` (`tcp:tcp_retransmit_skb`) and found by the id
//! tracefs gives it; where tracefs is not mounted, it is mounted on a
//! directory of plumb's own for as long as the ids take to read, and the
//! host is left as it was found.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

const PERF_TYPE_TRACEPOINT: u32 = 2;

/// Where tracefs is usually found.
const MOUNTED: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The id of each tracepoint in `names`, or why it has none here (the
/// kernel lacks it, tracefs cannot be read).
pub fn ids(names: &[&str]) -> Vec<Result<u64, String>> {
    in_tracefs(|root| names.iter().map(|n| id_in(root, n)).collect())
        .unwrap_or_else(|e| names.iter().map(|_| Err(e.clone())).collect())
}

/// What `read` makes of the tracefs root: where it is mounted, or mounted
/// here for as long as `read` takes.
fn in_tracefs<T>(read: impl FnOnce(&Path) -> T) -> Result<T, String> {
    if let Some(root) = MOUNTED
        .iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir())
    {
        return Ok(read(root));
    }
    match Mounted::new() {
        Ok(m) => Ok(read(&m.0)),
        Err(e) => Err(format!(
            "tracefs is not mounted and cannot be ({}): run as root, or mount it \
             (mount -t tracefs nodev /sys/kernel/tracing)",
            crate::plain_io(&e)
        )),
    }
}

/// A field of a tracepoint's records: where it lies in the raw data, and
/// the names its values print as (`__print_symbolic`), from the event's
/// format file, so that values the kernel adds need no code here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawField {
    pub offset: usize,
    pub size: usize,
    pub symbols: std::collections::BTreeMap<u64, String>,
}

impl RawField {
    /// The field's value in a record's raw data.
    pub fn value(&self, raw: &[u8]) -> Option<u64> {
        let b = raw.get(self.offset..self.offset + self.size)?;
        Some(match self.size {
            1 => u64::from(b[0]),
            2 => u64::from(u16::from_ne_bytes(b.try_into().ok()?)),
            4 => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            8 => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// What a value prints as: its symbol, else the number.
    pub fn name(&self, value: u64) -> String {
        self.symbols
            .get(&value)
            .cloned()
            .unwrap_or_else(|| value.to_string())
    }
}

/// Field `field` of tracepoint `name` (`skb:kfree_skb`, `reason`), or why
/// this kernel has none.
pub fn raw_field(name: &str, field: &str) -> Result<RawField, String> {
    Ok(raw_fields(name, &[field])?.remove(0))
}

/// Fields `fields` of tracepoint `name`, in their order, from one reading
/// of its format file; or why this kernel lacks the event or one of them.
pub fn raw_fields(name: &str, fields: &[&str]) -> Result<Vec<RawField>, String> {
    let (system, event) = name
        .split_once(':')
        .ok_or_else(|| format!("'{name}' is not system:event"))?;
    let text = in_tracefs(|root| {
        let file = root.join("events").join(system).join(event).join("format");
        std::fs::read_to_string(&file).map_err(|e| missing(name, &file, &e))
    })??;
    fields
        .iter()
        .map(|field| {
            parse_format(&text, field).ok_or_else(|| format!("{name} has no field {field} here"))
        })
        .collect()
}

/// A field's place and its symbols in a format file's text.
pub fn parse_format(text: &str, field: &str) -> Option<RawField> {
    let (offset, size) = text.lines().find_map(|l| {
        let l = l.trim();
        let decl = l.strip_prefix("field:")?.split(';').next()?;
        let name = decl.rsplit([' ', '*']).next()?;
        if name != field {
            return None;
        }
        let num = |key: &str| -> Option<usize> {
            l.split(';')
                .find_map(|p| p.trim().strip_prefix(key))?
                .trim()
                .parse()
                .ok()
        };
        Some((num("offset:")?, num("size:")?))
    })?;
    let mut symbols = std::collections::BTreeMap::new();
    let call = format!("__print_symbolic(REC->{field},");
    if let Some(start) = text.find(&call) {
        let mut rest = &text[start + call.len()..];
        // `{ 2, "NOT_SPECIFIED" }`, one after another, to the call's close.
        while let Some(open) = rest.find('{') {
            if rest[..open].contains(')') {
                break;
            }
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let pair = &rest[open + 1..open + close];
            if let Some((v, n)) = pair.split_once(',') {
                let v = v.trim();
                let v = match v.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16).ok(),
                    None => v.parse().ok(),
                };
                if let Some(v) = v {
                    symbols.insert(v, n.trim().trim_matches('"').to_string());
                }
            }
            rest = &rest[open + close + 1..];
        }
    }
    Some(RawField {
        offset,
        size,
        symbols,
    })
}

/// A tracepoint sampled on every CPU given, every event, with its raw
/// data: what a counting event cannot say (a field's value per event).
pub struct RawSampler {
    rings: Vec<crate::perf::Ring>,
}

impl RawSampler {
    /// Starts sampling tracepoint `id` on each of `cpus` into rings of
    /// `pages` pages each.
    pub fn open(id: u64, cpus: &[u32], pages: usize) -> io::Result<RawSampler> {
        let attr = crate::perf::Attr::every_raw(PERF_TYPE_TRACEPOINT, id);
        let rings = cpus
            .iter()
            .map(|&cpu| crate::perf::Ring::open(&attr, cpu, pages))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(RawSampler { rings })
    }

    /// Samples only the events of tracepoint `id` that match `filter`.
    pub fn filtered(id: u64, cpus: &[u32], pages: usize, filter: &str) -> io::Result<RawSampler> {
        let sampler = RawSampler::open(id, cpus, pages)?;
        for r in &sampler.rings {
            r.set_filter(filter)?;
        }
        // What came before the filter is not the filter's.
        let mut sampler = sampler;
        sampler.drain(&mut |_| {});
        Ok(sampler)
    }

    /// Stops sampling until [`RawSampler::resume`]: nothing is written,
    /// and so nothing lost, meanwhile (a record lost is told with the next
    /// one written, which would be after the resume).
    pub fn pause(&self) -> io::Result<()> {
        self.rings.iter().try_for_each(|r| r.disable())
    }

    pub fn resume(&self) -> io::Result<()> {
        self.rings.iter().try_for_each(|r| r.enable())
    }

    /// Hands each event's raw data the rings hold to `each`.
    pub fn drain(&mut self, each: &mut dyn FnMut(&[u8])) {
        for r in &mut self.rings {
            r.drain(&mut |body| {
                // PERF_SAMPLE_RAW: a u32 size, then the record's raw data.
                let Some(size) = body
                    .get(..4)
                    .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
                else {
                    return;
                };
                if let Some(raw) = body.get(4..4 + size as usize) {
                    each(raw);
                }
            });
        }
    }

    /// Events the kernel could not write because a ring was full.
    pub fn lost(&self) -> u64 {
        self.rings.iter().map(|r| r.lost).sum()
    }

    /// Times the kernel throttled the event on any CPU, each losing the
    /// rest of a tick's events unsaid.
    pub fn throttled(&self) -> u64 {
        self.rings.iter().map(|r| r.throttled).sum()
    }
}

fn id_in(root: &Path, name: &str) -> Result<u64, String> {
    let (system, event) = name
        .split_once(':')
        .ok_or_else(|| format!("'{name}' is not system:event"))?;
    let file = root.join("events").join(system).join(event).join("id");
    let text = std::fs::read_to_string(&file).map_err(|e| missing(name, &file, &e))?;
    text.trim()
        .parse()
        .map_err(|_| format!("{}: '{}' is not an id", file.display(), text.trim()))
}

/// Why tracepoint `name`'s `file` could not be read: the kernel lacks it,
/// or only root may read tracefs.
fn missing(name: &str, file: &Path, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => format!(
            "{}: permission denied: run as root to read tracefs",
            file.display()
        ),
        _ => format!("this kernel has no {name} ({}: {e})", file.display()),
    }
}

/// tracefs mounted on a directory of this process's own, unmounted and
/// removed when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn new() -> io::Result<Mounted> {
        // One directory per mount: `plumb serve` sessions start ends at once.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("plumb-tracefs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
        let (source, kind) = (c("nodev"), c("tracefs"));
        let target = c(&dir.to_string_lossy());
        // SAFETY: NUL-terminated strings alive for the call; no data.
        let r = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                kind.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        Ok(Mounted(dir))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Ok(target) = std::ffi::CString::new(self.0.to_string_lossy().as_bytes()) {
            // SAFETY: a NUL-terminated path alive for the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// One tracepoint counted on every CPU given.
pub struct Counter {
    cpus: Vec<File>,
}

impl Counter {
    /// Starts counting tracepoint `id` on each of `cpus`, every process.
    pub fn open(id: u64, cpus: &[u32]) -> io::Result<Counter> {
        let attr = crate::perf::Attr::counting(PERF_TYPE_TRACEPOINT, id);
        let cpus = cpus
            .iter()
            .map(|&cpu| crate::perf::open_on_cpu(&attr, cpu).map(File::from))
            .collect::<io::Result<Vec<File>>>()?;
        Ok(Counter { cpus })
    }

    /// Counts only the events of tracepoint `id` that match `filter`, in
    /// the kernel's event filter language, on each of `cpus`.
    pub fn filtered(id: u64, cpus: &[u32], filter: &str) -> io::Result<Counter> {
        let counter = Counter::open(id, cpus)?;
        for f in &counter.cpus {
            crate::perf::set_filter(f, filter)?;
        }
        Ok(counter)
    }

    /// The events counted so far on all its CPUs.
    pub fn read(&self) -> io::Result<u64> {
        let mut total = 0u64;
        for mut f in &self.cpus {
            let mut b = [0u8; 8];
            f.read_exact(&mut b)?;
            total = total.wrapping_add(u64::from_ne_bytes(b));
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KFREE_SKB: &str = "name: kfree_skb
ID: 2310
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:void * location;\toffset:16;\tsize:8;\tsigned:0;
\tfield:void * rx_sk;\toffset:24;\tsize:8;\tsigned:0;
\tfield:enum skb_drop_reason reason;\toffset:36;\tsize:4;\tsigned:0;

print fmt: \"skbaddr=%p reason: %s\", REC->skbaddr, __print_symbolic(REC->reason, { 2, \"NOT_SPECIFIED\" }, { 6, \"SOCKET_RCVBUFF\" }, { 0x2a, \"HEX\" }), REC->x
";

    #[test]
    fn a_field_is_found_with_the_names_of_its_values() {
        let f = parse_format(KFREE_SKB, "reason").unwrap();
        assert_eq!((f.offset, f.size), (36, 4));
        assert_eq!(f.name(6), "SOCKET_RCVBUFF");
        assert_eq!(f.name(42), "HEX");
        assert_eq!(f.name(99), "99", "a value without a symbol is its number");
        assert_eq!(f.symbols.len(), 3);
        let mut raw = vec![0u8; 40];
        raw[36..40].copy_from_slice(&6u32.to_ne_bytes());
        assert_eq!(f.value(&raw), Some(6));
        assert_eq!(f.value(&raw[..38]), None);
        // A pointer field, found by its name after the star.
        assert_eq!(parse_format(KFREE_SKB, "rx_sk").unwrap().offset, 24);
        assert!(parse_format(KFREE_SKB, "protocol").is_none());
        assert!(parse_format("", "reason").is_none());
    }

    #[test]
    fn the_running_kernels_drop_reasons_are_named() {
        if !crate::process::is_root() {
            return;
        }
        let Ok(f) = raw_field("skb:kfree_skb", "reason") else {
            // Kernels before 5.17 give no reason.
            return;
        };
        assert!(f.symbols.values().any(|n| n == "NOT_SPECIFIED"), "{f:?}");
    }

    #[test]
    fn a_name_without_its_system_is_refused_and_a_missing_one_named() {
        let root = std::env::temp_dir().join(format!("plumb-trace-test-{}", std::process::id()));
        let dir = root.join("events/tcp/tcp_retransmit_skb");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("id"), "1234\n").unwrap();
        assert_eq!(id_in(&root, "tcp:tcp_retransmit_skb"), Ok(1234));
        assert!(id_in(&root, "tcp_retransmit_skb")
            .unwrap_err()
            .contains("system:event"));
        let e = id_in(&root, "skb:kfree_skb").unwrap_err();
        assert!(e.contains("this kernel has no skb:kfree_skb"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
