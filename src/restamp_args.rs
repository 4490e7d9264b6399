//! `pack`'s flags for archives that come out the same wherever and whenever they are
//! made, and for renaming members: GNU tar's `--sort`, `--owner`, `--group`,
//! `--numeric-owner`, `--mtime`, `--clamp-mtime`, `--pax-option` and `--transform`,
//! read into a [`Restamp`].

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ferry_archive::owners::LocalIds;
use ferry_archive::transform::Transform;
use ferry_archive::write::pax_delete::PaxDelete;
use ferry_archive::write::restamp::{ForcedOwner, Restamp};
use ferry_core::entry::Timestamp;
use std::path::Path;
use std::sync::Arc;

/// `--sort` values.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortArg {
    /// The walk's own order: by inode number within each directory, which reads
    /// fastest (what GNU tar's `inode` is for), the leaves of a directory before its
    /// subdirectories.
    #[default]
    None,
    /// In the order of the names' bytes within each directory, each subdirectory's
    /// tree where its name falls, as `tar --sort=name`; with one walker.
    Name,
    /// The same as `none`: ferry's walk already goes by inode number.
    Inode,
}

/// The flags themselves.
#[derive(Args, Debug, Default)]
pub struct RestampArgs {
    /// The order of each directory's members (`--sort=name` and the flags below make
    /// two packs of one tree, or of two copies of it, byte for byte the same).
    #[arg(long, value_enum, default_value_t = SortArg::None)]
    pub sort: SortArg,
    /// Give every member this owner: a NAME (its id here, or the member's own id if
    /// this machine has no such user), an ID (with this machine's name for it), or
    /// NAME:ID, as GNU tar's --owner takes it.
    #[arg(long, value_name = "NAME[:ID]")]
    pub owner: Option<String>,
    /// Give every member this group, as --owner gives the owner.
    #[arg(long = "group", value_name = "NAME[:ID]")]
    pub group_owner: Option<String>,
    /// Write owner and group ids only, no names (`tar --numeric-owner`).
    #[arg(long)]
    pub numeric_owner: bool,
    /// Give every member this modification time: @SECONDS[.FRACTION] since the epoch,
    /// a date YYYY-MM-DD[ HH:MM[:SS[.FRACTION]]] (local time unless it ends in Z or
    /// +HH:MM; `T` may stand for the space), or the time of a file named by a path
    /// starting with `/` or `.`, as GNU tar's --mtime.
    #[arg(long, value_name = "DATE")]
    pub mtime: Option<String>,
    /// With --mtime: only members modified after DATE get it (`tar --clamp-mtime`).
    #[arg(long, requires = "mtime")]
    pub clamp_mtime: bool,
    /// Pax header options, as GNU tar's --pax-option, comma-separated:
    /// `delete=PATTERN` leaves out the keywords the glob matches (`atime`: no access
    /// times; `mtime`: whole seconds; `SCHILY.xattr.NAME`, `SCHILY.acl.*`: those
    /// attributes; `ctime`: ferry writes none), `exthdr.mtime=DATE` the pax headers' own
    /// mtime; `exthdr.name=`, `globexthdr.name=`, `globexthdr.mtime=` change nothing
    /// (ferry's pax header names hold no process id or time; it writes no global ones).
    #[arg(long, value_name = "LIST")]
    pub pax_option: Vec<String>,
    /// Rename members as they are written: sed's s/REGEX/REPLACEMENT/FLAGS, as GNU tar's
    /// --transform (basic regular expressions, `x` for extended; flags g, i, N, and
    /// r, s, h or R, S, H for member names, symlink and hardlink targets; several
    /// separated by `;`, applied in order). A new name with a `..` component is refused.
    #[arg(long, visible_alias = "xform", value_name = "EXPRESSION")]
    pub transform: Vec<String>,
}

impl RestampArgs {
    /// The rewrites these flags ask for.
    pub fn restamp(&self) -> anyhow::Result<Restamp> {
        let mut pax = PaxOptions::default();
        for list in &self.pax_option {
            pax.add(list)?;
        }
        let user = self
            .owner
            .as_deref()
            .map(|o| forced_owner(o, "--owner", user_id))
            .transpose()?;
        let group = self
            .group_owner
            .as_deref()
            .map(|g| forced_owner(g, "--group", group_id))
            .transpose()?;
        Ok(Restamp {
            user,
            group,
            numeric_owner: self.numeric_owner,
            mtime: self.mtime.as_deref().map(mtime).transpose()?,
            clamp_mtime: self.clamp_mtime,
            pax_delete: PaxDelete::new(&pax.delete)
                .map_err(|why| anyhow::anyhow!("--pax-option {why}"))?,
            pax_header_mtime: pax.header_mtime,
            sort_xattrs: self.sort == SortArg::Name,
            transform: transform_of(&self.transform)?,
        })
    }

