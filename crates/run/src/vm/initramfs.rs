//! The initramfs a guest boots from, in three cpio archives laid end to
//! end (the kernel unpacks each in turn): plumb's userland (this
//! executable as init, with what it loads, and the host tools the ends
//! call), built once per process; a kernel's part (its configuration and
//! the modules a command's tests need, in load order), built once per
//! kernel; and each boot's job.

use super::cpio::Archive;
use super::{Job, VmError, JOB_PATH, MODULES_DIR};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Directories, each added once, before what they hold.
struct Tree {
    archive: Archive,
    dirs: BTreeSet<String>,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            archive: Archive::new(),
            dirs: BTreeSet::new(),
        }
    }

    fn parents(&mut self, path: &str) {
        let mut at = String::new();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            at.push('/');
            at.push_str(part);
            if self.dirs.insert(at.clone()) {
                self.archive.dir(&at);
            }
        }
    }

    fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.parents(path);
        self.archive.file(path, mode, data);
    }

    fn finish(self) -> Vec<u8> {
        self.archive.finish()
    }
}

fn read(p: &Path) -> Result<Vec<u8>, VmError> {
    std::fs::read(p).map_err(|e| VmError::input(format!("cannot read {}: {e}", p.display())))
}

/// plumb's userland, built once per process.
pub(super) fn userland() -> Result<&'static [u8], VmError> {
    static BUILT: OnceLock<Result<Vec<u8>, VmError>> = OnceLock::new();
    BUILT
        .get_or_init(build_userland)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

fn build_userland() -> Result<Vec<u8>, VmError> {
    let exe = std::env::current_exe()
        .map_err(|e| VmError::input(format!("cannot find the plumb executable: {e}")))?;
    let mut t = Tree::new();
    for d in [
        "/dev/",
        "/proc/",
        "/sys/",
        "/tmp/",
        "/root/",
        "/run/",
        "/var/run/",
    ] {
        t.parents(d);
    }
    t.archive.char_device("/dev/console", 5, 1);
    // A debug build carries ten times its code in debug information, which
    // the guest would copy through emulated memory at every boot; its
    // symbols stay, for profiles.
    let stripped = std::env::temp_dir().join(format!("plumb-init-{}", std::process::id()));
    let small = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(&exe)
        .arg(&stripped)
        .status()
        .is_ok_and(|s| s.success());
    let init = read(if small { &stripped } else { &exe });
    let _ = std::fs::remove_file(&stripped);
    t.file("/init", 0o755, &init?);
    // The host's tools the ends call where they find them (veth and
    // namespaces, qdiscs, offloads), under /usr/bin, with what they load.
    let tools: Vec<PathBuf> = GUEST_TOOLS.iter().filter_map(|t| on_path(t)).collect();
    let mut libraries = BTreeSet::new();
    for program in std::iter::once(&exe).chain(&tools) {
        libraries.extend(shared_libraries(program)?);
    }
    for tool in &tools {
        let name = tool.file_name().map(|n| n.to_string_lossy().to_string());
        t.file(
            &format!("/usr/bin/{}", name.unwrap_or_default()),
            0o755,
            &read(tool)?,
        );
    }
    for lib in libraries {
        t.file(&lib.to_string_lossy(), 0o755, &read(&lib)?);
    }
    Ok(t.finish())
}

/// A kernel's part of the initramfs, and its modules' paths in the guest
/// (in load order) and names.
pub(super) struct KernelPart {
    pub bytes: Vec<u8>,
    pub paths: Vec<String>,
    pub names: Vec<String>,
}

/// A kernel's part: its configuration where known (the guest finds it at
/// /boot/config-RELEASE, as on a distribution's host) and its modules,
/// decompressed, named by load order.
pub(super) fn kernel_part(
    release: &str,
    config: Option<&Path>,
    modules: &[PathBuf],
) -> Result<KernelPart, VmError> {
    let mut t = Tree::new();
    if let Some(c) = config {
        t.file(&format!("/boot/config-{release}"), 0o644, &read(c)?);
    }
    let (mut paths, mut names) = (Vec::new(), Vec::new());
    for (i, m) in modules.iter().enumerate() {
        let file = m.file_name().map(|n| n.to_string_lossy().to_string());
        let name = file
            .as_deref()
            .and_then(|f| f.split(".ko").next())
            .unwrap_or("")
            .to_string();
        let at = format!("{MODULES_DIR}/{i:02}-{name}.ko");
        t.file(&at, 0o644, &super::kernel::module_image(m)?);
        paths.push(at);
        names.push(name);
    }
    Ok(KernelPart {
        bytes: t.finish(),
        paths,
        names,
    })
}

/// One boot's job.
pub(super) fn job_part(job: &Job) -> Result<Vec<u8>, VmError> {
    let mut t = Tree::new();
    let text = serde_json::to_vec(job).map_err(|e| VmError::input(e.to_string()))?;
    t.file(JOB_PATH, 0o644, &text);
    Ok(t.finish())
}

/// Programs of the host's that the ends run where present.
const GUEST_TOOLS: [&str; 4] = ["ip", "tc", "ethtool", "unshare"];

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The shared libraries and loader a dynamic executable needs, as `ldd`
/// lists them; none for a static one.
fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, VmError> {
    let bytes = std::fs::read(exe)
        .map_err(|e| VmError::input(format!("cannot read {}: {e}", exe.display())))?;
    if !has_interpreter(&bytes) {
        return Ok(Vec::new());
    }
    let out = Command::new("ldd").arg(exe).output().map_err(|e| {
        VmError::input(format!(
            "this plumb is dynamically linked and ldd cannot list its libraries ({e}); \
             use the static build ({})",
            crate::ssh::STATIC_BUILD
        ))
    })?;
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

/// Whether an ELF64 executable names a program interpreter (PT_INTERP):
/// whether it is dynamically linked.
fn has_interpreter(elf: &[u8]) -> bool {
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
    };
    const PT_INTERP: u32 = 3;
    let (Some(phoff), Some(size), Some(count)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return false;
    };
    (0..count).any(|i| {
        elf.get(phoff + i * size..phoff + i * size + 4)
            .is_some_and(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) == PT_INTERP)
    })
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_the_loader_and_the_libraries() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
    }

    #[test]
    fn this_test_binary_is_dynamic_and_garbage_is_not() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // Test binaries link glibc dynamically; the static build is musl.
        assert_eq!(has_interpreter(&me), cfg!(target_env = "gnu"));
        assert!(!has_interpreter(b"not an elf"));
    }

    #[test]
    fn a_job_part_holds_the_job_under_its_directory() {
        let job = Job {
            runs: Vec::new(),
            modules: vec!["/plumb/modules/00-veth.ko".into()],
            link: None,
        };
        let e = super::super::cpio::entries(&job_part(&job).unwrap());
        let names: Vec<&str> = e.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["plumb", "plumb/job.json"]);
        let back: Job = serde_json::from_slice(&e[1].2).unwrap();
        assert_eq!(back.modules, job.modules);
    }
}
