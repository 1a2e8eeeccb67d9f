//! Kernels under test without a reboot (`--kernel`): plumb boots the kernel
//! in QEMU with an initramfs it builds itself (its own executable as init,
//! the modules the test needs, the job), both ends run inside the guest as
//! they would on a host of their own, and the record comes back over a
//! serial port in the control protocol's frames.
//!
//! The host side is here; the guest's init is [`guest`].

mod cpio;
pub mod guest;
pub mod kernel;

use crate::{Repeat, RunOptions};
use plumb_ctl::message::{Frame, Message};
use plumb_samples::{Environment, RunRecord, VmInfo};
use plumb_spec::{Machine, Spec};
use serde::{Deserialize, Serialize};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use kernel::Kernel;

/// The program that runs guests, and the package it comes in.
pub const QEMU: &str = "qemu-system-x86_64";
const QEMU_PACKAGE: &str = "qemu-system-x86";

/// vCPUs and memory of a guest unless asked otherwise.
pub const DEFAULT_VCPUS: u32 = 2;
pub const DEFAULT_MEMORY_MIB: u32 = 1024;
/// How long a guest may take from QEMU's start to plumb's first word.
pub const DEFAULT_BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// What went wrong with a guest, and whose fault it was: the caller's
/// input (a bad image, a missing module or program), the guest's kernel (it
/// did not boot, panicked or hung), or the test inside it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct VmError {
    pub fault: Fault,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Input,
    /// The kernel did not boot to plumb, panicked or hung: for a bisect, a
    /// step to skip, never a bad commit.
    Boot,
    Test,
}

impl VmError {
    pub fn input(message: impl Into<String>) -> VmError {
        VmError {
            fault: Fault::Input,
            message: message.into(),
        }
    }
    fn boot(message: impl Into<String>) -> VmError {
        VmError {
            fault: Fault::Boot,
            message: message.into(),
        }
    }
}

/// The accelerator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM where a boot shows it works, TCG otherwise.
    Auto,
    Kvm,
    Tcg,
}

impl std::str::FromStr for Accel {
    type Err = String;
    fn from_str(s: &str) -> Result<Accel, String> {
        match s {
            "auto" => Ok(Accel::Auto),
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            _ => Err(format!("'{s}' is not an accelerator: auto, kvm or tcg")),
        }
    }
}

/// How to boot the guests of one command.
#[derive(Debug, Clone)]
pub struct VmOptions {
    pub accel: Accel,
    pub vcpus: u32,
    pub memory_mib: u32,
    pub boot_timeout: Duration,
    /// More words for the kernel's command line.
    pub append: String,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            accel: Accel::Auto,
            vcpus: DEFAULT_VCPUS,
            memory_mib: DEFAULT_MEMORY_MIB,
            boot_timeout: DEFAULT_BOOT_TIMEOUT,
            append: String::new(),
        }
    }
}

/// What the guest's init reads from its initramfs: the run to make.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub spec: Spec,
    pub label: String,
    pub repeat: Repeat,
    #[serde(default)]
    pub profile: Option<plumb_samples::ProfileAsk>,
    /// `KNOB=VALUE`, set inside the guest.
    #[serde(default)]
    pub knobs: Vec<String>,
    /// Module files in the archive, in load order.
    #[serde(default)]
    pub modules: Vec<String>,
}

/// Where in the initramfs the job and the modules are.
pub(crate) const JOB_PATH: &str = "/plumb/job.json";
pub(crate) const MODULES_DIR: &str = "/plumb/modules";

/// A directory of one boot's files, removed when dropped; those of plumb
/// processes that died are removed by the next [`Workdir::new`].
pub struct Workdir(PathBuf);

const WORKDIR_PREFIX: &str = "plumb-vm-";

