//! The kernel a guest boots: an image file, a distribution package, or a
//! build directory; its release, and the modules a test needs from it in
//! the order they load.

use super::{VmError, Workdir};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A kernel ready to boot.
#[derive(Debug)]
pub struct Kernel {
    /// The image QEMU boots (bzImage), read once.
    pub image: Vec<u8>,
    /// The directory of its modules (`lib/modules/RELEASE`), where known.
    pub modules: Option<PathBuf>,
    /// The release the image says it is (`6.1.0-56-cloud-amd64`).
    pub release: String,
    /// The file the user named, by name.
    pub source: String,
    /// SHA-256 of the image, in hex.
    pub sha256: String,
    /// The configuration it was built with, where known: the guest finds
    /// it at /boot/config-RELEASE, as on a distribution's host.
    pub config: Option<PathBuf>,
}

/// What a path given to `--kernel` is.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Image,
    Package,
    BuildDir,
}

fn kind(path: &Path) -> Result<Kind, VmError> {
    if path.is_dir() {
        return Ok(Kind::BuildDir);
    }
    let head = read_head(path, 0x210)?;
    if head.starts_with(b"!<arch>\n") {
        return Ok(Kind::Package);
    }
    if version_offset(&head).is_some() {
        return Ok(Kind::Image);
    }
    Err(VmError::input(format!(
        "--kernel {}: not a kernel image (no bzImage header), a .deb package or a build directory",
        path.display()
    )))
}

fn read_head(path: &Path, n: usize) -> Result<Vec<u8>, VmError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)
        .map_err(|e| VmError::input(format!("--kernel {}: {e}", path.display())))?;
    let mut buf = Vec::with_capacity(n);
    f.by_ref()
        .take(n as u64)
        .read_to_end(&mut buf)
        .map_err(|e| VmError::input(format!("--kernel {}: {e}", path.display())))?;
    Ok(buf)
}

/// Where a bzImage's release string starts: the boot protocol's
/// `kernel_version` field (at 0x20e) points at it, less 0x200.
fn version_offset(head: &[u8]) -> Option<usize> {
    if head.get(0x202..0x206)? != b"HdrS" {
        return None;
    }
    let at = u16::from_le_bytes([*head.get(0x20e)?, *head.get(0x20f)?]) as usize;
    (at > 0).then_some(at + 0x200)
}

/// Reads the release string an image's header points at.
fn image_release(path: &Path) -> Result<String, VmError> {
    let head = read_head(path, 0x210)?;
    let not = || {
        VmError::input(format!(
            "--kernel {}: not a kernel image (no bzImage header)",
            path.display()
        ))
    };
    let at = version_offset(&head).ok_or_else(not)?;
    let text = read_head(path, at + 256)?;
    let s = text.get(at..).ok_or_else(not)?;
    let end = s
        .iter()
        .position(|&b| b == 0 || b == b' ')
        .unwrap_or(s.len());
    let release = String::from_utf8_lossy(&s[..end]).to_string();
    if release.is_empty() || !release.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return Err(not());
    }
    Ok(release)
}

/// Where a tree keeps the modules of `release`: `lib/modules` or, in
/// newer distributions, `usr/lib/modules`.
fn modules_under(root: &Path, release: &str) -> Option<PathBuf> {
    ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|d| root.join(d).join(release))
        .find(|p| p.join("kernel").is_dir() || p.join("modules.order").is_file())
}

