//! `ferry copy --delete SRC s3://... --layout=objects`: objects of files gone from SRC
//! deleted (so a download does not bring them back), what the filter rules exclude
//! kept unless `--delete-excluded`, nothing deleted when SRC could not be read, `dir/`
//! markers left with a warning, `-n`/`-i`/`-v`; the requests it costs, counted by
//! Garage. And an upload of shards, which mirrors SRC by itself, taking the same flags.

use crate::common::build::*;
use crate::common::nobody::give_to_nobody;
use crate::common::{is_root, scratch};
use crate::garage::Garage;
use crate::objects::{curl_put, objects_line, tree, tree_uploaded};
use crate::s;

/// The keys under `prefix/`, without it, sorted.
fn keys(g: &Garage, prefix: &str) -> Vec<String> {
    let mut k: Vec<String> = g
        .list(prefix)
        .into_iter()
        .map(|k| k[prefix.len() + 1..].to_string())
        .collect();
    k.sort();
    k
}

#[test]
fn delete_removes_objects_src_no_longer_makes_and_keeps_what_is_excluded() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc);
    write(&sc.src.join("a.log"), b"log a");
    write(&sc.src.join("b.log"), b"log b");
    mkdirs(&sc.src.join("cache"));
    write(&sc.src.join("cache/blob"), b"cached");
    stamp_times(&sc.src);
    let url = g.url("del");
    let up = |extra: &[&str]| {
        let mut args = vec!["copy", "--json", s(&sc.src), &url, "--layout=objects"];
        args.extend_from_slice(extra);
        g.ferry(&args)
    };
    up(&[]).assert_ok();
    assert_eq!(keys(&g, "del").len(), 10);
    // Gone from SRC: a file, a whole directory, a symlink, the excluded ones.
    std::fs::remove_file(sc.src.join("d/run")).unwrap();
    std::fs::remove_dir_all(sc.src.join("d/e/f")).unwrap();
    std::fs::remove_file(sc.src.join("d/link")).unwrap();
    std::fs::remove_file(sc.src.join("a.log")).unwrap();
    std::fs::remove_dir_all(sc.src.join("cache")).unwrap();
    // Without --delete their objects stay, and a download brings them back.
    let r = up(&[]);
    r.assert_ok();
    assert_eq!(objects_line(&r), (5, 0, 5), "{r}");
    assert!(!r.stderr.contains("deleted"), "{r}");
    let back = sc.tmp.path().join("back");
    g.ferry(&["copy", &url, s(&back)]).assert_ok();
    assert!(back.join("d/run").exists() && back.join("d/e/f/deep name é").exists());
    assert!(std::fs::symlink_metadata(back.join("d/link")).is_ok_and(|m| m.is_symlink()));
    // --delete, the rules excluding *.log and cache/: a.log and cache/blob stay. The
    // unchanged files are not sent again. One LIST, one bulk delete, nothing else.
    let before = g.s3_requests();
    let r = up(&["--delete", "--exclude", "*.log", "--exclude", "cache/"]);
    r.assert_ok();
    assert_eq!(
        g.s3_requests_since(&before),
        Garage::requests(&[("DeleteObjects", 1), ("ListObjectsV2", 1)]),
        "{r}"
    );
    assert_eq!(objects_line(&r), (4, 0, 4), "{r}");
    assert!(r.stderr.contains("; 3 deleted"), "{r}");
    r.json().assert_counts(&[("deleted", 3), ("errors", 0)]);
    assert_eq!(
        keys(&g, "del"),
        [
            "a.log",
            "b.log",
            "cache/blob",
            "d/big",
            "d/e/second name",
            "empty",
            "small"
        ]
    );
    // Run again: nothing more to delete.
    let r = up(&["--delete", "--exclude", "*.log", "--exclude", "cache/"]);
    r.assert_ok();
    r.json().assert_counts(&[("deleted", 0)]);
    // --delete-excluded: what the rules exclude goes too, even b.log, which SRC has.
    let r = up(&[
        "--delete-excluded",
        "--exclude",
        "*.log",
        "--exclude",
        "cache/",
    ]);
    r.assert_ok();
    r.json().assert_counts(&[("deleted", 3)]);
    assert_eq!(
        keys(&g, "del"),
        ["d/big", "d/e/second name", "empty", "small"]
    );
    // An object no one made from SRC goes too (the prefix mirrors SRC); a `dir/`
    // marker, which object_store cannot name, is left with a warning, and one of a
    // directory SRC has is kept without a word.
    g.put("del/foreign", b"not from SRC".to_vec());
    assert!(curl_put(&g, "del/gone-dir/", ""));
    assert!(curl_put(&g, "del/d/", ""));
    let before = g.s3_requests();
    let r = up(&["--delete"]);
    r.assert_ok();
    r.json().assert_counts(&[("deleted", 1)]);
    let warnings = r.warnings();
    assert!(
        warnings.len() == 1
            && warnings[0].contains("s3://ferry-test/del/gone-dir/: a directory marker"),
        "{r}"
    );
    // The LIST, a HEAD of each zero-length object to delete (is it a marker?), the
    // bulk delete; b.log sent again.
    assert_eq!(
        g.s3_requests_since(&before),
        Garage::requests(&[
            ("DeleteObjects", 1),
            ("HeadObject", 1),
            ("ListObjectsV2", 1),
            ("PutObject", 1)
        ]),
        "{r}"
    );
    let down = sc.tmp.path().join("down");
    g.ferry(&["copy", &url, s(&down)]).assert_ok();
    for gone in ["d/run", "d/link", "d/e/f", "a.log", "cache", "foreign"] {
        assert!(
            std::fs::symlink_metadata(down.join(gone)).is_err(),
            "{gone}"
        );
    }
    assert_eq!(std::fs::read(down.join("b.log")).unwrap(), b"log b");
}

