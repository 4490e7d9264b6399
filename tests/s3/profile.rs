//! Credentials the standard way: a profile of `~/.aws/credentials` and `~/.aws/config`
//! (or the files `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` name), chosen by
//! `AWS_PROFILE`, with environment variables winning; and a wrong key, a missing
//! bucket, a wrong region or a missing profile each ending in one line that says
//! where to look.

use crate::common::build::*;
use crate::common::run::{run, Run};
use crate::common::scratch;
use crate::errors::one_error;
use crate::garage::{Garage, KEY_ID, SECRET};
use crate::s;
use std::path::Path;
use std::process::Command;

/// Writes `~/.aws/credentials` and `~/.aws/config` below `home`.
fn aws_files(home: &Path, credentials: &str, config: &str) {
    mkdirs(&home.join(".aws"));
    write(&home.join(".aws/credentials"), credentials.as_bytes());
    write(&home.join(".aws/config"), config.as_bytes());
}

/// ferry against `g` with HOME at `home` and no `AWS_*` variable but `env`.
fn ferry(g: &Garage, home: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd: Command = g.command(args);
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "AWS_SESSION_TOKEN",
        "AWS_DEFAULT_REGION",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home).envs(env.iter().copied());
    run(cmd)
}

fn endpoint(g: &Garage) -> String {
    format!("http://127.0.0.1:{}", g.nodes[0].s3_port)
}

#[test]
fn a_profile_gives_key_region_and_endpoint_and_the_environment_wins() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("a"), b"a");
    let home = sc.tmp.path().join("home");
    aws_files(
        &home,
        &format!(
            "[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n\
             # a comment\n[bad]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {}\n",
            "ff".repeat(32)
        ),
        &format!(
            "[default]\nregion = garage\ns3 =\n  endpoint_url = {}\n\
             [profile bad]\nregion = eu-west-3\nendpoint_url = {}\n",
            endpoint(&g),
            endpoint(&g)
        ),
    );
    let url = g.url("profile");
    // The default profile, from ~/.aws.
    ferry(&g, &home, &[], &["copy", s(&sc.src), &url]).assert_ok();
    // A named profile whose key and region are wrong, overridden by the environment.
    let env = [
        ("AWS_PROFILE", "bad"),
        ("AWS_ACCESS_KEY_ID", KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_REGION", "garage"),
    ];
    ferry(&g, &home, &env, &["copy", &url, s(&sc.dst)]).assert_ok();
    assert_eq!(std::fs::read(sc.dst.join("a")).unwrap(), b"a");
    // The files named by AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE, not ~/.aws.
    let elsewhere = sc.tmp.path().join("elsewhere");
    aws_files(
        &elsewhere,
        &format!("[p]\naws_access_key_id={KEY_ID}\naws_secret_access_key={SECRET}\n"),
        &format!(
            "[profile p]\nregion=garage\nendpoint_url={}\n",
            endpoint(&g)
        ),
    );
    let (creds, conf) = (
        elsewhere.join(".aws/credentials"),
        elsewhere.join(".aws/config"),
    );
    let env = [
        ("AWS_PROFILE", "p"),
        ("AWS_SHARED_CREDENTIALS_FILE", s(&creds)),
        ("AWS_CONFIG_FILE", s(&conf)),
    ];
    let r = ferry(&g, &home, &env, &["ls", &url]);
    r.assert_ok();
    assert!(r.stdout.contains(" a\n"), "{r}");
}

