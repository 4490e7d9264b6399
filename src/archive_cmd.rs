//! `pack`, `unpack`, `ls` and `cat`: the archive commands.

use crate::archive_out::ArchiveOut;
use crate::cli::{CatArgs, LsArgs, PackArgs, UnpackArgs};
use crate::compression::{after_the_end, decompressed, is_compressed, read_to_end, HEAD_LEN};
use crate::frames_out::Compress;
use crate::job::Job;
use crate::progress;
use crate::report::StderrReporter;
use anyhow::Context;
use ferry_archive::read::archive::Source;
use ferry_archive::read::list::{cat, cat_stream, list, list_stream, Member};
use ferry_archive::read::lookup::cat_by_tree;
use ferry_archive::read::select::Selection;
use ferry_archive::read::tail::{check_tail, check_tail_removing, TailError};
use ferry_archive::read::unpack::{unpack_file, unpack_stream, UnpackOptions};
use ferry_archive::read::{Archive, ArchiveError};
use ferry_archive::tar::TarKind;
use ferry_archive::write::pack::{pack, pack_named, Output, PackOptions};
use ferry_core::data::Reflink;
use ferry_core::entry::{escaped, RelPath};
use ferry_core::error::Error;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;

fn is_dash(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// `ferry pack`.
pub fn run_pack(mut args: PackArgs) -> anyhow::Result<ExitCode> {
    // Names as given (`-C DIR .` has none; a list's as it gives them), paths found in
    // DIR.
    let mut named = match (&args.files_from, args.srcs.len()) {
        (Some(_), 1..) => anyhow::bail!("-T gives the paths to pack: give no SRC with it"),
        (Some(list), _) => Some(crate::pack_list::read(list, args.null)?),
        (None, 1) => None,
        (None, _) => Some(crate::several::named_sources(&args.srcs)?),
    };
    if let Some(dir) = &args.directory {
        args.srcs = args.srcs.iter().map(|src| dir.join(src)).collect();
        args.src = args.srcs.first().cloned().unwrap_or_default();
        for (_, src) in named.iter_mut().flatten() {
            *src = dir.join(&*src);
        }
    }
    // Several SRCs: paths below them are told from the directory they share, or as
    // the members they become when they share none; a list's from DIR.
    let root = match &named {
        Some(_) if args.files_from.is_some() => args.directory.clone().unwrap_or_default(),
        Some(named) => crate::several::common_parent(named),
        None => args.src.clone(),
    };
    let mut job = Job::new(args.output, &root, &args.archive);
    if is_dash(&args.archive) {
        job.summary_on_stderr();
    }
    if let (Some(named), Some(_)) = (&mut named, &args.files_from) {
        crate::pack_list::drop_missing(named, &job);
    }
    Ok(job.or_fatal(pack_job(&args, named.as_deref(), &job)))
}

/// `ferry pack` as `job` (of the one SRC, or of `named` sources): an error returned
/// means it could not run at all.
fn pack_job(
    args: &PackArgs,
    named: Option<&[(Vec<u8>, PathBuf)]>,
    job: &Job<'_>,
) -> anyhow::Result<ExitCode> {
    let mut opts = PackOptions {
        threads: args.jobs,
        reflink: args.reflink.into(),
        hash: args.hash,
        filter: crate::vcs::filter(&args.filter, args.exclude_vcs)?,
        one_file_system: args.one_file_system,
        dereference: args.dereference,
        restamp: args.restamp.restamp()?,
        by_name: args.restamp.by_name(),
        times_in_index: !args.pax_times,
        ..PackOptions::default()
    };
    let to_stdout = is_dash(&args.archive);
    if to_stdout && io::stdout().is_terminal() {
        anyhow::bail!(
            "refusing to write an archive to a terminal: redirect standard output to a \
             file, or pipe it on"
        );
    }
    let compress = match (args.zstd, args.gzip) {
        (true, _) => Some(Compress::Zstd),
        (_, true) => Some(Compress::Gzip),
        _ if to_stdout => None,
        _ => Compress::implied_by_name(&args.archive)?,
    };
    let format = compress.map(|c| c.format(args.level)).transpose()?;
    // Nothing clones out of a compressed archive: its data needs no 4 KiB padding;
    // its index is compressed with the rest.
    opts.align = compress.is_none();
    opts.pack_index = compress.is_none() && !args.plain_index;
    if format.is_none() && args.level.is_some() {
        anyhow::bail!("--level is for a compressed archive: add --zstd or -z");
    }
    let archive_out = match to_stdout {
        true => {
            crate::end_quietly_on_closed_pipe();
            crate::archive_out::widen_pipe(io::stdout());
            None
        }
        false => Some(ArchiveOut::create(&args.archive)?),
    };
    let stream =
        |to: Box<dyn Write + Send>| Output::Stream(Box::new(BufWriter::with_capacity(1 << 20, to)));
    let mut compressing = None;
    let (out, skip) = match (&archive_out, format) {
        (_, Some(format)) => {
            let to: Box<dyn Write + Send> = match &archive_out {
                None => Box::new(io::stdout()),
                Some(file) => Box::new(BufWriter::with_capacity(1 << 20, file.file().try_clone()?)),
            };
            let shared = crate::frames_out::Shared::new(to, format)?;
            compressing = Some(shared.clone());
            let skip = match &archive_out {
                Some(file) if file.is_positional() => file.inodes()?,
                _ => Vec::new(),
            };
            (Output::Stream(Box::new(shared)), skip)
        }
        (None, None) => (stream(Box::new(io::stdout())), Vec::new()),
        // A fifo, a pipe, a terminal: written in order, as tar writes them.
        (Some(file), None) if !file.is_positional() => {
            crate::archive_out::widen_pipe(file.file());
            (stream(Box::new(file.file().try_clone()?)), Vec::new())
        }
        (Some(file), None) => (
            Output::File(file.file().try_clone()?.into()),
            file.inodes()?,
        ),
    };
    if let Output::Stream(_) = out {
        no_clones_through_a_stream(opts.reflink, &args.archive, "written")?;
    }
    let counting = job.counting();
    let srcs: Vec<&Path> = match named {
        Some(named) => named.iter().map(|(_, src)| src.as_path()).collect(),
        None => vec![args.src.as_path()],
    };
    let packed =
        progress::with_progress_of(job.show_progress(), &srcs, &job.stats, || match named {
            Some(srcs) => pack_named(srcs, out, &skip, &opts, &job.stats, &counting),
            None => pack(&args.src, out, &skip, &opts, &job.stats, &counting),
        });
    // The last frame and the seek table, once pack has written everything.
    let packed = packed.and_then(|stats| match &compressing {
        Some(shared) => shared
            .finish()
            .map(|_| stats)
            .map_err(|e| Error::new(&RelPath::root(), "write archive", e)),
        None => Ok(stats),
    });
    // Per-file failures were reported and leave a usable archive, as with tar.
    let packed = packed.map_err(|e| job.reporter.line(&e)).and_then(|_| {
        archive_out
            .map_or(Ok(()), ArchiveOut::commit)
            .map_err(|e| format!("{e:#}"))
    });
    Ok(match packed {
        Ok(()) => job.finish(),
        Err(line) => job.fatal(&line),
    })
}

/// Refuses `--reflink=always` for an archive `done` ("read", "written") as a stream (a
/// pipe, or compressed data): no data can be cloned through one.
fn no_clones_through_a_stream(reflink: Reflink, archive: &Path, done: &str) -> anyhow::Result<()> {
    if reflink == Reflink::Always {
        anyhow::bail!(
            "{}: --reflink=always: the archive is {done} as a stream (a pipe, or compressed \
             data), and no data can be cloned through a stream",
            archive.display()
        );
    }
    Ok(())
}

/// An input archive: a plain file (read through its index when it has one) or a
/// stream, decompressed if its first bytes say so.
enum Input {
    File(Archive),
    Stream(Box<dyn Read>),
}

fn open_input(path: &Path) -> anyhow::Result<Input> {
    match open_source(path)? {
        Opened::Source(source) => open_archive(source, path).map(Input::File),
        Opened::Stream(r) => Ok(Input::Stream(r)),
    }
}

/// An archive input before its index is read: an archive file read where asked (plain,
/// or zstd with a seek table), or a stream.
enum Opened {
    Source(Source),
    Stream(Box<dyn Read>),
}

fn open_source(path: &Path) -> anyhow::Result<Opened> {
    let raw: Box<dyn Read + Send> = if is_dash(path) {
        crate::archive_out::widen_pipe(io::stdin());
        Box::new(io::stdin())
    } else {
        let f = File::open(path).with_context(|| format!("{}: open archive", path.display()))?;
        let kind = f
            .metadata()
            .with_context(|| format!("{}: stat archive", path.display()))?
            .file_type();
        if kind.is_dir() {
            anyhow::bail!("{}: open archive: it is a directory", path.display());
        }
        // A fifo, a pipe (`<(...)`), a character device: read as a stream, as `-` is.
        if !crate::archive_out::is_positional(&kind) {
            crate::archive_out::widen_pipe(&f);
            return Ok(Opened::Stream(
                decompressed(Box::new(f)).with_context(|| format!("{}", path.display()))?,
            ));
        }
        let mut head = [0u8; HEAD_LEN];
        let n = f
            .read_at_most(&mut head)
            .with_context(|| format!("{}: read archive", path.display()))?;
        let compressed =
            is_compressed(&head[..n]).with_context(|| format!("{}", path.display()))?;
        if !compressed {
            let source = Source::file(f).with_context(|| format!("{}", path.display()))?;
            return Ok(Opened::Source(source));
        }
        // A zstd archive with a seek table (`pack --zstd`) is read where asked, as a
        // plain one is.
        if let Some(frames) = ferry_seek::Frames::open(f.try_clone()?)
            .with_context(|| format!("{}", path.display()))?
        {
            return Ok(Opened::Source(Source::Compressed(frames)));
        }
        Box::new(f)
    };
    Ok(Opened::Stream(
        decompressed(raw).with_context(|| format!("{}", path.display()))?,
    ))
}

/// The archive read from `source`, its index (if any) read and checked whole.
fn open_archive(source: Source, path: &Path) -> anyhow::Result<Archive> {
    let plain = matches!(source, Source::File(_) | Source::Packed(_));
    let archive = Archive::from_source(source).with_context(|| format!("{}", path.display()))?;
    if let Some(at) = archive.overwritten_at().filter(|_| plain) {
        crate::report::to_stderr(format_args!(
            "ferry: warning: {}: data at offset {at} was written over the end of \
             the archive after its index (members appended by tar -r?): reading it \
             as a plain tar, without the index",
            path.display()
        ));
    }
    Ok(archive)
}

/// Reads the first bytes of a file without moving its offset.
trait ReadAtMost {
    fn read_at_most(&self, buf: &mut [u8]) -> io::Result<usize>;
}

impl ReadAtMost for File {
    fn read_at_most(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, 0)
    }
}

