//! Command-line flags, parsed by clap into plain values.

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use ferry_core::data::{Reflink, Sparse};
use ferry_core::filter::Action;
use std::ffi::OsString;
use std::path::PathBuf;

/// Parses the command line (exiting with clap's message on a usage error), with the
/// filter rules of `copy` and `pack` in the order given.
pub fn parse() -> Cli {
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match (&mut cli.command, matches.subcommand()) {
        (Command::Copy(a), Some((_, m))) => a.filter.given = FilterArgs::in_order(m),
        (Command::Pack(a), Some((_, m))) => a.filter.given = FilterArgs::in_order(m),
        _ => {}
    }
    cli
}

/// Move trees of many small files as fast as the machine allows.
#[derive(Parser, Debug)]
#[command(name = "ferry", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Make DST an exact copy of the tree SRC (like `cp -a SRC/. DST`), updating an
    /// existing DST: files whose size and mtime already match are skipped. A SRC that
    /// is not a directory is copied like `cp -a SRC DST`: to DST, or into it when DST
    /// is a directory.
    ///
    /// Either SRC or DST may be remote, `[USER@]HOST:PATH` (the part before the first
    /// `:` without a `/`, as rsync and scp tell it): ferry then runs `ssh HOST ferry
    /// serve --stdio` and copies over ssh's pipes.
    Copy(CopyArgs),
    /// Serve one remote copy over standard input and output: what `ferry copy` runs on
    /// the other end of ssh.
    Serve(ServeArgs),
    /// Pack the tree SRC into a ferry archive (a tar with 4 KiB-aligned data and an
    /// index); a SRC that is not a directory is packed as one member named as it is.
    /// ARCHIVE `-` writes to standard output.
    Pack(PackArgs),
    /// Unpack an archive (ferry's, or any tar; compressed with gzip, zstd, xz or bzip2
    /// too) into DST. ARCHIVE `-` reads standard input; a ferry archive read so is
    /// checked against the content hashes its index records, once the index arrives.
    Unpack(UnpackArgs),
    /// List an archive's members (from the index of a ferry archive).
    Ls(LsArgs),
    /// Print one member of an archive to standard output.
    Cat(CatArgs),
    /// Copy a sample tree with ferry and with a one-file-at-a-time copy, side by side.
    Demo(DemoArgs),
    /// Mount an archive read-only (FUSE): a ferry archive at once from its index, any
    /// other tar after one scan of its headers (kept in the cache for the next time).
    /// Returns once the mount answers; the mount runs on in the background. As root,
    /// `--kernel` has the kernel mount it (EROFS), with no FUSE process in between.
    Mount(MountArgs),
    /// Unmount what `ferry mount` mounted (also when its process has died).
    Umount(UmountArgs),
    /// Build the index `ferry mount` needs for a tar that is not a ferry archive (or one
    /// from before ferry kept it), without mounting; it is kept in the cache.
    Index(IndexArgs),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell);
    /// see the README for where each shell looks for it.
    Completions(CompletionsArgs),
    /// Print a manual page (roff), generated from this help: ferry(1), listing the
    /// commands, or the page of COMMAND, ferry-COMMAND(1). Read it with `ferry man copy
    /// | man -l -`.
    Man(ManArgs),
}

/// Flags of `ferry completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete ferry's commands and flags in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Flags of `ferry man`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// The command whose page to print [default: the page of ferry itself].
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

