//! Symbolising user-space addresses of the running executable, so plumb can
//! name the functions in its own CPU-profile samples without shelling out to
//! addr2line or linking a DWARF reader. Function symbols only (no inlining,
//! no line numbers): that is what a flat profile needs.

use std::path::Path;

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const STT_FUNC: u8 = 2;
const PT_LOAD: u32 = 1;
const SYM_SIZE: usize = 24;

/// The function symbols of one ELF64 little-endian file, sorted by address.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    /// (start, size, name), one per start address.
    entries: Vec<(u64, u64, String)>,
}

impl Symbols {
    /// Reads .symtab (or .dynsym when there is no .symtab) of the file at
    /// `path`: STT_FUNC symbols with nonzero value.
    pub fn read(path: &Path) -> Result<Symbols, String> {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        parse_symbols(&data).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The function containing file-relative virtual address `vaddr`
    /// (st_value space), if any.
    pub fn lookup(&self, vaddr: u64) -> Option<&str> {
        let i = self
            .entries
            .partition_point(|e| e.0 <= vaddr)
            .checked_sub(1)?;
        let (start, size, name) = &self.entries[i];
        // Hand-written assembly often has no size: assume it runs to the next
        // symbol rather than dropping its samples.
        let end = match (size, self.entries.get(i + 1)) {
            (0, Some(next)) => next.0,
            (size, _) => start.saturating_add((*size).max(1)),
        };
        (vaddr < end).then_some(name.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One mapping of the executable from /proc/<pid>/maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    /// File offset of `start`.
    offset: u64,
}

/// How runtime addresses of this process map to the executable's st_value
/// addresses.
#[derive(Debug, Clone)]
pub struct ExeMap {
    symbols: Symbols,
    mappings: Vec<Mapping>,
    /// PT_LOAD (p_offset, p_filesz, p_vaddr).
    loads: Vec<(u64, u64, u64)>,
}

/// A process's executable and its mappings, held as they are now and
/// parsed later: parsing a large binary's symbols takes seconds where a
/// window's set-up cannot wait, and the process may be gone by then.
pub struct ExeHeld {
    /// The running binary, open through /proc/<pid>/exe: still the one
    /// that ran when the path was replaced since.
    file: std::fs::File,
    /// The path the link names, as maps names the file.
    target: String,
    maps: String,
}

impl ExeHeld {
    /// For process `pid`: /proc/<pid>/exe opened and /proc/<pid>/maps read.
    pub fn of(pid: u32) -> Result<ExeHeld, String> {
        ExeHeld::at(&pid.to_string())
    }

    fn at(proc: &str) -> Result<ExeHeld, String> {
        let exe = &format!("/proc/{proc}/exe");
        // maps names the file as the link does, " (deleted)" included when
        // the binary was replaced while running.
        let target = std::fs::read_link(exe).map_err(|e| format!("{exe}: {e}"))?;
        let target = target
            .to_str()
            .ok_or_else(|| format!("{exe}: path {} is not UTF-8", target.display()))?
            .to_string();
        let file = std::fs::File::open(exe).map_err(|e| format!("{exe}: {e}"))?;
        let maps = &format!("/proc/{proc}/maps");
        let maps = std::fs::read_to_string(maps).map_err(|e| format!("{maps}: {e}"))?;
        Ok(ExeHeld { file, target, maps })
    }

    /// Parses what was held: the symbols, the loads and the mappings.
    pub fn load(mut self) -> Result<ExeMap, String> {
        use std::io::Read;
        let target = &self.target;
        let mut data = Vec::new();
        self.file
            .read_to_end(&mut data)
            .map_err(|e| format!("{target}: {e}"))?;
        let symbols = parse_symbols(&data).map_err(|e| format!("{target}: {e}"))?;
        let loads = parse_loads(&data).map_err(|e| format!("{target}: {e}"))?;
        let mappings = parse_maps(&self.maps, target);
        if mappings.is_empty() {
            return Err(format!("maps: no mapping of {target}"));
        }
        Ok(ExeMap {
            symbols,
            mappings,
            loads,
        })
    }
}

impl ExeMap {
    /// [`ExeMap::own`], read once per process: the running binary and
    /// where it is loaded do not change.
    pub fn own_once() -> Option<&'static ExeMap> {
        static OWN: std::sync::OnceLock<Option<ExeMap>> = std::sync::OnceLock::new();
        OWN.get_or_init(|| ExeMap::own().ok()).as_ref()
    }

    /// For the calling process: /proc/self/exe and /proc/self/maps.
    pub fn own() -> Result<ExeMap, String> {
        ExeMap::at("self")
    }

    /// For process `pid`: /proc/<pid>/exe and /proc/<pid>/maps.
    pub fn of(pid: u32) -> Result<ExeMap, String> {
        ExeHeld::of(pid)?.load()
    }

    fn at(proc: &str) -> Result<ExeMap, String> {
        ExeHeld::at(proc)?.load()
    }

    /// Symbol of a runtime address in this executable, or None when the
    /// address is not in its mappings or in no function.
    pub fn symbol(&self, addr: u64) -> Option<&str> {
        let m = self
            .mappings
            .iter()
            .find(|m| m.start <= addr && addr < m.end)?;
        let off = addr - m.start + m.offset;
        // By file offset, not by mapping: a segment's p_offset need not be
        // page-aligned, so the mapping may start before its segment does.
        let &(p_offset, _, p_vaddr) = self
            .loads
            .iter()
            .find(|&&(o, size, _)| o <= off && off - o < size)?;
        self.symbols.lookup(off - p_offset + p_vaddr)
    }
}

/// The mappings of file `exe` in the text of a /proc/<pid>/maps file; lines
/// of other files or of unexpected shape are skipped.
fn parse_maps(text: &str, exe: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            // start-end perms offset dev inode path; the path is padded with
            // spaces and may itself contain spaces.
            let mut rest = line;
            let mut fields = [""; 5];
            for f in &mut fields {
                let (head, tail) = rest.trim_start().split_once(' ')?;
                *f = head;
                rest = tail;
            }
            if rest.trim_start() != exe {
                return None;
            }
            let (start, end) = fields[0].split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(fields[2], 16).ok()?,
            })
        })
        .collect()
}

