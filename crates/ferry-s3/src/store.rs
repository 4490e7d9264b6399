//! Where the objects are: `s3://BUCKET/PREFIX` parsed, and a client for it built the
//! standard way (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION` and the other `AWS_*` variables `object_store` reads, completed from
//! the profile of the AWS shared files, [`crate::profile`]), with retries and backoff
//! on 5xx, SlowDown and timeouts. Failures are turned into one line each: a wrong key,
//! a missing bucket and a wrong region say so, and where the key or region came from.

use crate::{Result, S3Error};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, RetryConfig};
use std::sync::Arc;
use std::time::Duration;

/// `s3://BUCKET/PREFIX`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The bucket.
    pub bucket: String,
    /// The prefix inside it, without leading or trailing `/` (may be empty).
    pub prefix: String,
    /// The snapshot named with `@NAME` after the prefix (see [`crate::snapshot`]);
    /// none: the newest.
    pub snapshot: Option<String>,
}

impl Location {
    /// Parses `s3://BUCKET[/PREFIX][@SNAPSHOT]`; None when `url` does not start with
    /// `s3://`. Only a snapshot's name after the last `@` makes it one: other `@`s are
    /// the prefix's.
    pub fn parse(url: &str) -> Option<Result<Location>> {
        let rest = url.strip_prefix("s3://")?;
        let (rest, snapshot) = match rest.rsplit_once('@') {
            Some((before, name)) if crate::snapshot::is_name(name) => (before, Some(name)),
            _ => (rest, None),
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Some(Err(S3Error::new(format!("{url}: no bucket named"))));
        }
        let prefix = prefix.trim_matches('/').to_string();
        if prefix.split('/').any(|c| c == "." || c == "..") {
            return Some(Err(S3Error::new(format!(
                "{url}: `.` or `..` in the prefix"
            ))));
        }
        Some(Ok(Location {
            bucket: bucket.to_string(),
            prefix,
            snapshot: snapshot.map(str::to_string),
        }))
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)?;
        match &self.snapshot {
            Some(name) => write!(f, "@{name}"),
            None => Ok(()),
        }
    }
}

/// A client for one location, with the runtime its requests run on.
pub struct Store {
    /// The client.
    pub s3: Arc<AmazonS3>,
    /// Where.
    pub loc: Location,
    /// The runtime requests run on.
    pub rt: tokio::runtime::Runtime,
    /// Where the key and region came from, for messages.
    pub hints: Hints,
}

/// Where the settings a failure may be due to came from, as a user finds them.
#[derive(Clone, Debug)]
pub struct Hints {
    /// E.g. `AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`.
    pub keys: String,
    /// E.g. `AWS_REGION`.
    pub region: String,
}

impl Default for Hints {
    fn default() -> Hints {
        Hints {
            keys: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
            region: "AWS_REGION".into(),
        }
    }
}