/// Flags of `ferry mount`.
#[derive(Args, Debug)]
pub struct MountArgs {
    /// The archive to mount.
    pub archive: PathBuf,
    /// An existing directory to mount it on.
    pub mountpoint: PathBuf,
    /// Stay attached, logging to stderr; Ctrl-C unmounts.
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Let other users see the mount (needs `user_allow_other` in /etc/fuse.conf when
    /// not root).
    #[arg(long)]
    pub allow_other: bool,
    /// FUSE threads answering requests.
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Where a background mount logs [default: mount.log in the cache directory].
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Who serves the mount: `fuse` (ferry's own process), `kernel` (root: an EROFS
    /// image of the archive's tree, the archive as its data; uncompressed archives
    /// only), or `auto` (kernel when root and the archive is uncompressed, else FUSE).
    #[arg(long, value_enum, default_value_t = MountMode::Fuse)]
    pub mode: MountMode,
    /// Same as `--mode kernel`.
    #[arg(long, conflicts_with = "mode")]
    pub kernel: bool,
    /// Kernel mode: mount through loop devices even where the kernel can mount files.
    #[arg(long = "loop")]
    pub loop_devices: bool,
}

/// Who serves a mount.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountMode {
    /// The kernel when it can (root, an uncompressed archive), else FUSE.
    Auto,
    /// ferry's FUSE filesystem.
    Fuse,
    /// The kernel's EROFS.
    Kernel,
}

/// Where built indexes are kept.
#[derive(Args, Debug, Clone)]
pub struct CacheArgs {
    /// Directory for indexes built for tars without one [default:
    /// $XDG_CACHE_HOME/ferry, else ~/.cache/ferry].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// Flags of `ferry umount`.
#[derive(Args, Debug)]
pub struct UmountArgs {
    /// Where the archive is mounted.
    pub mountpoint: PathBuf,
}

/// Flags of `ferry index`.
#[derive(Args, Debug)]
pub struct IndexArgs {
    /// The archive to index.
    pub archive: PathBuf,
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// Flags of `ferry pack`.
#[derive(Args, Debug)]
pub struct PackArgs {
    /// The tree (or single file) to pack.
    pub src: PathBuf,
    /// The archive to write (`-` for standard output).
    pub archive: PathBuf,
    /// Walker threads [default: 1, which keeps each directory's subtree together; files
    /// are read ahead by prefetch threads].
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 1)]
    pub jobs: usize,
    /// Clone file data into the archive where the filesystem allows.
    #[arg(long, value_enum, default_value_t = ReflinkArg::Auto)]
    pub reflink: ReflinkArg,
    /// Hash every file into the index, even data the kernel moves without reading.
    #[arg(long)]
    pub hash: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `ferry unpack`.
#[derive(Args, Debug)]
pub struct UnpackArgs {
    /// The archive to read (`-` for standard input).
    pub archive: PathBuf,
    /// Where to unpack it (created if missing).
    pub dst: PathBuf,
    /// Unpack only these members, each with everything below it (as `tar -xf A
    /// NAME...`). A hardlink whose target is left out gets the target's data.
    #[arg(value_name = "MEMBER")]
    pub members: Vec<PathBuf>,
    /// Workers for a ferry archive read through its index [default: 8 per core].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// As root, give members the archive's numeric user and group ids. Without it they
    /// get the ids their user and group names have here, where those exist (as GNU tar
    /// does).
    #[arg(long)]
    pub numeric_owner: bool,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `ferry ls`.
#[derive(Args, Debug)]
pub struct LsArgs {
    /// The archive (`-` for standard input).
    pub archive: PathBuf,
    /// List only these members, each with everything below it.
    #[arg(value_name = "MEMBER")]
    pub members: Vec<PathBuf>,
    /// Long form: mode, owner and group (names where the archive has them, else ids),
    /// size, mtime (UTC, to the nanosecond).
    #[arg(short = 'l', long)]
    pub long: bool,
}

/// Flags of `ferry cat`.
#[derive(Args, Debug)]
pub struct CatArgs {
    /// The archive (`-` for standard input).
    pub archive: PathBuf,
    /// The member to print.
    pub path: PathBuf,
}

/// Flags of `ferry copy`.
#[derive(Args, Debug)]
pub struct CopyArgs {
    /// The tree (or single file) to copy.
    pub src: PathBuf,
    /// Where to copy it (created if missing, with its parents).
    pub dst: PathBuf,
    /// Worker threads [default: 8 per core].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Skip the all-zero block check (for measuring its cost; holes in the source are
    /// still kept).
    #[arg(long, hide = true)]
    pub no_zero_scan: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub mirror: MirrorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Making DST a mirror of SRC, and seeing what that changes (`copy`).
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct MirrorArgs {
    /// After the copy, delete from DST what SRC does not have (what the filter rules
    /// exclude is kept); nothing is deleted if some of SRC could not be read.
    #[arg(long)]
    pub delete: bool,
    /// Delete what the filter rules exclude from DST too (implies --delete).
    #[arg(long)]
    pub delete_excluded: bool,
    /// Write nothing: only find what the copy would do (counted in the summary; with
    /// -i or -v, listed).
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// One line per entry created, updated, given new metadata or deleted, saying
    /// which and why (on stdout; on stderr with --json).
    #[arg(short = 'i', long)]
    pub itemize_changes: bool,
    /// The name of each entry as it is created, updated or deleted.
    #[arg(short = 'v', long)]
    pub verbose: bool,
}

/// Which entries of SRC a job takes, as rsync's filter rules: checked in the order
/// given, the first pattern that matches decides; no match, the entry is taken.
#[derive(Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// Leave out what PATTERN matches (an excluded directory is not read): `*`, `?`,
    /// `[...]` within a name, `**` across `/`; a leading `/` anchors at SRC, a trailing
    /// `/` matches directories only; without `/` it matches the name at any depth.
    #[arg(long, value_name = "PATTERN", allow_hyphen_values = true)]
    pub exclude: Vec<OsString>,
    /// Take what PATTERN matches, even if a later --exclude matches it too.
    #[arg(long, value_name = "PATTERN", allow_hyphen_values = true)]
    pub include: Vec<OsString>,
    /// Exclude patterns from FILE, one a line (`#`, `;` comments; `+ ` makes a line an
    /// include; `-` reads standard input).
    #[arg(long, value_name = "FILE")]
    pub exclude_from: Vec<PathBuf>,
    /// Include patterns from FILE, one a line (`- ` makes a line an exclude).
    #[arg(long, value_name = "FILE")]
    pub include_from: Vec<PathBuf>,
    /// All of the above in command-line order (filled by [`parse`]).
    #[arg(skip)]
    pub given: Vec<FilterGiven>,
}

/// One filter option as given.
#[derive(Debug, Clone)]
pub enum FilterGiven {
    /// `--exclude` or `--include`.
    Pattern(Action, OsString),
    /// `--exclude-from` or `--include-from`.
    File(Action, PathBuf),
}

impl FilterArgs {
    /// The filter options of a subcommand's `matches`, in command-line order.
    fn in_order(m: &ArgMatches) -> Vec<FilterGiven> {
        let mut all: Vec<(usize, FilterGiven)> = Vec::new();
        let mut take = |id: &str, make: &dyn Fn(OsString) -> FilterGiven| {
            if let (Some(at), Some(values)) = (m.indices_of(id), m.get_raw(id)) {
                all.extend(at.zip(values.map(|v| make(v.to_owned()))));
            }
        };
        take("exclude", &|v| FilterGiven::Pattern(Action::Exclude, v));
        take("include", &|v| FilterGiven::Pattern(Action::Include, v));
        take("exclude_from", &|v| {
            FilterGiven::File(Action::Exclude, v.into())
        });
        take("include_from", &|v| {
            FilterGiven::File(Action::Include, v.into())
        });
        all.sort_by_key(|(at, _)| *at);
        all.into_iter().map(|(_, g)| g).collect()
    }
}

/// How a remote SRC or DST is reached.
#[derive(Args, Debug, Clone)]
pub struct RemoteArgs {
    /// The ssh command (with its options) for a remote SRC or DST, e.g.
    /// `-e 'ssh -p 2222 -i KEY'`.
    #[arg(
        short = 'e',
        long = "rsh",
        value_name = "COMMAND",
        default_value = "ssh"
    )]
    pub rsh: String,
    /// The ferry to run on the remote host.
    #[arg(long, value_name = "PATH", default_value = "ferry")]
    pub remote_ferry: String,
    /// Compress file data on the wire with zstd (remote copies).
    #[arg(long)]
    pub compress: bool,
}

/// Flags of `ferry serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Speak the protocol over standard input and output (the only way today).
    #[arg(long, required = true)]
    pub stdio: bool,
    /// Worker threads [default: 8 per core].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
}

