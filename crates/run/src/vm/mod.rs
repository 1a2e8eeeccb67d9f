//! Kernels under test without a reboot (`--kernel`): plumb boots the kernel
//! in QEMU with an initramfs it builds itself (its own executable as init,
//! the modules the test needs, the job), both ends run inside the guest as
//! they would on a host of their own, and the record comes back over a
//! serial port in the control protocol's frames.
//!
//! The host side is here; the guest's init is [`guest`].

pub mod accel;
mod cpio;
pub mod guest;
mod initramfs;
pub mod kernel;
mod qemu;
pub mod watch;

use crate::{Repeat, RunOptions};
use plumb_samples::{RunRecord, VmInfo};
use plumb_spec::{Machine, Spec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub use kernel::Kernel;
pub use qemu::VmEvent;

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
    /// Ctrl-C or SIGTERM while a guest ran: it was stopped.
    Interrupted,
}

impl VmError {
    pub fn input(message: impl Into<String>) -> VmError {
        VmError {
            fault: Fault::Input,
            message: message.into(),
        }
    }
    pub(crate) fn boot(message: impl Into<String>) -> VmError {
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

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        })
    }
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
    /// Set by a signal handler: stop the guest and return.
    pub interrupted: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// One end per guest, two guests joined by a virtio-net link, rather
    /// than both ends in one.
    pub link: bool,
    /// Told of each boot's progress as it happens.
    pub progress: Option<Progress>,
}

/// Who is told of a boot's progress: the command line, on a terminal.
#[derive(Clone)]
pub struct Progress(pub std::sync::Arc<dyn Fn(&VmEvent) + Send + Sync>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            accel: Accel::Auto,
            vcpus: DEFAULT_VCPUS,
            memory_mib: DEFAULT_MEMORY_MIB,
            boot_timeout: DEFAULT_BOOT_TIMEOUT,
            append: String::new(),
            interrupted: Default::default(),
            link: false,
            progress: None,
        }
    }
}

/// One run a guest makes: a spec, its iterations, its knobs (both ends',
/// set inside the guest and put back after the run) and what its ends
/// read beyond the defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuestRun {
    pub spec: Spec,
    pub repeat: Repeat,
    #[serde(default)]
    pub knobs: Vec<String>,
    /// The server end's knobs where it has a namespace of its own in the
    /// guest (`--topology veth`): set there, as on a host. Without one
    /// they are among `knobs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_knobs: Vec<String>,
    #[serde(default, flatten)]
    pub observe: plumb_samples::Observe,
}

/// What the guest's init reads from its initramfs: the runs to make, in
/// order, and the modules to load first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub runs: Vec<GuestRun>,
    /// Module files in the archive, in load order.
    #[serde(default)]
    pub modules: Vec<String>,
    /// This guest's end of a link to another guest, when each end has
    /// one of its own.
    #[serde(default)]
    pub link: Option<GuestLink>,
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
        let router = v
            .qdisc
            .as_deref()
            .and_then(plumb_spec::bottleneck::module_of);
        // A router's qdisc, under the shaper where a rate is asked.
        if let Some((kind, _, module)) = router {
            m.extend(module);
            if v.link_rate_bps.is_some() && kind != "cake" {
                m.extend(plumb_spec::bottleneck::SHAPER_MODULES);
            }
        }
        // netem where a delay or loss is asked, or a rate with no router's
        // qdisc to shape it.
        let rate_alone = router.is_none() && v.link_rate_bps.is_some();
        if v.delay_us.is_some() || v.loss_ppm.is_some() || rate_alone {
            m.push("sch_netem");
        }
    }
    // A part's own congestion control (a BBR flow among CUBIC ones).
    for p in &spec.parts {
        for module in modules_needed(&spec.part_spec(p)) {
            if !m.contains(&module) {
                m.push(module);
            }
        }
    }
    m
}

/// A kernel opened for a command's runs, with what every boot of it needs
/// held in memory: a sweep boots it once per round.
pub struct Guest {
    /// `LABEL=IMAGE`'s label.
    label: Option<String>,
    /// The image's release and the file it came from.
    pub release: String,
    pub source: String,
    pub sha256: String,
    image: Vec<u8>,
    part: initramfs::KernelPart,
    pub vm: VmOptions,
    qemu: String,
}

