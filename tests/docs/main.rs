//! End-to-end tests of `ferry demo`, `ferry completions` and `ferry man`: the scripts are checked by
//! the shells themselves (`bash -n`, `zsh -n`, `fish --no-execute`, and completing
//! in bash and fish), the pages by man-db (`ferry man copy | man -l -`). The commands
//! they must cover are read from `ferry --help`, so a subcommand added later is
//! checked without changing these tests.
//!
//! One test binary: `cargo test --profile ci --test docs`. Without zsh, fish or man the
//! tests that need them say why they skip (a failure under FERRY_TEST_NO_SKIP=1, as
//! in CI).

#[path = "../common/mod.rs"]
#[allow(unused_imports)]
mod common;

mod completions;
mod demo;
mod links;
mod man;

use common::run::{run, Run, FERRY};
use common::skip;
use std::process::Command;

/// Runs `ferry ARGS..` to the end.
fn ferry(args: &[&str]) -> Run {
    let mut cmd = Command::new(FERRY);
    cmd.args(args);
    run(cmd)
}

/// Runs `ferry ARGS..`, which must succeed, and returns what it printed.
fn ferry_ok(args: &[&str]) -> String {
    let r = ferry(args);
    r.assert_ok();
    assert!(r.stderr.is_empty(), "stderr of a successful run: {r}");
    r.stdout
}

/// The subcommands `ferry --help` lists (all but `help`, which has no page and is
/// clap's own).
fn subcommands() -> Vec<String> {
    let help = ferry_ok(&["--help"]);
    let listed = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty());
    let names: Vec<String> = listed
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    assert!(
        names.iter().any(|n| n == "copy"),
        "no commands read from ferry --help:\n{help}"
    );
    names
}

/// Panics unless `has(NAME)` holds for every subcommand NAME; `what` (e.g. "ferry(1)
/// lists") and `seen` (what was looked in) go into the message.
fn assert_every_command(what: &str, has: impl Fn(&str) -> bool, seen: &dyn std::fmt::Debug) {
    for name in subcommands() {
        assert!(has(&name), "{what} no `ferry {name}`: {seen:#?}");
    }
}

/// Whether `program` runs here (`program ARG` starts); if not, says why the test skips.
fn have(program: &str, arg: &str, package: &str) -> bool {
    if Command::new(program).arg(arg).output().is_ok() {
        return true;
    }
    skip(&format!("no {program} (Debian package {package})"));
    false
}

/// Runs the bash script `script` with `args` as `$0 $1..`, without startup files.
fn bash(script: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new("bash");
    cmd.args(["--norc", "--noprofile", "-c", script]).args(args);
    run(cmd)
}
