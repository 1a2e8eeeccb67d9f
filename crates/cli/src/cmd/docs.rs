//! Shell completions and man pages, generated from the same clap definitions
//! as --help so that they never disagree with it.

use crate::args::{command, CompletionsArgs, ManArgs, Shell};
use crate::Failure;

pub fn completions(a: CompletionsArgs) -> Result<i32, Failure> {
    let mut cmd = command();
    let mut out = Vec::new();
    match a.shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "plumb", &mut out)
        }
        Shell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "plumb", &mut out)
        }
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "plumb", &mut out)
        }
    }
    crate::out::bytes(&out);
    Ok(0)
}

pub fn man(a: ManArgs) -> Result<i32, Failure> {
    let fail = |what: &str, e: std::io::Error| {
        Failure::usage(format!("plumb man: {what} {}: {e}", a.dir.display()))
    };
    std::fs::create_dir_all(&a.dir).map_err(|e| fail("cannot create", e))?;
    let mut cmd = command();
    cmd.build();
    let mut written = 0;
    write_pages(&cmd, "plumb", &a.dir, &mut written).map_err(|e| fail("cannot write into", e))?;
    eprintln!("wrote {written} man pages into {}", a.dir.display());
    Ok(0)
}

/// The page of `cmd` as `name`.1, then one for each visible subcommand as
/// `name-sub`.1, the way git names its pages.
fn write_pages(
    cmd: &clap::Command,
    name: &str,
    dir: &std::path::Path,
    written: &mut usize,
) -> std::io::Result<()> {
    let page = cmd
        .clone()
        .name(name.to_string())
        .bin_name(name.replace('-', " "));
    let mut roff = Vec::new();
    clap_mangen::Man::new(page).render(&mut roff)?;
    std::fs::write(dir.join(format!("{name}.1")), roff)?;
    *written += 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}