    /// Whether the walk goes in name order.
    pub fn by_name(&self) -> bool {
        self.sort == SortArg::Name
    }
}

/// The expressions of `--transform` options, in order; None when there are none.
pub fn transform_of(options: &[String]) -> anyhow::Result<Option<Arc<Transform>>> {
    let mut transform = Transform::default();
    for t in options {
        transform
            .add(t)
            .map_err(anyhow::Error::msg)
            .context("--transform")?;
    }
    Ok((!transform.is_empty()).then(|| Arc::new(transform)))
}

/// What `--pax-option` lists ask for.
#[derive(Default)]
struct PaxOptions {
    /// `delete=PATTERN` values, in order.
    delete: Vec<String>,
    /// `exthdr.mtime=DATE`, in seconds.
    header_mtime: Option<u64>,
}

impl PaxOptions {
    /// Takes one comma-separated list, as GNU tar's --pax-option. Anything ferry cannot
    /// do as asked is refused, not ignored.
    fn add(&mut self, list: &str) -> anyhow::Result<()> {
        for option in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match option.split_once('=') {
                Some(("delete", pattern)) => self.delete.push(pattern.to_string()),
                Some(("exthdr.mtime", date)) => {
                    let t = mtime(date).with_context(|| format!("--pax-option {option}"))?;
                    // A ustar mtime field holds 11 octal digits.
                    match u64::try_from(t.sec).ok().filter(|&s| s < 1 << 33) {
                        Some(secs) => self.header_mtime = Some(secs),
                        None => bail!(
                            "--pax-option {option}: a pax header's mtime is from 1970 to 2242"
                        ),
                    }
                }
                // ferry writes no global headers, and its pax headers' names
                // (`PaxHeaders/NAME`) hold no process id or time to begin with.
                Some(("exthdr.name" | "globexthdr.name" | "globexthdr.mtime", _)) => {}
                _ => bail!(
                    "--pax-option {option}: ferry takes delete=PATTERN, exthdr.mtime=DATE, \
                     exthdr.name=, globexthdr.name= and globexthdr.mtime= (adding keywords \
                     with KEY=VALUE or KEY:=VALUE is not done)"
                ),
            }
        }
        Ok(())
    }
}

/// `--owner` or `--group`'s NAME, ID or NAME:ID, as GNU tar reads it (`parse_owner_group`):
/// digits alone are an id; a name alone takes its id here, if there is one.
fn forced_owner(
    arg: &str,
    flag: &str,
    id_here: fn(&str) -> Option<u32>,
) -> anyhow::Result<ForcedOwner> {
    let number = |n: &str| {
        n.parse::<u32>()
            .with_context(|| format!("{flag} {arg}: {n} is not a valid owner or group id"))
    };
    let (name, id) = match arg.split_once(':') {
        Some((name, id)) => ((!name.is_empty()).then_some(name), Some(number(id)?)),
        None if arg.starts_with(|c: char| c.is_ascii_digit()) => (None, Some(number(arg)?)),
        None => (Some(arg), None),
    };
    let id = id.or_else(|| name.and_then(id_here));
    Ok(ForcedOwner {
        id,
        name: name.map(|n| n.as_bytes().to_vec()),
    })
}

fn user_id(name: &str) -> Option<u32> {
    LocalIds::default().user(name.as_bytes())
}

fn group_id(name: &str) -> Option<u32> {
    LocalIds::default().group(name.as_bytes())
}

/// `--mtime`'s DATE.
fn mtime(arg: &str) -> anyhow::Result<Timestamp> {
    let bad = || {
        format!("--mtime {arg}: not a date (@SECONDS, YYYY-MM-DD[ HH:MM[:SS]], or a path starting with / or .)")
    };
    if arg.starts_with('/') || arg.starts_with('.') {
        let st = rustix::fs::stat(Path::new(arg)).with_context(|| format!("--mtime {arg}"))?;
        return Ok(Timestamp {
            sec: st.st_mtime,
            nsec: st.st_mtime_nsec as u32,
        });
    }
    if let Some(secs) = arg.strip_prefix('@') {
        return epoch_seconds(secs).with_context(bad);
    }
    date(arg).with_context(bad)
}

