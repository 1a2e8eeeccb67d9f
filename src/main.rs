//! plumb: a network performance regression lab for Linux.
fn main() {
    std::process::exit(plumb_cli::main());
}