/// How file data is moved and checked, for the jobs that write trees.
#[derive(Args, Debug, Clone, Copy)]
pub struct DataArgs {
    /// Clone file data (share blocks) where the filesystem allows.
    #[arg(long, value_enum, default_value_t = ReflinkArg::Auto)]
    pub reflink: ReflinkArg,
    /// Keep holes; `auto` also turns all-zero 4 KiB blocks into holes.
    #[arg(long, value_enum, default_value_t = SparseArg::Auto)]
    pub sparse: SparseArg,
    /// Decide an existing file is up to date by its content, not its size and mtime.
    #[arg(long)]
    pub checksum: bool,
    /// Re-read every file written and compare its hash with the source's.
    #[arg(long)]
    pub verify: bool,
}

/// Flags every job shares about what it prints.
#[derive(Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// Print one JSON summary object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Never show the progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Flags of `ferry demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Files per folder for the smallest sizes (larger sizes get fewer).
    #[arg(long, default_value_t = 2000)]
    pub files: usize,
    /// Where to make the sample tree [default: a new temporary directory].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `--reflink` values.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ReflinkArg {
    /// Clone where possible, copy otherwise.
    Auto,
    /// Clone or fail (`pack`: every file of 64 KiB or more; smaller ones are written
    /// beside their headers, never cloned).
    Always,
    /// Never clone: every block is copied (not by `copy_file_range` either, which may
    /// clone)
    Never,
}

/// `--sparse` values.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum SparseArg {
    /// Keep holes, and make all-zero blocks holes.
    Auto,
    /// As `auto`, which already makes every all-zero block of uncloned data a hole in
    /// any file (what `cp --sparse=always` does).
    Always,
    /// Leave no holes: every byte written, holes a clone or an archive brings allocated.
    Never,
}

impl From<ReflinkArg> for Reflink {
    fn from(r: ReflinkArg) -> Self {
        match r {
            ReflinkArg::Auto => Reflink::Auto,
            ReflinkArg::Always => Reflink::Always,
            ReflinkArg::Never => Reflink::Never,
        }
    }
}

impl From<SparseArg> for Sparse {
    fn from(s: SparseArg) -> Self {
        match s {
            SparseArg::Auto => Sparse::Auto,
            SparseArg::Always => Sparse::Always,
            SparseArg::Never => Sparse::Never,
        }
    }
}
