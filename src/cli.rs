//! Command-line flags, parsed by clap into plain values.

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use ferry_core::data::{Reflink, Sparse};
use std::path::PathBuf;

pub use crate::copy_args::*;

/// Parses the command line (exiting with clap's message on a usage error), with the
/// filter rules of `copy` and `pack` in the order given.
pub fn parse() -> Cli {
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match (&mut cli.command, matches.subcommand()) {
        (Command::Copy(a), Some((_, m))) => {
            a.filter.given = FilterArgs::in_order(m);
            a.filter.files_from = a.list.files_from.clone();
            a.filter.from0 = a.list.from0;
            a.src = a.srcs[0].clone();
        }
        (Command::Pack(a), Some((_, m))) => {
            a.filter.given = FilterArgs::in_order(m);
            a.src = a.srcs.first().cloned().unwrap_or_default();
        }
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
    /// is a directory. With several SRCs, each is copied into DST under its own name,
    /// as `cp -a SRC1 SRC2 DST/` does (DST is made if missing); so is one directory
    /// named without a trailing slash into a DST named with one (`proj bk/` makes
    /// `bk/proj`, as cp and rsync do; `proj/ bk/` copies the contents).
    ///
    /// Either SRC or DST may be remote, `[USER@]HOST:PATH` (the part before the first
    /// `:` without a `/`, as rsync and scp tell it): ferry then runs `ssh HOST ferry
    /// serve --stdio` and copies over ssh's pipes; or `ferry://HOST[:PORT]/PATH`, a
    /// `ferry serve --listen` daemon, over TLS.
    Copy(CopyArgs),
    /// Serve remote copies: one over standard input and output (`--stdio`, what
    /// `ferry copy` runs on the other end of ssh), or many clients at once as a daemon
    /// (`--listen ADDR:PORT --root DIR`, over TLS).
    Serve(ServeArgs),
    /// Pack the tree SRC into a ferry archive (a tar with 4 KiB-aligned data and an
    /// index); a SRC that is not a directory is packed as one member named as it is.
    /// With several SRCs, each goes in under its own name, as `tar -cf A SRC1 SRC2`.
    /// With -z, or an ARCHIVE name ending in .gz, compressed in gzip members alike.
    /// ARCHIVE `-` writes to standard output. With --zstd, or an ARCHIVE name ending in
    /// .zst, compressed in independent zstd frames that ls, cat and unpack read apart.
    /// A name ending in .xz (in independent blocks), .bz2 or .lz4 writes that
    /// compression; the name of one ferry does not write is refused.
    Pack(PackArgs),
    /// Unpack an archive (ferry's, or any tar; compressed with gzip, zstd, xz, bzip2,
    /// lz4, lzma, lzip, compress or lzop too, as its first bytes say) into DST. ARCHIVE `-` reads standard input; a ferry archive read so is
    /// checked against the content hashes its index records, once the index arrives.
    Unpack(UnpackArgs),
    /// List an archive's members (from the index of a ferry archive).
    Ls(LsArgs),
    /// Print one member of an archive to standard output.
    Cat(CatArgs),
    /// Delete the older snapshots of an upload to `s3://BUCKET/PREFIX` (every upload is
    /// one), and the shards only they named: `--keep N` keeps the newest N,
    /// `--keep-within 30d` those of the last 30 days, both together what either keeps.
    /// Never beside an upload to the same prefix: one running stops it, one begun
    /// meanwhile waits for it.
    Prune(PruneArgs),
    /// Copy a sample tree with ferry and with a one-file-at-a-time copy, side by side.
    Demo(DemoArgs),
    /// Mount an archive read-only (FUSE): a ferry archive at once from its index, any
    /// other tar after one scan of its headers (kept in the cache for the next time),
    /// an upload `s3://BUCKET/PREFIX` with ranged GETs through a block cache.
    /// Returns once the mount answers; the mount runs on in the background. As root,
    /// `--kernel` has the kernel mount it (EROFS), with no FUSE process in between.
    Mount(MountArgs),
    /// Unmount what `ferry mount` mounted (also when its process has died).
    Umount(UmountArgs),
    /// (Internal) The watchdog of a FUSE mount: unmounts it once the process serving
    /// it has ended, however it ended.
    #[command(hide = true)]
    MountWatch(MountWatchArgs),
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
    /// The archive to mount, or an upload `s3://BUCKET/PREFIX` (made by `ferry copy`).
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
    /// Show the archive's owner and group ids, not the ids its owner names have here
    /// (as `unpack --numeric-owner` makes them; without it, root sees owners by name,
    /// as root's unpack makes them).
    #[arg(long)]
    pub numeric_owner: bool,
    /// Kernel mode: mount through loop devices even where the kernel can mount files.
    #[arg(long = "loop")]
    pub loop_devices: bool,
    #[command(flatten)]
    pub s3: S3MountArgs,
}

/// Flags of `ferry mount s3://...`.
#[derive(Args, Debug, Clone)]
pub struct S3MountArgs {
    /// s3:// only: bytes of blocks kept in memory (K, M, G suffixes: powers of 1024).
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_size)]
    pub cache_size: u64,
    /// s3:// only: bytes per ranged GET, a power of two from 64K to 256M.
    #[arg(long, value_name = "BYTES", default_value = "4M", value_parser = parse_size)]
    pub block_size: u64,
    /// s3:// only: seconds one ranged GET may take, retries included, before the read
    /// that waits for it fails with EIO.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub timeout: u64,
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
    /// Where the archive is mounted (only a mount `ferry mount` made is unmounted).
    pub mountpoint: PathBuf,
    /// Unmount even if busy: detached now, let go once no process uses it (umount -l).
    #[arg(short = 'l', long)]
    pub lazy: bool,
}

