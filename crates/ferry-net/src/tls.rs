//! TLS for `ferry serve --listen` (rustls): the server's identity, made once with
//! rcgen and kept in a state directory or read from `--tls-cert`/`--tls-key`, and the
//! client's pinning of it, as ssh pins host keys: a server's certificate is known by
//! the SHA-256 of its DER bytes (its fingerprint), recorded in `known_servers` on
//! first use, given with `--fingerprint`, and a different one is refused. A pinned
//! certificate still has to sign the handshake: the handshake signatures are checked
//! with rustls' own verifiers, only the chain to a CA is replaced by the pin.

use crate::NetError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// A server's certificate chain and key.
pub struct Identity {
    /// The chain, the server's own certificate first.
    pub certs: Vec<CertificateDer<'static>>,
    /// Its private key.
    pub key: PrivateKeyDer<'static>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(what: &str, e: impl std::fmt::Display) -> NetError {
    NetError::Tls(format!("{what}: {e}"))
}

impl Identity {
    /// Reads a PEM certificate chain and key (`--tls-cert`, `--tls-key`).
    pub fn from_files(cert: &Path, key: &Path) -> Result<Identity, NetError> {
        let certs = CertificateDer::pem_file_iter(cert)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| tls_err(&cert.display().to_string(), e))?;
        if certs.is_empty() {
            return Err(tls_err(&cert.display().to_string(), "no certificate in it"));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| tls_err(&key.display().to_string(), e))?;
        Ok(Identity { certs, key })
    }

    /// The identity kept in `state_dir` (`cert.pem`, `key.pem`), made there first if
    /// there is none (a key and a self-signed certificate); `true` when made now.
    pub fn in_state_dir(state_dir: &Path) -> Result<(Identity, bool), NetError> {
        let (cert, key) = (state_dir.join("cert.pem"), state_dir.join("key.pem"));
        if cert.exists() && key.exists() {
            return Ok((Identity::from_files(&cert, &key)?, false));
        }
        let io = |what: &Path, e: std::io::Error| tls_err(&what.display().to_string(), e);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir)
            .map_err(|e| io(state_dir, e))?;
        let made = rcgen::generate_simple_self_signed(vec!["ferry".to_string()])
            .map_err(|e| tls_err("make a certificate", e))?;
        write_new(&key, made.signing_key.serialize_pem().as_bytes(), 0o600)
            .map_err(|e| io(&key, e))?;
        write_new(&cert, made.cert.pem().as_bytes(), 0o644).map_err(|e| io(&cert, e))?;
        Ok((Identity::from_files(&cert, &key)?, true))
    }

    /// The fingerprint clients pin.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.certs[0])
    }

    /// rustls' server configuration for it.
    pub fn server_config(self) -> Result<Arc<ServerConfig>, NetError> {
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_err("TLS", e))?
            .with_no_client_auth()
            .with_single_cert(self.certs, self.key)
            .map_err(|e| tls_err("the server's certificate and key", e))?;
        Ok(Arc::new(config))
    }
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?
        .write_all(bytes)
}

/// `SHA256:` and the hex of the certificate's SHA-256.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = Sha256::digest(cert.as_ref());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("SHA256:{hex}")
}

/// The client's file of pinned servers: lines of `HOST:PORT FINGERPRINT`.
pub struct KnownServers {
    path: PathBuf,
}

impl KnownServers {
    /// `$XDG_CONFIG_HOME/ferry/known_servers`, or `~/.config/ferry/known_servers`.
    pub fn default_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("ferry").join("known_servers"))
    }

    /// The file at `path`.
    pub fn at(path: PathBuf) -> Self {
        KnownServers { path }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The fingerprint pinned for `server` (`HOST:PORT`).
    pub fn get(&self, server: &str) -> Option<String> {
        let text = fs::read_to_string(&self.path).ok()?;
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some(s), Some(fp)) if s == server => Some(fp.to_owned()),
                _ => None,
            }
        })
    }

    /// Pins `fingerprint` for `server`.
    pub fn add(&self, server: &str, fingerprint: &str) -> Result<(), NetError> {
        let io = |e: std::io::Error| tls_err(&self.path.display().to_string(), e);
        if let Some(dir) = self.path.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io)?;
        }
        let mut f = fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(io)?;
        writeln!(f, "{server} {fingerprint}").map_err(io)
    }
}

/// A verifier accepting the server's certificate by its fingerprint: the one
/// expected, or on first use any (the caller pins what it saw). Handshake signatures
/// are verified as rustls verifies them.
#[derive(Debug)]
pub struct Pinned {
    expected: Option<String>,
    seen: Mutex<Option<String>>,
    provider: Arc<CryptoProvider>,
}

impl Pinned {
    /// Expecting `expected`, or anything on first use.
    pub fn new(expected: Option<String>) -> Arc<Self> {
        Arc::new(Pinned {
            expected,
            seen: Mutex::new(None),
            provider: provider(),
        })
    }

    /// The fingerprint the server showed, once it has.
    pub fn seen(&self) -> Option<String> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The fingerprint expected.
    pub fn expected(&self) -> Option<&str> {
        self.expected.as_deref()
    }

    /// rustls' client configuration trusting only this.
    pub fn client_config(self: &Arc<Self>) -> Result<Arc<ClientConfig>, NetError> {
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_err("TLS", e))?
            .dangerous()
            .with_custom_certificate_verifier(self.clone())
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let fp = fingerprint(end_entity);
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(fp.clone());
        match &self.expected {
            Some(want) if !want.eq_ignore_ascii_case(&fp) => Err(rustls::Error::General(
                "the server's certificate is not the one pinned".into(),
            )),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