fn bytes(d: &[u8], off: u64, len: usize) -> Result<&[u8], String> {
    usize::try_from(off)
        .ok()
        .and_then(|o| d.get(o..o.checked_add(len)?))
        .ok_or_else(|| format!("truncated: {len} bytes at offset {off:#x}"))
}

fn u16_at(d: &[u8], off: u64) -> Result<u16, String> {
    Ok(u16::from_le_bytes(bytes(d, off, 2)?.try_into().unwrap()))
}

fn u32_at(d: &[u8], off: u64) -> Result<u32, String> {
    Ok(u32::from_le_bytes(bytes(d, off, 4)?.try_into().unwrap()))
}

fn u64_at(d: &[u8], off: u64) -> Result<u64, String> {
    Ok(u64::from_le_bytes(bytes(d, off, 8)?.try_into().unwrap()))
}

fn check_header(d: &[u8]) -> Result<(), String> {
    match d.get(..6) {
        Some([0x7f, b'E', b'L', b'F', 2, 1]) => Ok(()),
        Some([0x7f, b'E', b'L', b'F', ..]) => Err("not a 64-bit little-endian ELF".into()),
        _ => Err("not an ELF file".into()),
    }
}

/// One section header: (sh_type, sh_offset, sh_size, sh_link).
struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
}