/// Flags of the mount watchdog (started by `ferry mount`, its standard input a pipe
/// from the serving process).
#[derive(Args, Debug)]
pub struct MountWatchArgs {
    /// The mountpoint.
    pub mountpoint: PathBuf,
    /// The id of the mount to unmount (/proc/self/mountinfo's first field).
    #[arg(long)]
    pub id: u64,
}

/// Flags of `ferry index`.
#[derive(Args, Debug)]
pub struct IndexArgs {
    /// The archive to index.
    pub archive: PathBuf,
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// Flags of `ferry pack`. (SRC may be missing only with -T: clap's debug builds check
/// that a missing positional is allowed before a required one.)
#[derive(Args, Debug)]
#[command(allow_missing_positional = true)]
pub struct PackArgs {
    /// The tree (or single file) to pack; several: each goes in under its own name
    /// (its last component), as `tar -cf A SRC1 SRC2` makes them.
    #[arg(value_name = "SRC", required_unless_present = "files_from", num_args = 1..)]
    pub srcs: Vec<PathBuf>,
    /// The archive to write (`-` for standard output).
    pub archive: PathBuf,
    /// The one SRC, or the first of several (filled in from SRCs).
    #[arg(skip)]
    pub src: PathBuf,
    /// Find SRC in DIR (as `tar -C DIR -cf A SRC`): a relative SRC is taken from DIR;
    /// ARCHIVE is still named from where ferry runs.
    #[arg(short = 'C', long = "directory", value_name = "DIR")]
    pub directory: Option<PathBuf>,
    /// Pack the paths FILE names instead of SRCs, one a line (`-` reads standard
    /// input), each under its name as the list gives it, as `tar -cf A -T FILE` names
    /// it (relative to -C DIR; `./` and `//` dropped, `..` refused); a path listed
    /// twice or below a listed directory is packed once.
    #[arg(short = 'T', long = "files-from", value_name = "FILE")]
    pub files_from: Option<PathBuf>,
    /// The list of -T holds NUL-ended names, not lines (`find -print0`), as tar's
    /// --null reads it.
    #[arg(long, requires = "files_from")]
    pub null: bool,
    /// Stay on SRC's filesystem: a directory where another filesystem is mounted is
    /// packed empty, as `tar --one-file-system` does.
    #[arg(short = 'x', long)]
    pub one_file_system: bool,
    /// Follow symlinks in SRC: pack what each points to (a directory's tree, a file's
    /// data), as `tar -h` does; a symlink to nothing or to a directory above it (a
    /// loop) is reported and left out.
    #[arg(short = 'L', long)]
    pub dereference: bool,
    /// Walker threads [default: 1, which keeps each directory's subtree together; files
    /// are read ahead by prefetch threads].
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 1)]
    pub jobs: usize,
    /// Clone file data into the archive where the filesystem allows.
    #[arg(long, value_enum, default_value_t = ReflinkArg::Auto)]
    pub reflink: ReflinkArg,
    /// Hash cloned files into the index too (every other file is hashed anyway).
    #[arg(long)]
    pub hash: bool,
    /// Compress with zstd, in independent frames of about 4 MiB of tar each, with a
    /// seek table at the end, so `ls`, `cat` and `unpack` read only what they need
    /// (`zstd -d`, `tar --zstd` read it as any .tar.zst). Implied by an ARCHIVE name
    /// ending in .zst or .tzst. Nothing is cloned into a compressed archive, nor out.
    #[arg(long, conflicts_with = "gzip")]
    pub zstd: bool,
    /// Compress with gzip, in independent members of about 4 MiB of tar each that
    /// carry their sizes in their headers, so `ls`, `cat` and `unpack` read only what
    /// they need (`gzip -d`, `tar -xzf` read it as any .tar.gz). Implied by an ARCHIVE
    /// name ending in .gz or .tgz.
    #[arg(short = 'z', long)]
    pub gzip: bool,
    /// The compression level (zstd 1-19, default 3; gzip 1-9, default 6; xz 0-9,
    /// default 6; bzip2 1-9, default 9).
    #[arg(long, value_name = "N")]
    pub level: Option<u32>,
    /// Give every member's times to the nanosecond, and its atime, in a pax header, so
    /// GNU tar and bsdtar restore them as ferry does (as `tar --format=posix`). Without
    /// it, a member that needs a pax header for nothing else has none: its header gives
    /// the mtime's seconds (as GNU tar's default format), and the index the rest for
    /// ferry; a small file then costs 1 KiB, not 2.
    #[arg(long)]
    pub pax_times: bool,
    /// Store the index as ferry did before index format 6 (and any older ferry reads):
    /// plain, not packed in zstd frames (see docs/format.md). A small file's archive
    /// then holds about 296 bytes of index a member, not about 50.
    #[arg(long)]
    pub plain_index: bool,
    /// Leave out version control files and directories at any depth (.git, .svn, CVS,
    /// .hg, .bzr, _darcs and their kin), as GNU tar's --exclude-vcs does.
    #[arg(long)]
    pub exclude_vcs: bool,
    #[command(flatten)]
    pub restamp: crate::restamp_args::RestampArgs,
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
    /// NAME...`). A name with `*`, `?` or `[` is a glob, as with `tar --wildcards`
    /// (`*` crosses `/`; quote it from the shell): 'dir/*', '*.c'. A hardlink whose
    /// target is left out gets the target's data.
    #[arg(value_name = "MEMBER")]
    pub members: Vec<PathBuf>,
    /// Drop the first N components of every member's name (and of hardlink targets),
    /// as `tar --strip-components N`: `.` counts as one; a member with nothing left of
    /// its name is skipped. MEMBER names are matched against what is left.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub strip_components: usize,
    /// Workers for a ferry archive read through its index [default: 8 per core].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// As root, give members the archive's numeric user and group ids. Without it they
    /// get the ids their user and group names have here, where those exist (as GNU tar
    /// does).
    #[arg(long)]
    pub numeric_owner: bool,
    /// Replace nothing already in DST (directories are entered): each member whose
    /// name is taken is an error naming it, and the job exits 1 (GNU tar's -k).
    #[arg(short = 'k', long)]
    pub keep_old_files: bool,
    /// Leave out the members PATTERN matches, and what lies below them, as GNU tar's
    /// `--exclude`: a glob (`*` matches `/` too) matched against any run of whole
    /// components of a member's path (`d` leaves out `d/f` and `e/d`); a leading `./`
    /// or `/` matches from the archive's root only. May be given several times.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<std::ffi::OsString>,
    /// Rename members as they are unpacked, with GNU tar's sed expressions (as `pack
    /// --transform`; symlink targets too), before --strip-components; MEMBER names and
    /// --exclude match the new names. A new name with a `..` component is refused.
    #[arg(long, visible_alias = "xform", value_name = "EXPRESSION")]
    pub transform: Vec<String>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `ferry ls` (`-h` is `--human-readable`, as for `ls`; help is `--help`).
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct LsArgs {
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// The archive (`-` for standard input), or an upload (`s3://BUCKET/PREFIX`, a
    /// snapshot of it `s3://BUCKET/PREFIX@NAME`, or a prefix of plain objects).
    pub archive: PathBuf,
    /// List only these members, each with everything below it; a name with `*`, `?`
    /// or `[` is a glob, as for `unpack`.
    #[arg(value_name = "MEMBER")]
    pub members: Vec<PathBuf>,
    /// Long form: mode, owner and group (names where the archive has them, else ids),
    /// size, mtime (UTC, to the nanosecond). For `s3://`: kind and mode, size, mtime.
    #[arg(short = 'l', long)]
    pub long: bool,
    /// With `-l`: sizes as `ls -h` prints them (1.0K, 15M).
    #[arg(short = 'h', long = "human-readable", requires = "long")]
    pub human: bool,
    /// One JSON object per member, one a line: path, kind, mode, owner, size, mtime,
    /// link, device (names quoted as `tar -t` shows them). Not for `s3://`.
    #[arg(long, conflicts_with = "long")]
    pub json: bool,
    /// For `s3://`: list the snapshots (every upload is one), oldest first, one a line:
    /// its name (read it as `s3://B/P@NAME`), its members, the bytes of its files, and
    /// the bytes stored that only it names (what pruning it would free).
    #[arg(long, conflicts_with_all = ["long", "json", "members"])]
    pub snapshots: bool,
}

