//! A signal that cuts short a thread's blocking system calls, so that a
//! thread blocked on one socket still looks at its flags: sent by another
//! thread when it has raised one ([`interrupt`]), and by the thread's own
//! interval timer every period ([`Interrupter`]).
//!
//! A socket's SO_RCVTIMEO or SO_SNDTIMEO does the same at a price: the
//! kernel arms and cancels a timer at every sleep, and a thread that sleeps
//! twice a transaction pays that tens of thousands of times a second. A
//! signal costs only when it is sent.

use std::io;
use std::time::Duration;

/// The signal the timer sends. SIGURG is ignored by default, and plumb
/// never asks the kernel for urgent-data signals (F_SETOWN), so nothing
/// else raises it.
const SIGNAL: libc::c_int = libc::SIGURG;

extern "C" fn interrupted(_: libc::c_int) {}

/// Installs the handler once for the process: it does nothing, and it is
/// installed without SA_RESTART so that a blocked call returns EINTR (or
/// what it had moved so far) instead of sleeping on.
fn install() -> io::Result<()> {
    static INSTALLED: std::sync::OnceLock<Result<(), i32>> = std::sync::OnceLock::new();
    let done = INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid empty one (no flags, empty
        // mask); the handler is a plain extern "C" function that touches
        // nothing, so it is async-signal-safe.
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = interrupted as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(SIGNAL, &act, std::ptr::null_mut())
        };
        match rc {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error().raw_os_error().unwrap_or(0)),
        }
    });
    done.map_err(io::Error::from_raw_os_error)
}

/// Blocks or unblocks (`how`) the signal on the calling thread only.
fn mask(how: libc::c_int) -> io::Result<()> {
    // SAFETY: the set is initialised by sigemptyset before use; the call
    // changes only this thread's mask and asks nothing back.
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, SIGNAL);
        libc::pthread_sigmask(how, &set, std::ptr::null_mut())
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::from_raw_os_error(rc)),
    }
}

/// Signals `thread` once. A blocking call it is in returns EINTR, provided
/// the thread has made an [`Interrupter`] (which installs the handler and
/// unblocks the signal); a signal that lands before the call is lost, so a
/// caller waiting for the thread to notice sends it again. A thread without
/// the handler ignores it, as SIGURG's default is.
pub fn interrupt<T>(thread: &std::thread::JoinHandle<T>) -> io::Result<()> {
    use std::os::unix::thread::JoinHandleExt;
    // std's pthread_t is an integer; musl's, to libc, a pointer.
    #[allow(clippy::unnecessary_cast)]
    let id = thread.as_pthread_t() as libc::pthread_t;
    // SAFETY: while its JoinHandle lives a thread is neither joined nor
    // detached, so its pthread_t stays valid even after it has returned.
    let rc = unsafe { libc::pthread_kill(id, SIGNAL) };
    match rc {
        0 | libc::ESRCH => Ok(()),
        _ => Err(io::Error::from_raw_os_error(rc)),
    }
}

/// A timer that signals the thread that made it, every period, until it
/// is dropped. It belongs to that thread: it is neither `Send` nor `Sync`.
pub struct Interrupter {
    id: libc::timer_t,
    _here: std::marker::PhantomData<*const ()>,
}

impl Interrupter {
    /// Starts signalling the calling thread every `period` (at least a
    /// microsecond).
    pub fn every(period: Duration) -> io::Result<Interrupter> {
        install()?;
        // A mask inherited from whoever started plumb might block the
        // signal, and then nothing would ever cut a call short.
        mask(libc::SIG_UNBLOCK)?;
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        // SAFETY: a zeroed sigevent is valid; the fields set make it
        // signal one thread (SIGEV_THREAD_ID), the calling one.
        let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
        ev.sigev_notify = libc::SIGEV_THREAD_ID;
        ev.sigev_signo = SIGNAL;
        ev.sigev_notify_thread_id = tid;
        let mut id: libc::timer_t = std::ptr::null_mut();
        // SAFETY: `ev` and `id` are valid for the call; the kernel writes
        // the new timer's id into `id`.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut id) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // From here the timer is deleted on every path.
        let timer = Interrupter {
            id,
            _here: std::marker::PhantomData,
        };
        let period = period.max(Duration::from_micros(1));
        let ts = libc::timespec {
            tv_sec: period.as_secs() as _,
            tv_nsec: period.subsec_nanos() as _,
        };
        let spec = libc::itimerspec {
            it_interval: ts,
            it_value: ts,
        };
        // SAFETY: `timer.id` is the timer just made; `spec` is valid and
        // the old value is not asked for.
        if unsafe { libc::timer_settime(timer.id, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(timer)
    }
}

impl Drop for Interrupter {
    fn drop(&mut self) {
        // SAFETY: the id is a timer this value made and nobody else deletes.
        // A signal already on its way finds the handler, which stays.
        unsafe {
            libc::timer_delete(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Instant;

    #[test]
    fn a_blocked_receive_returns_interrupted_within_a_period_and_not_after_the_drop() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 16];
        let timer = Interrupter::every(Duration::from_millis(20)).unwrap();
        let t = Instant::now();
        let e = sock.recv(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        drop(timer);
        // Without the timer the receive sleeps until data comes: it is cut
        // short by the socket's own timeout, not by a signal.
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let t = Instant::now();
        let e = sock.recv(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        assert!(
            t.elapsed() >= Duration::from_millis(90),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_signal_blocked_by_the_thread_is_unblocked() {
        let t = std::thread::spawn(|| {
            mask(libc::SIG_BLOCK).unwrap();
            let _timer = Interrupter::every(Duration::from_millis(5)).unwrap();
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            sock.recv(&mut [0u8; 16]).unwrap_err().kind()
        });
        assert_eq!(t.join().unwrap(), io::ErrorKind::Interrupted);
    }

    #[test]
    fn another_thread_cuts_a_blocked_receive_short_once() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // A period far past the test: only the other thread signals.
            let _timer = Interrupter::every(Duration::from_secs(3600)).unwrap();
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            tx.send(()).unwrap();
            let mut buf = [0u8; 16];
            let t = Instant::now();
            let first = sock.recv(&mut buf).unwrap_err().kind();
            (first, t.elapsed())
        });
        rx.recv().unwrap();
        // The thread may not be in its receive yet: signal until it returns.
        while !t.is_finished() {
            interrupt(&t).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        // Signalling a thread that has returned is no error.
        interrupt(&t).unwrap();
        let (first, took) = t.join().unwrap();
        assert_eq!(first, io::ErrorKind::Interrupted);
        assert!(took < Duration::from_secs(4), "{took:?}");
    }

    #[test]
    fn only_the_thread_that_made_it_is_signalled() {
        let _timer = Interrupter::every(Duration::from_millis(5)).unwrap();
        let other = std::thread::spawn(|| {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut buf = [0u8; 16];
            sock.recv(&mut buf).unwrap_err().kind()
        });
        assert_eq!(other.join().unwrap(), io::ErrorKind::WouldBlock);
    }
}
