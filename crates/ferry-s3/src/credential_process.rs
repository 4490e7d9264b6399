//! `credential_process`: a profile's command that prints credentials (aws-vault,
//! 1Password, a company's SSO helper), run as the AWS tools run it on Unix (`sh -c`),
//! its standard output the JSON they specify: `Version` 1, `AccessKeyId`,
//! `SecretAccessKey`, and optionally `SessionToken` and `Expiration` (RFC 3339).
//!
//! It runs once when the store is opened, so a command that fails is one clear error
//! before any request; credentials that expire are fetched again, by running it again,
//! five minutes before they do (an upload may outlast an hour's session token).

use crate::{Result, S3Error};
use object_store::aws::AwsCredential;
use object_store::CredentialProvider;
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long before their expiry credentials are fetched again.
const EARLY: Duration = Duration::from_secs(300);

/// What the command prints.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Printed {
    version: u32,
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
    expiration: Option<String>,
}

/// Credentials and when they stop working (None: never).
#[derive(Clone)]
struct Fetched {
    credential: Arc<AwsCredential>,
    expires: Option<SystemTime>,
}

/// A profile's `credential_process`, and the credentials it last printed.
#[derive(Debug)]
pub struct ProcessCredentials {
    command: String,
    /// Where the command is set, for messages.
    from: String,
    last: tokio::sync::Mutex<Option<Fetched>>,
}

impl std::fmt::Debug for Fetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetched")
            .field("expires", &self.expires)
            .finish()
    }
}

impl ProcessCredentials {
    /// Runs `command` (set `from` where it is said) once; its credentials, or why not.
    pub fn start(command: &str, from: &str) -> Result<ProcessCredentials> {
        let first = fetch(command, from)?;
        Ok(ProcessCredentials {
            command: command.into(),
            from: from.into(),
            last: tokio::sync::Mutex::new(Some(first)),
        })
    }
}

/// Runs the command and reads what it prints.
fn fetch(command: &str, from: &str) -> Result<Fetched> {
    let said = |what: String| S3Error::new(format!("credential_process of {from}: {what}"));
    let out = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| said(format!("cannot run `{command}`: {e}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(said(format!(
            "`{command}` failed ({}){}",
            out.status,
            last.map_or(String::new(), |l| format!(": {}", l.trim()))
        )));
    }
    parse(&out.stdout).map_err(|e| said(format!("`{command}` printed {e}")))
}

/// The credentials in the command's output.
fn parse(stdout: &[u8]) -> std::result::Result<Fetched, String> {
    let p: Printed = serde_json::from_slice(stdout)
        .map_err(|e| format!("no credentials as the AWS tools specify them: {e}"))?;
    if p.version != 1 {
        return Err(format!(
            "Version {}, where 1 is the one there is",
            p.version
        ));
    }
    let expires = match &p.expiration {
        None => None,
        Some(t) => {
            let at = chrono::DateTime::parse_from_rfc3339(t)
                .map_err(|e| format!("an Expiration that is no RFC 3339 time ({t}): {e}"))?;
            let secs = u64::try_from(at.timestamp()).unwrap_or(0);
            Some(UNIX_EPOCH + Duration::from_secs(secs))
        }
    };
    Ok(Fetched {
        credential: Arc::new(AwsCredential {
            key_id: p.access_key_id,
            secret_key: p.secret_access_key,
            token: p.session_token,
        }),
        expires,
    })
}

/// Whether credentials expiring at `expires` are still good to sign with now.
fn fresh(expires: Option<SystemTime>) -> bool {
    expires.is_none_or(|at| SystemTime::now() + EARLY < at)
}

#[async_trait::async_trait]
impl CredentialProvider for ProcessCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let mut last = self.last.lock().await;
        if let Some(f) = last.as_ref().filter(|f| fresh(f.expires)) {
            return Ok(f.credential.clone());
        }
        let (command, from) = (self.command.clone(), self.from.clone());
        let fetched = tokio::task::spawn_blocking(move || fetch(&command, &from))
            .await
            .map_err(|e| S3Error::new(e.to_string()))
            .and_then(|r| r)
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        let credential = fetched.credential.clone();
        *last = Some(fetched);
        Ok(credential)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_command_prints_is_read_and_checked() {
        let ok = br#"{"Version": 1, "AccessKeyId": "AK", "SecretAccessKey": "SK",
                      "SessionToken": "T", "Expiration": "2030-01-02T03:04:05Z"}"#;
        let f = parse(ok).expect("valid");
        assert_eq!(f.credential.key_id, "AK");
        assert_eq!(f.credential.token.as_deref(), Some("T"));
        assert!(fresh(f.expires));
        let past = br#"{"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "S",
                        "Expiration": "2001-01-01T00:00:00+00:00"}"#;
        assert!(!fresh(parse(past).expect("valid").expires));
        for (bad, says) in [
            (&br#"{"Version": 2, "AccessKeyId": "A", "SecretAccessKey": "S"}"#[..], "Version 2"),
            (br#"{"Version": 1, "AccessKeyId": "A"}"#, "SecretAccessKey"),
            (br#"{"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "S", "Expiration": "soon"}"#, "soon"),
            (b"not json", "no credentials"),
        ] {
            let e = parse(bad).expect_err("refused");
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_command_that_fails_says_so_with_its_last_line() {
        let e = fetch(
            "echo first >&2; echo 'token expired' >&2; exit 3",
            "profile p",
        )
        .expect_err("fails");
        let e = e.to_string();
        assert!(e.contains("credential_process of profile p"), "{e}");
        assert!(e.contains("token expired") && e.contains('3'), "{e}");
    }
}
