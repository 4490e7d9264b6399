//! Reporting what the tar reader read liberally: each [`TarWarning`] as a warning, or
//! as an error for a member it left out (which sets the exit status, as GNU tar's does).

use crate::tar::{Reader, Severity, TarWarning};
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Reporter};
use std::io::{self, Read};

/// Reports the warnings `reader` has noted since the last call.
pub(crate) fn report<R: Read>(reader: &mut Reader<R>, reporter: &dyn Reporter) {
    for w in reader.take_warnings() {
        report_one(&w, reporter);
    }
}

/// Reports one warning: an error (naming the archive, `read`) if a member was left out.
pub(crate) fn report_one(w: &TarWarning, reporter: &dyn Reporter) {
    match w.severity {
        Severity::Warning => reporter.warn(&w.to_string()),
        Severity::Error => reporter.error(&Error::new(
            &RelPath::root(),
            "read",
            io::Error::other(w.to_string()),
        )),
    }
}