/// The members named on the command line.
pub(crate) fn selection(members: &[std::path::PathBuf]) -> anyhow::Result<Selection> {
    let names: Vec<&[u8]> = members.iter().map(|m| m.as_os_str().as_bytes()).collect();
    Selection::of(&names).map_err(anyhow::Error::msg)
}

/// `ferry unpack`.
pub fn run_unpack(args: UnpackArgs) -> anyhow::Result<ExitCode> {
    let job = Job::new(args.output, &args.archive, &args.dst).reading_archive();
    Ok(job.or_fatal(unpack_job(&args, &job)))
}

/// `ferry unpack` as `job`: an error returned means it could not run at all.
fn unpack_job(args: &UnpackArgs, job: &Job<'_>) -> anyhow::Result<ExitCode> {
    let excluded: Vec<&[u8]> = args.exclude.iter().map(|p| p.as_bytes()).collect();
    let mut select = selection(&args.members)?
        .stripping(args.strip_components)
        .excluding(&excluded)
        .map_err(anyhow::Error::msg)?;
    if let Some(t) = crate::restamp_args::transform_of(&args.transform)? {
        select = select.transforming(t);
    }
    let opts = UnpackOptions {
        threads: args.jobs.unwrap_or_else(ferry_core::copy::default_threads),
        reflink: args.data.reflink.into(),
        sparse: args.data.sparse.into(),
        checksum: args.data.checksum,
        verify: args.data.verify,
        numeric_owner: args.numeric_owner,
        dir_metadata: true,
        keep_old: args.keep_old_files,
        keep_partial: false,
    };
    // Before the input is opened: a pipe may keep it waiting for its first bytes.
    job.summary_on_interrupt()?;
    let input = open_input(&args.archive)?;
    if let Input::Stream(_) = input {
        no_clones_through_a_stream(opts.reflink, &args.archive, "read")?;
    }
    let counting = job.counting();
    let show = job.show_progress();
    let result = match input {
        Input::File(a) => {
            // The index says how much there is to do, before anything is done.
            let count = |t: &ferry_core::count::Totals| {
                // An index that fails now is reported by the unpack.
                for e in a.entries().into_iter().flatten().map_while(Result::ok) {
                    t.entries.fetch_add(
                        u64::from(e.kind != ferry_archive::index::Kind::Dir),
                        Relaxed,
                    );
                    t.bytes.fetch_add(e.size, Relaxed);
                }
                t.complete.store(a.index().is_some(), Relaxed);
            };
            progress::with_totals(show, count, &job.stats, || {
                unpack_file(&a, &args.dst, &opts, &select, &job.stats, &counting)
            })
        }
        Input::Stream(mut r) => progress::with_totals(
            show,
            |_| {},
            &job.stats,
            || {
                let hashes =
                    unpack_stream(&mut r, &args.dst, &opts, &select, &job.stats, &counting)?;
                // A file whose data differs is removed: none is left looking complete.
                check_tail_removing(&mut r, hashes, &args.dst, DAMAGED, &counting)
                    .map_err(tail_error)?;
                Ok(())
            },
        ),
    };
    Ok(match result {
        Ok(()) => job.finish(),
        Err(e @ ArchiveError::Destination(_)) => job.fatal(&e.to_string()),
        Err(e) => job.fatal(&format!("{}: {e}", args.archive.display())),
    })
}

