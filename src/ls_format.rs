//! `ferry ls --json` (one JSON object per member, one a line) and `ls -h` (sizes as
//! `ls -h` prints them).

use ferry_archive::read::list::Member;
use ferry_archive::read::quote::tar_quoted;
use ferry_archive::tar::TarKind;
use serde_json::{json, Value};

/// One member as a JSON object: names quoted as `tar -t` shows them (so bytes that are
/// not UTF-8 read `\200`), times in seconds and nanoseconds.
pub fn json_line(m: &Member) -> String {
    let name = |n: &Option<Vec<u8>>| n.as_deref().map(tar_quoted);
    let mut v = json!({
        "path": tar_quoted(&m.path),
        "kind": match m.continued_at {
            Some(_) => "continued",
            None => kind_word(m.kind),
        },
        "mode": format!("{:04o}", m.mode),
        "uid": m.uid,
        "gid": m.gid,
        "user": name(&m.names.user),
        "group": name(&m.names.group),
        "size": m.size,
        "mtime": m.mtime.0,
        "mtime_nsec": m.mtime.1,
    });
    if let Value::Object(o) = &mut v {
        if matches!(m.kind, TarKind::Symlink | TarKind::HardLink) {
            o.insert("link".into(), tar_quoted(&m.link).into());
        }
        if let Some((major, minor)) = m.device {
            o.insert("device".into(), json!([major, minor]));
        }
        if let Some(at) = m.continued_at {
            o.insert("continued_at".into(), at.into());
        }
    }
    v.to_string()
}

fn kind_word(kind: TarKind) -> &'static str {
    match kind {
        TarKind::File => "file",
        TarKind::Dir => "dir",
        TarKind::Symlink => "symlink",
        TarKind::HardLink => "hardlink",
        TarKind::CharDevice => "char-device",
        TarKind::BlockDevice => "block-device",
        TarKind::Fifo => "fifo",
    }
}

/// `size` as coreutils' `ls -h` prints it: bytes below 1024, else in K, M, G, ...
/// (powers of 1024), rounded up, with one decimal below 10.
pub fn human(size: u64) -> String {
    if size < 1024 {
        return size.to_string();
    }
    let mut unit = 0;
    let mut scaled = size as f64;
    while scaled >= 1024.0 && unit < 6 {
        scaled /= 1024.0;
        unit += 1;
    }
    let suffix = ["", "K", "M", "G", "T", "P", "E"][unit];
    let tenths = (scaled * 10.0).ceil() / 10.0;
    if tenths < 10.0 {
        return format!("{tenths:.1}{suffix}");
    }
    let whole = scaled.ceil();
    if whole >= 1024.0 && unit < 6 {
        // 1023.5K rounds up to the next unit, as ls shows it.
        return format!("1.0{}", ["", "K", "M", "G", "T", "P", "E"][unit + 1]);
    }
    format!("{whole}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn sizes_as_ls_h_prints_them() {
        // `ls -lh` (coreutils 9.1) of files of these sizes.
        for (size, shown) in [
            (0, "0"),
            (1023, "1023"),
            (1024, "1.0K"),
            (1025, "1.1K"),
            (10 * 1024, "10K"),
            (10 * 1024 + 1, "11K"),
            (1024 * 1024 - 1, "1.0M"),
            (5 << 30, "5.0G"),
        ] {
            assert_eq!(human(size), shown, "{size}");
        }
    }
}
