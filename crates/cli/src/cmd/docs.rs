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
    std::fs::write(dir.join(format!("{name}.1")), page(cmd, name)?)?;
    *written += 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}

/// The page of `cmd` as `name`, in roff. clap_mangen names each option in
/// the synopsis without its value (`[--duration]`), which reads as a switch;
/// its synopsis is replaced by one that writes the value as --help does
/// (`[--duration <TIME>]`).
fn page(cmd: &clap::Command, name: &str) -> std::io::Result<String> {
    let page = cmd
        .clone()
        .name(name.to_string())
        .bin_name(name.replace('-', " "));
    let man = clap_mangen::Man::new(page.clone());
    let mut roff = Vec::new();
    man.render(&mut roff)?;
    let mut theirs = Vec::new();
    man.render_synopsis_section(&mut theirs)?;
    let (roff, theirs) = (
        String::from_utf8_lossy(&roff),
        String::from_utf8_lossy(&theirs),
    );
    // The section as rendered alone repeats the page's preamble of string
    // definitions; only what follows it is the section in the page.
    let theirs = &theirs[theirs.find(".SH SYNOPSIS").unwrap_or(0)..];
    Ok(roff.replacen(theirs, &synopsis(&page), 1))
}

/// Text for roff: a backslash and a dash (which roff would print as a
/// hyphen, so that a flag could not be copied) escaped.
fn roff_text(s: &str) -> String {
    s.replace('\\', r"\e").replace('-', r"\-")
}

/// The SYNOPSIS section of `cmd`: its name, its options (optional ones in
/// brackets) each with its value's name, its arguments and its subcommand,
/// in the order and the fonts clap_mangen's page uses.
fn synopsis(cmd: &clap::Command) -> String {
    let bold = |s: &str| format!(r"\fB{}\fR", roff_text(s));
    let italic = |s: &str| format!(r"\fI{}\fR", roff_text(s));
    let mut line = bold(cmd.get_bin_name().unwrap_or_else(|| cmd.get_name()));
    let mut options: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .collect();
    options.sort_by_key(|a| {
        let key = match (a.get_short(), a.get_long()) {
            (Some(c), _) => format!(
                "{}{}",
                c.to_ascii_lowercase(),
                u8::from(c.is_ascii_uppercase())
            ),
            (None, Some(l)) => l.to_string(),
            (None, None) => a.get_id().to_string(),
        };
        (a.get_display_order(), key)
    });
    for a in options {
        let mut names: Vec<String> = Vec::new();
        names.extend(a.get_short().map(|c| bold(&format!("-{c}"))));
        names.extend(a.get_long().map(|l| bold(&format!("--{l}"))));
        if names.is_empty() {
            continue;
        }
        let mut item = names.join("|");
        if a.get_action().takes_values() {
            let values: Vec<String> = match a.get_value_names() {
                Some(v) => v.iter().map(|n| n.to_string()).collect(),
                None => vec![a.get_id().as_str().to_uppercase()],
            };
            let range = a.get_num_args().unwrap_or_default();
            let mut value = values
                .iter()
                .map(|v| italic(&format!("<{v}>")))
                .collect::<Vec<_>>()
                .join(" ");
            if range.max_values() > values.len() {
                value.push_str("...");
            }
            if range.min_values() == 0 {
                value = format!("[{value}]");
            }
            item = format!("{item} {value}");
        }
        if matches!(a.get_action(), clap::ArgAction::Count) {
            item.push_str("...");
        }
        line += &if a.is_required_set() {
            format!(" {item}")
        } else {
            format!(" [{item}]")
        };
    }
    for a in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let value = match a.get_value_names() {
            Some(v) => v
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            None => a.get_id().to_string(),
        };
        let (l, r) = if a.is_required_set() {
            ("<", ">")
        } else {
            ("[", "]")
        };
        let many = a.get_num_args().is_some_and(|n| n.max_values() > 1);
        line += &format!(" {l}{}{r}{}", italic(&value), if many { "..." } else { "" });
    }
    if cmd.has_subcommands() {
        let (l, r) = if cmd.is_subcommand_required_set() {
            ("<", ">")
        } else {
            ("[", "]")
        };
        let value = cmd
            .get_subcommand_value_name()
            .unwrap_or_else(|| cmd.get_subcommand_help_heading().unwrap_or("SUBCOMMANDS"))
            .to_lowercase();
        line += &format!(" {l}{}{r}", italic(&value));
    }
    format!(".SH SYNOPSIS\n{line}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SYNOPSIS section of a page.
    fn synopsis_of(page: &str) -> &str {
        let start = page.find(".SH SYNOPSIS").expect("a synopsis");
        let end = page[start + 1..]
            .find(".SH ")
            .map_or(page.len(), |e| start + 1 + e);
        &page[start..end]
    }

    #[test]
    fn the_synopsis_names_the_value_each_option_takes() {
        let mut cmd = command();
        cmd.build();
        let run = cmd.find_subcommand("run").unwrap();
        let stream = run.find_subcommand("stream").unwrap();
        let page = page(stream, "plumb-run-stream").unwrap();
        let synopsis = synopsis_of(&page);
        assert!(
            synopsis.starts_with(".SH SYNOPSIS\n\\fBplumb run stream\\fR ["),
            "{synopsis}"
        );
        assert!(
            synopsis.contains(r"[\fB\-\-duration\fR \fI<TIME>\fR]"),
            "{synopsis}"
        );
        // A switch takes no value.
        assert!(synopsis.contains(r"[\fB\-\-nodelay\fR]"), "{synopsis}");
        assert!(
            synopsis.contains(r"[\fB\-h\fR|\fB\-\-help\fR]"),
            "{synopsis}"
        );
        assert_eq!(page.matches(".SH SYNOPSIS").count(), 1);
        assert!(page.contains(".SH OPTIONS"), "the rest of the page is kept");

        let sweep = page_of(&cmd, "sweep");
        assert!(synopsis_of(&sweep).contains(r" <\fIFILE\fR>"), "{sweep}");
        let delete = page_of(&cmd, "delete");
        assert!(
            synopsis_of(&delete).contains(r" <\fIRUNS\fR>..."),
            "{delete}"
        );
        let top = super::page(&cmd, "plumb").unwrap();
        assert!(
            synopsis_of(&top)
                .trim_end()
                .ends_with(r"<\fIsubcommands\fR>"),
            "{top}"
        );
    }

    fn page_of(cmd: &clap::Command, sub: &str) -> String {
        page(cmd.find_subcommand(sub).unwrap(), &format!("plumb-{sub}")).unwrap()
    }
}