fn mode_string(kind: TarKind, mode: u32) -> String {
    let t = match kind {
        TarKind::Dir => 'd',
        TarKind::Symlink => 'l',
        TarKind::HardLink => 'h',
        TarKind::CharDevice => 'c',
        TarKind::BlockDevice => 'b',
        TarKind::Fifo => 'p',
        TarKind::File => '-',
    };
    let mut s = String::from(t);
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        let bit = 0o400 >> i;
        let special = match i {
            2 => (mode & 0o4000 != 0).then_some(if mode & bit != 0 { 's' } else { 'S' }),
            5 => (mode & 0o2000 != 0).then_some(if mode & bit != 0 { 's' } else { 'S' }),
            8 => (mode & 0o1000 != 0).then_some(if mode & bit != 0 { 't' } else { 'T' }),
            _ => None,
        };
        s.push(special.unwrap_or(if mode & bit != 0 { c } else { '-' }));
    }
    s
}

/// The least width of `ls -l`'s owner, group and size together (GNU tar's, whose
/// columns then line up with ours).
const OWNER_AND_SIZE_WIDTH: usize = 19;

/// Prints a member as `tar -t` (`long`: `tar -tv`) does, its names quoted as GNU tar
/// quotes them (`\200`, `\n`).
fn print_member(out: &mut impl Write, m: &Member, args: &LsArgs) -> io::Result<()> {
    use ferry_archive::read::quote::tar_quoted as escaped;
    if args.json {
        return writeln!(out, "{}", crate::ls_format::json_line(m));
    }
    if !args.long {
        return writeln!(out, "{}", escaped(&m.path));
    }
    let link = match (m.kind, m.continued_at) {
        (_, Some(at)) => format!("--Continued at byte {at}--"),
        (TarKind::Symlink, _) => format!(" -> {}", escaped(&m.link)),
        (TarKind::HardLink, _) => format!(" link to {}", escaped(&m.link)),
        _ => String::new(),
    };
    // A name where the archive gives one, else the number, as `tar -tv` shows them;
    // the size after them, the two together at least as wide as GNU tar makes them.
    let name_or = |name: &Option<Vec<u8>>, id: u32| match name {
        Some(name) => escaped(name),
        None => id.to_string(),
    };
    let owner = format!(
        "{}/{}",
        name_or(&m.names.user, m.uid),
        name_or(&m.names.group, m.gid)
    );
    let size_width = OWNER_AND_SIZE_WIDTH.saturating_sub(owner.len() + 1);
    // A device's numbers where a file's size would be.
    let size = match m.device {
        Some((major, minor)) => format!("{major},{minor}"),
        None if args.human => crate::ls_format::human(m.size),
        None => m.size.to_string(),
    };
    let mut mode = mode_string(m.kind, m.mode);
    if m.continued_at.is_some() {
        // GNU tar's type letter for a file continued from another volume.
        mode.replace_range(..1, "M");
    }
    writeln!(
        out,
        "{mode} {owner} {size:>size_width$} {} {}{link}",
        ferry_core::utc::date_time(m.mtime.0, m.mtime.1),
        escaped(&m.path)
    )
}

