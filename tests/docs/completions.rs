//! `ferry completions SHELL`: each script parses in its shell, and completing `ferry `
//! offers every subcommand `ferry --help` lists.

use crate::common::run::run;
use crate::{assert_every_command, bash, ferry, ferry_ok, have};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `ferry completions SHELL` into a new temporary directory (kept while the
/// returned handle lives) and checks it with `SHELL CHECK_ARGS.. FILE`, which must
/// succeed without a word on stderr.
fn checked_script(shell: &str, check_args: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("make a temp dir");
    let path = tmp.path().join(format!("ferry.{shell}"));
    std::fs::write(&path, ferry_ok(&["completions", shell])).expect("write the script");
    let mut cmd = Command::new(shell);
    cmd.args(check_args).arg(&path);
    let r = run(cmd);
    r.assert_ok();
    assert!(
        r.stderr.is_empty(),
        "the {shell} script does not parse: {r}"
    );
    (tmp, path)
}

/// The words bash offers for the command line `ferry WORDS..`, the last word being
/// the one completed.
fn bash_completes(script: &Path, words: &[&str]) -> Vec<String> {
    let r = bash(
        r#"source "$0" || exit 3
           complete -p ferry >/dev/null || exit 4
           COMP_WORDS=(ferry "$@"); COMP_CWORD=$#
           COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
           _ferry ferry "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
           printf '%s\n' "${COMPREPLY[@]}""#,
        &[&[script.to_str().expect("UTF-8 temp path")], words].concat(),
    );
    r.assert_ok();
    r.stdout.lines().map(str::to_owned).collect()
}

#[test]
fn the_bash_script_parses_and_completes_commands_and_flags() {
    let (_tmp, path) = checked_script("bash", &["--norc", "--noprofile", "-n"]);
    let offered = bash_completes(&path, &[""]);
    assert_every_command(
        "bash offers",
        |name| offered.iter().any(|o| o == name),
        &offered,
    );
    assert_eq!(
        bash_completes(&path, &["copy", "--refl"]),
        ["--reflink-dest", "--reflink"]
    );
    assert_eq!(
        bash_completes(&path, &["copy", "--files-f"]),
        ["--files-from"]
    );
    assert_eq!(bash_completes(&path, &["pack", "--nul"]), ["--null"]);
    assert_eq!(
        bash_completes(&path, &["pack", "--nu"]),
        ["--null", "--numeric-owner"]
    );
}

#[test]
fn the_zsh_script_parses_and_lists_every_command() {
    if !have("zsh", "--version", "zsh") {
        return;
    }
    let (_tmp, path) = checked_script("zsh", &["-f", "-n"]);
    let text = std::fs::read_to_string(&path).expect("read the script");
    assert!(
        text.lines().next() == Some("#compdef ferry"),
        "not a zsh completion:\n{text}"
    );
    assert_every_command(
        "the zsh script lists",
        |name| text.contains(&format!("\n'{name}:")),
        &text,
    );
}

#[test]
fn the_fish_script_parses_and_completes_every_command() {
    if !have("fish", "--version", "fish") {
        return;
    }
    let (tmp, path) = checked_script("fish", &["--no-config", "--no-execute"]);
    let mut cmd = Command::new("fish");
    // fish keeps its history and variables under HOME: not the user's.
    cmd.env("HOME", tmp.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .args([
            "--no-config",
            "-c",
            "source $argv[1]; and complete -C 'ferry '",
        ])
        .arg(&path);
    let r = run(cmd);
    r.assert_ok();
    let offered: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('\t').next())
        .map(str::to_owned)
        .collect();
    assert_every_command(
        "fish offers",
        |name| offered.iter().any(|o| o == name),
        &offered,
    );
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let r = ferry(&["completions", "nosuchshell"]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("nosuchshell"),
        "the error does not name it: {r}"
    );
    assert!(r.stdout.is_empty(), "printed a script anyway: {r}");
}
