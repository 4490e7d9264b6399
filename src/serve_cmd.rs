//! `ferry serve`: one job over standard input and output (`--stdio`, under ssh), or
//! the daemon (`--listen`): TLS identity, token, root, pool and admission resolved
//! from the flags, then [`ferry_net::daemon::run`].

use crate::cli::ServeArgs;
use ferry_core::pool::BufferPool;
use ferry_net::admission::Admission;
use ferry_net::beneath::Root;
use ferry_net::conn::Limits;
use ferry_net::daemon::{self, Daemon};
use ferry_net::preauth::{self, PreAuth};
use ferry_net::serve::{serve, ServeConfig, Served};
use ferry_net::tls::Identity;
use ferry_net::NetError;
use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Bytes of each buffer of the daemon's pool (what an unpack of a stream uses).
const BUFFER: usize = 1 << 20;

/// Buffers one connection may hold at once from the shared pool.
const IN_FLIGHT: usize = 8;

/// Buffers each running upload should have of the shared pool: so many run at once
/// (the pool's capacity over this), the other admitted ones queue.
const RUNNING_SHARE: usize = 4;

/// How long the uploads running may go without one starting or finishing before a
/// queued one runs anyway (they wait on slow clients, say).
const RUN_PATIENCE: Duration = Duration::from_secs(1);

/// Connections in their handshake at once: one more closes the oldest of them.
const HANDSHAKES: usize = 64;

/// Bytes of request frames all handshakes may hold at once.
const HANDSHAKE_BYTES: usize = 4 << 20;

/// The longest a handshake may take (shorter when `--idle-timeout` is).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `ferry serve`.
pub fn run_serve(args: ServeArgs) -> ExitCode {
    if args.listen.is_none() {
        return run_stdio(&args);
    }
    match run_daemon(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::report::to_stderr(format_args!("ferry serve: {e}"));
            ExitCode::from(2)
        }
    }
}

/// `ferry serve --stdio`: exit status 0 when the job was done, 1 when some paths
/// failed (the client was told each), 2 when it could not run or go on.
fn run_stdio(args: &ServeArgs) -> ExitCode {
    let config = ServeConfig {
        threads: args.jobs.unwrap_or_else(ferry_core::copy::default_threads),
        ..ServeConfig::default()
    };
    let output = BufWriter::with_capacity(1 << 20, io::stdout());
    match serve(io::stdin().lock(), output, &config) {
        Ok(Served::Done { errors: 0 }) => ExitCode::SUCCESS,
        Ok(Served::Done { .. }) => ExitCode::from(1),
        Ok(Served::Stopped(e)) => {
            // The client was told; say it here only where it may not have heard.
            if !matches!(
                e,
                NetError::Remote(_) | NetError::Refused(_) | NetError::Path(_)
            ) {
                crate::report::to_stderr(format_args!("ferry serve: {e}"));
            }
            ExitCode::from(2)
        }
        Err(e) => {
            crate::report::to_stderr(format_args!("ferry serve: {e}"));
            ExitCode::from(2)
        }
    }
}

fn default_state_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")));
    match base {
        Some(base) => Ok(base.join("ferry")),
        None => anyhow::bail!("no HOME nor XDG_STATE_HOME: give --state-dir"),
    }
}

fn tls_config(args: &ServeArgs) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
    if args.insecure {
        crate::report::to_stderr(format_args!(
            "ferry serve: --insecure: plain TCP, neither private nor authenticated"
        ));
        return Ok(None);
    }
    let identity = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Identity::from_files(cert, key)?,
        _ => {
            let dir = match &args.state_dir {
                Some(dir) => dir.clone(),
                None => default_state_dir()?,
            };
            let (identity, made) = Identity::in_state_dir(&dir)?;
            if made {
                crate::report::to_stderr(format_args!(
                    "ferry serve: made a key and a self-signed certificate in {}",
                    dir.display()
                ));
            }
            identity
        }
    };
    crate::report::to_stderr(format_args!(
        "ferry serve: certificate fingerprint {}",
        identity.fingerprint()
    ));
    Ok(Some(identity.server_config()?))
}

fn run_daemon(args: &ServeArgs) -> anyhow::Result<()> {
    let (Some(listen), Some(root)) = (&args.listen, &args.root) else {
        anyhow::bail!("--listen needs --root");
    };
    let root = std::fs::canonicalize(root)
        .map_err(|e| anyhow::anyhow!("--root {}: {e}", root.display()))?;
    let token = match &args.token_file {
        Some(path) => {
            let token = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("{}: read token: {e}", path.display()))?;
            let token = token.trim_ascii();
            if token.is_empty() {
                anyhow::bail!("{}: the token file is empty", path.display());
            }
            if token.len() > preauth::MAX_TOKEN {
                anyhow::bail!(
                    "{}: a token of {} bytes: more than the {} a client may send",
                    path.display(),
                    token.len(),
                    preauth::MAX_TOKEN
                );
            }
            Some(Arc::from(token))
        }
        None => None,
    };
    let tls = tls_config(args)?;
    crate::malloc_tuning::arenas_per_core();
    let memory = usize::try_from(args.memory).unwrap_or(usize::MAX);
    let pool = Arc::new(BufferPool::new(memory, BUFFER));
    let (per_connection, default_max) = match args.per_client_buffer {
        true => (1, pool.capacity()),
        false => (IN_FLIGHT, 4 * pool.capacity()),
    };
    let max = args.max_clients.unwrap_or(default_max);
    let runners = args.max_running.unwrap_or(match args.per_client_buffer {
        true => max,
        false => (pool.capacity() / RUNNING_SHARE).max(1),
    });
    let wait = Duration::from_secs(args.busy_timeout);
    let serve = ServeConfig {
        threads: args.jobs.unwrap_or(4),
        root: Some(Arc::new(Root::open(&root)?)),
        read_only: args.read_only,
        token,
        admission: Some(Admission::with_runners(max, wait, runners, RUN_PATIENCE)),
        pool: Some((pool, per_connection)),
    };
    let idle = Duration::from_secs(args.idle_timeout.max(1));
    let daemon = Arc::new(Daemon {
        tls,
        serve,
        limits: Limits {
            idle,
            bwlimit: args.bwlimit,
        },
        preauth: PreAuth::new(preauth::Limits {
            timeout: idle.min(HANDSHAKE_TIMEOUT),
            slots: HANDSHAKES,
            frame_bytes: HANDSHAKE_BYTES,
        }),
    });
    let (listener, local) = daemon::listen(listen)?;
    crate::report::to_stderr(format_args!(
        "ferry serve: serving {} on {local}{}{}, at most {max} clients at once (uploads \
         running: {runners}), {} MiB of buffers ({})",
        root.display(),
        if args.insecure {
            " (plain TCP)"
        } else {
            " (TLS)"
        },
        if args.read_only { ", read-only" } else { "" },
        memory >> 20,
        if args.per_client_buffer {
            "one per client"
        } else {
            "shared"
        },
    ));
    let log: Arc<dyn Fn(&str) + Send + Sync> =
        Arc::new(|line: &str| crate::report::to_stderr(format_args!("ferry serve: {line}")));
    daemon::run(&listener, &daemon, &log)?;
    Ok(())
}