/// `ferry ls`: exit status 1 if a member named was not found.
pub fn run_ls(args: LsArgs) -> anyhow::Result<ExitCode> {
    let select = selection(&args.members)?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let each = |m: &Member| print_member(&mut out, m, &args);
    // Names are members of the archive: its path is the root they are shown under.
    let reporter = StderrReporter::for_archive(&args.archive);
    let stats = ferry_core::Stats::default();
    let counting = ferry_core::error::Counting {
        inner: &reporter,
        stats: &stats,
    };
    let listed = match open_input(&args.archive)? {
        Input::File(a) => list(&a, &select, &counting, each),
        Input::Stream(mut r) => {
            list_stream(&mut r, &select, &counting, each).and_then(|()| Ok(read_to_end(&mut r)?))
        }
    };
    let status = finish_output(listed.map_err(anyhow::Error::from), &args.archive, out)?;
    if status != ExitCode::SUCCESS {
        return Ok(status);
    }
    let missing = select.report_unmatched("ls", &reporter);
    let cut_short = stats.snapshot().errors > 0;
    Ok(if missing || cut_short {
        ExitCode::from(1)
    } else {
        status
    })
}

/// `ferry cat`: each member named, in the order given, the last of its name.
pub fn run_cat(args: CatArgs) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let paths: Vec<&[u8]> = std::iter::once(&args.path)
        .chain(&args.more)
        .map(|p| p.as_os_str().as_bytes())
        .collect();
    let reporter = StderrReporter::for_archive(&args.archive);
    let done = match open_source(&args.archive)? {
        // Looked up through the tree table where the archive has one; read whole
        // (its index checked, or scanned) otherwise.
        Opened::Source(source) => cat_each(source, &paths, &args.archive, &mut out, &reporter),
        Opened::Stream(mut r) => {
            let again = |target: &[u8]| stream_again(&args.archive, paths[0], target);
            let printed = cat_stream(&mut r, &paths, &mut out, again, &reporter);
            let checked = printed.and_then(|hashes| {
                // Damaged inside the tar data (reported): no end to check past.
                let Some(hashes) = hashes else { return Ok(()) };
                let mut differed = None;
                check_tail(&mut r, hashes, &reporter, &mut |name| {
                    differed.get_or_insert(name);
                })
                .map_err(tail_error)?;
                match differed {
                    Some(name) => Err(ArchiveError::Member {
                        path: escaped(name.as_bytes()),
                        why: format!("{DAMAGED} (printed anyway)"),
                    }),
                    None => Ok(()),
                }
            });
            checked.map_err(anyhow::Error::from)
        }
    };
    finish_output(done, &args.archive, out)
}

