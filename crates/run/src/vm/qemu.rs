//! QEMU: one boot of a guest, its deadlines, and what it says back.

use super::{accel, watch, Accel, Fault, VmError, VmOptions, Workdir, QEMU};
use plumb_ctl::message::{Frame, Message};
use plumb_samples::{Environment, RunRecord};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a KVM boot may take to say its first word before it counts as
/// a hang: a guest that KVM runs says it in a few seconds.
const KVM_PROBE: Duration = Duration::from_secs(20);

/// One boot: what it boots, where its files go, and how many records its
/// job makes.
pub(super) struct Boot<'a> {
    pub image: &'a Path,
    pub release: &'a str,
    pub initrd: &'a Path,
    pub work: &'a Workdir,
    pub vm: &'a VmOptions,
    /// The whole boot's deadline, the runs included.
    pub limit: Duration,
    pub runs: usize,
    /// The guest's end of a virtio-net link to another guest.
    pub link: Option<Link<'a>>,
    /// Ends the boot besides Ctrl-C: a server's guest, once its client's
    /// runs are done.
    pub stop: Option<&'a AtomicBool>,
    /// The accelerator to boot under, where another guest's boot chose it.
    pub accel: Option<Accel>,
    /// Told the accelerator when the guest says its first word.
    pub hello: Option<&'a std::sync::OnceLock<Accel>>,
    /// QEMU's version line: with the host's kernel, the key of what this
    /// host's KVM answered before.
    pub qemu: &'a str,
    /// The specs of the job's runs, in order.
    pub specs: &'a [plumb_spec::Spec],
}

/// One guest's end of the link between two: a QEMU stream over a Unix
/// socket, which the server's QEMU listens on and the client's connects to.
pub(super) struct Link<'a> {
    pub socket: &'a Path,
    pub listen: bool,
    pub mac: &'a str,
}

/// A record as it comes back from a guest.
pub(super) struct Arrived {
    pub record: Box<RunRecord>,
    pub env: Box<Environment>,
    pub boot_s: f64,
    /// The end of the console so far.
    pub console: String,
    /// Why this accelerator, where `auto` did not get KVM.
    pub accel_note: Option<String>,
    /// What other processes took of the host in each iteration, percent.
    pub host_others_percent: Vec<f64>,
    /// The guest's idle round trip on the run's path just before it.
    pub idle_rtt_us: Option<f64>,
}

/// Boots under the accelerator asked for; under `auto`, KVM first where
/// the host offers it and has not refused a guest before, and TCG when KVM
/// does not bring the guest up. `each` gets every record as it arrives.
pub(super) fn boot_any(
    b: &Boot,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), VmError> {
    let tcg = |note: Option<String>,
               each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>| {
        boot_tcg(b, note, each).map_err(|f| f.error)
    };
    match b.accel {
        Some(Accel::Tcg) => return tcg(None, each),
        Some(accel) => return boot(b, accel, b.vm.boot_timeout, None, each).map_err(|f| f.error),
        None => {}
    }
    match b.vm.accel {
        Accel::Tcg => tcg(None, each),
        Accel::Auto if !accel::device_opens() => tcg(None, each),
        Accel::Auto => {
            if let Some(known) = accel::recall(b.qemu).filter(|a| !a.kvm) {
                return tcg(Some(accel::remembered_note(&known)), each);
            }
            match boot_kvm(b, each) {
                // Ctrl-C is the user's, not KVM's.
                Err(f) if f.error.fault == Fault::Interrupted => Err(f.error),
                // KVM that cannot bring a guest up (QEMU fails, or the
                // guest hangs) is this host's, not the kernel's: TCG
                // instead, and, where nothing says the kernel ran, this
                // host is not asked again.
                Err(f) if f.before_first_word => {
                    let why = f.kvm_why();
                    let kept = if f.is_kvms() {
                        accel::remember(b.qemu, false, &why);
                        format!(
                            "; remembered for this host in {}",
                            accel::memo_path().display()
                        )
                    } else {
                        String::new()
                    };
                    eprintln!("plumb: KVM did not bring the guest up, using TCG ({why}){kept}");
                    tcg(
                        Some(format!("tcg, since KVM did not bring the guest up ({why})")),
                        each,
                    )
                }
                r => {
                    if r.as_ref().is_ok() && accel::recall(b.qemu).is_none() {
                        accel::remember(b.qemu, true, "");
                    }
                    r.map_err(|f| f.error)
                }
            }
        }
        // Asked by name: a fresh probe, its answer remembered, and a
        // failure in one line.
        Accel::Kvm => match boot_kvm(b, each) {
            Err(f) if f.error.fault != Fault::Interrupted && f.is_kvms() => {
                let why = f.kvm_why();
                accel::remember(b.qemu, false, &why);
                Err(VmError::boot(format!(
                    "--accel kvm: KVM cannot run the guest of kernel {} here: {why}; \
                     use --accel tcg (or auto)",
                    b.release
                )))
            }
            r => {
                if r.is_ok() {
                    accel::remember(b.qemu, true, "");
                }
                r.map_err(|f| f.error)
            }
        },
    }
}

