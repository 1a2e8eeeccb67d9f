//! What the commands that boot kernels share: the progress a person
//! watching sees while a guest boots and measures, and what `--dry-run`
//! says a guest's run will be.

use plumb_run::vm::{Accel, Progress, VmEvent, VmOptions};
use plumb_spec::Spec;
use std::io::IsTerminal;

/// One line of an iteration's progress, for a run on the host or in a
/// guest alike: its figure, and the mean so far with its interval.
pub(crate) fn iteration_line(
    spec: &Spec,
    index: u32,
    value: f64,
    mean: f64,
    half_width: Option<f64>,
) -> String {
    let width = half_width
        .map(plumb_samples::units::format_half_width)
        .unwrap_or_else(|| "-".into());
    let show = |v: f64| plumb_samples::Metric::of(spec).format(v);
    format!(
        "iteration {}: {}   mean {} {}",
        index + 1,
        show(value),
        show(mean),
        width
    )
}

/// Progress of the guests booted under `vm`, on stderr where a person
/// watches it (a terminal), as a run on the host shows its own.
pub(crate) fn watch(vm: &mut VmOptions) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    vm.progress = Some(Progress(std::sync::Arc::new(move |e: &VmEvent| {
        let line = match *e {
            VmEvent::Booting {
                release,
                accel,
                elapsed_s,
            } => format!("booting {release} under {accel}: {elapsed_s:.0} s"),
            VmEvent::Booted {
                release,
                accel,
                boot_s,
            } => format!("booted {release} under {accel} in {boot_s:.1} s"),
            VmEvent::Iteration {
                run,
                runs,
                spec,
                iteration,
                value,
                mean,
                half_width,
            } => {
                let line = iteration_line(spec, iteration, value, mean, half_width);
                if runs > 1 {
                    format!("run {} of {runs} ({}), {line}", run + 1, spec.summary())
                } else {
                    line
                }
            }
        };
        eprintln!("{line}");
    })));
}

/// What a `--dry-run` of a guest's run says beside the plan: the machine
/// its records will name (and so their key), and where the server end is.
pub(crate) struct GuestPlan {
    /// The guest's label: `LABEL=`'s, else `--label`'s, else the release.
    pub label: String,
    pub release: String,
    pub accel: Accel,
    /// Why that accelerator, where it was not asked for by name.
    pub accel_note: Option<String>,
    pub server: String,
    pub vm: VmOptions,
}

impl GuestPlan {
    /// Reads the kernel (its release) and this host's accelerator as a run
    /// would, boots nothing.
    pub(crate) fn of(
        kernel: &std::path::Path,
        label: Option<String>,
        vm: &VmOptions,
    ) -> Result<GuestPlan, crate::Failure> {
        let fail = |e: plumb_run::vm::VmError| crate::Failure::usage(format!("--kernel: {e}"));
        let qemu = plumb_run::vm::qemu_version().map_err(fail)?;
        let work = plumb_run::vm::Workdir::new().map_err(fail)?;
        let k = plumb_run::vm::Kernel::open(kernel, &work).map_err(fail)?;
        let (accel, accel_note) = match vm.accel {
            Accel::Auto => plumb_run::vm::accel::predict(&qemu),
            other => (other, None),
        };
        let server = if vm.link {
            "plumb serve in a guest of its own, joined by virtio-net (198.18.0.2)".to_string()
        } else {
            "embedded: plumb serve --once inside the guest".to_string()
        };
        Ok(GuestPlan {
            label: label.unwrap_or_else(|| k.release.clone()),
            release: k.release,
            accel,
            accel_note,
            server,
            vm: vm.clone(),
        })
    }

    /// `spec` as the guest's record will carry it.
    pub(crate) fn aim(&self, spec: &mut Spec) {
        spec.machine = Some(plumb_run::vm::machine_of(&self.vm, self.accel));
        // --io auto decides by the guest's vCPUs, as it will inside it.
        plumb_spec::auto::resolve(spec, 0, true);
    }

    /// The machine, in words.
    pub(crate) fn machine(&self) -> String {
        format!(
            "a QEMU guest of kernel {} under {}, {} vCPUs, {} MiB{}{}",
            self.release,
            self.accel,
            self.vm.vcpus,
            self.vm.memory_mib,
            if self.vm.link {
                ", one end per guest over virtio-net"
            } else {
                ""
            },
            self.accel_note
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        )
    }
}
