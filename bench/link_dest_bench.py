#!/usr/bin/env python3
"""Snapshot backups on a local disk: the second backup of the kernel tree after 60
scattered changes, `ferry copy --link-dest` (and `--reflink-dest` on XFS) against
`rsync -a --link-dest`, side by side on a fresh loop-mounted filesystem.

For each repetition, on ext4 and on XFS (reflink=1): the tree is extracted once; each
tool makes its first backup (`ferry copy TREE bk1`, `rsync -a TREE/ bk1/`, not timed),
the tree gets bench/net_mirror.py's 60 changes (once, before the first backups of the
next repetition are made again from a fresh tree), and each tool's second backup is
timed, warm (the tree and the first backup read before):

  ferry --link-dest      ferry copy --link-dest=../bk1 TREE bk2
  ferry --reflink-dest   ferry copy --reflink-dest=../bk1 TREE bk2   (XFS only)
  rsync --link-dest      rsync -a --link-dest=../bk1 TREE/ bk2/

"blocks" is what the second backup added to the filesystem's used blocks (statvfs),
in MiB. Every second backup is compared with the tree (counts and bytes).

    sudo bench/link_dest_bench.py -r 3

Tables go to stdout, progress to stderr, everything to bench/results/link-dest-<ts>.json.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import copy_bench as C  # noqa: E402  (kernel_tarball, warm_source)
import net_mirror as N  # noqa: E402  (changes)


def used_mib(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize / 2**20


def ways(fs, f):
    out = [("ferry --link-dest", lambda bk1, tree, bk2: f"{f} copy --no-progress --link-dest=../{bk1} {tree} {bk2}"),
           ("rsync --link-dest", lambda bk1, tree, bk2: f"rsync -a --link-dest=../{bk1} {tree}/ {bk2}/")]
    if fs == "xfs":
        out.insert(1, ("ferry --reflink-dest",
                       lambda bk1, tree, bk2: f"{f} copy --no-progress --reflink-dest=../{bk1} {tree} {bk2}"))
    return out


def first(label, f, tree, bk1):
    if label.startswith("rsync"):
        return f"rsync -a {tree}/ {bk1}/"
    return f"{f} copy --no-progress {tree} {bk1}"


def bench_fs(fs, tar, args, out):
    mkfs = ("-m", "reflink=1") if fs == "xfs" else ()
    rows = {label: [] for label, _ in ways(fs, args.ferry)}
    with B.LoopFs(fs, args.scratch, f"linkdest-{fs}", size=args.image_size, mkfs_args=mkfs) as lfs:
        for rep in range(args.reps):
            tree = os.path.join(lfs.mnt, "tree")
            for name in os.listdir(lfs.mnt):
                if name != "lost+found":
                    B.rmtree(os.path.join(lfs.mnt, name))
            os.makedirs(tree)
            B.sh("tar", "-C", tree, "--strip-components=1", "-xf", tar)
            for i, (label, _) in enumerate(ways(fs, args.ferry)):
                B.sh("sh", "-c", first(label, args.ferry, tree, os.path.join(lfs.mnt, f"bk1-{i}")))
            N.changes(tree, n=60)
            want = B.tree_stats(tree)
            B.sync()
            for i, (label, cmd) in enumerate(ways(fs, args.ferry)):
                bk1, bk2 = f"bk1-{i}", os.path.join(lfs.mnt, f"bk2-{i}")
                C.warm_source(tree)
                C.warm_source(os.path.join(lfs.mnt, bk1))
                B.sync()
                before = used_mib(lfs.mnt)
                B.wait_quiet(args.quiet_wait)
                r = B.run_measured(cmd(bk1, tree, bk2), shell=True, timeout=args.timeout)
                B.sync()
                grown = used_mib(lfs.mnt) - before
                ok = r["rc"] == 0 and B.tree_stats(bk2) == want
                rows[label].append({"seconds": r["seconds"], "grown_mib": grown, "ok": ok, "rc": r["rc"]})
                B.log(f"{fs} rep {rep} {label}: {r['seconds']:.2f} s, +{grown:.1f} MiB, tree ok {ok}")
                if r["rc"] != 0:
                    B.log(r["stderr"][-2000:])
    out["filesystems"][fs] = {label: {"runs": rs, "median_seconds": B.median([x["seconds"] for x in rs]),
                                      "median_grown_mib": B.median([x["grown_mib"] for x in rs])}
                              for label, rs in rows.items()}


def print_tables(out):
    for fs, rows in out["filesystems"].items():
        print(f"\n{fs}: second backup of the kernel tree after 60 changes, warm, median of {out['args']['reps']}")
        base = rows["rsync --link-dest"]["median_seconds"]
        table = [[label, f"{r['median_seconds']:.2f}", f"{base / r['median_seconds']:.2f}x",
                  f"{r['median_grown_mib']:.1f}", str(all(x["ok"] for x in r["runs"]))]
                 for label, r in rows.items()]
        for line in B.format_table(["way", "seconds", "rsync/this", "blocks MiB", "tree ok"], table):
            print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("-f", "--filesystems", type=lambda s: s.split(","), default=["ext4", "xfs"])
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-linkdest")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--image-size", default="16G")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--quiet-wait", type=float, default=20)
    ap.add_argument("--nice", type=int)
    ap.add_argument("--cleanup", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    B.start(args)
    out = {"machine": B.machine_info(), "ferry": B.ferry_identity(args.ferry), "args": vars(args),
           "rsync": B.sh("rsync", "--version", capture=True).stdout.splitlines()[0], "filesystems": {}}
    path = args.out or os.path.join(B.ROOT, "bench", "results", f"link-dest-{B.timestamp()}.json")
    tar = C.kernel_tarball(args.kernel_cache)
    if not tar:
        sys.exit("no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
    for fs in args.filesystems:
        bench_fs(fs, tar, args, out)
        B.write_json(path, out)
    print_tables(out)
    B.log(f"results: {path}")


if __name__ == "__main__":
    main()