/// Boots under KVM, up to [`KVM_TRIES`] times while QEMU exits before the
/// guest's first word: a nested host's KVM now and then refuses QEMU a
/// register write (an MSR) that it takes at a later start, and twice in a
/// row has been seen. A hang, or QEMU saying that KVM cannot emulate the
/// guest, is the same at every start and is not tried again.
fn boot_kvm(
    b: &Boot,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), BootFailure> {
    let again = |f: &BootFailure| f.before_first_word && f.exited && f.fatal.is_none();
    boot_again(b, Accel::Kvm, KVM_PROBE, None, KVM_TRIES, &again, each)
}

/// Boots under KVM before TCG is taken instead.
const KVM_TRIES: u32 = 3;

/// Boots under TCG, once more where the kernel stopped on a stray
/// breakpoint before the guest's first word ([`BootFailure::tcg_again`]).
fn boot_tcg(
    b: &Boot,
    note: Option<String>,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), BootFailure> {
    let again = |f: &BootFailure| {
        let again = f.tcg_again();
        if again {
            eprintln!(
                "plumb: kernel {} (tcg) stopped on a stray int3 before plumb started in it; \
                 booting it again",
                b.release
            );
        }
        again
    };
    let timeout = b.vm.boot_timeout;
    boot_again(b, Accel::Tcg, timeout, note, TCG_TRIES, &again, each)
}

/// Boots under TCG before a stray breakpoint is taken for the kernel's.
const TCG_TRIES: u32 = 2;

