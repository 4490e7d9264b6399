#!/usr/bin/env python3
"""ferry copy to and from S3 against rclone, side by side, on a real Garage on loopback.

A fresh XFS (reflink) holds the kernel tree (Debian's linux-source, extracted once),
Garage's data and metadata (a single node, started here with --single-node
--default-bucket), ferry's temporary shards and every destination. For each set
(-s: drivers/net of the kernel tree, and the whole tree) every tool uploads the set
to its own prefix and downloads it back into a fresh DST:

  ferry          ferry copy SRC s3://B/ferry-SET        / ferry copy s3://B/ferry-SET DST
  rclone         rclone copy SRC garage:B/rclone-SET    / rclone copy garage:B/rclone-SET DST
                 (Debian's rclone, its default 4 transfers)
  rclone64       the same with --transfers 64 (--checkers 64)
  tar+rcat       tar -C SRC -cf - . | rclone rcat garage:B/tar-SET.tar
                 / rclone cat garage:B/tar-SET.tar | tar -C DST -xf -
  objects        ferry copy SRC s3://B/objects-SET --layout=objects (one plain object
                 per file, 64 in flight) / ferry copy s3://B/objects-SET DST

Each upload goes to a prefix emptied before it (a fresh upload, not a resume). Warm
cache (the source is read before every upload). Seconds are wall time, median of -r
runs; peak RSS is the largest single process's (GNU time). "CPU floor" is the whole
machine's busy CPU seconds during the run (the tool, Garage, the kernel) over the
cores: the fastest the run could be here, were every core busy throughout. After every download the
tree's counts and bytes are compared with the source's. Then `ferry cat` of one small
member: cold (no cached manifest) and warm (cached, revalidated by ETag), in ms.

    sudo bench/s3_bench.py                        # both sets
    sudo bench/s3_bench.py -s net -r 1            # drivers/net only, one run each
    sudo bench/s3_bench.py --cleanup              # unmount leftovers

Tables go to stdout, progress to stderr, everything to bench/results/s3-<ts>.json.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import copy_bench as C  # noqa: E402  (kernel_tarball, warm_source)

KEY_ID = "GK0123456789abcdef01234567"
SECRET = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
BUCKET = "bench"
SETS = {"net": "drivers/net", "kernel": "."}
TOOLS = ["ferry", "rclone", "rclone64", "tar+rcat", "objects"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Garage:
    """A single-node Garage with its data under `root`; stopped on exit."""

    def __init__(self, root):
        self.root = root
        self.port, self.rpc = free_port(), free_port()
        os.makedirs(root, exist_ok=True)
        self.conf = os.path.join(root, "garage.toml")
        with open(self.conf, "w") as f:
            f.write(f'metadata_dir = "{root}/meta"\ndata_dir = "{root}/data"\ndb_engine = "sqlite"\n'
                    f'replication_factor = 1\nrpc_bind_addr = "127.0.0.1:{self.rpc}"\n'
                    f'rpc_public_addr = "127.0.0.1:{self.rpc}"\nrpc_secret = "{"ab" * 32}"\n'
                    f'[s3_api]\ns3_region = "garage"\napi_bind_addr = "127.0.0.1:{self.port}"\n'
                    f'root_domain = ".s3.garage"\n')
        self.proc = None

    def __enter__(self):
        env = dict(os.environ, GARAGE_DEFAULT_ACCESS_KEY=KEY_ID, GARAGE_DEFAULT_SECRET_KEY=SECRET,
                   GARAGE_DEFAULT_BUCKET=BUCKET, RUST_LOG="warn")
        log = open(os.path.join(self.root, "garage.log"), "ab")
        self.proc = subprocess.Popen([B.which("garage"), "-c", self.conf, "server", "--single-node",
                                      "--default-bucket"], env=env, stdout=log, stderr=log,
                                     start_new_session=True)
        deadline = time.time() + 30
        while True:
            r = subprocess.run(["rclone", "lsd", f"garage:{BUCKET}"], env=self.env(), capture_output=True)
            if r.returncode == 0:
                return self
            if time.time() > deadline:
                raise RuntimeError(f"garage did not start: {r.stderr!r}")
            time.sleep(0.2)

    def __exit__(self, *exc):
        if self.proc:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait()
        return False

    def env(self):
        ep = f"http://127.0.0.1:{self.port}"
        return {"AWS_CA_BUNDLE": "", "AWS_ENDPOINT_URL": ep, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
                "AWS_REGION": "garage", "RCLONE_CONFIG_GARAGE_TYPE": "s3",
                "RCLONE_CONFIG_GARAGE_PROVIDER": "Other", "RCLONE_CONFIG_GARAGE_ENDPOINT": ep,
                "RCLONE_CONFIG_GARAGE_ACCESS_KEY_ID": KEY_ID,
                "RCLONE_CONFIG_GARAGE_SECRET_ACCESS_KEY": SECRET, "RCLONE_CONFIG_GARAGE_REGION": "garage",
                "RCLONE_CONFIG_GARAGE_FORCE_PATH_STYLE": "true", "PATH": os.environ["PATH"]}


def commands(tool, name, src, dst, args):
    """(upload, download) command lines (shell) of `tool` for set `name`."""
    f = args.ferry
    if tool == "ferry":
        return (f"{f} copy {src} s3://{BUCKET}/ferry-{name}", f"{f} copy s3://{BUCKET}/ferry-{name} {dst}")
    if tool == "objects":
        return (f"{f} copy {src} s3://{BUCKET}/objects-{name} --layout=objects",
                f"{f} copy s3://{BUCKET}/objects-{name} {dst}")
    if tool in ("rclone", "rclone64"):
        flags = "--transfers 64 --checkers 64" if tool == "rclone64" else ""
        return (f"rclone copy {flags} {src} garage:{BUCKET}/{tool}-{name}",
                f"rclone copy {flags} garage:{BUCKET}/{tool}-{name} {dst}")
    if tool == "tar+rcat":
        return (f"tar -C {src} -cf - . | rclone rcat garage:{BUCKET}/tar-{name}.tar",
                f"mkdir -p {dst} && rclone cat garage:{BUCKET}/tar-{name}.tar | tar -C {dst} -xf -")
    raise ValueError(tool)


def empty_prefix(tool, name, env):
    prefix = {"ferry": f"ferry-{name}", "tar+rcat": f"tar-{name}.tar"}.get(tool, f"{tool}-{name}")
    subprocess.run(["rclone", "purge", f"garage:{BUCKET}/{prefix}"], env=env, capture_output=True)
    subprocess.run(["rclone", "deletefile", f"garage:{BUCKET}/{prefix}"], env=env, capture_output=True)


def run(cmd, env, args):
    B.wait_quiet(args.quiet_wait)
    r = B.run_measured(cmd, shell=True, env=env, timeout=args.timeout)
    if r["rc"] != 0:
        B.log(f"FAILED ({r['rc']}): {cmd}\n{r['stderr'][-2000:]}")
    return r


def cpu_floor(run):
    """The fastest a run could have been here: the whole machine's busy CPU seconds
    while it ran (the tool, Garage, the kernel's work for both), over the cores."""
    cpu = (run["user"] or 0) + (run["sys"] or 0) + (run["other_cpu"] or 0)
    return cpu / (os.cpu_count() or 1)


def bench_set(name, rel, tree, mnt, g, args, results):
    src = os.path.normpath(os.path.join(tree, rel))
    want = B.tree_stats(src)
    B.log(f"{name}: {src}: {want}")
    env = g.env()
    env["TMPDIR"] = os.path.join(mnt, "tmp")
    os.makedirs(env["TMPDIR"], exist_ok=True)
    env["XDG_CACHE_HOME"] = os.path.join(mnt, "cache")
    out = {"set": name, "path": rel, "stats": want, "tools": {}}
    tools = [t for t in args.tools if not (name == "kernel" and t == "rclone" and not args.slow_rclone)]
    for tool in tools:
        rows = {"upload": [], "download": []}
        for rep in range(args.reps):
            dst = os.path.join(mnt, f"dst-{tool}")
            up, down = commands(tool, name, src, dst, args)
            empty_prefix(tool, name, env)
            C.warm_source(src)
            r = run(up, env, args)
            rows["upload"].append({k: r[k] for k in ("seconds", "maxrss_kib", "user", "sys", "rc", "other_cpu")})
            B.log(f"{name} {tool} upload {rep}: {r['seconds']:.2f} s, {r['maxrss_kib']} KiB")
            B.rmtree(dst)
            B.sync()
            r = run(down, env, args)
            got = B.tree_stats(dst) if os.path.isdir(dst) else None
            ok = got == want
            rows["download"].append({k: r[k] for k in ("seconds", "maxrss_kib", "user", "sys", "rc", "other_cpu")}
                                    | {"tree_ok": ok})
            B.log(f"{name} {tool} download {rep}: {r['seconds']:.2f} s, {r['maxrss_kib']} KiB, tree ok {ok}")
            if not ok:
                B.log(f"{name} {tool}: DST differs: {got} != {want}")
            B.rmtree(dst)
        out["tools"][tool] = {op: {"runs": rs, "median_seconds": B.median([x["seconds"] for x in rs]),
                                   "median_floor_seconds": B.median([cpu_floor(x) for x in rs]),
                                   "max_rss_kib": max((x["maxrss_kib"] or 0) for x in rs)}
                              for op, rs in rows.items()}
    # cat of one small member: cold (no cached manifest) and warm.
    member = os.path.relpath(args.cat_member, rel)
    if member and "ferry" in tools:
        cat = {}
        for mode in ("cold", "warm"):
            ms = []
            for _ in range(args.cat_reps):
                if mode == "cold":
                    B.rmtree(os.path.join(env["XDG_CACHE_HOME"], "ferry", "s3"))
                r = B.run_measured(f"{args.ferry} cat s3://{BUCKET}/ferry-{name} {member}", shell=True, env=env,
                                   stdout_path="/dev/null")
                ms.append(r["seconds"] * 1000)
            cat[mode] = {"ms": ms, "median_ms": B.median(ms)}
            B.log(f"{name} cat {member} {mode}: {B.median(ms):.1f} ms")
        out["cat"] = {"member": member, **cat}
    results["sets"].append(out)


def print_tables(results):
    for s in results["sets"]:
        print(f"\n{s['set']} ({s['path']}: {s['stats']['files']} files, {s['stats']['bytes'] / 1e6:.0f} MB), "
              "warm, median seconds; peak RSS MiB")
        rows = []
        for tool, ops in s["tools"].items():
            u, d = ops["upload"], ops["download"]
            rows.append([tool, f"{u['median_seconds']:.2f}", f"{u['median_floor_seconds']:.2f}",
                         f"{u['max_rss_kib'] / 1024:.0f}",
                         f"{d['median_seconds']:.2f}", f"{d['median_floor_seconds']:.2f}",
                         f"{d['max_rss_kib'] / 1024:.0f}",
                         str(all(r["tree_ok"] for r in d["runs"]))])
        header = ["tool", "upload s", "CPU floor", "RSS", "download s", "CPU floor", "RSS", "tree ok"]
        for line in B.format_table(header, rows):
            print(line)
        if "cat" in s:
            c = s["cat"]
            print(f"ferry cat {c['member']}: cold {c['cold']['median_ms']:.1f} ms, warm {c['warm']['median_ms']:.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csv = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("-s", "--sets", type=csv, default=list(SETS))
    ap.add_argument("-t", "--tools", type=csv, default=TOOLS)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--slow-rclone", action="store_true", help="run rclone's default on the whole tree too")
    ap.add_argument("--cat-member", default="drivers/net/dummy.c")
    ap.add_argument("--cat-reps", type=int, default=5)
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-s3")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--image-size", default="24G")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--quiet-wait", type=float, default=20)
    ap.add_argument("--nice", type=int)
    ap.add_argument("--cleanup", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    B.start(args)
    results = {"machine": B.machine_info(), "ferry": B.ferry_identity(args.ferry), "args": vars(args),
               "rclone": B.sh("rclone", "version", capture=True).stdout.splitlines()[0],
               "garage": B.sh(B.which("garage"), "--version", capture=True, check=False).stdout.strip(),
               "sets": []}
    out = args.out or os.path.join(B.ROOT, "bench", "results", f"s3-{B.timestamp()}.json")
    tar = C.kernel_tarball(args.kernel_cache)
    if not tar:
        sys.exit("no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
    with B.LoopFs("xfs", args.scratch, "s3", size=args.image_size, mkfs_args=("-m", "reflink=1")) as lfs:
        tree = os.path.join(lfs.mnt, "tree")
        os.makedirs(tree)
        B.log(f"extracting {tar}")
        B.sh("tar", "-C", tree, "--strip-components=1", "-xf", tar)
        with Garage(os.path.join(lfs.mnt, "garage")) as g:
            for name in args.sets:
                bench_set(name, SETS[name], tree, lfs.mnt, g, args, results)
                B.write_json(out, results)
    print_tables(results)
    B.log(f"results: {out}")


if __name__ == "__main__":
    main()