impl Workdir {
    pub fn new() -> Result<Workdir, VmError> {
        let tmp = std::env::temp_dir();
        for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let pid = name
                .strip_prefix(WORKDIR_PREFIX)
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = tmp.join(format!("{WORKDIR_PREFIX}{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| VmError::input(format!("cannot make {}: {e}", dir.display())))?;
        Ok(Workdir(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Removes the directory early, once nothing needs its files by name.
    fn clear(&self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The modules a spec needs from the guest's kernel, by name.
pub fn modules_needed(spec: &Spec) -> Vec<&'static str> {
    let mut m = Vec::new();
    match spec.socket.cc.as_deref() {
        Some("bbr") => m.push("tcp_bbr"),
        Some("dctcp") => m.push("tcp_dctcp"),
        Some("htcp") => m.push("tcp_htcp"),
        Some("vegas") => m.push("tcp_vegas"),
        Some("westwood") => m.push("tcp_westwood"),
        _ => {}
    }
    if let Some(plumb_spec::Topology::Veth(v)) = &spec.topology {
        m.push("veth");
        if v.delay_us.is_some() || v.loss_ppm.is_some() || v.link_rate_bps.is_some() {
            m.push("sch_netem");
        }
    }
    m
}

/// Runs `spec` inside a guest booted from `kernel`; the record comes back
/// with its environment (the guest's), its `vm` block, and the machine in
/// its spec.
pub fn run(
    spec: &Spec,
    opts: &RunOptions,
    repeat: &Repeat,
    knobs: &[String],
    kernel_path: &Path,
    vm: &VmOptions,
) -> Result<RunRecord, VmError> {
    let qemu = qemu_version()?;
    let work = Workdir::new()?;
    let kernel = Kernel::open(kernel_path, &work)?;
    let modules = kernel.modules_for(&modules_needed(spec))?;
    let mut guest_spec = spec.clone();
    guest_spec.machine = None;
    let job = Job {
        spec: guest_spec,
        label: opts.label.clone(),
        repeat: *repeat,
        profile: opts.profile,
        knobs: knobs.to_vec(),
        modules: Vec::new(),
    };
    let initrd = work.path().join("initrd.cpio");
    let loaded = initramfs(&initrd, job, &kernel, &modules)?;
    // The run's window is the guest's clock; this bounds the whole boot.
    let per_iteration = Duration::from_millis(spec.warmup_ms + spec.duration_ms) * 3;
    let limit = vm.boot_timeout + per_iteration * repeat.max + Duration::from_secs(60);
    let (accel, booted) = boot_any(&kernel, &initrd, &work, vm, limit)?;
    let Booted {
        mut record,
        env,
        boot_s,
        console,
    } = booted;
    record.environment = Some(*env);
    let machine = Machine {
        accel: accel.to_string(),
        vcpus: vm.vcpus,
        memory_mib: vm.memory_mib,
    };
    record.spec.machine = Some(machine.clone());
    record.spec_key = record.spec.key();
    record.vm = Some(VmInfo {
        accel: machine.accel,
        vcpus: vm.vcpus,
        memory_mib: vm.memory_mib,
        qemu,
        image: kernel.source.clone(),
        image_sha256: kernel.sha256.clone(),
        release: kernel.release.clone(),
        boot_s,
        host: plumb_sys::proc::hostname(),
        modules: loaded,
        console: Some(console),
    });
    Ok(*record)
}

fn qemu_version() -> Result<String, VmError> {
    let out = Command::new(QEMU).arg("--version").output().map_err(|e| {
        VmError::input(format!(
            "--kernel: cannot run {QEMU} ({e}); install the {QEMU_PACKAGE} package"
        ))
    })?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Writes the initramfs: this executable as init (with the libraries it
/// loads, when it is not static), the job, and the modules in load order.
/// Returns the modules' names.
fn initramfs(
    to: &Path,
    mut job: Job,
    kernel: &Kernel,
    modules: &[PathBuf],
) -> Result<Vec<String>, VmError> {
    let exe = std::env::current_exe()
        .map_err(|e| VmError::input(format!("cannot find the plumb executable: {e}")))?;
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| VmError::input(format!("cannot read {}: {e}", p.display())))
    };
    let mut a = cpio::Archive::new();
    let mut dirs = std::collections::BTreeSet::new();
    let mut add_dirs = |a: &mut cpio::Archive, path: &str| {
        let mut at = String::new();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            at.push('/');
            at.push_str(part);
            if dirs.insert(at.clone()) {
                a.dir(&at);
            }
        }
    };
    for d in [
        "/dev/",
        "/proc/",
        "/sys/",
        "/tmp/",
        "/root/",
        "/run/",
        "/var/run/",
    ] {
        add_dirs(&mut a, d);
    }
    a.char_device("/dev/console", 5, 1);
    // A debug build carries ten times its code in debug information, which
    // the guest would copy through emulated memory at every boot; its
    // symbols stay, for profiles.
    let stripped = to.with_file_name("init");
    let small = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(&exe)
        .arg(&stripped)
        .status()
        .is_ok_and(|s| s.success());
    a.file("/init", 0o755, &read(if small { &stripped } else { &exe })?);
    // The host's tools the ends call where they find them (veth and
    // namespaces, qdiscs, offloads), under /usr/bin, with what they load.
    let tools: Vec<PathBuf> = GUEST_TOOLS.iter().filter_map(|t| on_path(t)).collect();
    let mut libraries = std::collections::BTreeSet::new();
    for program in std::iter::once(&exe).chain(&tools) {
        libraries.extend(shared_libraries(program)?);
    }
    for t in &tools {
        let name = t.file_name().map(|n| n.to_string_lossy().to_string());
        let at = format!("/usr/bin/{}", name.unwrap_or_default());
        add_dirs(&mut a, &at);
        a.file(&at, 0o755, &read(t)?);
    }
    for lib in libraries {
        let at = lib.to_string_lossy().to_string();
        add_dirs(&mut a, &at);
        a.file(&at, 0o755, &read(&lib)?);
    }
    if let Some(config) = &kernel.config {
        let at = format!("/boot/config-{}", kernel.release);
        add_dirs(&mut a, &at);
        a.file(&at, 0o644, &read(config)?);
    }
    let mut names = Vec::new();
    for (i, m) in modules.iter().enumerate() {
        let name = m
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .split(".ko")
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default();
        let at = format!("{MODULES_DIR}/{i:02}-{name}.ko");
        add_dirs(&mut a, &at);
        a.file(&at, 0o644, &kernel::module_image(m)?);
        job.modules.push(at);
        names.push(name);
    }
    add_dirs(&mut a, JOB_PATH);
    let text = serde_json::to_vec(&job).map_err(|e| VmError::input(e.to_string()))?;
    a.file(JOB_PATH, 0o644, &text);
    std::fs::write(to, a.finish())
        .map_err(|e| VmError::input(format!("cannot write {}: {e}", to.display())))?;
    Ok(names)
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

/// A guest's answer.
struct Booted {
    record: Box<RunRecord>,
    env: Box<Environment>,
    boot_s: f64,
    console: String,
}

/// Whether KVM was found broken on this host by an earlier boot of this
/// process, so later boots go straight to TCG.
static KVM_BROKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long a KVM boot may take to say its first word before it counts as
/// a hang and TCG is used instead.
const KVM_PROBE: Duration = Duration::from_secs(20);

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        })
    }
}

fn kvm_usable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
        && !KVM_BROKEN.load(std::sync::atomic::Ordering::Relaxed)
}

/// Boots under the accelerator asked for; under `auto`, KVM first where
/// the host offers it, and TCG when KVM does not bring the guest up.
fn boot_any(
    kernel: &Kernel,
    initrd: &Path,
    work: &Workdir,
    vm: &VmOptions,
    limit: Duration,
) -> Result<(Accel, Booted), VmError> {
    let tcg =
        || boot(kernel, initrd, work, vm, Accel::Tcg, vm.boot_timeout, limit).map_err(|f| f.error);
    match vm.accel {
        Accel::Auto if kvm_usable() => {
            match boot(kernel, initrd, work, vm, Accel::Kvm, KVM_PROBE, limit) {
                // KVM that cannot bring a guest up (QEMU fails, or the guest
                // hangs) is this host's, not the kernel's: TCG instead.
                Err(f) if f.before_first_word => {
                    KVM_BROKEN.store(true, std::sync::atomic::Ordering::Relaxed);
                    let why = f.error.message.lines().next().unwrap_or("");
                    let why = why.split("; the console").next().unwrap_or(why);
                    eprintln!("plumb: KVM did not bring the guest up, using TCG ({why})");
                    Ok((Accel::Tcg, tcg()?))
                }
                r => Ok((Accel::Kvm, r.map_err(|f| f.error)?)),
            }
        }
        Accel::Auto | Accel::Tcg => Ok((Accel::Tcg, tcg()?)),
        Accel::Kvm => Ok((
            Accel::Kvm,
            boot(kernel, initrd, work, vm, Accel::Kvm, vm.boot_timeout, limit)
                .map_err(|f| f.error)?,
        )),
    }
}

/// The guest kernel's command line: the console on the first serial port,
/// plumb as init, and a panic that ends QEMU (with -no-reboot) rather than
/// hanging. (Words without '=' would reach init as arguments.)
const KERNEL_COMMAND_LINE: &str = "console=ttyS0 rdinit=/init panic=-1 oops=panic quiet loglevel=4";

/// A boot that failed, and whether the guest had said its first word.
struct BootFailure {
    error: VmError,
    before_first_word: bool,
}

/// QEMU, ended when dropped: a run that fails or is interrupted leaves no
/// guest behind (and one whose plumb is killed loses it to the
/// parent-death signal).
struct Qemu(Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[allow(clippy::too_many_arguments)]
fn boot(
    kernel: &Kernel,
    initrd: &Path,
    work: &Workdir,
    vm: &VmOptions,
    accel: Accel,
    boot_timeout: Duration,
    limit: Duration,
) -> Result<Booted, BootFailure> {
    let mut said_hello = false;
    boot_inner(
        kernel,
        initrd,
        work,
        vm,
        accel,
        boot_timeout,
        limit,
        &mut said_hello,
    )
    .map_err(|error| BootFailure {
        error,
        before_first_word: !said_hello,
    })
}

#[allow(clippy::too_many_arguments)]
fn boot_inner(
    kernel: &Kernel,
    initrd: &Path,
    work: &Workdir,
    vm: &VmOptions,
    accel: Accel,
    boot_timeout: Duration,
    limit: Duration,
    said_hello: &mut bool,
) -> Result<Booted, VmError> {
    let console = work.path().join(format!("console-{accel}.log"));
    let qemu_log = work.path().join(format!("qemu-{accel}.log"));
    let sock = work.path().join(format!("results-{accel}.sock"));
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock)
        .map_err(|e| VmError::input(format!("cannot listen on {}: {e}", sock.display())))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| VmError::input(e.to_string()))?;
    let mut cmd = Command::new(QEMU);
    cmd.args([
        "-nodefaults",
        "-no-user-config",
        "-no-reboot",
        "-display",
        "none",
    ])
    .args(["-accel", &accel.to_string()])
    .args(["-cpu", if accel == Accel::Kvm { "host" } else { "max" }])
    .args(["-smp", &vm.vcpus.to_string()])
    .args(["-m", &format!("{}M", vm.memory_mib)])
    .arg("-kernel")
    .arg(&kernel.image)
    .arg("-initrd")
    .arg(initrd)
    .arg("-append")
    .arg(format!("{KERNEL_COMMAND_LINE} {}", vm.append).trim_end())
    .arg("-chardev")
    .arg(format!("file,id=console,path={}", console.display()))
    .args(["-serial", "chardev:console"])
    .arg("-chardev")
    .arg(format!("socket,id=results,path={}", sock.display()))
    .args(["-serial", "chardev:results"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(
        std::fs::File::create(&qemu_log)
            .map_err(|e| VmError::input(format!("{}: {e}", qemu_log.display())))?,
    );
    plumb_sys::process::kill_on_parent_death(&mut cmd);
    let start = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| VmError::input(format!("cannot start {QEMU}: {e}")))?;
    let mut qemu = Qemu(child);
    let logs = Logs::new(&console, &qemu_log);
    let last_words = |why: &str| {
        let said = logs.qemu();
        let text = logs.console();
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let qemu_said = said.trim();
        VmError::boot(format!(
            "kernel {} ({accel}): {why}{}{}",
            kernel.release,
            if qemu_said.is_empty() {
                String::new()
            } else {
                format!("; qemu said: {}", qemu_said.replace('\n', " / "))
            },
            if tail.is_empty() {
                "; the console is empty".to_string()
            } else {
                format!("; the console ended:\n  {}", tail.join("\n  "))
            }
        ))
    };
    // QEMU connects to the socket as it starts.
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(VmError::input(format!("{}: {e}", sock.display()))),
        }
        if let Ok(Some(status)) = qemu.0.try_wait() {
            return Err(last_words(&format!("{QEMU} exited at once ({status})")));
        }
        if start.elapsed() > boot_timeout {
            return Err(last_words(&format!("{QEMU} never opened the results port")));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut reader = Frames::new(stream);
    let mut boot_s = None;
    loop {
        let deadline = if boot_s.is_none() {
            boot_timeout
        } else {
            limit
        };
        let frame = reader.next(start + deadline, &mut qemu.0);
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => {
                let text = logs.console();
                let why = match text.lines().find(|l| l.contains("Kernel panic")) {
                    Some(line) => format!(
                        "the guest kernel panicked: {}",
                        line.split("Kernel panic - ").last().unwrap_or(line).trim()
                    ),
                    None => "the guest stopped before it sent its results".to_string(),
                };
                return Err(last_words(&why));
            }
            Err(Timeout) => {
                let why = if boot_s.is_none() {
                    format!(
                        "no word from the guest in {} s: killed",
                        boot_timeout.as_secs()
                    )
                } else {
                    format!("the run took over {} s: killed", limit.as_secs())
                };
                return Err(last_words(&why));
            }
        };
        match frame {
            Message::Hello { .. } => {
                *said_hello = true;
                boot_s = Some(start.elapsed().as_secs_f64());
                // QEMU has read what it boots, and the logs stay open here:
                // a plumb killed from now on leaves no file behind.
                logs.keep();
                work.clear();
            }
            Message::Guest { record, env } => {
                return Ok(Booted {
                    record,
                    env,
                    boot_s: boot_s.unwrap_or(0.0),
                    console: tail_of(&logs.console(), CONSOLE_KEPT),
                });
            }
            Message::Error { message, .. } => {
                return Err(VmError {
                    fault: Fault::Test,
                    message: format!("in the guest ({}): {message}", kernel.release),
                })
            }
            other => {
                return Err(last_words(&format!(
                    "the guest sent '{}' out of place",
                    other.name()
                )))
            }
        }
    }
}

