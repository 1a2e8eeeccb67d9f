//! The command line: clap arguments turned into spec types, one module per
//! subcommand. The only crate that wires the run orchestrator to reports
//! (and later to the store); anyhow-style error plumbing stops here.
#![deny(unsafe_code)]

mod args;
mod cmd;

use clap::Parser;

/// A failure to report: one line on stderr and an exit status.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
}

/// Runs plumb with the process's arguments and returns its exit status.
pub fn main() -> i32 {
    let cli = args::Cli::parse();
    // The embedded server is a child of a live plumb: its parent recovers.
    // `plumb restore` does the same itself, and says so on stdout.
    if !matches!(
        cli.command,
        args::Command::Serve(_) | args::Command::Restore(_)
    ) {
        cmd::knob::recover_at_start();
    }
    let result = match cli.command {
        args::Command::Run(r) => cmd::run::exec(r),
        args::Command::Serve(s) => cmd::serve::exec(s),
        args::Command::List(a) => cmd::db::list(a),
        args::Command::Show(a) => cmd::db::show(a),
        args::Command::Export(a) => cmd::db::export(a),
        args::Command::Import(a) => cmd::db::import(a),
        args::Command::Delete(a) => cmd::db::delete(a),
        args::Command::Env(a) => cmd::compare::env(a),
        args::Command::Compare(a) => cmd::compare::compare(a),
        args::Command::Check(a) => cmd::compare::check(a),
        args::Command::Doctor(a) => cmd::doctor::exec(a),
        args::Command::FlowGroupMember => cmd::run::flow_group_member(),
        args::Command::Restore(a) => cmd::knob::restore(a),
        args::Command::Sweep(a) => cmd::sweep::exec(a),
        args::Command::Report(a) => cmd::report::exec(a),
        args::Command::Topology(args::TopologyCommand::Down(a)) => cmd::knob::topology_down(a),
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
    fn every_comparison_defaults_to_one_bootstrap_seed() {
        let cli = args::Cli::try_parse_from(["plumb", "compare", "a", "b"]).unwrap();
        let args::Command::Compare(c) = cli.command else {
            panic!("parsed as compare")
        };
        assert_eq!(c.verdict.seed, plumb_stats::CompareParams::default().seed);
    }
}
