//! What the reader read liberally, for the caller to report: a member read as GNU tar
//! reads it where a strict reading would refuse the archive, or a member left out.

use std::fmt;

use super::error::{escaped, Member};

/// Warnings kept until the caller takes them; more are counted, not kept, so a caller
/// that never takes them (or an archive of a million odd headers) costs bounded memory.
const KEPT: usize = 256;

/// How much a warning matters to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The archive was read as GNU tar reads it; nothing of it was left out, or what
    /// was left out (a field that does not parse) has a replacement.
    Warning,
    /// A member was left out (GNU tar fails it too, and exits 2), the rest read on.
    Error,
}

/// One thing the reader read liberally or left out, at `offset`.
///
/// Displays as one line: `archive offset 512, member a: unknown file type 'Z', read as
/// a regular file`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TarWarning {
    /// Stream offset of the header (or record) concerned.
    pub offset: u64,
    /// The member concerned, where known.
    pub member: Option<Member>,
    /// What was read liberally and how.
    pub message: String,
    /// Whether a member was left out.
    pub severity: Severity,
}

impl fmt::Display for TarWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "archive offset {}", self.offset)?;
        match &self.member {
            None => {}
            Some(Member::In(name)) => write!(f, ", member {}", escaped(name))?,
            Some(Member::After(name)) => write!(f, ", after member {}", escaped(name))?,
        }
        write!(f, ": {}", self.message)
    }
}

/// The warnings not yet taken, bounded.
#[derive(Default)]
pub(crate) struct Warnings {
    kept: Vec<TarWarning>,
    /// Warnings past [`KEPT`] since the last take, counted only.
    dropped: u64,
    /// Whether one of the dropped ones was an error.
    dropped_error: bool,
}

impl Warnings {
    /// Notes `w`.
    pub(crate) fn push(&mut self, w: TarWarning) {
        if self.kept.len() < KEPT {
            self.kept.push(w);
        } else {
            self.dropped += 1;
            self.dropped_error |= w.severity == Severity::Error;
        }
    }

    /// The warnings noted since the last call; those past the bound as one more,
    /// which says how many there were.
    pub(crate) fn take(&mut self, offset: u64) -> Vec<TarWarning> {
        let mut out = std::mem::take(&mut self.kept);
        if self.dropped > 0 {
            out.push(TarWarning {
                offset,
                member: None,
                message: format!("and {} more such warnings before this offset", self.dropped),
                severity: if self.dropped_error {
                    Severity::Error
                } else {
                    Severity::Warning
                },
            });
        }
        (self.dropped, self.dropped_error) = (0, false);
        out
    }
}
