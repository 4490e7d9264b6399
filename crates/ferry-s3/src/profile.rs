//! The AWS shared files: `~/.aws/credentials` and `~/.aws/config` (or the files
//! `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` name), read for the profile
//! `AWS_PROFILE` names (`default` otherwise), as the AWS CLI reads them: environment
//! variables win over the files, the credentials file over the config file, keys over
//! a `credential_process` ([`crate::credential_process`]).
//!
//! The files are the small INI dialect the AWS tools share: `[name]` sections in the
//! credentials file, `[profile name]` (or `[default]`) in the config file, `key = value`
//! lines, `#` and `;` comment lines, and indented `key = value` lines below a key with
//! no value for a service's own settings (`s3 =` then `  endpoint_url = ...`). A
//! generic INI crate knows none of these rules, and the AWS SDK's own loader comes
//! with the whole SDK runtime, so the parser is the few lines below.

use crate::{Result, S3Error};
use std::collections::HashMap;
use std::path::PathBuf;

/// The settings of one section: `key` or `service.key` to value.
type Section = HashMap<String, String>;

/// The sections of one file, by profile name.
fn parse(text: &str, config: bool) -> HashMap<String, Section> {
    let mut out: HashMap<String, Section> = HashMap::new();
    let mut current: Option<String> = None;
    let mut service: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let name = name.trim();
            let name = match config {
                true => name.strip_prefix("profile ").map_or(name, str::trim),
                false => name,
            };
            out.entry(name.to_string()).or_default();
            (current, service) = (Some(name.to_string()), None);
            continue;
        }
        let (Some(section), Some((key, value))) = (&current, trimmed.split_once('=')) else {
            continue;
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim().to_string());
        let indented = line.starts_with([' ', '\t']);
        let key = match (&service, indented) {
            (Some(s), true) => format!("{s}.{key}"),
            _ => {
                service = value.is_empty().then(|| key.clone());
                key
            }
        };
        if let Some(s) = out.get_mut(section) {
            s.insert(key, value);
        }
    }
    out
}

/// What the environment and the profile say, each setting with where it came from.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The profile's name, when its files were read.
    pub profile: String,
    /// Access key id, secret and session token, when a profile gives them (the
    /// environment's are left to `object_store`).
    pub keys: Option<(String, String, Option<String>)>,
    /// The profile's region, when the environment gives none.
    pub region: Option<String>,
    /// The profile's endpoint URL, when the environment gives none.
    pub endpoint: Option<String>,
    /// The profile's `credential_process` and where it is set, when the environment and
    /// the profile give no keys.
    pub process: Option<(String, String)>,
    /// Where the key came from, for messages.
    pub keys_from: String,
    /// Where the region came from, for messages.
    pub region_from: String,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A shared file: the one `var` names, else `~/.aws/NAME`.
fn file(var: &str, name: &str) -> Option<PathBuf> {
    env(var)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".aws").join(name)))
}

/// The sections of the file at `path`; none when it does not exist.
fn read(path: &Option<PathBuf>, config: bool) -> Result<HashMap<String, Section>> {
    let Some(path) = path else {
        return Ok(HashMap::new());
    };
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(parse(&text, config)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
        Err(e) => Err(S3Error::new(format!("{}: {e}", path.display()))),
    }
}

/// The settings for this process: the environment's, completed from the profile.
pub fn load() -> Result<Settings> {
    let named = env("AWS_PROFILE");
    let name = named.clone().unwrap_or_else(|| "default".into());
    let (cred_path, conf_path) = (
        file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        file("AWS_CONFIG_FILE", "config"),
    );
    let creds = read(&cred_path, false)?;
    let conf = read(&conf_path, true)?;
    let shown = |p: &Option<PathBuf>| p.as_ref().map_or("-".into(), |p| p.display().to_string());
    let (in_creds, in_conf) = (creds.get(&name), conf.get(&name));
    if named.is_some() && in_creds.is_none() && in_conf.is_none() {
        return Err(S3Error::new(format!(
            "AWS_PROFILE={name}: no such profile: no [{name}] in {} and no [profile {name}] in {}",
            shown(&cred_path),
            shown(&conf_path)
        )));
    }
    let get = |key: &str| -> Option<(String, String)> {
        let from = |s: Option<&Section>, p: &Option<PathBuf>| {
            s.and_then(|s| s.get(key))
                .filter(|v| !v.is_empty())
                .map(|v| (v.clone(), format!("profile {name} in {}", shown(p))))
        };
        from(in_creds, &cred_path).or_else(|| from(in_conf, &conf_path))
    };
    let mut out = Settings {
        profile: name.clone(),
        keys_from: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
        region_from: "AWS_REGION".into(),
        ..Settings::default()
    };
    if env("AWS_ACCESS_KEY_ID").is_none() {
        if let (Some((id, from)), Some((secret, _))) =
            (get("aws_access_key_id"), get("aws_secret_access_key"))
        {
            let token = get("aws_session_token").map(|t| t.0);
            out.keys = Some((id, secret, token));
            out.keys_from = format!("aws_access_key_id and aws_secret_access_key of {from}");
        } else if let Some((command, from)) = get("credential_process") {
            out.keys_from = format!("the credentials credential_process of {from} printed");
            out.process = Some((command, from));
        }
    }
    if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
        if let Some((region, from)) = get("region") {
            out.region = Some(region);
            out.region_from = format!("region of {from}");
        }
    }
    let env_endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .iter()
        .any(|k| env(k).is_some());
    if !env_endpoint {
        out.endpoint = get("s3.endpoint_url")
            .or_else(|| get("endpoint_url"))
            .map(|e| e.0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_services_and_comments_parse() {
        let text = "# comment\n[default]\nregion = eu-west-1\n\n[profile dev]\n\
                    aws_access_key_id = AK\n; another\ns3 =\n  endpoint_url = http://x:1\n\
                    region=garage\n[profile  spaced ]\nregion = r\n";
        let conf = parse(text, true);
        assert_eq!(conf["default"]["region"], "eu-west-1");
        assert_eq!(conf["dev"]["aws_access_key_id"], "AK");
        assert_eq!(conf["dev"]["s3.endpoint_url"], "http://x:1");
        assert_eq!(conf["dev"]["region"], "garage");
        assert_eq!(conf["spaced"]["region"], "r");
        // In the credentials file `profile ` is no prefix.
        let creds = parse("[profile x]\nk = v\n", false);
        assert_eq!(creds["profile x"]["k"], "v");
    }
}