/// Boots up to `tries` times while `again` says a failure is worth another
/// start (it may say why, once, where it does).
fn boot_again(
    b: &Boot,
    accel: Accel,
    timeout: Duration,
    note: Option<String>,
    tries: u32,
    again: &dyn Fn(&BootFailure) -> bool,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), BootFailure> {
    let mut left = tries;
    loop {
        match boot(b, accel, timeout, note.clone(), each) {
            Err(f) if left > 1 && again(&f) => left -= 1,
            r => return r,
        }
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
    /// QEMU ended by itself (rather than hanging or being stopped).
    exited: bool,
    /// QEMU's line saying KVM cannot run the guest at all.
    fatal: Option<String>,
    console_said: bool,
    /// The kernel's console says it oopsed on an int3.
    stray_int3: bool,
}

impl BootFailure {
    /// Whether the failure is the host's KVM rather than the kernel's:
    /// QEMU said KVM cannot run the guest, or the kernel never wrote a
    /// line to its console (a kernel that ran under KVM and panicked has
    /// said so there, and is not KVM's fault).
    fn is_kvms(&self) -> bool {
        self.before_first_word && (self.fatal.is_some() || !self.console_said)
    }

    /// Whether a boot under TCG is worth one more: the kernel oopsed on an
    /// int3 before plumb's init said a word. With one thread per vCPU, TCG
    /// can run a stale translation of code that another vCPU is patching
    /// (the breakpoint text_poke_bp leaves there for a moment), and the
    /// kernel finds a breakpoint it did not place: a clean-clone CI saw
    /// 6.12 stop so in enqueue_timer at boot, in one boot of dozens. The
    /// kernel's own traps are ud2, not int3; a kernel that stops so twice
    /// is reported as it is.
    fn tcg_again(&self) -> bool {
        self.before_first_word && self.stray_int3
    }

    /// Why KVM did not bring the guest up, in one line: QEMU's own line
    /// where it said one, else the first line of the error without the
    /// console's tail or QEMU's register dump.
    fn kvm_why(&self) -> String {
        if let Some(line) = &self.fatal {
            return format!("QEMU said: {line}");
        }
        let first = self.error.message.lines().next().unwrap_or("");
        let first = first.split("; the console").next().unwrap_or(first);
        let first = first.split("; qemu said").next().unwrap_or(first);
        // `kernel R (kvm): ` says what the caller's line already says.
        first
            .split_once("(kvm): ")
            .map_or(first, |(_, why)| why)
            .to_string()
    }
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

fn boot(
    b: &Boot,
    accel: Accel,
    boot_timeout: Duration,
    note: Option<String>,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), BootFailure> {
    let mut seen = Seen::default();
    boot_inner(b, accel, boot_timeout, note, &mut seen, each).map_err(|error| BootFailure {
        error,
        before_first_word: !seen.hello,
        exited: seen.exited,
        fatal: seen.fatal,
        console_said: seen.console_said,
        stray_int3: seen.stray_int3,
    })
}

/// What a boot saw before it ended.
#[derive(Default)]
struct Seen {
    hello: bool,
    exited: bool,
    fatal: Option<String>,
    /// The guest's kernel wrote to its console before the boot ended.
    console_said: bool,
    stray_int3: bool,
}

/// QEMU's command line for boot `b` under `accel`: the kernel with its
/// initramfs, no devices but the two serial ports (the console to the file
/// `console`, the results to the socket `sock`) and, where the guest has a
/// link, its virtio NIC.
fn qemu_command(b: &Boot, accel: Accel, console: &Path, sock: &Path) -> Command {
    let vm = b.vm;
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
    .arg(b.image)
    .arg("-initrd")
    .arg(b.initrd)
    .arg("-append")
    .arg(format!("{KERNEL_COMMAND_LINE} {}", vm.append).trim_end())
    .arg("-chardev")
    .arg(format!("file,id=console,path={}", console.display()))
    .args(["-serial", "chardev:console"])
    .arg("-chardev")
    .arg(format!("socket,id=results,path={}", sock.display()))
    .args(["-serial", "chardev:results"]);
    if let Some(l) = &b.link {
        cmd.arg("-netdev")
            .arg(format!(
                "stream,id=link,server={},addr.type=unix,addr.path={}",
                if l.listen { "on" } else { "off" },
                l.socket.display()
            ))
            .arg("-device")
            .arg(format!("virtio-net-pci,netdev=link,mac={}", l.mac));
    }
    cmd
}

fn boot_inner(
    b: &Boot,
    accel: Accel,
    boot_timeout: Duration,
    note: Option<String>,
    seen: &mut Seen,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), VmError> {
    let (work, vm, limit) = (b.work, b.vm, b.limit);
    let console = work.path().join(format!("console-{accel}.log"));
    let qemu_log = work.path().join(format!("qemu-{accel}.log"));
    let sock = work.path().join(format!("results-{accel}.sock"));
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock)
        .map_err(|e| VmError::input(format!("cannot listen on {}: {e}", sock.display())))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| VmError::input(e.to_string()))?;
    let mut cmd = qemu_command(b, accel, &console, &sock);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(
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
    let progress = |e: VmEvent| {
        if let Some(p) = &vm.progress {
            (p.0)(&e)
        }
    };
    // Under KVM, QEMU's word that KVM cannot run the guest ends the boot
    // at once: it says so and then hangs.
    let fatal = || {
        (accel == Accel::Kvm)
            .then(|| accel::fatal_line(&logs.qemu()).map(str::to_string))
            .flatten()
    };
    let mut told = Duration::ZERO;
    let last_words = |why: &str| {
        let said = logs.qemu();
        let text = logs.console();
        let tail = console_end(&text);
        let qemu_said = said.trim();
        VmError::boot(format!(
            "kernel {} ({accel}): {why}{}{}",
            b.release,
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
            seen.exited = true;
            seen.fatal = fatal();
            seen.console_said = !logs.console().trim().is_empty();
            return Err(last_words(&format!("{QEMU} exited at once ({status})")));
        }
        if let Some(line) = fatal() {
            return Err(kvm_refused(&mut *seen, b.release, line));
        }
        if start.elapsed() > boot_timeout {
            return Err(last_words(&format!("{QEMU} never opened the results port")));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut reader = Frames::new(stream);
    let mut boot_s = None;
    let mut arrived = 0;
    // The host's load since the last iteration ended (or the guest said
    // its first word), and what others took in each iteration of the run
    // now under way.
    let mut host = None;
    let mut others = Vec::new();
    loop {
        let deadline = if boot_s.is_none() {
            boot_timeout
        } else {
            limit
        };
        let booting = boot_s.is_none();
        let mut tick = || {
            if !booting {
                return None;
            }
            let elapsed = start.elapsed();
            if elapsed >= told + BOOT_TOLD_EVERY {
                told = elapsed;
                progress(VmEvent::Booting {
                    release: b.release,
                    accel,
                    elapsed_s: elapsed.as_secs_f64(),
                });
            }
            fatal()
        };
        let frame = reader.next(
            start + deadline,
            &mut qemu.0,
            &vm.interrupted,
            b.stop,
            &mut tick,
        );
        let frame = match frame {
            Ok(Some(f)) => f,
            // A server's guest whose client is done: it served its part.
            Ok(None) if b.stop.is_some_and(|d| d.load(Ordering::Relaxed)) => return Ok(()),
            Ok(None) => {
                seen.exited = matches!(qemu.0.try_wait(), Ok(Some(_)));
                seen.fatal = fatal();
                seen.console_said = !logs.console().trim().is_empty();
                let text = logs.console();
                seen.stray_int3 = text.contains("Oops: int3");
                let why = match text.lines().find(|l| l.contains("Kernel panic")) {
                    Some(line) => format!(
                        "the guest kernel panicked: {}",
                        line.split("Kernel panic - ").last().unwrap_or(line).trim()
                    ),
                    None => "the guest stopped before it sent its results".to_string(),
                };
                return Err(last_words(&why));
            }
            Err(Waited::Interrupted) => {
                return Err(VmError {
                    fault: Fault::Interrupted,
                    message: format!("interrupted: the guest of kernel {} was stopped", b.release),
                })
            }
            Err(Waited::Fatal(line)) => return Err(kvm_refused(&mut *seen, b.release, line)),
            Err(Waited::Timeout) => {
                seen.console_said = !logs.console().trim().is_empty();
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
                seen.hello = true;
                if let Some(h) = b.hello {
                    let _ = h.set(accel);
                }
                boot_s = Some(start.elapsed().as_secs_f64());
                progress(VmEvent::Booted {
                    release: b.release,
                    accel,
                    boot_s: start.elapsed().as_secs_f64(),
                });
                host = watch::Snapshot::take();
                // A probe asks for the first word and nothing more.
                if b.runs == 0 {
                    return Ok(());
                }
                // QEMU has read what it boots, and the logs stay open here:
                // a plumb killed from now on leaves no file behind.
                logs.keep();
                work.clear();
            }
            Message::GuestIteration {
                run,
                iteration,
                value,
                mean,
                half_width,
            } => {
                let now = watch::Snapshot::take();
                if let (Some(before), Some(now)) = (&host, &now) {
                    others.push(now.others_since(before));
                }
                host = now;
                if let Some(spec) = b.specs.get(run as usize) {
                    progress(VmEvent::Iteration {
                        run: run as usize,
                        runs: b.specs.len(),
                        spec,
                        iteration,
                        value,
                        mean,
                        half_width,
                    });
                }
            }
            Message::Guest {
                record,
                env,
                idle_rtt_us,
            } => {
                each(
                    accel,
                    Arrived {
                        record,
                        env,
                        boot_s: boot_s.unwrap_or(0.0),
                        console: tail_of(&logs.console(), CONSOLE_KEPT),
                        accel_note: note.clone(),
                        host_others_percent: std::mem::take(&mut others),
                        idle_rtt_us,
                    },
                )?;
                // The next run's first iteration starts from here.
                host = watch::Snapshot::take();
                arrived += 1;
                if arrived == b.runs {
                    return Ok(());
                }
            }
            Message::Error { message, .. } => {
                return Err(VmError {
                    fault: Fault::Test,
                    message: format!("in the guest ({}): {message}", b.release),
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

/// Lines a console's kernel report begins with: an oops, a BUG, a
/// warning's cut line, a panic.
const FAULT_MARKS: [&str; 5] = [
    "------------[ cut here ]------------",
    "BUG: ",
    "Oops: ",
    "general protection fault",
    "Kernel panic - not syncing",
];

/// The lines of a kernel's report kept at most, from its first line.
const REPORT_LINES: usize = 80;

/// What a failed boot's error shows of the console: where the kernel
/// reported a fault, the report from its first line (its registers and
/// call trace, which say where the fault was) up to [`REPORT_LINES`], and
/// the last lines after it where the report ran longer; elsewhere the last
/// 12 lines.
fn console_end(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let last = |n: usize| lines[lines.len().saturating_sub(n)..].to_vec();
    let Some(start) = lines
        .iter()
        .position(|l| FAULT_MARKS.iter().any(|m| l.contains(m)))
    else {
        return last(12);
    };
    let report = &lines[start..];
    if report.len() <= REPORT_LINES {
        return report.to_vec();
    }
    let mut kept = report[..REPORT_LINES - 12].to_vec();
    kept.push("...");
    kept.extend(last(12));
    kept
}

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

/// A boot that QEMU said KVM cannot run: one line, without the register
/// dump QEMU prints after it.
fn kvm_refused(seen: &mut Seen, release: &str, line: String) -> VmError {
    let e = VmError::boot(format!(
        "kernel {release} (kvm): KVM cannot run this guest: QEMU said: {line}"
    ));
    seen.fatal = Some(line);
    e
}

/// How often a boot that has not said its first word says how long it
/// has taken so far.
const BOOT_TOLD_EVERY: Duration = Duration::from_secs(5);

/// What a boot tells whoever watches it, as it happens.
#[derive(Debug, Clone, Copy)]
pub enum VmEvent<'a> {
    /// Still booting, this long after QEMU started.
    Booting {
        release: &'a str,
        accel: Accel,
        elapsed_s: f64,
    },
    /// plumb in the guest said its first word.
    Booted {
        release: &'a str,
        accel: Accel,
        boot_s: f64,
    },
    /// An iteration of the job's run `run` (of `runs`) ended, in the
    /// guest's words.
    Iteration {
        run: usize,
        runs: usize,
        spec: &'a plumb_spec::Spec,
        iteration: u32,
        value: f64,
        mean: f64,
        half_width: Option<f64>,
    },
}

/// Why no message came.
enum Waited {
    /// QEMU said KVM cannot run the guest.
    Fatal(String),
    Timeout,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

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
    fn next(
        &mut self,
        deadline: Instant,
        qemu: &mut Child,
        stop: &AtomicBool,
        done: Option<&AtomicBool>,
        tick: &mut dyn FnMut() -> Option<String>,
    ) -> Result<Option<Message>, Waited> {
        loop {
            if let Some(line) = tick() {
                return Err(Waited::Fatal(line));
            }
            if done.is_some_and(|d| d.load(Ordering::Relaxed)) {
                return Ok(None);
            }
            if stop.load(Ordering::Relaxed) {
                return Err(Waited::Interrupted);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Waited::Timeout);
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
    fn only_a_failure_with_nothing_from_the_kernel_is_blamed_on_kvm() {
        let failure = |fatal: Option<&str>, console_said: bool, hello: bool| BootFailure {
            error: VmError::boot("kernel 6.1 (kvm): no word from the guest in 20 s: killed"),
            before_first_word: !hello,
            exited: false,
            fatal: fatal.map(str::to_string),
            console_said,
            stray_int3: false,
        };
        // QEMU's own word, or a kernel that never wrote a line.
        assert!(failure(Some("KVM internal error. Suberror: 1"), false, false).is_kvms());
        assert!(failure(None, false, false).is_kvms());
        // A kernel that ran and panicked is the kernel's.
        assert!(!failure(None, true, false).is_kvms());
        // After the guest's first word nothing is KVM's.
        assert!(!failure(None, false, true).is_kvms());
        assert_eq!(
            failure(None, false, false).kvm_why(),
            "no word from the guest in 20 s: killed"
        );
    }

    #[test]
    fn only_a_stray_int3_before_the_guests_first_word_boots_tcg_again() {
        let failure = |stray_int3: bool, hello: bool| BootFailure {
            error: VmError::boot("kernel 6.12 (tcg): the guest kernel panicked"),
            before_first_word: !hello,
            exited: true,
            fatal: None,
            console_said: true,
            stray_int3,
        };
        assert!(failure(true, false).tcg_again());
        // Another oops is the kernel's, and so is anything after plumb's
        // init spoke.
        assert!(!failure(false, false).tcg_again());
        assert!(!failure(true, true).tcg_again());
    }

    #[test]
    fn a_console_is_kept_by_its_end() {
        assert_eq!(tail_of("abcdef", 3), "def");
        let boot: String = (0..40).map(|i| format!("boot line {i}\n")).collect();
        let plain = console_end(&boot);
        assert_eq!(plain.len(), 12);
        assert_eq!(plain[11], "boot line 39");
        // An oops is kept whole, from its first line.
        let oops: String = ["BUG: kernel NULL pointer dereference, address: 0"]
            .into_iter()
            .chain(["RIP: 0010:sched_clock_cpu+0x10/0x40"; 30])
            .chain(["Kernel panic - not syncing: Fatal exception in interrupt"])
            .map(|l| format!("{l}\n"))
            .collect();
        let console = format!("{boot}{oops}");
        let kept = console_end(&console);
        assert_eq!(kept.len(), 32);
        assert!(kept[0].starts_with("BUG: kernel NULL"));
        assert!(kept[31].starts_with("Kernel panic"));
        // A report too long for the error keeps its start and its end.
        let long: String = (0..200).map(|i| format!("trace {i}\n")).collect();
        let console = format!("{oops}{long}");
        let kept = console_end(&console);
        assert_eq!(kept.len(), REPORT_LINES + 1);
        assert!(kept[0].starts_with("BUG: "));
        assert_eq!(kept[REPORT_LINES - 12], "...");
        assert_eq!(kept[REPORT_LINES], "trace 199");
        assert_eq!(tail_of("ab", 3), "ab");
        assert_eq!(tail_of("aé", 1), "");
    }
}