fn section(d: &[u8], shoff: u64, shentsize: u64, i: u64) -> Result<Section, String> {
    let at = i
        .checked_mul(shentsize)
        .and_then(|o| o.checked_add(shoff))
        .ok_or("section header offset overflows")?;
    let h = bytes(d, at, 64)?;
    Ok(Section {
        kind: u32_at(h, 4)?,
        offset: u64_at(h, 24)?,
        size: u64_at(h, 32)?,
        link: u32_at(h, 40)?,
    })
}

fn parse_symbols(d: &[u8]) -> Result<Symbols, String> {
    check_header(d)?;
    let shoff = u64_at(d, 0x28)?;
    let shentsize = u64::from(u16_at(d, 0x3a)?);
    if shoff == 0 || shentsize < 64 {
        return Err("no section headers".into());
    }
    let mut shnum = u64::from(u16_at(d, 0x3c)?);
    if shnum == 0 {
        // Past 0xff00 sections the count moves to section 0's sh_size.
        shnum = section(d, shoff, shentsize, 0)?.size;
    }
    let mut table = None;
    for i in 0..shnum {
        let s = section(d, shoff, shentsize, i)?;
        if s.kind == SHT_SYMTAB {
            table = Some(s);
            break;
        }
        if s.kind == SHT_DYNSYM && table.is_none() {
            table = Some(s);
        }
    }
    let table = table.ok_or("no symbol table")?;
    let strtab = section(d, shoff, shentsize, u64::from(table.link))?;
    let strings = usize::try_from(strtab.size)
        .map_err(|e| e.to_string())
        .and_then(|n| bytes(d, strtab.offset, n))?;
    let syms = usize::try_from(table.size)
        .map_err(|e| e.to_string())
        .and_then(|n| bytes(d, table.offset, n))?;

    let mut entries = Vec::new();
    for sym in syms.chunks_exact(SYM_SIZE) {
        let name = u32::from_le_bytes(sym[0..4].try_into().unwrap()) as usize;
        let info = sym[4];
        let shndx = u16::from_le_bytes(sym[6..8].try_into().unwrap());
        let value = u64::from_le_bytes(sym[8..16].try_into().unwrap());
        let size = u64::from_le_bytes(sym[16..24].try_into().unwrap());
        // Undefined imports carry their PLT address in a non-PIE file; they
        // are not functions of this file.
        if info & 0xf != STT_FUNC || value == 0 || shndx == 0 {
            continue;
        }
        let raw = strings.get(name..).ok_or("symbol name out of bounds")?;
        let raw = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
        // `{:#}` drops the ::h<hash> suffix; names that are not Rust pass
        // through unchanged.
        let name = format!(
            "{:#}",
            rustc_demangle::demangle(&String::from_utf8_lossy(raw))
        );
        entries.push((value, size, name));
    }
    if entries.is_empty() {
        return Err("no function symbols".into());
    }
    // Aliases share a start; keep the one with a size, so lookup sees a
    // single entry per address.
    entries.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    entries.dedup_by_key(|e| e.0);
    Ok(Symbols { entries })
}