impl Guest {
    /// Opens `path` for runs of `specs`: the modules they need are taken
    /// now, so a missing one is refused before anything boots.
    pub fn open(
        path: &Path,
        label: Option<String>,
        vm: &VmOptions,
        specs: &[&Spec],
    ) -> Result<Guest, VmError> {
        let qemu = qemu_version()?;
        let work = Workdir::new()?;
        let kernel = Kernel::open(path, &work)?;
        let mut wanted: Vec<&str> = Vec::new();
        // The link's NIC: virtio over PCI, the driver, and what it needs.
        let link: &[&str] = if vm.link {
            &["virtio_pci", "virtio_net"]
        } else {
            &[]
        };
        for m in specs
            .iter()
            .flat_map(|s| modules_needed(s))
            .chain(link.iter().copied())
        {
            if !wanted.contains(&m) {
                wanted.push(m);
            }
        }
        let files = kernel.modules_for(&wanted)?;
        let part = initramfs::kernel_part(&kernel.release, kernel.config.as_deref(), &files)?;
        Ok(Guest {
            label,
            release: kernel.release,
            source: kernel.source,
            sha256: kernel.sha256,
            image: kernel.image,
            part,
            vm: vm.clone(),
            qemu,
        })
    }

    /// What its runs are labelled: `LABEL=IMAGE`'s label, else the release.
    pub fn label(&self) -> String {
        self.label.clone().unwrap_or_else(|| self.release.clone())
    }

    /// Gives guests that share a release and no label of their own (the
    /// builds of a bisect) labels that tell them apart: the release and a
    /// short hash of the image.
    pub fn distinguish(guests: &mut [Guest]) {
        for i in 0..guests.len() {
            let shared = guests
                .iter()
                .filter(|g| g.release == guests[i].release && g.sha256 != guests[i].sha256)
                .count()
                > 0;
            if shared && guests[i].label.is_none() {
                guests[i].label = Some(format!("{}@{}", guests[i].release, &guests[i].sha256[..8]));
            }
        }
    }

