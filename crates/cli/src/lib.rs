//! The command line: clap arguments turned into spec types, one module per
//! subcommand. The only crate that wires the run orchestrator to reports
//! (and later to the store); anyhow-style error plumbing stops here.
#![deny(unsafe_code)]

mod args;
mod cmd;
pub mod out;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Exit statuses, as the README's "Output and exit status" documents them
/// (`plumb check` has its own, see cmd/compare.rs).
pub mod exit {
    /// A bad flag or value, an unknown run or label, an unreadable file.
    pub const USAGE: i32 = 2;
    /// A run that could not be made: server unreachable, option refused.
    pub const RUN: i32 = 2;
    /// The result database could not be opened, read or written.
    pub const STORE: i32 = 2;
    /// Interrupted by a signal, or the server was lost mid-test.
    pub const INTERRUPTED: i32 = 130;
}

/// A failure to report: one line on stderr and an exit status.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::USAGE,
            message: message.into(),
        }
    }

    /// A run that failed, its message naming the flag at fault.
    pub fn run(e: &plumb_run::RunError) -> Failure {
        Failure {
            code: exit::RUN,
            message: run_message(e),
        }
    }

    pub fn store(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::STORE,
            message: message.into(),
        }
    }

    /// The same failure with `context: ` before its message.
    pub fn within(self, context: impl std::fmt::Display) -> Failure {
        Failure {
            code: self.code,
            message: format!("{context}: {}", self.message),
        }
    }
}

/// What a failed run says to the user: a setup error leads with the flag
/// that set up what failed, unless its message already does.
pub fn run_message(e: &plumb_run::RunError) -> String {
    match e {
        plumb_run::RunError::Setup {
            flag: Some(flag),
            message,
        } if !message.starts_with(flag) => format!("{flag}: {message}"),
        other => other.to_string(),
    }
}

/// Installs the Ctrl-C/SIGTERM handlers once and hands out their flag: the
/// first signal ends the window and reports what was measured, a second one
/// ends plumb at once.
pub(crate) fn interrupt_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    static FLAG: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
        std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone());
            let _ = signal_hook::flag::register(sig, flag.clone());
        }
        flag
    })
    .clone()
}

/// Runs plumb with the process's arguments and returns its exit status.
pub fn main() -> i32 {
    plumb_run::env::set_build(env!("PLUMB_BUILD"));
    // Booted by `--kernel` as the guest's init: no arguments, only the job.
    if plumb_run::vm::guest::is_init() {
        plumb_run::vm::guest::main();
    }
    let cli = match args::parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if let Err(message) = plumb_engine::probe::probes_off() {
        eprintln!("plumb: error: {message}");
        return exit::USAGE;
    }
    // The embedded server is a child of a live plumb: its parent recovers.
    // `plumb restore` does the same itself, and says so on stdout.
    if !matches!(
        cli.command,
        args::Command::Serve(_)
            | args::Command::Restore(_)
            | args::Command::Completions(_)
            | args::Command::Man(_)
    ) {
        cmd::knob::recover_at_start();
    }
    let result = match cli.command {
        args::Command::Run(r) => match r.common.lab.clone() {
            Some(class) => cmd::lab::submit_run(r, &class),
            None => cmd::run::exec(r),
        },
        args::Command::Serve(s) => cmd::serve::exec(s),
        args::Command::List(a) => cmd::db::list(a),
        args::Command::Show(a) => cmd::db::show(a),
        args::Command::Export(a) => cmd::db::export(a),
        args::Command::Import(a) => cmd::db::import(a),
        args::Command::Delete(a) => cmd::db::delete(a),
        args::Command::History(a) => cmd::history::history(a),
        args::Command::Db(args::DbCommand::Copy(a)) => cmd::db::copy(a),
        args::Command::Env(a) => cmd::compare::env(a),
        args::Command::Compare(a) => cmd::compare::compare(a),
        args::Command::Check(a) => cmd::compare::check(a),
        args::Command::Bisect(a) => cmd::bisect::exec(a),
        args::Command::Doctor(a) => cmd::doctor::exec(a),
        args::Command::FlowGroupMember => cmd::run::flow_group_member(),
        args::Command::Restore(a) => cmd::knob::restore(a),
        args::Command::Sweep(a) => cmd::sweep::exec(a),
        args::Command::Report(a) => cmd::report::exec(a),
        args::Command::Lab(args::LabCommand::Submit(a)) => cmd::lab::submit(a),
        args::Command::Lab(args::LabCommand::Status(a)) => cmd::lab::status(a),
        args::Command::Lab(args::LabCommand::Wait(a)) => cmd::lab::wait(a),
        args::Command::Lab(args::LabCommand::Grant(a)) => cmd::lab::grant(a),
        args::Command::Lab(args::LabCommand::Watch(a)) => cmd::watch::exec(a),
        args::Command::Agent(a) => cmd::lab::agent(a),
        args::Command::Topology(args::TopologyCommand::Down(a)) => cmd::knob::topology_down(a),
        args::Command::Completions(a) => cmd::docs::completions(a),
        args::Command::Man(a) => cmd::docs::man(a),
    };
    match result {
        Ok(code) => code,
        Err(f) => {
            eprintln!("plumb: error: {}", f.message);
            f.code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setup_error_names_its_flag_once() {
        let e = |message: &str| plumb_run::RunError::Setup {
            flag: Some("--flows"),
            message: message.into(),
        };
        assert_eq!(
            Failure::run(&e("cannot start flow group")).message,
            "--flows: cannot start flow group"
        );
        assert_eq!(
            Failure::run(&e("--flows: too many")).message,
            "--flows: too many"
        );
        assert_eq!(Failure::run(&e("x")).code, exit::RUN);
    }
}