/// Flags of `ferry prune`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("rule").required(true).multiple(true).args(["keep", "keep_within"])))]
pub struct PruneArgs {
    /// The upload, `s3://BUCKET/PREFIX`.
    pub url: PathBuf,
    /// Keep the newest N snapshots (the newest is always kept).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub keep: Option<u64>,
    /// Keep the snapshots begun within DURATION before now: a number with s, m, h, d
    /// or w (`30d`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub keep_within: Option<i64>,
    /// Say what would be deleted, delete nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Leave the shards that kept snapshots name less than half of as they are
    /// (without it, their live members are copied into new shards, and they go).
    #[arg(long)]
    pub no_compact: bool,
    /// Bytes per shard compaction writes (K, M, G suffixes: powers of 1024).
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_size)]
    pub shard_size: u64,
}

/// `30d`, `12h`, `90m`, `3600s`, `2w` as seconds.
fn parse_duration(text: &str) -> Result<i64, String> {
    let split = text.len().saturating_sub(1);
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(format!("{text:?}: a number and s, m, h, d or w, as 30d")),
    };
    let n: i64 = number
        .parse()
        .map_err(|_| format!("{text:?}: a number and s, m, h, d or w, as 30d"))?;
    n.checked_mul(scale)
        .filter(|&s| s > 0)
        .ok_or_else(|| format!("{text:?}: out of range"))
}