fn parse_loads(d: &[u8]) -> Result<Vec<(u64, u64, u64)>, String> {
    check_header(d)?;
    let phoff = u64_at(d, 0x20)?;
    let phentsize = u64::from(u16_at(d, 0x36)?);
    let phnum = u64::from(u16_at(d, 0x38)?);
    if phentsize < 56 {
        return Err("bad program header size".into());
    }
    let mut loads = Vec::new();
    for i in 0..phnum {
        let at = phoff
            .checked_add(i * phentsize)
            .ok_or("program header offset overflows")?;
        let h = bytes(d, at, 56)?;
        if u32_at(h, 0)? == PT_LOAD {
            loads.push((u64_at(h, 8)?, u64_at(h, 32)?, u64_at(h, 16)?));
        }
    }
    if loads.is_empty() {
        return Err("no PT_LOAD segments".into());
    }
    Ok(loads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn plumb_elf_probe_target() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn own_function_symbolises_to_its_name() {
        let map = ExeMap::own().unwrap();
        assert!(map.symbols.len() > 100);
        let addr = plumb_elf_probe_target as fn() -> u64 as usize as u64;
        let name = map.symbol(addr).expect("probe address has a symbol");
        assert!(name.contains("plumb_elf_probe_target"), "{name}");
        // Demangled without the ::h<hash> suffix.
        assert!(!name.contains("::h"), "{name}");
        assert_eq!(map.symbol(0), None);
    }

    #[test]
    fn parses_maps_of_the_executable_only() {
        let text = "\
55d0c0a00000-55d0c0a2a000 r--p 00000000 fd:01 1311 /usr/bin/plumb
55d0c0a2a000-55d0c0c00000 r-xp 00029000 fd:01 1311 /usr/bin/plumb
55d0c0e00000-55d0c0e01000 rw-p 00200000 fd:01 1311      /usr/bin/plumb
55d0c0e01000-55d0c0e22000 rw-p 00000000 00:00 0                          [heap]
7f1e2c000000-7f1e2c1c0000 r-xp 00028000 fd:01 2042   /usr/lib/libc.so.6
7f1e2d000000-7f1e2d001000 r-xp 00000000 fd:01 1312   /usr/bin/plumb old
garbage line
";
        let m = parse_maps(text, "/usr/bin/plumb");
        let starts: Vec<_> = m.iter().map(|m| (m.start, m.end, m.offset)).collect();
        assert_eq!(
            starts,
            [
                (0x55d0c0a00000, 0x55d0c0a2a000, 0),
                (0x55d0c0a2a000, 0x55d0c0c00000, 0x29000),
                (0x55d0c0e00000, 0x55d0c0e01000, 0x200000),
            ]
        );
        assert_eq!(parse_maps(text, "/usr/bin/plumb old").len(), 1);
    }

    #[test]
    fn lookup_uses_size_or_next_symbol() {
        let s = Symbols {
            entries: vec![
                (0x100, 0x10, "a".into()),
                (0x200, 0, "b".into()),
                (0x300, 0, "c".into()),
            ],
        };
        assert_eq!(s.lookup(0xff), None);
        assert_eq!(s.lookup(0x10f), Some("a"));
        assert_eq!(s.lookup(0x110), None);
        assert_eq!(s.lookup(0x2ff), Some("b"));
        assert_eq!(s.lookup(0x300), Some("c"));
        assert_eq!(s.lookup(0x301), None);
    }

    #[test]
    fn malformed_files_are_errors_not_panics() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        assert!(parse_symbols(&exe).is_ok());
        // Section headers sit at the end of the file, so every cut loses
        // them or the tables they point to.
        for cut in [0, 3, 5, 6, 40, 63, 64, 1000, exe.len() / 2, exe.len() - 1] {
            assert!(parse_symbols(&exe[..cut]).is_err(), "cut at {cut}");
        }
        for cut in [0, 6, 0x37, 64] {
            assert!(parse_loads(&exe[..cut]).is_err(), "cut at {cut}");
        }
        let garbage: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        assert!(parse_symbols(&garbage).unwrap_err().contains("not an ELF"));
        let mut bad = exe[..64].to_vec();
        bad[4] = 1; // ELFCLASS32
        assert!(parse_symbols(&bad).unwrap_err().contains("64-bit"));
        // Header fields pointing anywhere: shoff, shentsize, shnum, phoff.
        let mut header = exe[..64].to_vec();
        header.extend_from_slice(&garbage);
        for (at, value) in [
            (0x28, u64::MAX),
            (0x28, 64),
            (0x3a, 0xffff),
            (0x3c, 0xffff),
            (0x20, u64::MAX - 8),
        ] {
            let mut d = header.clone();
            let len = if at == 0x28 || at == 0x20 { 8 } else { 2 };
            d[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
            assert!(parse_symbols(&d).is_err());
            let _ = parse_loads(&d);
        }
    }
}
