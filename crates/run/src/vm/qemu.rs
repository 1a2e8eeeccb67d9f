//! QEMU: one boot of a guest, its deadlines, and what it says back.

use super::{Accel, Fault, VmError, VmOptions, Workdir, QEMU};
use plumb_ctl::message::{Frame, Message};
use plumb_samples::{Environment, RunRecord};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether KVM was found broken on this host by an earlier boot of this
/// process, so later boots go straight to TCG.
static KVM_BROKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long a KVM boot may take to say its first word before it counts as
/// a hang and TCG is used instead.
const KVM_PROBE: Duration = Duration::from_secs(20);

fn kvm_usable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
        && !KVM_BROKEN.load(std::sync::atomic::Ordering::Relaxed)
}

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
}

/// Boots under the accelerator asked for; under `auto`, KVM first where
/// the host offers it, and TCG when KVM does not bring the guest up.
/// `each` gets every record as it arrives.
pub(super) fn boot_any(
    b: &Boot,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), VmError> {
    if let Some(accel) = b.accel {
        return boot(b, accel, b.vm.boot_timeout, each).map_err(|f| f.error);
    }
    match b.vm.accel {
        Accel::Auto if kvm_usable() => match boot_kvm(b, each) {
            // KVM that cannot bring a guest up (QEMU fails, or the guest
            // hangs) is this host's, not the kernel's: TCG instead.
            Err(f) if f.before_first_word => {
                KVM_BROKEN.store(true, std::sync::atomic::Ordering::Relaxed);
                let why = f.error.message.lines().next().unwrap_or("");
                let why = why.split("; the console").next().unwrap_or(why);
                eprintln!("plumb: KVM did not bring the guest up, using TCG ({why})");
                boot(b, Accel::Tcg, b.vm.boot_timeout, each).map_err(|f| f.error)
            }
            r => r.map_err(|f| f.error),
        },
        Accel::Auto | Accel::Tcg => {
            boot(b, Accel::Tcg, b.vm.boot_timeout, each).map_err(|f| f.error)
        }
        Accel::Kvm => boot(b, Accel::Kvm, b.vm.boot_timeout, each).map_err(|f| f.error),
    }
}

/// Boots under KVM, up to [`KVM_TRIES`] times while a boot ends before the
/// guest's first word: a nested host's KVM now and then refuses QEMU a
/// register write (an MSR) that it takes at a later start, and twice in a
/// row has been seen.
fn boot_kvm(
    b: &Boot,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), BootFailure> {
    let mut tries = KVM_TRIES;
    loop {
        match boot(b, Accel::Kvm, KVM_PROBE, each) {
            Err(f) if f.before_first_word && tries > 1 => tries -= 1,
            r => return r,
        }
    }
}

/// Boots under KVM before TCG is taken instead.
const KVM_TRIES: u32 = 3;

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

fn boot(
    b: &Boot,
    accel: Accel,
    boot_timeout: Duration,
    each: &mut dyn FnMut(Accel, Arrived) -> Result<(), VmError>,
) -> Result<(), BootFailure> {
    let mut said_hello = false;
    boot_inner(b, accel, boot_timeout, &mut said_hello, each).map_err(|error| BootFailure {
        error,
        before_first_word: !said_hello,
    })
}

fn boot_inner(
    b: &Boot,
    accel: Accel,
    boot_timeout: Duration,
    said_hello: &mut bool,
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
    let last_words = |why: &str| {
        let said = logs.qemu();
        let text = logs.console();
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
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
            return Err(last_words(&format!("{QEMU} exited at once ({status})")));
        }
        if start.elapsed() > boot_timeout {
            return Err(last_words(&format!("{QEMU} never opened the results port")));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut reader = Frames::new(stream);
    let mut boot_s = None;
    let mut arrived = 0;
    loop {
        let deadline = if boot_s.is_none() {
            boot_timeout
        } else {
            limit
        };
        let frame = reader.next(start + deadline, &mut qemu.0, &vm.interrupted, b.stop);
        let frame = match frame {
            Ok(Some(f)) => f,
            // A server's guest whose client is done: it served its part.
            Ok(None) if b.stop.is_some_and(|d| d.load(Ordering::Relaxed)) => return Ok(()),
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
            Err(Waited::Interrupted) => {
                return Err(VmError {
                    fault: Fault::Interrupted,
                    message: format!("interrupted: the guest of kernel {} was stopped", b.release),
                })
            }
            Err(Waited::Timeout) => {
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
                if let Some(h) = b.hello {
                    let _ = h.set(accel);
                }
                boot_s = Some(start.elapsed().as_secs_f64());
                // QEMU has read what it boots, and the logs stay open here:
                // a plumb killed from now on leaves no file behind.
                logs.keep();
                work.clear();
            }
            Message::Guest { record, env } => {
                each(
                    accel,
                    Arrived {
                        record,
                        env,
                        boot_s: boot_s.unwrap_or(0.0),
                        console: tail_of(&logs.console(), CONSOLE_KEPT),
                    },
                )?;
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

/// Why no message came.
enum Waited {
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
    ) -> Result<Option<Message>, Waited> {
        loop {
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
    fn a_console_is_kept_by_its_end() {
        assert_eq!(tail_of("abcdef", 3), "def");
        assert_eq!(tail_of("ab", 3), "ab");
        assert_eq!(tail_of("aé", 1), "");
    }
}
