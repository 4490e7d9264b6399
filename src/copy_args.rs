//! The flags of `ferry copy`: its SRCs and DST, mirroring (`--delete`, `-n`, `-i`),
//! the filter rules, the remote and S3 ends, and which of them each kind of copy takes.

use crate::cli::{parse_size, DataArgs, OutputArgs, RsyncHabits};
use clap::{ArgMatches, Args, ValueEnum};
use ferry_core::filter::Action;
use std::ffi::OsString;
use std::path::PathBuf;

/// Flags of `ferry copy`.
#[derive(Args, Debug)]
pub struct CopyArgs {
    /// The tree (or single file) to copy; several: each goes into DST under its own
    /// name.
    #[arg(value_name = "SRC", required = true, num_args = 1..)]
    pub srcs: Vec<PathBuf>,
    /// Where to copy it (created if missing, with its parents).
    pub dst: PathBuf,
    /// The one SRC being copied (filled in for each SRC in turn).
    #[arg(skip)]
    pub src: PathBuf,
    /// Keep files in DST whose mtime is newer than SRC's (rsync's and `cp`'s
    /// `--update`): they are skipped, counted as up to date.
    #[arg(short = 'u', long)]
    pub update: bool,
    /// Stay on SRC's filesystem: a directory where another filesystem is mounted is
    /// made in DST, empty, as `cp -x` and `rsync -x` make it.
    #[arg(short = 'x', long)]
    pub one_file_system: bool,
    /// Follow symlinks in SRC: copy what each points to (a directory's tree, a file's
    /// data), as `cp -L` and `rsync -L` do; a symlink to nothing or to a directory
    /// above it (a loop) is reported and left out.
    #[arg(short = 'L', long)]
    pub dereference: bool,
    /// Hardlink a file DST lacks to DIR's copy of it where DIR holds it unchanged (same
    /// size, mtime, mode, owner and group, xattrs) instead of copying it: rsync's
    /// `--link-dest`, for snapshot backups. A relative DIR is taken from DST. Several
    /// are tried in the order given, the `--link-dest`s before the `--reflink-dest`s.
    #[arg(long = "link-dest", value_name = "DIR")]
    pub link_dest: Vec<PathBuf>,
    /// As `--link-dest`, but clone the file (XFS, btrfs): the two share their blocks
    /// until one of them changes, which never reaches the other. Where the filesystem
    /// cannot clone, the file is copied from SRC.
    #[arg(long = "reflink-dest", value_name = "DIR")]
    pub reflink_dest: Vec<PathBuf>,
    /// Worker threads [default: 8 per core].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub s3: S3Args,
    /// Skip the all-zero block check (for measuring its cost; holes in the source are
    /// still kept).
    #[arg(long, hide = true)]
    pub no_zero_scan: bool,
    #[command(flatten)]
    pub rsync_habits: RsyncHabits,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub list: ListArgs,
    #[command(flatten)]
    pub mirror: MirrorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl CopyArgs {
    /// The first flag given that a download from S3 does not carry out yet.
    pub fn not_for_s3(&self) -> Option<&'static str> {
        self.not_supported(Takes::default())
    }

    /// The first flag given that an upload of shards to S3 does not take: it takes the
    /// filter rules, and `--delete` and `--delete-excluded`, which is what it does
    /// anyway (the new manifest names what SRC has and the rules take, nothing else).
    pub fn not_for_shards_upload(&self) -> Option<&'static str> {
        self.not_supported(Takes {
            filters: true,
            delete: true,
            ..Takes::default()
        })
    }

    /// The first flag given that an upload of plain objects to S3 does not take (it
    /// takes `--delete`, `--delete-excluded`, the filter rules, `-n`, `-i` and `-v`).
    pub fn not_for_objects_upload(&self) -> Option<&'static str> {
        self.not_supported(Takes {
            filters: true,
            delete: true,
            dry_run: true,
        })
    }

    /// Whether `--link-dest` or `--reflink-dest` is given.
    pub fn takes_from_dirs(&self) -> bool {
        !self.link_dest.is_empty() || !self.reflink_dest.is_empty()
    }

    /// The `--link-dest` and `--reflink-dest` directories, in the order they are tried.
    pub fn link_dests(&self) -> ferry_core::local::link_dest::LinkDests {
        use ferry_core::local::link_dest::Take;
        let links = self.link_dest.iter().map(|d| (d.clone(), Take::Link));
        let clones = self.reflink_dest.iter().map(|d| (d.clone(), Take::Clone));
        ferry_core::local::link_dest::LinkDests {
            dirs: links.chain(clones).collect(),
        }
    }

    fn not_supported(&self, takes: Takes) -> Option<&'static str> {
        let m = &self.mirror;
        let unsupported = [
            (!takes.delete && (m.delete || m.delete_excluded), "--delete"),
            // A copy to or from S3 does not count its removals yet.
            (m.max_delete.is_some(), "--max-delete"),
            (
                !takes.dry_run && (m.dry_run || m.itemize_changes || m.verbose),
                "--dry-run, -i and -v",
            ),
            (
                !takes.filters && !self.filter.given.is_empty(),
                "--exclude and --include",
            ),
            // Only a local copy says which listed paths SRC lacks.
            (self.list.files_from.is_some(), "--files-from"),
            (self.srcs.len() > 1, "several SRCs"),
            (self.update, "-u/--update"),
            (self.one_file_system, "-x/--one-file-system"),
            (self.dereference, "-L/--dereference"),
            (self.takes_from_dirs(), "--link-dest and --reflink-dest"),
        ];
        unsupported.iter().find(|(given, _)| *given).map(|u| u.1)
    }
}