/// `cat` of each of `paths` from an archive file, in order; the first error is
/// returned once the others are printed.
fn cat_each(
    source: Source,
    paths: &[&[u8]],
    archive: &Path,
    out: &mut impl Write,
    reporter: &StderrReporter<'_>,
) -> anyhow::Result<()> {
    let mut first_error = None;
    let mut note = |done: Result<(), ArchiveError>| {
        if let Err(e) = done {
            first_error.get_or_insert(e);
        }
    };
    // Through the tree table where the archive has one (it has, or has not, for all).
    let (first, rest) = paths.split_first().context("cat: no member named")?;
    match cat_by_tree(&source, first, out) {
        Ok(true) => rest
            .iter()
            .for_each(|p| note(cat_by_tree(&source, p, out).map(drop))),
        Ok(false) => {
            let opened = open_archive(source, archive)?;
            paths
                .iter()
                .for_each(|p| note(cat(&opened, p, out, reporter)));
        }
        Err(e) => note(Err(e)),
    }
    first_error.map_or(Ok(()), |e| Err(e.into()))
}

/// What a member whose streamed data differs from its index's hash is told to be.
const DAMAGED: &str = "content differs from the hash the archive's index records for it \
                       (damaged after packing, or on the way)";

/// A failure after the end of a streamed archive, as the commands tell it.
fn tail_error(e: TailError) -> ArchiveError {
    match e {
        TailError::Read(e) => ArchiveError::Io(after_the_end(e)),
        TailError::Index(e) => ArchiveError::Index(e),
    }
}

/// The archive read again from its start, for `cat` of a hardlink in a compressed
/// archive, whose data came before it (standard input cannot be read again).
fn stream_again(archive: &Path, link: &[u8], target: &[u8]) -> Result<Box<dyn Read>, ArchiveError> {
    if is_dash(archive) {
        return Err(ArchiveError::Io(io::Error::other(format!(
            "{}: a hardlink to {}, whose data came before it in standard input; \
             cat it from the archive file instead",
            escaped(link),
            escaped(target)
        ))));
    }
    Ok(decompressed(Box::new(File::open(archive)?))?)
}

/// Flushes `out`; a closed pipe (`ferry ls | head`) is not an error.
fn finish_output(
    result: anyhow::Result<()>,
    archive: &Path,
    mut out: impl Write,
) -> anyhow::Result<ExitCode> {
    let result = result.and_then(|()| Ok(out.flush()?));
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e)
            if e.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            crate::report::to_stderr(format_args!("ferry: {}: {e}", archive.display()));
            Ok(ExitCode::from(2))
        }
    }
}
