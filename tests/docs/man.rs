//! `ferry man [COMMAND]`: every subcommand has a page that man-db renders without a
//! warning, carrying the command's whole help and its options; the top page lists
//! them all; an unknown command is an error naming it.

use crate::{assert_every_command, bash, ferry, ferry_ok, have, subcommands};

/// `ferry man ARGS.. | man -l -` rendered as plain ASCII text (no hyphenation, each
/// paragraph on one line), which must succeed without a word on stderr (groff's
/// warnings all on).
fn rendered(args: &[&str]) -> String {
    let r = bash(
        r#"set -o pipefail; "$0" man "$@" | MANWIDTH=2000 LC_ALL=C man --warnings=all -P cat -l -"#,
        &[&[crate::common::run::FERRY], args].concat(),
    );
    r.assert_ok();
    assert!(r.stderr.is_empty(), "rendering the page complains: {r}");
    r.stdout
}

/// Whether man-db's `man` is here; if not, says why the test skips.
fn have_man() -> bool {
    have("man", "--version", "man-db")
}

/// `text` with every run of whitespace made one space.
fn squeezed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_copy_page_renders_with_its_options() {
    if !have_man() {
        return;
    }
    let page = rendered(&["copy"]);
    assert!(
        page.starts_with("ferry-copy(1)"),
        "not ferry-copy(1):\n{page}"
    );
    for needed in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "--reflink",
        "--sparse",
    ] {
        assert!(
            page.contains(needed),
            "no {needed} in ferry-copy(1):\n{page}"
        );
    }
}

#[test]
fn every_command_has_a_page_with_its_whole_help() {
    if !have_man() {
        return;
    }
    for name in subcommands() {
        let roff = ferry_ok(&["man", &name]);
        assert!(
            roff.contains(&format!(".TH ferry-{name} 1 ")),
            "ferry man {name} is not ferry-{name}(1):\n{roff}"
        );
        let page = squeezed(&rendered(&[&name]));
        // The long help, as `ferry NAME --help` gives it before its usage line.
        let help = ferry_ok(&[&name, "--help"]);
        let about = squeezed(help.split("\nUsage:").next().unwrap_or_default());
        assert!(
            page.contains(&about),
            "ferry-{name}(1) lacks the help {about:?}:\n{page}"
        );
    }
}

#[test]
fn the_top_page_lists_every_command() {
    if !have_man() {
        return;
    }
    let page = rendered(&[]);
    assert!(page.starts_with("ferry(1)"), "not ferry(1):\n{page}");
    assert_every_command(
        "ferry(1) lists",
        |name| page.contains(&format!("ferry-{name}(1)")),
        &page,
    );
}

#[test]
fn an_unknown_command_is_an_error_naming_it() {
    let r = ferry(&["man", "nosuchcommand"]);
    r.assert_status(2);
    assert!(r.stdout.is_empty(), "printed a page anyway: {r}");
    assert!(
        r.errors().iter().any(|l| l.contains("nosuchcommand")),
        "no error line names the command: {r}"
    );
}