/// Flags of `ferry cat`.
#[derive(Args, Debug)]
pub struct CatArgs {
    /// The archive (`-` for standard input), or an upload (`s3://BUCKET/PREFIX`, a
    /// snapshot of it `s3://BUCKET/PREFIX@NAME`, or a prefix of plain objects).
    pub archive: PathBuf,
    /// The member to print: the last member of that name, as an extraction leaves it.
    pub path: PathBuf,
    /// More members to print after it, each in the order given (as `tar -xOf A m1
    /// m2`; not for `s3://`).
    #[arg(value_name = "MEMBER")]
    pub more: Vec<PathBuf>,
}

/// Flags of `ferry serve`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["stdio", "listen"])))]
pub struct ServeArgs {
    /// Speak the protocol over standard input and output, for one job (what `ferry
    /// copy` runs on the other end of ssh).
    #[arg(long)]
    pub stdio: bool,
    /// Run a daemon listening on ADDR:PORT (TLS unless --insecure), serving --root.
    #[arg(long, value_name = "ADDR:PORT", requires = "root")]
    pub listen: Option<String>,
    /// The directory the daemon serves: clients read and write only beneath it.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Where the daemon keeps the key and self-signed certificate it makes on first
    /// start [default: $XDG_STATE_HOME/ferry or ~/.local/state/ferry].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A certificate chain (PEM) to serve instead of the self-signed one.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A file holding the secret clients must send (their --token-file).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Plain TCP, no TLS: the connection is neither private nor authenticated.
    #[arg(long)]
    pub insecure: bool,
    /// Serve downloads only.
    #[arg(long)]
    pub read_only: bool,
    /// The memory budget of the buffers all connections share (K, M, G suffixes).
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = parse_size)]
    pub memory: u64,
    /// One buffer per client instead of several from the shared pool (the baseline
    /// for the benchmark); clients admitted: the budget over the buffer size.
    #[arg(long)]
    pub per_client_buffer: bool,
    /// Most jobs at once [default: 4 per MiB of --memory; with --per-client-buffer
    /// one per MiB].
    #[arg(long, value_name = "N")]
    pub max_clients: Option<usize>,
    /// Most uploads placing data at once; the other admitted ones queue, holding no
    /// buffer [default: the --memory buffers over 4, 16 for 64M; with
    /// --per-client-buffer --max-clients].
    #[arg(long, value_name = "N")]
    pub max_running: Option<usize>,
    /// Seconds a client waits for a place before it is told the server is busy.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub busy_timeout: u64,
    /// Seconds a connection may send or take nothing before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub idle_timeout: u64,
    /// Bytes per second each way, per connection (K, M, G suffixes).
    #[arg(long, value_name = "RATE", value_parser = parse_size)]
    pub bwlimit: Option<u64>,
    /// Worker threads [default: 8 per core; the daemon: 4 per connection].
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
}