#[test]
fn delete_deletes_nothing_when_src_could_not_be_read() {
    let Some(g) = Garage::start() else { return };
    let (sc, _, url) = tree_uploaded(&g, "unread");
    let before = keys(&g, "unread");
    std::fs::remove_file(sc.src.join("d/run")).unwrap();
    // Root reads everything: ferry runs as nobody, on a tree nobody owns, with a
    // cache directory nobody may write.
    let cache = sc.tmp.path().join("cache");
    mkdirs(&cache);
    chmod(sc.tmp.path(), 0o755);
    if is_root() {
        give_to_nobody(&sc.src);
        give_to_nobody(&cache);
    }
    chmod(&sc.src.join("d/e"), 0o000);
    let args = [
        "copy",
        "--json",
        "--delete",
        s(&sc.src),
        &url,
        "--layout=objects",
    ];
    let Some(r) = g.ferry_unprivileged(&args, &cache) else {
        return;
    };
    chmod(&sc.src.join("d/e"), 0o755);
    r.assert_status(1);
    let errors = r.errors();
    assert!(errors.len() == 1 && errors[0].contains("d/e"), "{r}");
    assert!(
        r.warnings()
            .iter()
            .any(|w| w.contains("some of SRC could not be read: no object deleted")),
        "{r}"
    );
    r.json().assert_counts(&[("deleted", 0), ("errors", 1)]);
    assert_eq!(keys(&g, "unread"), before, "{r}");
    // Readable again: the rerun deletes what is gone.
    let Some(r) = g.ferry_unprivileged(&args, &cache) else {
        return;
    };
    r.assert_ok();
    r.json().assert_counts(&[("deleted", 1)]);
    assert!(!keys(&g, "unread").contains(&"d/run".to_string()), "{r}");
}

#[test]
fn an_upload_of_shards_takes_filters_and_delete_and_refuses_dry_runs() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    for p in ["f", "g.o", "d/h", "d/i.o"] {
        mkdirs(sc.src.join(p).parent().unwrap());
        write(&sc.src.join(p), p.as_bytes());
    }
    let url = "s3://ferry-test/shards-del";
    let up = || {
        g.ferry(&[
            "copy",
            "--json",
            s(&sc.src),
            url,
            "--exclude",
            "*.o",
            "--delete",
        ])
    };
    up().assert_ok();
    let ls = |g: &Garage| {
        let r = g.ferry(&["ls", url]);
        r.assert_ok();
        r.stdout
    };
    let listed = ls(&g);
    assert!(
        listed.contains(" f\n") && listed.contains(" d/h\n"),
        "{listed}"
    );
    assert!(!listed.contains(".o"), "excluded files went up: {listed}");
    // A file gone from SRC is gone from the upload, and counted as deleted.
    std::fs::remove_file(sc.src.join("d/h")).unwrap();
    let r = up();
    r.assert_ok();
    r.json().assert_counts(&[("deleted", 1), ("errors", 0)]);
    assert!(!ls(&g).contains("d/h"));
    let r = g.ferry(&["copy", s(&sc.src), url, "-n"]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("not supported for a copy to or from S3"),
        "{r}"
    );
}

#[test]
fn dry_run_sends_and_deletes_nothing_and_itemizes_what_would_go() {
    let Some(g) = Garage::start() else { return };
    let (sc, _, url) = tree_uploaded(&g, "dry");
    std::fs::remove_file(sc.src.join("d/run")).unwrap();
    std::fs::remove_file(sc.src.join("d/link")).unwrap();
    write(&sc.src.join("small"), b"small file, longer now");
    write(&sc.src.join("new"), b"new");
    let before = keys(&g, "dry");
    let requests = g.s3_requests();
    let args = |flag| {
        [
            "copy",
            flag,
            "--delete",
            s(&sc.src),
            &url,
            "--layout=objects",
        ]
    };
    let r = g.ferry(&args("-ni"));
    r.assert_ok();
    let mut lines: Vec<&str> = r.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "created file    new",
            "deleted file    d/run",
            "deleted symlink d/link",
            "updated file    d/e/second name (size,mtime)",
            "updated file    small (size,mtime)",
        ],
        "{r}"
    );
    assert!(r.stderr.contains("dry run, nothing sent or deleted"), "{r}");
    assert_eq!(objects_line(&r), (6, 3, 3), "{r}");
    // Only the LIST: nothing sent, nothing deleted.
    assert_eq!(
        g.s3_requests_since(&requests),
        Garage::requests(&[("ListObjectsV2", 1)]),
        "{r}"
    );
    assert_eq!(keys(&g, "dry"), before);
    // The same for real, with -v: names as they go, `deleting` for what is deleted.
    let r = g.ferry(&args("-v"));
    r.assert_ok();
    let mut lines: Vec<&str> = r.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "d/e/second name",
            "deleting d/link",
            "deleting d/run",
            "new",
            "small"
        ],
        "{r}"
    );
    let after = keys(&g, "dry");
    assert!(after.contains(&"new".to_string()), "{after:?}");
    assert!(
        !after
            .iter()
            .any(|k| k == "d/run" || k == "d/link.rclonelink"),
        "{after:?}"
    );
}