    /// Boots once and makes `runs` inside, in order; `each` gets every
    /// record as it comes back, as if measured on a host of its own: the
    /// guest's environment, the machine in its spec, the `vm` block, and
    /// this guest's label.
    pub fn run(
        &self,
        runs: &[GuestRun],
        each: &mut dyn FnMut(usize, RunRecord) -> Result<(), VmError>,
    ) -> Result<(), VmError> {
        if runs.is_empty() {
            return Ok(());
        }
        let runs: Vec<GuestRun> = runs
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.spec.machine = None;
                r
            })
            .collect();
        // The windows are the guest's clock; this bounds the whole boot.
        let busy: Duration = runs
            .iter()
            .map(|r| {
                Duration::from_millis(r.spec.warmup_ms + r.spec.duration_ms) * 3 * r.repeat.max
                    + Duration::from_secs(30)
            })
            .sum();
        let limit = self.vm.boot_timeout + busy;
        let work = Workdir::new()?;
        let link_socket = work.path().join("link.sock");
        let (client_link, server_link) = if self.vm.link {
            (Some(GuestLink::client()), Some(GuestLink::server()))
        } else {
            (None, None)
        };
        let client = self.boot_files(&work, runs.clone(), client_link.clone())?;
        let specs: Vec<Spec> = runs.iter().map(|r| r.spec.clone()).collect();
        let mut k = 0;
        let mut arrived = |accel: Accel, arrived: qemu::Arrived| {
            let record = self.record_of(accel, arrived);
            let at = k;
            k += 1;
            each(at, record)
        };
        let client_boot = |accel: Option<Accel>| qemu::Boot {
            image: &client.0,
            release: &self.release,
            initrd: &client.1,
            work: &work,
            vm: &self.vm,
            limit,
            runs: runs.len(),
            link: client_link.as_ref().map(|_| qemu::Link {
                socket: &link_socket,
                listen: false,
                mac: GuestLink::CLIENT_MAC,
            }),
            stop: None,
            accel,
            hello: None,
            qemu: &self.qemu,
            specs: &specs,
        };
        let Some(server_link) = server_link else {
            return qemu::boot_any(&client_boot(None), &mut arrived);
        };
        // One end per guest: the server's guest first, listening on the
        // link, until the client's runs are done.
        let server_work = Workdir::new()?;
        let server = self.boot_files(&server_work, Vec::new(), Some(server_link))?;
        let done = std::sync::atomic::AtomicBool::new(false);
        let booted = std::sync::OnceLock::new();
        let server_boot = qemu::Boot {
            image: &server.0,
            release: &self.release,
            initrd: &server.1,
            work: &server_work,
            vm: &self.vm,
            // It boots first and serves to the client's end.
            limit: limit + self.vm.boot_timeout,
            runs: usize::MAX,
            link: Some(qemu::Link {
                socket: &link_socket,
                listen: true,
                mac: GuestLink::SERVER_MAC,
            }),
            stop: Some(&done),
            accel: None,
            hello: Some(&booted),
            qemu: &self.qemu,
            specs: &[],
        };
        std::thread::scope(|scope| {
            let served = scope.spawn(|| qemu::boot_any(&server_boot, &mut |_, _| Ok(())));
            // The client's guest boots once the server's has, under the
            // accelerator that one found, and its QEMU connects to the link
            // the server's listens on.
            while booted.get().is_none() && !served.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let ran = match booted.get() {
                Some(accel) => qemu::boot_any(&client_boot(Some(*accel)), &mut arrived),
                None => Err(VmError::boot("the server's guest did not boot")),
            };
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            let served = served
                .join()
                .unwrap_or_else(|_| Err(VmError::boot("the server's guest thread panicked")));
            match (ran, served) {
                // The server's guest failing says why the client did.
                (Err(e), Err(s)) => Err(VmError {
                    fault: s.fault,
                    message: format!("{} (the server's guest: {})", e.message, s.message),
                }),
                (r, _) => r,
            }
        })
    }

    /// Boots under KVM to the guest's first word and no further: whether
    /// this host's KVM runs a guest, asked afresh (and remembered for
    /// `--accel auto`). The seconds it took to boot.
    pub fn probe_kvm(&self) -> Result<f64, VmError> {
        let work = Workdir::new()?;
        let files = self.boot_files(&work, Vec::new(), None)?;
        let vm = VmOptions {
            accel: Accel::Kvm,
            ..self.vm.clone()
        };
        let booted = std::sync::OnceLock::new();
        let start = std::time::Instant::now();
        let boot = qemu::Boot {
            image: &files.0,
            release: &self.release,
            initrd: &files.1,
            work: &work,
            vm: &vm,
            limit: vm.boot_timeout,
            runs: 0,
            link: None,
            stop: None,
            accel: None,
            hello: Some(&booted),
            qemu: &self.qemu,
            specs: &[],
        };
        qemu::boot_any(&boot, &mut |_, _| Ok(()))?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// Writes a boot's image and initramfs (plumb, this kernel's part and
    /// the job) into `work`.
    fn boot_files(
        &self,
        work: &Workdir,
        runs: Vec<GuestRun>,
        link: Option<GuestLink>,
    ) -> Result<(PathBuf, PathBuf), VmError> {
        let image = work.path().join("vmlinuz");
        let initrd = work.path().join("initrd.cpio");
        let job = Job {
            runs,
            modules: self.part.paths.clone(),
            link,
        };
        let mut bytes = initramfs::userland()?.to_vec();
        bytes.extend_from_slice(&self.part.bytes);
        bytes.extend_from_slice(&initramfs::job_part(&job)?);
        let write = |p: &Path, b: &[u8]| {
            std::fs::write(p, b)
                .map_err(|e| VmError::input(format!("cannot write {}: {e}", p.display())))
        };
        write(&image, &self.image)?;
        write(&initrd, &bytes)?;
        Ok((image, initrd))
    }

    /// A record from the guest as if measured on a host of its own.
    fn record_of(&self, accel: Accel, arrived: qemu::Arrived) -> RunRecord {
        let mut record = *arrived.record;
        record.environment = Some(*arrived.env);
        record.label = self.label();
        record.spec.machine = Some(machine_of(&self.vm, accel));
        record.spec_key = record.spec.key();
        let why: Vec<String> = watch::suspect(&arrived.host_others_percent)
            .into_iter()
            .chain(
                arrived
                    .idle_rtt_us
                    .and_then(|idle| watch::rtt_suspect(&record, idle)),
            )
            .collect();
        record.suspect = (!why.is_empty()).then(|| why.join("; "));
        record.vm = Some(VmInfo {
            accel: accel.to_string(),
            vcpus: self.vm.vcpus,
            memory_mib: self.vm.memory_mib,
            qemu: self.qemu.clone(),
            image: self.source.clone(),
            image_sha256: self.sha256.clone(),
            release: self.release.clone(),
            boot_s: arrived.boot_s,
            host: plumb_sys::proc::hostname(),
            modules: self.part.names.clone(),
            console: Some(arrived.console),
            accel_note: arrived.accel_note,
            host_others_percent: arrived.host_others_percent,
            idle_rtt_us: arrived.idle_rtt_us,
        });
        record
    }
}