impl Kernel {
    /// Opens what `--kernel` names; a package is unpacked into `work`.
    pub fn open(path: &Path, work: &Workdir) -> Result<Kernel, VmError> {
        let source = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| path.display().to_string());
        // Each kind: its image, its release, and its modules and
        // configuration where it has them.
        let (image, release, modules, config) = match kind(path)? {
            Kind::Image => (path.to_path_buf(), image_release(path)?, None, None),
            Kind::Package => {
                let to = work.path().join("package");
                let out = Command::new("dpkg-deb")
                    .arg("-x")
                    .arg(path)
                    .arg(&to)
                    .output()
                    .map_err(|e| {
                        VmError::input(format!(
                            "--kernel {}: cannot run dpkg-deb to unpack it ({e}); install the dpkg package",
                            path.display()
                        ))
                    })?;
                if !out.status.success() {
                    return Err(VmError::input(format!(
                        "--kernel {}: dpkg-deb cannot unpack it: {}",
                        path.display(),
                        String::from_utf8_lossy(&out.stderr).trim()
                    )));
                }
                let image = std::fs::read_dir(to.join("boot"))
                    .ok()
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .find(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
                    })
                    .ok_or_else(|| {
                        VmError::input(format!(
                            "--kernel {}: the package holds no boot/vmlinuz-*: not a kernel image package",
                            path.display()
                        ))
                    })?;
                let release = image_release(&image)?;
                let modules = modules_under(&to, &release);
                let config = to.join("boot").join(format!("config-{release}"));
                (image, release, modules, Some(config))
            }
            Kind::BuildDir => {
                let image = path.join("arch/x86/boot/bzImage");
                if !image.is_file() {
                    return Err(VmError::input(format!(
                        "--kernel {}: a directory, but without arch/x86/boot/bzImage: build the kernel first",
                        path.display()
                    )));
                }
                // `make modules_install INSTALL_MOD_PATH=...` to the tree
                // itself or to a staging directory in it.
                let release = image_release(&image)?;
                let modules = ["staging", "."]
                    .iter()
                    .find_map(|d| modules_under(&path.join(d), &release));
                (image, release, modules, Some(path.join(".config")))
            }
        };
        let config = config.filter(|p| p.is_file());
        let bytes = std::fs::read(&image)
            .map_err(|e| VmError::input(format!("--kernel {}: {e}", image.display())))?;
        let sha256 = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Kernel {
            image: bytes,
            modules,
            release,
            source,
            sha256,
            config,
        })
    }

    /// The module files `names` need, each after those it depends on,
    /// leaving out what the kernel has built in. A module neither built in
    /// nor found is refused by name.
    pub fn modules_for(&self, names: &[&str]) -> Result<Vec<PathBuf>, VmError> {
        let mut order = Vec::new();
        if names.is_empty() {
            return Ok(order);
        }
        let Some(dir) = &self.modules else {
            return Err(VmError::input(format!(
                "--kernel {}: the test needs module {} and this image comes without modules; \
                 give a linux-image .deb, or a build directory with the modules installed \
                 under it (make modules_install INSTALL_MOD_PATH=$PWD/staging)",
                self.source, names[0]
            )));
        };
        let index = ModuleIndex::read(dir);
        for n in names {
            index.visit(n, &self.source, &mut order, 0)?;
        }
        Ok(order)
    }
}

/// The modules of one release: each file by module name (`-` and `_`
/// alike), and the names built into the image.
struct ModuleIndex {
    files: std::collections::BTreeMap<String, PathBuf>,
    builtin: std::collections::BTreeSet<String>,
}

fn module_name(file: &str) -> Option<String> {
    let stem = file.split(".ko").next()?;
    (file.len() > stem.len()).then(|| stem.replace('-', "_"))
}

impl ModuleIndex {
    fn read(dir: &Path) -> ModuleIndex {
        let mut files = std::collections::BTreeMap::new();
        let mut stack = vec![dir.join("kernel")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Some(n) = module_name(&e.file_name().to_string_lossy()) {
                    files.insert(n, p);
                }
            }
        }
        let builtin = std::fs::read_to_string(dir.join("modules.builtin"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| module_name(l.rsplit('/').next()?))
            .collect();
        ModuleIndex { files, builtin }
    }

    fn visit(
        &self,
        name: &str,
        source: &str,
        order: &mut Vec<PathBuf>,
        depth: u32,
    ) -> Result<(), VmError> {
        let name = name.replace('-', "_");
        if self.builtin.contains(&name) {
            return Ok(());
        }
        let Some(file) = self.files.get(&name) else {
            return Err(VmError::input(format!(
                "--kernel {source}: the test needs module {name}, which this kernel neither \
                 builds in nor ships"
            )));
        };
        if order.contains(file) || depth > 32 {
            return Ok(());
        }
        for dep in depends(file) {
            self.visit(&dep, source, order, depth + 1)?;
        }
        order.push(file.clone());
        Ok(())
    }
}

