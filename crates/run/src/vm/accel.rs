//! What this host's KVM answered a guest, remembered per host: a host
//! whose KVM cannot run a stock guest (a paravirtual KVM module, a nested
//! hypervisor that emulates too little) costs its probe once, and later
//! runs under `--accel auto` go straight to TCG and say why.
//!
//! The answer is keyed by the host's kernel (release and build) and QEMU's
//! version, so a new kernel or QEMU asks again. `--accel kvm` and
//! `plumb doctor --kernel` probe afresh and replace it.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One host's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The host kernel and QEMU it was given under ([`host_key`]).
    pub key: String,
    /// Whether a guest came up under KVM.
    pub kvm: bool,
    /// What QEMU or the wait said when it did not; empty when it did.
    #[serde(default)]
    pub why: String,
    /// RFC 3339 time of the boot that answered.
    pub at: String,
}

/// `$PLUMB_ACCEL_MEMO`, else `$XDG_STATE_HOME/plumb/accel.json`, else
/// `~/.local/state/plumb/accel.json`.
pub fn memo_path() -> PathBuf {
    crate::knob::state_file("PLUMB_ACCEL_MEMO", "accel.json")
}

/// This host's kernel (release and build string) and QEMU's version line.
pub fn host_key(qemu: &str) -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{} {} | {qemu}",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version")
    )
}

fn load() -> Vec<Answer> {
    std::fs::read(memo_path())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The answer this host gave under QEMU `qemu`, if one is remembered.
pub fn recall(qemu: &str) -> Option<Answer> {
    let key = host_key(qemu);
    load().into_iter().find(|a| a.key == key)
}

/// Remembers this host's answer, replacing what it said before; a memo
/// that cannot be written only costs the next run its probe.
pub fn remember(qemu: &str, kvm: bool, why: &str) -> Answer {
    let answer = Answer {
        key: host_key(qemu),
        kvm,
        why: why.to_string(),
        at: jiff::Timestamp::now().to_string(),
    };
    let mut all = load();
    all.retain(|a| a.key != answer.key);
    all.push(answer.clone());
    let path = memo_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Written beside and renamed: a reader never sees half of it.
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let written = serde_json::to_vec_pretty(&all)
        .ok()
        .and_then(|b| std::fs::write(&tmp, b).ok())
        .and_then(|_| std::fs::rename(&tmp, &path).ok());
    if written.is_none() {
        let _ = std::fs::remove_file(&tmp);
    }
    answer
}

/// Whether this process may open /dev/kvm at all.
pub fn device_opens() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

/// The line of QEMU's output that says KVM cannot run this guest at all,
/// as opposed to a refusal that a later start may not meet: an emulation
/// failure, an entry KVM rejects, a module that is not there.
pub fn fatal_line(qemu_said: &str) -> Option<&str> {
    const FATAL: [&str; 6] = [
        "KVM internal error",
        "KVM: entry failed",
        "emulation failure",
        "failed to initialize kvm",
        "Could not access KVM kernel module",
        "kvm_init_vcpu failed",
    ];
    qemu_said
        .lines()
        .map(str::trim)
        .find(|l| FATAL.iter().any(|f| l.contains(f)))
}

/// How the accelerator of an `auto` boot is chosen before anything boots,
/// and why: what `--dry-run` shows, and what a run then does.
pub fn predict(qemu: &str) -> (super::Accel, Option<String>) {
    use super::Accel;
    if !device_opens() {
        return (
            Accel::Tcg,
            Some("tcg: /dev/kvm cannot be opened here".to_string()),
        );
    }
    match recall(qemu) {
        Some(a) if !a.kvm => (Accel::Tcg, Some(remembered_note(&a))),
        Some(_) => (Accel::Kvm, None),
        None => (
            Accel::Kvm,
            Some("kvm if it brings the guest up, else tcg (this host was not probed yet)".into()),
        ),
    }
}

/// What a record says when the remembered answer sent it to TCG.
pub fn remembered_note(a: &Answer) -> String {
    format!(
        "tcg, since KVM failed on this host at {} ({}); remembered, so not tried \
         again (plumb doctor --kernel IMAGE or --accel kvm probe afresh)",
        a.at, a.why
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulation_failure_is_fatal_and_a_refused_register_write_is_not() {
        let said = "KVM internal error. Suberror: 1\nextra data[0]: 0x0000000000000000\nRAX=0";
        assert_eq!(fatal_line(said), Some("KVM internal error. Suberror: 1"));
        let msr = "qemu-system-x86_64: error: failed to set MSR 0x38d to 0x0\n\
                   qemu-system-x86_64: ../target/i386/kvm/kvm.c:2996: kvm_buf_set_msrs: \
                   Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.";
        assert_eq!(fatal_line(msr), None);
        assert_eq!(fatal_line(""), None);
    }
}