#[test]
fn a_wrong_key_missing_bucket_wrong_region_and_missing_profile_each_say_so() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("a"), b"a");
    let home = sc.tmp.path().join("home");
    aws_files(
        &home,
        &format!(
            "[good]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n\
             [wrongkey]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {}\n\
             [wrongregion]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n",
            "ff".repeat(32)
        ),
        &format!(
            "[profile good]\nregion = garage\nendpoint_url = {ep}\n\
             [profile wrongkey]\nregion = garage\nendpoint_url = {ep}\n\
             [profile wrongregion]\nregion = eu-west-3\nendpoint_url = {ep}\n",
            ep = endpoint(&g)
        ),
    );
    let creds = home.join(".aws/credentials");
    let conf = home.join(".aws/config");
    let copy = ["copy", s(&sc.src), "s3://ferry-test/p"];
    let line = one_error(&ferry(&g, &home, &[("AWS_PROFILE", "wrongkey")], &copy));
    let want_key = format!(
        "access denied (check aws_access_key_id and aws_secret_access_key of profile wrongkey in {})",
        creds.display()
    );
    assert!(line.contains(&want_key), "{line}");
    let line = one_error(&ferry(&g, &home, &[("AWS_PROFILE", "wrongregion")], &copy));
    let want = format!(
        "wrong region (check region of profile wrongregion in {})",
        conf.display()
    );
    assert!(line.contains(&want), "{line}");
    // The objects layout's first request (a LIST) says the same.
    let objects = ["copy", s(&sc.src), "s3://ferry-test/p", "--layout=objects"];
    let line = one_error(&ferry(&g, &home, &[("AWS_PROFILE", "wrongkey")], &objects));
    assert!(line.contains(&want_key), "{line}");
    let missing = ["copy", s(&sc.src), "s3://no-such-bucket/p"];
    let objects_missing = [&missing[..], &["--layout=objects"]].concat();
    for args in [&missing[..], &objects_missing] {
        let line = one_error(&ferry(&g, &home, &[("AWS_PROFILE", "good")], args));
        assert!(
            line.contains("s3://no-such-bucket/") && line.contains("the bucket does not exist"),
            "{line}"
        );
    }
    let line = one_error(&ferry(&g, &home, &[("AWS_PROFILE", "nope")], &copy));
    assert!(
        line.contains("AWS_PROFILE=nope: no such profile")
            && line.contains(&creds.display().to_string())
            && line.contains(&conf.display().to_string()),
        "{line}"
    );
    // The good profile works, so each failure above is the one setting's.
    ferry(&g, &home, &[("AWS_PROFILE", "good")], &copy).assert_ok();
    assert!(!sc.dst.exists());
}

#[test]
fn a_credential_process_gives_the_keys_and_one_that_fails_says_why() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("a"), b"a");
    let home = sc.tmp.path().join("home");
    // The script counts its runs: credentials without an Expiration are fetched once.
    let runs = sc.tmp.path().join("runs");
    let script = sc.tmp.path().join("creds.sh");
    write(
        &script,
        format!(
            "#!/bin/sh\necho run >> {}\nprintf '{{\"Version\": 1, \"AccessKeyId\": \"%s\", \
             \"SecretAccessKey\": \"%s\"}}' {KEY_ID} {SECRET}\n",
            runs.display()
        )
        .as_bytes(),
    );
    let failing = "echo 'the vault is locked' >&2; exit 4";
    aws_files(
        &home,
        "",
        &format!(
            "[default]\nregion = garage\nendpoint_url = {ep}\ncredential_process = sh {}\n\
             [profile locked]\nregion = garage\nendpoint_url = {ep}\ncredential_process = {failing}\n",
            script.display(),
            ep = endpoint(&g)
        ),
    );
    let url = g.url("process");
    ferry(&g, &home, &[], &["copy", s(&sc.src), &url]).assert_ok();
    ferry(&g, &home, &[], &["copy", &url, s(&sc.dst)]).assert_ok();
    assert_eq!(std::fs::read(sc.dst.join("a")).unwrap(), b"a");
    let ran = std::fs::read_to_string(&runs).expect("the process ran");
    assert_eq!(ran.lines().count(), 2, "once a run: {ran}");
    let line = one_error(&ferry(
        &g,
        &home,
        &[("AWS_PROFILE", "locked")],
        &["ls", &url],
    ));
    let conf = home.join(".aws/config");
    assert!(
        line.contains(&format!(
            "credential_process of profile locked in {}",
            conf.display()
        )) && line.contains("the vault is locked"),
        "{line}"
    );
}