impl Store {
    /// A client for `loc` from the environment and the AWS profile.
    pub fn open(loc: &Location) -> Result<Store> {
        let profile = crate::profile::load()?;
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(&loc.bucket)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(5),
                    base: 2.0,
                },
                max_retries: 6,
                retry_timeout: Duration::from_secs(120),
            });
        if let Some((command, from)) = &profile.process {
            let process = crate::credential_process::ProcessCredentials::start(command, from)?;
            b = b.with_credentials(Arc::new(process));
        }
        if let Some((id, secret, token)) = &profile.keys {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
            if let Some(token) = token {
                b = b.with_token(token);
            }
        }
        if let Some(region) = &profile.region {
            b = b.with_region(region);
        }
        if let Some(endpoint) = &profile.endpoint {
            b = b.with_endpoint(endpoint);
        }
        let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
            .iter()
            .find_map(|k| std::env::var(k).ok())
            .or(profile.endpoint.clone());
        let plain_http = endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
        // Over TLS, which guards the bytes in transit, a request signs its headers but
        // not a SHA-256 of its body (`UNSIGNED-PAYLOAD`, as the AWS SDKs sign S3 over
        // HTTPS): hashing every byte sent cost ferry 0.7-1.5 s of CPU, and the store
        // about 1 s more, per 1.5 GB uploaded. Over plain HTTP the body stays signed;
        // AWS_UNSIGNED_PAYLOAD says otherwise either way.
        if !plain_http && std::env::var_os("AWS_UNSIGNED_PAYLOAD").is_none() {
            b = b.with_unsigned_payload(true);
        }
        if plain_http {
            // No TLS, so no system certificates either: loading them cost 30-40 ms of
            // every `ferry cat` (strace: every file of /etc/ssl/certs opened).
            b = b.with_client_options(
                ClientOptions::new()
                    .with_allow_http(true)
                    .with_no_system_certificates(true),
            );
        }
        let s3 = b
            .build()
            .map_err(|e| S3Error::new(format!("{loc}: {}", short(&e))))?;
        let hints = Hints {
            keys: profile.keys_from,
            region: profile.region_from,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .map_err(|e| S3Error::new(format!("start the runtime: {e}")))?;
        Ok(Store {
            s3: Arc::new(s3),
            loc: loc.clone(),
            rt,
            hints,
        })
    }

    /// The manifest a reader reads: the snapshot's the location names, else the newest.
    pub fn manifest_key(&self) -> Key {
        match &self.loc.snapshot {
            Some(name) => self.key(&crate::snapshot::object(name)),
            None => self.key(crate::manifest::NAME),
        }
    }

    /// Every object in the folder `name` under the prefix, as listed.
    pub async fn list_folder(&self, name: &str) -> Result<Vec<object_store::ObjectMeta>> {
        use futures::TryStreamExt;
        let dir = self.key(name);
        object_store::ObjectStore::list(&*self.s3, Some(&dir))
            .try_collect()
            .await
            .map_err(|e| self.error(&dir, "list", &e))
    }

    /// The object `name` under the prefix.
    pub fn key(&self, name: &str) -> Key {
        if self.loc.prefix.is_empty() {
            Key::from(name)
        } else {
            Key::from(format!("{}/{name}", self.loc.prefix))
        }
    }

    /// One line for a failed request on `key`.
    pub fn error(&self, key: &Key, what: &str, e: &object_store::Error) -> S3Error {
        S3Error::new(format!(
            "s3://{}/{key}: {what}: {}",
            self.loc.bucket,
            explain_with(e, &self.hints)
        ))
    }
}

/// What went wrong, in words a user acts on, then the server's own (the settings
/// named as they are when they come from the environment).
pub fn explain(e: &object_store::Error) -> String {
    explain_with(e, &Hints::default())
}

/// [`explain`], naming the settings where `hints` says they came from.
pub fn explain_with(e: &object_store::Error, hints: &Hints) -> String {
    let text = short(e);
    let hint: String = if text.contains("NoSuchBucket") {
        "the bucket does not exist".into()
    } else if text.contains("InvalidAccessKeyId")
        || text.contains("SignatureDoesNotMatch")
        || text.contains("AccessDenied")
        || text.contains("Forbidden")
        || matches!(
            e,
            object_store::Error::Unauthenticated { .. }
                | object_store::Error::PermissionDenied { .. }
        )
    {
        format!("access denied (check {})", hints.keys)
    } else if text.contains("AuthorizationHeaderMalformed")
        || text.contains("region")
        || text.contains("PermanentRedirect")
    {
        format!("wrong region (check {})", hints.region)
    } else if matches!(e, object_store::Error::NotFound { .. }) {
        "not found".into()
    } else {
        return text;
    };
    format!("{hint}: {text}")
}

/// The error's text on one line, with no control character (a key from the bucket,
/// quoted by the client's message, may hold any: a NUL, a terminal's escapes).
fn short(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s.chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => " ".to_string(),
            c if c.is_control() => format!("\\x{:02X}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        let l = Location::parse("s3://b/x/y/").unwrap().unwrap();
        assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("b", "x/y"));
        let l = Location::parse("s3://b").unwrap().unwrap();
        assert_eq!(l.prefix, "");
        assert!(Location::parse("/tmp/x").is_none());
        assert!(Location::parse("s3:///x").unwrap().is_err());
        assert!(Location::parse("s3://b/a/../c").unwrap().is_err());
        let l = Location::parse("s3://b/p@x@20261201T203015Z.2")
            .unwrap()
            .unwrap();
        assert_eq!(
            (l.prefix.as_str(), l.snapshot.as_deref()),
            ("p@x", Some("20261201T203015Z.2"))
        );
        assert_eq!(l.to_string(), "s3://b/p@x@20261201T203015Z.2");
        let l = Location::parse("s3://b/p@home").unwrap().unwrap();
        assert_eq!((l.prefix.as_str(), l.snapshot), ("p@home", None));
    }

    #[test]
    fn messages_hold_no_control_characters() {
        let e = std::io::Error::other("key \"a\0b\x1b[31m\" at\nline two");
        assert_eq!(short(&e), "key \"a\\x00b\\x1B[31m\" at line two");
    }
}