/// The guest's console and QEMU's own messages: by path until the files
/// are removed, then through descriptors opened before.
struct Logs {
    console: PathBuf,
    qemu: PathBuf,
    kept: std::cell::RefCell<Option<(std::fs::File, std::fs::File)>>,
}

impl Logs {
    fn new(console: &Path, qemu: &Path) -> Logs {
        Logs {
            console: console.to_path_buf(),
            qemu: qemu.to_path_buf(),
            kept: Default::default(),
        }
    }

    fn keep(&self) {
        let open = |p: &Path| std::fs::File::open(p);
        if let (Ok(c), Ok(q)) = (open(&self.console), open(&self.qemu)) {
            *self.kept.borrow_mut() = Some((c, q));
        }
    }

    fn read(
        &self,
        path: &Path,
        which: fn(&mut (std::fs::File, std::fs::File)) -> &mut std::fs::File,
    ) -> String {
        use std::io::{Read, Seek};
        let mut kept = self.kept.borrow_mut();
        let Some(files) = kept.as_mut() else {
            return std::fs::read_to_string(path).unwrap_or_default();
        };
        let f = which(files);
        let mut text = String::new();
        let _ = f.rewind().and_then(|_| f.read_to_string(&mut text));
        text
    }

    fn console(&self) -> String {
        self.read(&self.console, |f| &mut f.0)
    }