/// A size or rate: a number, with an optional K, M or G (powers of 1024).
pub fn parse_size(arg: &str) -> Result<u64, String> {
    let arg = arg.trim();
    let (digits, unit) = match arg.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => arg.split_at(at),
        None => (arg, ""),
    };
    let shift = match unit
        .trim_end_matches(['B', 'b', 'i'])
        .to_ascii_uppercase()
        .as_str()
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        _ => return Err(format!("{arg}: not a size (a number, then K, M or G)")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{arg}: not a size (a number, then K, M or G)"))?;
    n.checked_mul(1 << shift)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{arg}: out of range"))
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
    #[arg(short = 'c', long)]
    pub checksum: bool,
    /// Re-read every file written and compare its hash with the source's.
    #[arg(long)]
    pub verify: bool,
}

/// rsync's flags for keeping what ferry always keeps, taken so that an rsync habit
/// (`ferry copy -aHAX SRC DST`) works; each changes nothing.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct RsyncHabits {
    /// Accepted for rsync's habit: ferry always keeps what -a keeps (a tree with its
    /// symlinks, modes, times, owners as root, devices and specials).
    #[arg(short = 'a', long)]
    pub archive: bool,
    /// Accepted for rsync's habit: ferry always keeps hardlinks.
    #[arg(short = 'H', long)]
    pub hard_links: bool,
    /// Accepted for rsync's habit: ferry always keeps ACLs.
    #[arg(short = 'A', long)]
    pub acls: bool,
    /// Accepted for rsync's habit: ferry always keeps extended attributes.
    #[arg(short = 'X', long)]
    pub xattrs: bool,
}

/// Flags every job shares about what it prints.
#[derive(Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// Print one JSON summary object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Never show the progress bar.
    #[arg(long, conflicts_with = "progress")]
    pub no_progress: bool,
    /// Show progress also where standard error is not a terminal (a log, a pipe): one
    /// line every few seconds instead of the bar.
    #[arg(long)]
    pub progress: bool,
    /// Print the summary line at the end also where standard error is not a terminal
    /// (rsync's --stats); with --json, the JSON says it all.
    #[arg(long)]
    pub stats: bool,
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