/// The machine a guest's records name in their spec, and so in their key.
pub fn machine_of(vm: &VmOptions, accel: Accel) -> Machine {
    Machine {
        accel: accel.to_string(),
        vcpus: vm.vcpus,
        memory_mib: vm.memory_mib,
        link: vm.link.then(|| GuestLink::KIND.to_string()),
    }
}

/// A guest's end of the link between two (`--vm-link`): its address, and
/// whether it serves or runs the client against the other's address.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuestLink {
    /// This guest's address with its prefix, on its one NIC.
    pub address: String,
    /// The other guest's address.
    pub peer: std::net::IpAddr,
    /// Runs `plumb serve` (the server's guest) rather than the runs.
    pub serve: bool,
}

impl GuestLink {
    /// What joins the two guests, as the spec's machine names it.
    pub const KIND: &'static str = "virtio-net";
    const CLIENT_MAC: &'static str = "52:54:00:12:34:01";
    const SERVER_MAC: &'static str = "52:54:00:12:34:02";
    const CLIENT: [u8; 4] = [198, 18, 0, 1];
    const SERVER: [u8; 4] = [198, 18, 0, 2];

    fn client() -> GuestLink {
        GuestLink {
            address: format!("{}/24", std::net::Ipv4Addr::from(GuestLink::CLIENT)),
            peer: std::net::Ipv4Addr::from(GuestLink::SERVER).into(),
            serve: false,
        }
    }

    fn server() -> GuestLink {
        GuestLink {
            address: format!("{}/24", std::net::Ipv4Addr::from(GuestLink::SERVER)),
            peer: std::net::Ipv4Addr::from(GuestLink::CLIENT).into(),
            serve: true,
        }
    }
}

/// Runs `spec` in a guest booted from `kernel` with `knobs` set inside
/// (and `opts.server_knobs` in the server's namespace of a veth topology):
/// `plumb run --kernel`.
pub fn run(
    spec: &Spec,
    opts: &RunOptions,
    repeat: &Repeat,
    knobs: &[String],
    kernel: &Path,
    label: Option<String>,
    vm: &VmOptions,
) -> Result<RunRecord, VmError> {
    let guest = Guest::open(kernel, label, vm, &[spec])?;
    let runs = [GuestRun {
        spec: spec.clone(),
        repeat: *repeat,
        knobs: knobs.to_vec(),
        server_knobs: opts.server_knobs.iter().map(ToString::to_string).collect(),
        observe: opts.observe,
    }];
    let mut out = None;
    guest.run(&runs, &mut |_, r| {
        out = Some(r);
        Ok(())
    })?;
    out.ok_or_else(|| VmError::boot("the guest ended without its record"))
}

