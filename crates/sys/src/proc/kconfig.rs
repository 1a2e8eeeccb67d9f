//! The running kernel's build configuration, from /proc/config.gz
//! (CONFIG_IKCONFIG_PROC) or /boot/config-<release>, for the options that
//! change how far a figure can be trusted.

use std::io::Read;

/// Whether the option is built in or a module in a kernel config text; None
/// when the text does not mention it (an option of another kernel version).
pub fn kconfig_enabled(text: &str, option: &str) -> Option<bool> {
    text.lines().find_map(|l| {
        let l = l.trim();
        if let Some(v) = l.strip_prefix(option).and_then(|r| r.strip_prefix('=')) {
            return Some(v == "y" || v == "m");
        }
        let unset = l.strip_prefix("# ")?.strip_suffix(" is not set")?;
        (unset == option).then_some(false)
    })
}

/// The running kernel's config text, where the kernel or /boot has one.
fn config_text() -> Option<String> {
    if let Ok(gz) = std::fs::read("/proc/config.gz") {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut text)
            .is_ok()
        {
            return Some(text);
        }
    }
    std::fs::read_to_string(format!("/boot/config-{}", super::kernel_release())).ok()
}

/// Whether this kernel accounts interrupt and softirq time precisely
/// (CONFIG_IRQ_TIME_ACCOUNTING) rather than charging whole ticks to whatever
/// the tick interrupted; None when its config cannot be read.
pub fn irq_time_accounting() -> Option<bool> {
    // The config does not change while the kernel runs.
    static CACHE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *CACHE.get_or_init(|| {
        kconfig_enabled(&config_text()?, "CONFIG_IRQ_TIME_ACCOUNTING").or(Some(false))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_set_unset_and_absent() {
        let text = "#\n# General setup\n#\nCONFIG_IRQ_TIME_ACCOUNTING=y\n\
                    CONFIG_NET_SCH_NETEM=m\n# CONFIG_SCHED_DEBUG is not set\n\
                    CONFIG_LOCALVERSION=\"\"\n";
        assert_eq!(
            kconfig_enabled(text, "CONFIG_IRQ_TIME_ACCOUNTING"),
            Some(true)
        );
        assert_eq!(kconfig_enabled(text, "CONFIG_NET_SCH_NETEM"), Some(true));
        assert_eq!(kconfig_enabled(text, "CONFIG_SCHED_DEBUG"), Some(false));
        assert_eq!(kconfig_enabled(text, "CONFIG_LOCALVERSION"), Some(false));
        assert_eq!(
            kconfig_enabled(text, "CONFIG_IRQ_TIME"),
            None,
            "a prefix is not the option"
        );
        assert_eq!(kconfig_enabled(text, "CONFIG_HZ"), None);
    }

    #[test]
    fn the_running_kernels_answer_agrees_with_zcat() {
        // An independent reading of the same files: gzip's zcat, or cat.
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                "zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r) 2>/dev/null",
            ])
            .output()
            .expect("sh runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let expect =
            (!text.is_empty()).then(|| text.lines().any(|l| l == "CONFIG_IRQ_TIME_ACCOUNTING=y"));
        assert_eq!(irq_time_accounting(), expect);
    }
}
