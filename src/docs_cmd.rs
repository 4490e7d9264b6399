//! `ferry completions` and `ferry man`: shell completion scripts and roff manual pages,
//! generated at run time from the clap definition of the command line ([`Cli`]), so
//! every subcommand and flag, including ones added later, is in them with the help
//! text `ferry --help` gives.

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use anyhow::{bail, Context};
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

/// `ferry completions SHELL`: prints the completion script for SHELL on stdout.
pub fn run_completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let name = cmd.get_name().to_owned();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, name, &mut out);
    write_stdout(&out)
}

/// `ferry man [COMMAND]`: prints `ferry(1)`, which lists the subcommands, or the page
/// of one subcommand, `ferry-COMMAND(1)`, with its whole help and every option. An
/// unknown COMMAND is an error naming it and the known ones.
pub fn run_man(args: ManArgs) -> anyhow::Result<ExitCode> {
    // No `help` subcommand: it has no page of its own, so the top page must not list one.
    let mut top = Cli::command().disable_help_subcommand(true);
    // Gives each subcommand its page name (`ferry-copy`) and its usage (`ferry copy`).
    top.build();
    let source = format!(
        "{} {}",
        top.get_name(),
        top.get_version().unwrap_or_default()
    );
    let page = match &args.command {
        None => top,
        Some(name) => match top.find_subcommand(name) {
            Some(sub) if !sub.is_hide_set() => sub.clone(),
            _ => bail!(
                "man: no command {name:?}; the pages are ferry(1) and {}",
                page_names(&top).join(", ")
            ),
        },
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(one_sentence_name(page))
        .source(source)
        .manual("User Commands")
        .render(&mut out)
        .context("man: render the page")?;
    write_stdout(&out)
}

/// `cmd` with its first sentence alone as its about, which is the page's NAME line
/// (what `whatis` and `apropos` show), and its whole help as the DESCRIPTION.
fn one_sentence_name(cmd: clap::Command) -> clap::Command {
    let Some(about) = cmd.get_about().cloned() else {
        return cmd;
    };
    let long = cmd
        .get_long_about()
        .cloned()
        .unwrap_or_else(|| about.clone());
    let short = first_sentence(&about.to_string()).to_owned();
    cmd.about(short).long_about(long)
}

/// `text` up to the end of its first sentence (a `.` before a space, outside `code`
/// and parentheses), without that `.`; all of `text` if it is one sentence.
fn first_sentence(text: &str) -> &str {
    let (mut in_code, mut parens) = (false, 0usize);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '`' => in_code = !in_code,
            '(' if !in_code => parens += 1,
            ')' if !in_code => parens = parens.saturating_sub(1),
            '.' if !in_code
                && parens == 0
                && chars.peek().is_none_or(|&(_, next)| next.is_whitespace()) =>
            {
                return &text[..i];
            }
            _ => {}
        }
    }
    text
}

/// `ferry-NAME(1)` for every subcommand with a page, in the order `ferry --help` lists
/// them.
fn page_names(top: &clap::Command) -> Vec<String> {
    top.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| format!("{}-{}(1)", top.get_name(), s.get_name()))
        .collect()
}

/// Writes `bytes`, all of it, to stdout; a reader that goes away early (`| head`) ends
/// ferry quietly (see [`crate::end_quietly_on_closed_pipe`]).
fn write_stdout(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .context("write to standard output")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::first_sentence;

    #[test]
    fn first_sentence_ends_at_a_full_stop_outside_code_and_parentheses() {
        assert_eq!(
            first_sentence("Copy (like `cp -a SRC/. DST`), v1.2 too. More here."),
            "Copy (like `cp -a SRC/. DST`), v1.2 too"
        );
        assert_eq!(
            first_sentence("See `a. b` (x. y). Then"),
            "See `a. b` (x. y)"
        );
        assert_eq!(first_sentence("One sentence."), "One sentence");
        assert_eq!(first_sentence("No stop"), "No stop");
    }
}