/// What `plumb doctor` says of guests on this host: whether they can use
/// KVM, probed afresh by booting `kernel` where one is given, else what
/// this host answered before.
pub fn kvm_finding(kernel: Option<&Path>) -> plumb_samples::Finding {
    use plumb_samples::{Finding, Status};
    let finding = |status, value: String, advice: Option<&str>| Finding {
        check: "guests".into(),
        status,
        value,
        why: "--kernel boots guests under KVM where it works and under TCG (QEMU's emulator) \
              otherwise; TCG figures measure the emulator as well as the kernel"
            .into(),
        advice: advice.map(str::to_string),
        recorded_as: vec!["vm.accel".into(), "spec.machine.accel".into()],
    };
    let qemu = match qemu_version() {
        Ok(q) => q,
        Err(_) => {
            return finding(
                Status::Info,
                format!("{QEMU} is not installed: --kernel cannot boot guests"),
                Some("apt-get install qemu-system-x86"),
            )
        }
    };
    if !accel::device_opens() {
        return finding(
            Status::Warn,
            "TCG only: /dev/kvm cannot be opened".into(),
            Some("load kvm_intel or kvm_amd, or run as a user in the kvm group"),
        );
    }
    let Some(kernel) = kernel else {
        return match accel::recall(&qemu) {
            Some(a) if a.kvm => finding(
                Status::Ok,
                format!("KVM: it brought a guest up here at {}", a.at),
                None,
            ),
            Some(a) => finding(
                Status::Warn,
                format!("TCG only: KVM failed here at {} ({})", a.at, a.why),
                Some("plumb doctor --kernel IMAGE probes again"),
            ),
            None => finding(
                Status::Info,
                "/dev/kvm opens; not probed yet".into(),
                Some("plumb doctor --kernel IMAGE boots it under KVM to find out"),
            ),
        };
    };
    let probed = Guest::open(kernel, None, &VmOptions::default(), &[])
        .and_then(|g| g.probe_kvm().map(|s| (g.release, s)));
    match probed {
        Ok((release, s)) => finding(
            Status::Ok,
            format!("KVM: it brought kernel {release} up in {s:.1} s"),
            None,
        ),
        Err(e) if e.fault == Fault::Input => finding(
            Status::Info,
            format!("not probed: {}", e.message),
            Some("give --kernel a kernel image, package or build directory"),
        ),
        Err(e) => finding(
            Status::Warn,
            format!(
                "TCG only: {}",
                e.message.trim_start_matches("--accel kvm: ")
            ),
            Some("guests run under TCG here; their figures follow the host's load"),
        ),
    }
}

pub fn qemu_version() -> Result<String, VmError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_asks_for_the_modules_it_uses() {
        let mut s = Spec::stream();
        assert!(modules_needed(&s).is_empty());
        s.socket.cc = Some("bbr".into());
        assert_eq!(modules_needed(&s), ["tcp_bbr"]);
        // A router's fq_codel under the shaper; a FIFO is built in; cake
        // shapes by itself; a delay is netem's beside any of them.
        let veth = |qdisc: &str, delay: Option<u64>| {
            plumb_spec::Topology::Veth(plumb_spec::Veth {
                link_rate_bps: Some(20_000_000),
                qdisc: Some(qdisc.into()),
                delay_us: delay,
                ..Default::default()
            })
        };
        s.socket.cc = None;
        s.topology = Some(veth("fq_codel", None));
        assert_eq!(
            modules_needed(&s),
            ["veth", "sch_fq_codel", "sch_htb", "cls_u32"]
        );
        s.topology = Some(veth("pfifo", Some(5000)));
        assert_eq!(
            modules_needed(&s),
            ["veth", "sch_htb", "cls_u32", "sch_netem"]
        );
        s.topology = Some(veth("cake", None));
        assert_eq!(modules_needed(&s), ["veth", "sch_cake"]);
        // A part's own congestion control, once.
        let mut bbr = Spec::stream();
        bbr.socket.cc = Some("bbr".into());
        for name in ["one", "two"] {
            s.parts.push(plumb_spec::Part {
                name: name.into(),
                start_ms: 0,
                stop_ms: None,
                spec: bbr.clone(),
            });
        }
        assert_eq!(modules_needed(&s), ["veth", "sch_cake", "tcp_bbr"]);
        s.parts.clear();
        let symbols = kernel::config_needed(&modules_needed(&Spec {
            topology: Some(veth("fq_codel", None)),
            ..Spec::stream()
        }));
        for want in ["NET_SCH_FQ_CODEL", "NET_SCH_HTB", "NET_CLS_U32", "NET_CLS"] {
            assert!(symbols.iter().any(|x| x == want), "{want}: {symbols:?}");
        }
    }
}