    fn qemu(&self) -> String {
        self.read(&self.qemu, |f| &mut f.1)
    }
}

/// How much of the guest's console a record keeps: its end.
const CONSOLE_KEPT: usize = 32 * 1024;

fn tail_of(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut at = text.len() - max;
    while !text.is_char_boundary(at) {
        at += 1;
    }
    text[at..].to_string()
}

struct Timeout;

/// Frames from the guest's port, read with a deadline while QEMU lives.
struct Frames {
    rx: std::sync::mpsc::Receiver<Result<Frame, plumb_ctl::frame::FrameError>>,
}

impl Frames {
    fn new(stream: UnixStream) -> Frames {
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = stream.set_nonblocking(false);
        std::thread::spawn(move || loop {
            let f = plumb_ctl::frame::read_frame(&stream, plumb_ctl::frame::MAX_RESULT_FRAME);
            let end = f.is_err();
            if tx.send(f).is_err() || end {
                break;
            }
        });
        Frames { rx }
    }

    /// The next message; None when the guest is gone without one.
    fn next(&mut self, deadline: Instant, qemu: &mut Child) -> Result<Option<Message>, Timeout> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Timeout);
            }
            match self.rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(Ok(f)) => return Ok(Some(f.message)),
                Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Ok(None)
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    // A guest that powered off has said all it will.
                    if let Ok(Some(_)) = qemu.try_wait() {
                        return match self.rx.recv_timeout(Duration::from_millis(500)) {
                            Ok(Ok(f)) => Ok(Some(f.message)),
                            _ => Ok(None),
                        };
                    }
                }
            }
        }
    }
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
    fn a_spec_asks_for_the_modules_it_uses() {
        let mut s = Spec::stream();
        assert!(modules_needed(&s).is_empty());
        s.socket.cc = Some("bbr".into());
        assert_eq!(modules_needed(&s), ["tcp_bbr"]);
    }

    #[test]
    fn a_console_is_kept_by_its_end() {
        assert_eq!(tail_of("abcdef", 3), "def");
        assert_eq!(tail_of("ab", 3), "ab");
        assert_eq!(tail_of("aé", 1), "");
    }
}
