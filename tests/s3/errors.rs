//! What goes wrong ends in one clear line: a wrong key, a missing bucket, a wrong
//! region; a manifest or shard in the bucket that is not what ferry wrote is refused,
//! naming the object, and nothing is written outside the destination.

use crate::common::build::*;
use crate::common::scratch;
use crate::garage::Garage;
use crate::s;
use ferry_s3::object_store::path::Path as Key;
use ferry_s3::object_store::{ObjectStoreExt, PutPayload};

/// The one error line of a failed run (exit status 2).
pub(crate) fn one_error(r: &crate::common::run::Run) -> String {
    r.assert_status(2);
    let errors = r.errors();
    assert_eq!(errors.len(), 1, "{r}");
    errors[0].to_string()
}

#[test]
fn wrong_key_missing_bucket_and_wrong_region_each_say_so() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("a"), b"a");
    let url = g.url("errors");
    let mut cmd = g.command(&["copy", s(&sc.src), &url]);
    cmd.env("AWS_SECRET_ACCESS_KEY", "ff".repeat(32));
    let r = crate::common::run::run(cmd);
    let line = one_error(&r);
    assert!(
        line.contains("access denied") && line.contains("manifest.ferry"),
        "{line}"
    );
    let r = g.ferry(&["copy", s(&sc.src), "s3://no-such-bucket/x"]);
    let line = one_error(&r);
    assert!(
        line.contains("s3://no-such-bucket/") && line.contains("the bucket does not exist"),
        "{line}"
    );
    let r = g.ferry(&["ls", "s3://no-such-bucket/x"]);
    assert!(one_error(&r).contains("the bucket does not exist"), "{r}");
    let mut cmd = g.command(&["copy", &url, s(&sc.dst)]);
    cmd.env("AWS_REGION", "eu-west-3");
    let r = crate::common::run::run(cmd);
    assert!(
        one_error(&r).contains("wrong region (check AWS_REGION)"),
        "{r}"
    );
    assert!(!sc.dst.exists());
}

#[test]
fn a_manifest_not_written_by_ferry_is_refused_naming_it() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    g.put("bad/manifest.ferry", b"not a manifest".to_vec());
    for args in [
        vec!["ls", "s3://ferry-test/bad"],
        vec!["copy", "s3://ferry-test/bad", s(&sc.dst)],
    ] {
        let r = g.ferry(&args);
        let line = one_error(&r);
        assert!(
            line.contains("s3://ferry-test/bad/manifest.ferry: bad manifest"),
            "{line}"
        );
    }
    // A manifest naming a member outside the tree.
    let json = format!(
        r#"{{"format":"ferry-s3 1","shards":[{{"fingerprint":"{}","size":8192,"etag":null,"dirs":false,
           "members":[{{"p":"../../escape","k":0,"s":1,"m":[0,0],"mode":420,"o":0,"e":1024}}]}}]}}"#,
        "ab".repeat(16)
    );
    g.put(
        "esc/manifest.ferry",
        zstd::encode_all(json.as_bytes(), 1).unwrap(),
    );
    let r = g.ferry(&["copy", "s3://ferry-test/esc", s(&sc.dst)]);
    let line = one_error(&r);
    assert!(
        line.contains("../../escape") && line.contains("leaves the tree"),
        "{line}"
    );
    assert!(!sc.tmp.path().join("escape").exists() && !sc.dst.exists());
}

#[test]
fn a_shard_that_is_not_the_archive_named_is_refused() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("a"), b"content");
    let url = g.url("swap");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    // Every shard replaced by a plain tar of the same length holding `../escape`.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let c = g.client();
    let listed: Vec<_> = rt.block_on(async {
        use futures::TryStreamExt;
        ferry_s3::object_store::ObjectStore::list(&c, Some(&Key::from("swap/shards")))
            .try_collect()
            .await
            .expect("list")
    });
    let evil = sc.tmp.path().join("evil");
    mkdirs(&evil);
    write(&evil.join("x"), b"evil");
    for meta in listed
        .iter()
        .filter(|m| m.location.as_ref().ends_with(".far"))
    {
        let out = std::process::Command::new("tar")
            .args(["-c", "-C"])
            .arg(&evil)
            .args(["--transform", "s,^,../,", "x"])
            .output()
            .expect("tar");
        let mut tar = out.stdout;
        tar.resize(meta.size as usize, 0);
        rt.block_on(c.put(&meta.location, PutPayload::from(tar)))
            .expect("put");
    }
    let r = g.ferry(&["copy", &url, s(&sc.dst)]);
    let line = one_error(&r);
    assert!(line.contains("s3://ferry-test/swap/shards/"), "{line}");
    assert!(line.contains("its ETag differs"), "{line}");
    assert!(!sc.tmp.path().join("x").exists());
}

#[test]
fn a_download_removes_a_file_whose_content_differs_and_a_rerun_repairs_it() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("good"), &vec![7u8; 300_000]);
    write(&sc.src.join("zbad"), &vec![9u8; 300_000]);
    let url = g.url("rot");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "256K"])
        .assert_ok();
    // One byte of zbad's data changed in its shard, and the manifest made to name the
    // changed object (as if it had rotted in place): only the index's hash can tell.
    let (key, original, at) = crate::mount::shard_holding(&g, "rot", 9, 300_000);
    let mut damaged = original.clone();
    damaged[at + 150_000] = 8;
    g.put(&key, damaged);
    crate::mount::name_current_etags(&g, "rot");
    let r = g.ferry(&["copy", &url, s(&sc.dst)]);
    r.assert_status(1);
    let errors = r.errors();
    assert!(
        errors.len() == 1 && errors[0].contains("zbad") && errors[0].contains("content differs"),
        "{r}"
    );
    assert!(!sc.dst.join("zbad").exists(), "a damaged file is not left");
    assert_eq!(
        std::fs::read(sc.dst.join("good")).expect("good"),
        vec![7u8; 300_000]
    );
    // The object whole again: the rerun fetches what is missing.
    g.put(&key, original);
    crate::mount::name_current_etags(&g, "rot");
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_eq!(
        std::fs::read(sc.dst.join("zbad")).expect("zbad"),
        vec![9u8; 300_000]
    );
}
