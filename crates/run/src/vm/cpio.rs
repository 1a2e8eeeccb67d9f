//! The initramfs a guest boots from: a cpio archive in the kernel's "newc"
//! format (Documentation/driver-api/early-userspace/buffer-format.rst),
//! uncompressed, which every kernel unpacks.

/// An archive being written. Entries go in the order added; a directory
/// must be added before what it holds.
pub struct Archive {
    bytes: Vec<u8>,
    ino: u32,
}

const DIR: u32 = 0o040_000;
const FILE: u32 = 0o100_000;
const CHAR: u32 = 0o020_000;

impl Default for Archive {
    fn default() -> Self {
        Archive::new()
    }
}

impl Archive {
    pub fn new() -> Archive {
        Archive {
            bytes: Vec::new(),
            ino: 1,
        }
    }

    /// A directory; the one above it must be in the archive already.
    pub fn dir(&mut self, path: &str) {
        self.entry(path, DIR | 0o755, 0, 0, &[]);
    }

    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.entry(path, FILE | (mode & 0o7777), 0, 0, data);
    }

    /// A character device node, such as `dev/console` (5, 1), which the
    /// kernel opens for init's standard streams before any devtmpfs.
    pub fn char_device(&mut self, path: &str, major: u32, minor: u32) {
        self.entry(path, CHAR | 0o600, major, minor, &[]);
    }

    fn entry(&mut self, path: &str, mode: u32, rmajor: u32, rminor: u32, data: &[u8]) {
        let name = path.trim_start_matches('/');
        let nlink = if mode & DIR != 0 { 2 } else { 1 };
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime: the same archive for the same inputs
            data.len() as u32,
            0,
            0,
            rmajor,
            rminor,
            name.len() as u32 + 1,
            0, // check: unused by newc
        ];
        self.ino += 1;
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        self.bytes.resize(self.bytes.len().next_multiple_of(4), 0);
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, 0, 0, &[]);
        self.bytes
    }
}

/// The entries of a newc archive as (name, mode, data), for tests.
#[cfg(test)]
pub(crate) fn entries(mut b: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let field = |h: &[u8], i: usize| {
        u32::from_str_radix(std::str::from_utf8(&h[6 + 8 * i..14 + 8 * i]).unwrap(), 16).unwrap()
    };
    let up4 = |n: usize| n.div_ceil(4) * 4;
    loop {
        assert_eq!(&b[..6], b"070701", "at byte {at}");
        let (mode, size, namesize) = (field(b, 1), field(b, 6) as usize, field(b, 11) as usize);
        let name = std::str::from_utf8(&b[110..110 + namesize - 1])
            .unwrap()
            .to_string();
        let data_at = up4(110 + namesize);
        let data = b[data_at..data_at + size].to_vec();
        let next = up4(data_at + size);
        at += next;
        b = &b[next..];
        if name == "TRAILER!!!" {
            assert!(b.is_empty());
            return out;
        }
        out.push((name, mode, data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_aligned_with_their_modes() {
        let mut a = Archive::new();
        a.dir("dev");
        a.char_device("dev/console", 5, 1);
        a.file("/init", 0o755, b"\x7fELF...");
        a.file("plumb/job.json", 0o644, b"{}");
        let bytes = a.finish();
        assert_eq!(bytes.len(), bytes.len().next_multiple_of(4));
        let e = entries(&bytes);
        let names: Vec<&str> = e.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["dev", "dev/console", "init", "plumb/job.json"]);
        assert_eq!(e[0].1, 0o040755);
        assert_eq!(e[1].1, 0o020600);
        assert_eq!(e[2].1, 0o100755);
        assert_eq!(e[2].2, b"\x7fELF...");
        assert_eq!(e[3].2, b"{}");
    }
}
