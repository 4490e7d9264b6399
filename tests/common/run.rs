//! Running the `ferry` binary and reading what it says: exit status, error and warning
//! lines on stderr, the `--json` summary on stdout.

use std::path::Path;
use std::process::{Command, Output};

/// The binary under test, built by cargo for these tests.
pub const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// `ferry copy ARGS.. SRC DST`, not yet started.
pub fn copy_command(src: &Path, dst: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(FERRY);
    cmd.arg("copy").args(args).arg(src).arg(dst);
    cmd
}

/// Runs `ferry copy ARGS.. SRC DST` to the end.
pub fn copy(src: &Path, dst: &Path, args: &[&str]) -> Run {
    run(copy_command(src, dst, args))
}

/// Runs `ferry copy ARGS.. SRC DST` and checks that it succeeded without an error line.
pub fn copy_ok(src: &Path, dst: &Path, args: &[&str]) -> Run {
    let r = copy(src, dst, args);
    r.assert_ok();
    r
}

/// Descriptors open in ferry when [`with_open_file_limit`] starts it: the standard
/// streams and descriptors inherited from a parent (CI's runner passed enough to run
/// pack out of descriptors under a limit of 64 when ferry did not count them). They
/// count against the limit like ferry's own.
pub const OPEN_AT_START: usize = 35;

/// `ferry ARGS..` under `ulimit -n LIMIT` (soft and hard, so ferry cannot raise it),
/// with [`OPEN_AT_START`] descriptors open when it starts; not yet started.
pub fn with_open_file_limit<S: AsRef<std::ffi::OsStr>>(limit: u32, args: &[S]) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(r#"ulimit -n {limit} && exec "$@""#))
        .arg("sh")
        .arg(FERRY)
        .args(args);
    let more = OPEN_AT_START.saturating_sub(3 + passed_on_descriptors());
    let null = std::fs::File::open("/dev/null").expect("open /dev/null");
    // SAFETY: between fork and exec this only calls dup(2), which is async-signal-safe
    // and allocates nothing; the copies lack FD_CLOEXEC, so they outlive the exec.
    unsafe {
        cmd.pre_exec(move || {
            for _ in 0..more {
                std::mem::forget(rustix::io::dup(&null)?);
            }
            Ok(())
        });
    }
    cmd
}

/// Descriptors past the standard streams that this process passes to the programs it
/// starts: those without `O_CLOEXEC` (inherited from whoever started the tests; this
/// process's own are opened with it).
fn passed_on_descriptors() -> usize {
    const O_CLOEXEC: u32 = 0o2_000_000;
    let Ok(fds) = std::fs::read_dir("/proc/self/fdinfo") else {
        return 0;
    };
    fds.filter_map(|e| {
        let name = e.ok()?.file_name();
        let fd: u32 = name.to_str()?.parse().ok()?;
        // Gone meanwhile (another test's file, or this listing's own): not passed on.
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
        let flags = u32::from_str_radix(flags.trim(), 8).ok()?;
        (fd > 2 && flags & O_CLOEXEC == 0).then_some(())
    })
    .count()
}

/// Runs a command to the end and keeps what it printed.
pub fn run(mut cmd: Command) -> Run {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawn {shown}: {e}"));
    Run::new(shown, out)
}

/// What one run of ferry did.
pub struct Run {
    /// The command line, for messages.
    pub cmd: String,
    /// Exit status; -1 when killed by a signal.
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn new(cmd: String, out: Output) -> Run {
        let r = Run {
            cmd,
            status: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        assert!(!r.stderr.contains("panicked"), "ferry panicked: {r}");
        r
    }

    /// Lines of the form `ferry: <path>: <operation>: <error>` (not warnings).
    pub fn errors(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("ferry: ") && !l.starts_with("ferry: warning: "))
            .collect()
    }

    /// Lines of the form `ferry: warning: ...`.
    pub fn warnings(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("ferry: warning: "))
            .collect()
    }

    /// Exit status 0 and no error line.
    pub fn assert_ok(&self) {
        self.assert_status(0);
        assert!(
            self.errors().is_empty(),
            "error lines from a successful run: {self}"
        );
    }

    /// Exit status `code`.
    pub fn assert_status(&self, code: i32) {
        assert_eq!(self.status, code, "unexpected exit status: {self}");
    }

    /// The `--json` summary: stdout must be exactly one JSON object.
    pub fn json(&self) -> Summary {
        let v: serde_json::Value = serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {self}"));
        assert!(v.is_object(), "JSON summary is not an object: {self}");
        Summary(v)
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\nexit status {}\n--- stdout\n{}--- stderr\n{}",
            self.cmd, self.status, self.stdout, self.stderr
        )
    }
}

/// The object `--json` prints.
pub struct Summary(pub serde_json::Value);

impl Summary {
    /// A count (`files`, `dirs`, `others`, `bytes`, `skipped`, `errors`, `cloned`...).
    pub fn count(&self, key: &str) -> u64 {
        self.0
            .get(key)
            .and_then(|v| v.as_u64())
            .unwrap_or_else(|| panic!("JSON summary has no count {key:?}: {}", self.0))
    }

    /// Panics unless each `(key, value)` is in the summary.
    pub fn assert_counts(&self, expected: &[(&str, u64)]) {
        let got: Vec<(&str, u64)> = expected.iter().map(|(k, _)| (*k, self.count(k))).collect();
        assert_eq!(got, expected, "JSON summary counts: {}", self.0);
    }
}

/// Runs the Python `script` with `path` as its one argument; it must succeed.
pub fn run_python(script: &str, path: &Path) {
    let status = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .status()
        .expect("python3");
    assert!(status.success(), "python3 failed on {}", path.display());
}
