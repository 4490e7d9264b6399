#!/usr/bin/env python3
"""What issue 32's checks cost, ferry beside GNU tar and bsdtar, on fresh loop filesystems.

Parts (-p):
  sparse  GNU tar (--sparse --format=posix) archives of a 60 GB file holding 4 bytes and a
          600 GB file holding ten, on a fresh XFS: `ferry unpack A DST` against
          `tar -C DST -xf A` and `bsdtar -C DST -xf A`; seconds, peak RSS, KiB allocated.
  table   The kernel tree (Debian's linux-source) packed by ferry on a fresh XFS, warm:
          `ferry mount A MNT` timed to its return, to a first listing, to a first file
          read, and (a fresh mount) to a read of the last file in archive order (a file's
          data waits until the check of the archive's own table against the tar's headers
          has passed it, which goes in archive order); the check alone (`target/release/examples/check_table`, built if
          missing); and the peers' reading of every header of the same archive
          (`tar -tf A`, `bsdtar -tf A`).

    sudo bench/hostile_bench.py                 # both parts, 5 runs each
    sudo bench/hostile_bench.py -p sparse -r 3
    sudo bench/hostile_bench.py --cleanup       # unmount leftovers

Tables to stdout, progress to stderr, everything to bench/results/hostile-<ts>.json.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import copy_bench as C  # noqa: E402  (kernel_tarball)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sparse_archive(dir_, name, size, data_at):
    """A GNU tar archive of one sparse file of `size` bytes with a byte at each `data_at`."""
    src = os.path.join(dir_, f"src-{name}")
    os.makedirs(src, exist_ok=True)
    path = os.path.join(src, name)
    with open(path, "wb") as f:
        f.truncate(size)
        for at in data_at:
            f.seek(at)
            f.write(b"d")
    archive = os.path.join(dir_, f"{name}.tar")
    B.sh("tar", "--sparse", "--format=posix", "-C", src, "-cf", archive, name)
    os.unlink(path)
    return archive


def part_sparse(args, fs, out):
    rows = []
    g = 1 << 30
    for name, size, at in [("claim60", 60 * 10**9, [30 * g]),
                           ("claim600", 600 * 10**9, [i * 60 * g for i in range(10)])]:
        archive = sparse_archive(fs.mnt, name, size, at)
        for tool in ["ferry", "tar", "bsdtar"]:
            runs = []
            for rep in range(args.reps):
                dst = os.path.join(fs.mnt, f"dst-{name}-{tool}")
                B.rmtree(dst)
                os.makedirs(dst)
                argv = {"ferry": [args.ferry, "unpack", archive, dst],
                        "tar": ["tar", "-C", dst, "-xf", archive],
                        "bsdtar": ["bsdtar", "-C", dst, "-xf", archive]}[tool]
                r = B.run_measured(argv)
                if r["rc"] != 0:
                    raise SystemExit(f"{tool} failed on {name}: {r['stderr']}")
                r["alloc_kib"] = B.du_kib(dst)
                runs.append(r)
                B.log(f"sparse {name} {tool} rep {rep + 1}: {r['seconds']:.3f} s")
            rows.append({"archive": name, "archive_bytes": os.path.getsize(archive), "tool": tool,
                         "seconds": B.median([r["seconds"] for r in runs]),
                         "maxrss_kib": max(r["maxrss_kib"] or 0 for r in runs),
                         "alloc_kib": runs[-1]["alloc_kib"]})
    out["sparse"] = rows
    print("\n== sparse claims: unpack, median of %d ==" % args.reps)
    print("\n".join(B.format_table(["archive", "bytes", "tool", "seconds", "RSS MiB", "alloc KiB"],
                         [[r["archive"], str(r["archive_bytes"]), r["tool"], f"{r['seconds']:.3f}",
                           f"{r['maxrss_kib'] / 1024:.1f}", str(r["alloc_kib"])] for r in rows])))


def check_table_binary():
    exe = os.path.join(ROOT, "target/release/examples/check_table")
    if not os.path.exists(exe):
        B.sh("cargo", "build", "--release", "-p", "ferry-archive", "--example", "check_table", cwd=ROOT)
    return exe


def part_table(args, fs, out):
    tarball = C.kernel_tarball(B.DEFAULT_SCRATCH)  # decompressed once, shared with the other benches
    if not tarball:
        raise SystemExit("no /usr/src/linux-source-*.tar.*: apt-get install linux-source")
    src = os.path.join(fs.mnt, "src")
    os.makedirs(src)
    B.sh("tar", "-C", src, "-xf", tarball)
    archive = os.path.join(fs.mnt, "k.far")
    B.sh(args.ferry, "pack", "--no-progress", src, archive)
    mnt = os.path.join(args.scratch, "fuse-mount")
    os.makedirs(mnt, exist_ok=True)
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(fs.mnt, "cache"))
    top = sorted(os.listdir(src))[0]
    first_dir = os.path.join(mnt, top)
    first_file = next(os.path.join(mnt, top, n) for n in sorted(os.listdir(os.path.join(src, top)))
                      if os.path.isfile(os.path.join(src, top, n)))
    # The file the check reaches last: the last regular file in archive order.
    listing = B.sh(args.ferry, "ls", "-l", archive, capture=True).stdout.splitlines()
    last_file = os.path.join(mnt, next(line.split(None, 5)[5] for line in reversed(listing)
                                       if line.startswith("-")))
    B.sh("tar", "-cf", "/dev/null", "-C", fs.mnt, "k.far")  # the archive in the page cache
    mounts = []
    for rep in range(args.reps):
        t0 = time.perf_counter()
        subprocess.run([args.ferry, "mount", archive, mnt], check=True, env=env)
        t1 = time.perf_counter()
        os.listdir(first_dir)
        t2 = time.perf_counter()
        with open(first_file, "rb") as f:
            f.read()
        t3 = time.perf_counter()
        subprocess.run([args.ferry, "umount", mnt], check=True, env=env)
        # A fresh mount, and at once the file the check passes last.
        t4 = time.perf_counter()
        subprocess.run([args.ferry, "mount", archive, mnt], check=True, env=env)
        with open(last_file, "rb") as f:
            f.read()
        t5 = time.perf_counter()
        subprocess.run([args.ferry, "umount", mnt], check=True, env=env)
        mounts.append({"returned_ms": 1e3 * (t1 - t0), "listing_ms": 1e3 * (t2 - t0),
                       "first_read_ms": 1e3 * (t3 - t0), "last_read_ms": 1e3 * (t5 - t4)})
        B.log(f"table mount rep {rep + 1}: {mounts[-1]}")
    check = B.sh(check_table_binary(), archive, str(args.reps), capture=True).stdout
    check_ms = [float(line.rsplit(",", 1)[1].split()[0]) for line in check.splitlines() if "ms" in line]
    peers = {}
    for tool in ["tar", "bsdtar"]:
        peers[tool] = B.median([B.run_measured([tool, "-tf", archive], stdout_path="/dev/null")["seconds"]
                                for _ in range(args.reps)]) * 1e3
    med = {k: B.median([m[k] for m in mounts]) for k in mounts[0]}
    out["table"] = {"mounts": mounts, "median": med, "check_ms": check_ms,
                    "check_median_ms": B.median(check_ms), "peers_list_ms": peers}
    print("\n== the table a ferry archive carries, kernel tree, warm, median of %d ==" % args.reps)
    print("\n".join(B.format_table(["what", "ms"], [
        ["ferry mount returns", f"{med['returned_ms']:.1f}"],
        ["first listing", f"{med['listing_ms']:.1f}"],
        ["first file's data (once the check has passed it)", f"{med['first_read_ms']:.1f}"],
        ["last file's data (the check passes it last)", f"{med['last_read_ms']:.1f}"],
        ["the check alone (check_table)", f"{B.median(check_ms):.1f}"],
        ["tar -tf (every header)", f"{peers['tar']:.1f}"],
        ["bsdtar -tf (every header)", f"{peers['bsdtar']:.1f}"],
    ])))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", "--parts", type=lambda s: s.split(","), default=["sparse", "table"])
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-hostile")
    ap.add_argument("--nice", type=int)
    ap.add_argument("--cleanup", action="store_true")
    args = ap.parse_args()
    B.start(args)
    out = {"machine": B.machine_info(), "ferry": B.ferry_identity(args.ferry), "args": vars(args)}
    path = os.path.join(HERE, "results", f"hostile-{B.timestamp()}.json")
    for part, run in [("sparse", part_sparse), ("table", part_table)]:
        if part in args.parts:
            with B.LoopFs("xfs", args.scratch, part, size="8G") as fs:
                run(args, fs, out)
    B.write_json(path, out)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