/// `SECONDS[.FRACTION]`, possibly negative.
fn epoch_seconds(text: &str) -> anyhow::Result<Timestamp> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let negative = whole.starts_with('-');
    let sec: i64 = whole.parse()?;
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        bail!("not a fraction");
    }
    let digits: String = fraction
        .chars()
        .chain("000000000".chars())
        .take(9)
        .collect();
    let nsec: u32 = digits.parse()?;
    Ok(match (negative, nsec) {
        (true, 1..) => Timestamp {
            sec: sec - 1,
            nsec: 1_000_000_000 - nsec,
        },
        _ => Timestamp { sec, nsec },
    })
}

/// An ISO 8601 date and time, with a zone or in local time.
fn date(text: &str) -> anyhow::Result<Timestamp> {
    use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, TimeZone};
    let text = text.trim();
    let at = |t: DateTime<chrono::FixedOffset>| Timestamp {
        sec: t.timestamp(),
        nsec: t.timestamp_subsec_nanos(),
    };
    let zoned = text.replacen(' ', "T", 1);
    let zoned = match zoned.strip_suffix(" UTC").or(zoned.strip_suffix('Z')) {
        Some(utc) => format!("{utc}+00:00"),
        None => zoned,
    };
    for form in [
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M%:z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(&zoned, form) {
            return Ok(at(t));
        }
    }
    let local = text.replacen('T', " ", 1);
    let naive = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|form| NaiveDateTime::parse_from_str(&local, form).ok())
        .or_else(|| {
            let day = NaiveDate::parse_from_str(&local, "%Y-%m-%d").ok()?;
            day.and_hms_opt(0, 0, 0)
        })
        .context("not a date")?;
    let t = Local
        .from_local_datetime(&naive)
        .earliest()
        .context("a local time that does not exist (a clock change skips it)")?;
    Ok(at(t.fixed_offset()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(sec: i64, nsec: u32) -> Timestamp {
        Timestamp { sec, nsec }
    }

    #[test]
    fn dates_in_each_form() {
        assert_eq!(mtime("@0").ok(), Some(at(0, 0)));
        assert_eq!(
            mtime("@1700000000.5").ok(),
            Some(at(1_700_000_000, 500_000_000))
        );
        assert_eq!(mtime("@-1.25").ok(), Some(at(-2, 750_000_000)));
        assert_eq!(
            mtime("2001-09-09 01:46:40Z").ok(),
            Some(at(1_000_000_000, 0))
        );
        assert_eq!(
            mtime("2001-09-09T03:46:40+02:00").ok(),
            Some(at(1_000_000_000, 0))
        );
        assert_eq!(
            mtime("2001-09-09 01:46:40 UTC").ok(),
            Some(at(1_000_000_000, 0))
        );
        assert!(mtime("yesterday").is_err());
        assert!(mtime("@1.x").is_err());
    }

    #[test]
    fn owners_as_gnu_tar_reads_them() {
        let none = |_: &str| None;
        let o = forced_owner("0", "--owner", none).expect("an id");
        assert_eq!((o.id, o.name), (Some(0), None));
        let o = forced_owner("builder:1234", "--owner", none).expect("a name and id");
        assert_eq!(
            (o.id, o.name.as_deref()),
            (Some(1234), Some(&b"builder"[..]))
        );
        let o = forced_owner("nobody-here", "--owner", none).expect("a name");
        assert_eq!((o.id, o.name.as_deref()), (None, Some(&b"nobody-here"[..])));
        assert!(forced_owner("x:y", "--owner", none).is_err());
        assert!(forced_owner("99999999999", "--owner", none).is_err());
    }

    #[test]
    fn pax_options_ferry_cannot_keep_are_refused() {
        let mut pax = PaxOptions::default();
        let recipe = "exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime";
        pax.add(recipe).expect("the reproducible-builds recipe");
        pax.add("delete=mtime,exthdr.mtime=@0").expect("GNU tar's");
        assert_eq!(pax.delete, ["atime", "ctime", "mtime"]);
        assert_eq!(pax.header_mtime, Some(0));
        for refused in [
            "comment=x",
            "comment:=x",
            "invalid=bin",
            "linkdata",
            "exthdr.mtime=@-1",
        ] {
            assert!(PaxOptions::default().add(refused).is_err(), "{refused}");
        }
    }
}