/// What a copy to or from S3 takes of the flags a local copy takes.
#[derive(Clone, Copy, Default)]
struct Takes {
    /// `--exclude`, `--include` and their files.
    filters: bool,
    /// `--delete`, `--delete-excluded`.
    delete: bool,
    /// `-n`, `-i`, `-v`.
    dry_run: bool,
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
    /// Delete at most N entries: what is past it is kept, named by one error line,
    /// and the job exits 1 (rsync's --max-delete).
    #[arg(long, value_name = "N")]
    pub max_delete: Option<u64>,
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

/// The paths of SRC a copy takes, from a list (rsync's `--files-from`).
#[derive(Args, Debug, Clone, Default)]
pub struct ListArgs {
    /// Copy only the paths FILE lists, as `rsync -a -r --files-from=FILE SRC/ DST/`:
    /// relative to SRC (a leading `/` dropped, `..` refused), one a line (`#`, `;`
    /// comments; `-` reads standard input); a listed directory with everything below
    /// it, the directories leading to each path with SRC's metadata. The filter rules
    /// still apply to each listed path and what is below it.
    #[arg(long, value_name = "FILE")]
    pub files_from: Option<PathBuf>,
    /// The files of --files-from, --exclude-from and --include-from hold NUL-ended
    /// entries, not lines (`find -print0`), as rsync's --from0 reads them.
    #[arg(short = '0', long)]
    pub from0: bool,
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
    /// `copy --files-from` (filled by [`parse`] from [`ListArgs`]).
    #[arg(skip)]
    pub files_from: Option<PathBuf>,
    /// Files of rules and lists hold NUL-ended entries (`--from0`, filled by [`parse`]).
    #[arg(skip)]
    pub from0: bool,
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
    pub(crate) fn in_order(m: &ArgMatches) -> Vec<FilterGiven> {
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

/// How a copy to or from `s3://BUCKET/PREFIX` is done (see docs/s3.md).
#[derive(Args, Debug, Clone)]
pub struct S3Args {
    /// Bytes per shard uploaded to S3 (K, M, G suffixes: powers of 1024).
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_size)]
    pub shard_size: u64,
    /// Multipart upload parts (5 MiB each, more for objects above 50 GB) or ranged GETs
    /// (4 MiB each) in flight at once; with plain objects (`--layout=objects`, or a
    /// download of a prefix without a manifest), objects in flight [default: 8; 64 with
    /// plain objects].
    #[arg(long, value_name = "N")]
    pub transfers: Option<usize>,
    /// How an upload is stored: `shards` (packed, indexed ferry archives and a
    /// manifest) or `objects` (one plain object per file, metadata as rclone keeps it,
    /// for other S3 tools). A download finds out which by itself.
    #[arg(long, value_name = "LAYOUT", default_value = "shards")]
    pub layout: Layout,
}

/// How an upload to S3 is stored (see docs/s3.md).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Packed, indexed shards and a manifest.
    Shards,
    /// One plain object per file.
    Objects,
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
    #[arg(short = 'z', long)]
    pub compress: bool,
    /// ferry:// without TLS (the daemon must run with --insecure too).
    #[arg(long)]
    pub insecure: bool,
    /// The fingerprint (SHA256:...) the daemon's certificate must have, instead of
    /// the one pinned in ~/.config/ferry/known_servers.
    #[arg(long, value_name = "SHA256:HEX")]
    pub fingerprint: Option<String>,
    /// A file holding the daemon's secret (ferry:// copies).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Bytes per second each way (remote copies; K, M, G suffixes).
    #[arg(long, value_name = "RATE", value_parser = parse_size)]
    pub bwlimit: Option<u64>,
}