/// A module's dependencies as its own modinfo names them (a package has no
/// modules.dep).
fn depends(file: &Path) -> Vec<String> {
    Command::new("modinfo")
        .args(["-F", "depends"])
        .arg(file)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A module file's bytes as the kernel's init_module takes them:
/// decompressed here, since a kernel may lack in-kernel decompression.
pub fn module_image(file: &Path) -> Result<Vec<u8>, VmError> {
    let name = file.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some(("xz", "xz-utils"))
    } else if name.ends_with(".zst") {
        Some(("zstd", "zstd"))
    } else if name.ends_with(".gz") {
        Some(("gzip", "gzip"))
    } else {
        None
    };
    let Some((tool, package)) = tool else {
        return std::fs::read(file).map_err(|e| VmError::input(format!("{name}: {e}")));
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(file)
        .output()
        .map_err(|e| {
            VmError::input(format!(
                "{name}: cannot run {tool} to decompress it ({e}); install the {package} package"
            ))
        })?;
    if !out.status.success() {
        return Err(VmError::input(format!(
            "{name}: {tool} cannot decompress it: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// What a kernel built for a guest needs in its configuration (Kconfig
/// symbols without `CONFIG_`), given the modules its test points load:
/// plumb's console and frames go over the 8250 serial ports, its init
/// comes in an initramfs, and `--vm-link`'s NIC is virtio over PCI.
/// `VIRTIO_MENU` gates the virtio drivers in kernels from 5.8 on;
/// `make olddefconfig` drops a symbol a kernel does not know.
pub fn config_needed(modules: &[&str]) -> Vec<String> {
    let base = [
        "SERIAL_8250",
        "SERIAL_8250_CONSOLE",
        "BLK_DEV_INITRD",
        "VIRTIO_MENU",
        "VIRTIO",
        "VIRTIO_PCI",
        "VIRTIO_NET",
    ];
    let mut symbols: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    for m in modules {
        let more: Vec<String> = match *m {
            "veth" => vec!["VETH".into()],
            // sch_fq_codel is NET_SCH_FQ_CODEL, cls_u32 NET_CLS_U32.
            q if q.starts_with("sch_") => {
                vec![
                    "NET_SCHED".into(),
                    format!("NET_SCH_{}", q["sch_".len()..].to_ascii_uppercase()),
                ]
            }
            c if c.starts_with("cls_") => vec![
                "NET_SCHED".into(),
                "NET_CLS".into(),
                format!("NET_CLS_{}", c["cls_".len()..].to_ascii_uppercase()),
            ],
            // tcp_bbr is TCP_CONG_BBR, and so on for each congestion control.
            cc if cc.starts_with("tcp_") => {
                vec![format!(
                    "TCP_CONG_{}",
                    cc["tcp_".len()..].to_ascii_uppercase()
                )]
            }
            // The link's modules are in the base; one without a symbol
            // here is refused by name when its guest is opened.
            _ => Vec::new(),
        };
        for s in more {
            if !symbols.contains(&s) {
                symbols.push(s);
            }
        }
    }
    symbols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_ignore_compression_and_dashes() {
        assert_eq!(module_name("tcp_bbr.ko.xz").as_deref(), Some("tcp_bbr"));
        assert_eq!(module_name("sch-netem.ko").as_deref(), Some("sch_netem"));
        assert_eq!(module_name("modules.order"), None);
    }

    #[test]
    fn a_guests_configuration_names_each_modules_symbol_once() {
        let c = config_needed(&["tcp_bbr", "veth", "sch_netem", "veth"]);
        assert!(c.contains(&"SERIAL_8250_CONSOLE".to_string()), "{c:?}");
        let tail: Vec<&str> = c[c.len() - 4..].iter().map(String::as_str).collect();
        assert_eq!(tail, ["TCP_CONG_BBR", "VETH", "NET_SCHED", "NET_SCH_NETEM"]);
    }

    #[test]
    fn a_header_without_the_magic_is_no_image() {
        let mut head = vec![0u8; 0x210];
        assert_eq!(version_offset(&head), None);
        head[0x202..0x206].copy_from_slice(b"HdrS");
        head[0x20e] = 0x30;
        assert_eq!(version_offset(&head), Some(0x230));
    }
}
