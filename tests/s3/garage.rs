//! Throwaway Garage servers for one test: a single node started with
//! `garage server --single-node --default-bucket` (key and bucket from
//! GARAGE_DEFAULT_*), or a cluster of nodes joined by `garage node connect` and a
//! layout; each node in its own directory, on free loopback ports, killed on drop.

use crate::common::run::{run, Run, FERRY};
use crate::common::skip;
use ferry_s3::object_store::aws::{AmazonS3, AmazonS3Builder};
use ferry_s3::object_store::path::Path as Key;
use ferry_s3::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The key every test uses: GK and 24 hex digits, and 64 hex digits.
pub const KEY_ID: &str = "GK0123456789abcdef01234567";
pub const SECRET: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
pub const BUCKET: &str = "ferry-test";
const RPC_SECRET: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// The garage binary, or None (the caller skips, saying why).
fn binary() -> Option<PathBuf> {
    let on_path = Command::new("garage").arg("--version").output().is_ok();
    if on_path {
        return Some(PathBuf::from("garage"));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let cargo = home.join(".cargo/bin/garage");
    cargo.exists().then_some(cargo)
}

/// A port free now, below the kernel's ephemeral range (32768 on): a port bind(0)
/// picks is free again once the probe closes, and an outgoing connection of another
/// test (ferry to another Garage) may take it before this Garage binds it (seen as
/// "connection reset" for 30 s). Random, so parallel tests rarely pick the same one.
fn free_port() -> u16 {
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0) as u64
        ^ u64::from(std::process::id()) << 16;
    let mut x = start | 1;
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let port = 20_000 + (x % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000..32000");
}

/// One node: its directory, config and ports, and the process while it runs.
pub struct Node {
    bin: PathBuf,
    pub dir: PathBuf,
    pub s3_port: u16,
    /// The admin API (its `/metrics` counts S3 requests by kind).
    pub admin_port: u16,
    child: Option<Child>,
    single: bool,
}

impl Node {
    fn new(bin: &Path, dir: PathBuf, replication: u32, single: bool) -> Node {
        std::fs::create_dir_all(&dir).expect("node dir");
        let (s3_port, rpc_port, admin_port) = (free_port(), free_port(), free_port());
        let d = dir.display();
        let config = format!(
            "metadata_dir = \"{d}/meta\"\ndata_dir = \"{d}/data\"\ndb_engine = \"sqlite\"\n\
             replication_factor = {replication}\nrpc_bind_addr = \"127.0.0.1:{rpc_port}\"\n\
             rpc_public_addr = \"127.0.0.1:{rpc_port}\"\nrpc_secret = \"{RPC_SECRET}\"\n\
             [s3_api]\ns3_region = \"garage\"\napi_bind_addr = \"127.0.0.1:{s3_port}\"\n\
             root_domain = \".s3.garage\"\n[admin]\napi_bind_addr = \"127.0.0.1:{admin_port}\"\n"
        );
        std::fs::write(dir.join("garage.toml"), config).expect("write config");
        Node {
            bin: bin.to_path_buf(),
            dir,
            s3_port,
            admin_port,
            child: None,
            single,
        }
    }

    /// `garage -c CONFIG ARGS...`.
    pub fn cli(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c").arg(self.dir.join("garage.toml")).args(args);
        run(cmd)
    }

    /// `garage -c CONFIG ARGS...` until it succeeds (nodes just started or just joined
    /// answer some commands only after a moment), for at most 30 s.
    pub fn cli_ok(&self, args: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.cli(args);
            if r.status == 0 {
                return;
            }
            assert!(Instant::now() < deadline, "garage {args:?}: {r}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Starts the server (again, after [`Node::kill`]: same data).
    pub fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("garage.log"))
            .expect("log");
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c")
            .arg(self.dir.join("garage.toml"))
            .arg("server");
        if self.single {
            cmd.args(["--single-node", "--default-bucket"])
                .env("GARAGE_DEFAULT_ACCESS_KEY", KEY_ID)
                .env("GARAGE_DEFAULT_SECRET_KEY", SECRET)
                .env("GARAGE_DEFAULT_BUCKET", BUCKET);
        }
        let child = cmd
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start garage");
        self.child = Some(child);
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the server (SIGSTOP: it keeps its sockets and answers nothing), or lets it
    /// go on (SIGCONT).
    pub fn pause(&self, stop: bool) {
        use rustix::process::{kill_process, Pid, Signal};
        let child = self.child.as_ref().expect("the node runs");
        let sig = if stop { Signal::STOP } else { Signal::CONT };
        kill_process(Pid::from_child(child), sig).expect("signal garage");
    }

    /// The node's `id@addr`.
    fn id(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let r = self.cli(&["node", "id", "-q"]);
            if r.status == 0 && r.stdout.contains('@') {
                return r.stdout.trim().to_string();
            }
            assert!(Instant::now() < deadline, "garage node id: {r}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A running Garage: one node, or a cluster.
pub struct Garage {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<Node>,
}

impl Garage {
    /// A single node with the test key and bucket, or None (the test returns) when
    /// garage is not installed.
    pub fn start() -> Option<Garage> {
        let Some(bin) = binary() else {
            skip("needs garage (cargo install garage --locked)");
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let mut node = Node::new(&bin, dir.path().join("n0"), 1, true);
        node.start();
        let g = Garage {
            dir,
            nodes: vec![node],
        };
        g.wait_ready();
        Some(g)
    }

    /// `n` nodes with replication factor `n`, joined, laid out in one zone, with the
    /// test key allowed on the test bucket.
    pub fn cluster(n: usize) -> Option<Garage> {
        let Some(bin) = binary() else {
            skip("needs garage (cargo install garage --locked)");
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let mut nodes: Vec<Node> = (0..n)
            .map(|i| Node::new(&bin, dir.path().join(format!("n{i}")), n as u32, false))
            .collect();
        for node in &mut nodes {
            node.start();
        }
        let ids: Vec<String> = nodes.iter().map(Node::id).collect();
        for id in &ids[1..] {
            nodes[0].cli_ok(&["node", "connect", id]);
        }
        for id in &ids {
            let short = id.split('@').next().unwrap_or(id);
            nodes[0].cli_ok(&["layout", "assign", "-z", "dc1", "-c", "1G", short]);
        }
        nodes[0].cli_ok(&["layout", "apply", "--version", "1"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while nodes[0].cli(&["bucket", "create", BUCKET]).status != 0 {
            assert!(
                Instant::now() < deadline,
                "garage bucket create never worked"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        nodes[0].cli_ok(&["key", "import", "--yes", "-n", "test", KEY_ID, SECRET]);
        nodes[0].cli_ok(&[
            "bucket", "allow", "--read", "--write", "--owner", BUCKET, "--key", "test",
        ]);
        let g = Garage { dir, nodes };
        g.wait_ready();
        Some(g)
    }

    /// Waits until the S3 API of node 0 answers for the bucket.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.ferry(&["ls", &self.url("not-there")]);
            if r.stderr.contains("no ferry upload here") {
                return;
            }
            assert!(Instant::now() < deadline, "garage never became ready: {r}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `s3://BUCKET/prefix`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    /// A ferry command with the standard variables pointing at node 0.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(FERRY);
        cmd.args(args)
            .env(
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.nodes[0].s3_port),
            )
            .env("AWS_ACCESS_KEY_ID", KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_REGION", "garage")
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"))
            .env("TMPDIR", self.dir.path());
        cmd
    }

    /// Runs ferry with `args` against this Garage.
    pub fn ferry(&self, args: &[&str]) -> Run {
        run(self.command(args))
    }

    /// The S3 requests node 0 has answered so far, by kind (`GetObject`, `HeadObject`,
    /// `ListObjectsV2`, `DeleteObjects`...), from its admin API's metrics.
    pub fn s3_requests(&self) -> std::collections::BTreeMap<String, u64> {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", self.nodes[0].admin_port))
            .expect("connect to garage's admin API");
        conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .expect("ask for metrics");
        let mut text = String::new();
        conn.read_to_string(&mut text).expect("read metrics");
        let mut counts = std::collections::BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("api_s3_request_counter{api_endpoint=\"") else {
                continue;
            };
            let (kind, n) = rest.split_once("\"} ").expect("a metric line");
            counts.insert(kind.to_string(), n.trim().parse().expect("a count"));
        }
        counts
    }

    /// Request counts by kind, as [`Garage::s3_requests_since`] gives them.
    pub fn requests(pairs: &[(&str, u64)]) -> std::collections::BTreeMap<String, u64> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    /// The S3 requests node 0 answered since `before` ([`Garage::s3_requests`]), by
    /// kind; kinds with none left out.
    pub fn s3_requests_since(
        &self,
        before: &std::collections::BTreeMap<String, u64>,
    ) -> std::collections::BTreeMap<String, u64> {
        let mut now = self.s3_requests();
        for (kind, n) in now.iter_mut() {
            *n -= before.get(kind).copied().unwrap_or(0);
        }
        now.retain(|_, n| *n > 0);
        now
    }

    /// Runs ferry with `args` against this Garage as nobody when root (as the caller
    /// otherwise): root reads every file, so a SRC that cannot be read in part needs an
    /// unprivileged ferry. None when that cannot be done here (the reason printed).
    /// HOME, the caches and TMPDIR are `cache`, which nobody must be able to write.
    pub fn ferry_unprivileged(&self, args: &[&str], cache: &Path) -> Option<Run> {
        let mut plain = self.command(args);
        plain
            .env("XDG_CACHE_HOME", cache)
            .env("TMPDIR", cache)
            .env("HOME", cache);
        crate::common::nobody::as_nobody(plain).map(run)
    }

    /// A client of node 0's S3 API with the test key, to make and spoil objects.
    pub fn client(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_endpoint(format!("http://127.0.0.1:{}", self.nodes[0].s3_port))
            .with_allow_http(true)
            .with_access_key_id(KEY_ID)
            .with_secret_access_key(SECRET)
            .with_region("garage")
            .with_bucket_name(BUCKET)
            .build()
            .expect("client")
    }

    /// Writes the object `key` of the test bucket.
    pub fn put(&self, key: &str, bytes: Vec<u8>) {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(self.client().put(&Key::from(key), PutPayload::from(bytes)))
            .expect("put");
    }

    /// The object `key` of the test bucket.
    pub fn get(&self, key: &str) -> Vec<u8> {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let got = self.client().get(&Key::from(key)).await?;
            got.bytes().await
        })
        .expect("get")
        .to_vec()
    }

    /// The keys below `prefix` in the test bucket.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let c = self.client();
        rt.block_on(async {
            use futures::TryStreamExt;
            ObjectStore::list(&c, Some(&Key::from(prefix)))
                .map_ok(|m| m.location.to_string())
                .try_collect()
                .await
        })
        .expect("list")
    }

    /// The object holding the newest manifest of the upload at `prefix`: the snapshot
    /// `manifest.ferry` names.
    pub fn newest_manifest_key(&self, prefix: &str) -> String {
        let pointer = self.get(&format!("{prefix}/manifest.ferry"));
        let what = format!("{prefix}/manifest.ferry");
        let name = ferry_s3::snapshot::Newest::decode(&pointer, &what)
            .expect("manifest.ferry names a snapshot")
            .expect("a good name");
        format!("{prefix}/{}", ferry_s3::snapshot::object(&name))
    }

    /// Forgets the manifests and mount tables ferry keeps for this Garage's uploads,
    /// after a test rewrote a snapshot in place (which ferry never does: its caches
    /// take a snapshot's bytes for good).
    pub fn forget_cached_manifests(&self) {
        let cache = self.dir.path().join("cache/ferry");
        let _ = std::fs::remove_dir_all(cache.join("s3"));
        for entry in std::fs::read_dir(&cache).into_iter().flatten().flatten() {
            if entry.path().extension().is_some_and(|x| x == "ftree") {
                std::fs::remove_file(entry.path()).expect("remove a mount table");
            }
        }
    }

    /// The keys below `prefix` in the test bucket, with their sizes.
    pub fn sizes(&self, prefix: &str) -> std::collections::BTreeMap<String, u64> {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let c = self.client();
        rt.block_on(async {
            use futures::TryStreamExt;
            ObjectStore::list(&c, Some(&Key::from(prefix)))
                .map_ok(|m| (m.location.to_string(), m.size))
                .try_collect()
                .await
        })
        .expect("list")
    }

    /// Where ferry records multipart uploads in progress.
    pub fn pending_dir(&self) -> PathBuf {
        self.dir.path().join("cache/ferry/s3-uploads")
    }

    /// How many whole records of multipart uploads in progress there are (one being
    /// written has a `.partial` name until it is whole).
    pub fn pending(&self) -> usize {
        // (A record whose id is `lease` is an upload's lease, not a multipart upload.)
        let multipart =
            |p: &Path| std::fs::read_to_string(p).is_ok_and(|t| t.lines().nth(2) != Some("lease"));
        std::fs::read_dir(self.pending_dir()).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.path().extension().is_none_or(|x| x != "partial"))
                .filter(|e| multipart(&e.path()))
                .count()
        })
    }

    /// Waits until ferry (running as `child`) has a multipart upload in progress
    /// (recorded in its cache).
    pub fn wait_for_multipart(&self, child: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.pending() > 0 {
                return;
            }
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                panic!("the upload ended ({status}) before a multipart began: {err}");
            }
            assert!(Instant::now() < deadline, "no multipart upload began");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts ferry with `args` and returns once it has a multipart upload in progress.
    pub fn spawn_until_multipart(&self, args: &[&str]) -> Child {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ferry");
        self.wait_for_multipart(&mut child);
        child
    }

    /// Runs the upload `args` again after a killed one: it must succeed, say it aborted
    /// the multipart uploads the killed run left, and leave no record of them.
    pub fn rerun_aborting_what_was_left(&self, args: &[&str]) {
        let again = self.ferry(args);
        again.assert_ok();
        assert!(
            again
                .stderr
                .contains("unfinished uploads of an earlier run aborted"),
            "{again}"
        );
        assert_eq!(self.pending(), 0, "records of aborted uploads left");
        // (One being written when the run was killed keeps its `.partial` name until
        // it is a minute old, as for multipart uploads.)
        let left = std::fs::read_dir(self.pending_dir()).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.path().extension().is_none_or(|x| x != "partial"))
                .count()
        });
        assert_eq!(left, 0, "records of the killed run's lease left");
    }
}
