#!/usr/bin/env python3
"""ferry pack --zstd against tar -I 'zstd -T0' and tar -czf on the kernel tree (issue 25),
side by side on a fresh loop-mounted ext4.

The Linux source tree (Debian's linux-source, extracted once onto the fresh filesystem)
is packed by each tool into a compressed archive on the same filesystem, then each
tool unpacks its own archive, then one member is printed from each archive:

  tool       pack                                   unpack                          cat of one member
  ferry      ferry pack SRC A.tar.zst               ferry unpack A.tar.zst DST      ferry cat A.tar.zst MEMBER
  tar-zstd   tar -C SRC -I 'zstd -T0' -cf A .       tar -C DST -I zstd -xf A        tar -I zstd -xOf A ./MEMBER
  ferry-gzip ferry pack SRC A.tar.gz                ferry unpack A.tar.gz DST       ferry cat A.tar.gz MEMBER
  tar-gzip   tar -C SRC -czf A .                    tar -C DST -xzf A               tar -xzOf A ./MEMBER

ferry's archive is independent zstd frames (level 3, like zstd's default) with a seek
table, or (ferry-gzip) independent gzip members (level 6, like gzip's) carrying their sizes; tar's is one zstd frame (zstd -T0 compresses it on every core but writes one
frame), which can only be read from its start. Size is the archive's bytes.

For each cache mode (-c warm,cold) and repetition (-r 3) the tools take turns; cold =
`sync; echo 3 > /proc/sys/vm/drop_caches` before every timed run; warm = the input read
right before. Seconds are wall time (median), the sync after each run timed apart. After
every unpack the tree's counts and bytes are compared with the source's.

    sudo bench/zstd_bench.py                      # about 15 minutes
    sudo bench/zstd_bench.py -r 1 -c warm         # a quick look
    sudo bench/zstd_bench.py --cleanup            # unmount leftovers

Table to stdout, progress to stderr, everything to bench/results/zstd-<ts>.json.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import archive_bench as A  # noqa: E402  (extract_source, read_file, timed)
import copy_bench as C  # noqa: E402  (kernel_tarball, warm_source)

TOOLS = ["ferry", "tar-zstd", "ferry-gzip", "tar-gzip"]
SUFFIX = {"ferry": "tar.zst", "tar-zstd": "tar.zst", "ferry-gzip": "tar.gz", "tar-gzip": "tar.gz"}
FERRY = ("ferry", "ferry-gzip")
# A member well into the tree, in every archive (below the tarball's top directory).
MEMBER = "kernel/sched/core.c"


def member_in(src):
    """MEMBER's path in the archives of `src`: below its one top directory, if it has one."""
    tops = os.listdir(src)
    return os.path.join(tops[0], MEMBER) if len(tops) == 1 and os.path.isdir(os.path.join(src, tops[0])) \
        else MEMBER


def pack_cmd(tool, ferry, src, archive):
    if tool in FERRY:
        return [ferry, "pack", "--no-progress", src, archive]
    flags = ["-I", "zstd -T0"] if tool == "tar-zstd" else ["-z"]
    return ["tar", "-C", src, *flags, "-cf", archive, "."]


def unpack_cmd(tool, ferry, archive, dst):
    if tool in FERRY:
        return [ferry, "unpack", "--no-progress", archive, dst]
    flags = "-I zstd" if tool == "tar-zstd" else "-z"
    return ["sh", "-c", f'mkdir "$1" && tar -C "$1" {flags} -xf "$2"', "sh", dst, archive]


def cat_cmd(tool, ferry, archive, member):
    if tool in FERRY:
        return [ferry, "cat", archive, member]
    flags = ["-I", "zstd"] if tool == "tar-zstd" else ["-z"]
    return ["tar", *flags, "-xOf", archive, f"./{member}"]


def run(args, results, out_path):
    tar = args.kernel_tarball or C.kernel_tarball(args.kernel_cache)
    if tar is None:
        sys.exit("no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
    with B.LoopFs("ext4", args.scratch, "zstd-kernel", size=args.image_size,
                  direct_io=not args.no_direct_io) as lfs:
        results["loop"] = lfs.info
        src, want, took = A.extract_source(lfs, tar)
        results["source"] = want
        member = results["member"] = member_in(src)
        B.log(f"kernel/ext4: {want} (extracted in {took:.1f} s)")
        dst = os.path.join(lfs.mnt, "dst")
        archives = {t: os.path.join(lfs.mnt, f"a-{t}.{SUFFIX[t]}") for t in args.tools}
        for cache in args.cache:
            for op in ("pack", "unpack", "cat"):
                for rep in range(args.reps):
                    for tool in args.tools:
                        archive = archives[tool]
                        if op == "pack":
                            if os.path.exists(archive):
                                os.unlink(archive)
                            if cache == "warm":
                                C.warm_source(src)
                            cmd = pack_cmd(tool, args.ferry, src, archive)
                        elif op == "unpack":
                            B.rmtree(dst)
                            if cache == "warm":
                                A.read_file(archive)
                            cmd = unpack_cmd(tool, args.ferry, archive, dst)
                        else:
                            if cache == "warm":
                                A.read_file(archive)
                            cmd = cat_cmd(tool, args.ferry, archive, member)
                        r = A.timed(cmd, cache, args, stdout_path="/dev/null")
                        entry = {"tool": tool, "op": op, "cache": cache, "rep": rep, "cmd": cmd,
                                 **{k: v for k, v in r.items() if k != "stdout"}}
                        if r["rc"] != 0:
                            results["failures"].append(f"{tool} {op}: rc {r['rc']}: {r['stderr'][-500:]}")
                        if op == "pack":
                            entry["archive_bytes"] = os.path.getsize(archive)
                        if op == "unpack":
                            got = B.tree_stats(dst)
                            entry["tree"] = got
                            if got != want:
                                results["failures"].append(f"{tool} unpack: {got} != {want}")
                        results["runs"].append(entry)
                        B.log(f"{cache} {op} {tool} #{rep}: {r['seconds']:.3f} s")
                        B.write_json(out_path, results)
        B.rmtree(dst)


def med(results, tool, op, cache, key="seconds"):
    xs = [r[key] for r in results["runs"] if (r["tool"], r["op"], r["cache"]) == (tool, op, cache)]
    return B.median(xs) if xs else None


def table(results, args):
    lines = []
    for cache in args.cache:
        rows = []
        for tool in args.tools:
            size = med(results, tool, "pack", cache, "archive_bytes")
            pack, unpack, cat = (med(results, tool, op, cache) for op in ("pack", "unpack", "cat"))
            rss = med(results, tool, "pack", cache, "maxrss_kib")
            rows.append([tool, f"{size / 1e6:,.1f}", f"{pack:.2f}", f"{unpack:.2f}", f"{cat * 1000:.0f}",
                         f"{rss / 1024:.0f}" if rss else "-"])
        lines.append(f"\nkernel tree on ext4, {cache} cache (median of {args.reps})")
        lines += B.format_table(["tool", "size MB", "pack s", "unpack s", "cat ms", "pack RSS MiB"], rows)
    return lines


def targets(results, args):
    """The issue's targets, against tar -I zstd, from the warm runs (and cold where run)."""
    out = {}
    for cache in args.cache:
        f = {op: med(results, "ferry", op, cache) for op in ("pack", "unpack", "cat")}
        t = {op: med(results, "tar-zstd", op, cache) for op in ("pack", "unpack")}
        fs, ts = (med(results, x, "pack", cache, "archive_bytes") for x in ("ferry", "tar-zstd"))
        if None in f.values() or None in t.values():
            continue
        out[cache] = {
            "size_ratio": fs / ts, "size_met": fs <= ts * 1.05,
            "pack_speedup": t["pack"] / f["pack"], "pack_met": t["pack"] / f["pack"] >= 1.3,
            "unpack_speedup": t["unpack"] / f["unpack"], "unpack_met": t["unpack"] / f["unpack"] >= 1.3,
            "cat_ms": f["cat"] * 1000, "cat_met": f["cat"] < 0.020,
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csv = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("-c", "--cache", type=csv, default=["warm", "cold"], help="comma list of warm,cold")
    ap.add_argument("-r", "--reps", type=int, default=3, help="timed runs per tool and op (median reported)")
    ap.add_argument("-t", "--tools", type=csv, default=TOOLS, help=f"comma list of {','.join(TOOLS)}")
    ap.add_argument("--ferry", default=B.default_ferry(), help="ferry binary (default target/release/ferry)")
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-zstd")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH,
                    help="where the decompressed kernel tarball is kept (shared with copy_bench)")
    ap.add_argument("--kernel-tarball", help="extract this (uncompressed) tar instead of the kernel's")
    ap.add_argument("--image-size", default="16G")
    ap.add_argument("--no-direct-io", action="store_true", help="loop devices without direct I/O")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--quiet-wait", type=float, default=20, help="before each timed run, wait up to this many "
                    "seconds for the rest of the machine to be idle (0: do not wait)")
    ap.add_argument("--nice", type=int, help="run the measured commands at this niceness")
    ap.add_argument("--out", help="JSON path (default bench/results/zstd-<timestamp>.json)")
    ap.add_argument("--cleanup", action="store_true", help="unmount and detach leftovers under --scratch, then exit")
    args = ap.parse_args()
    B.start(args)
    for t in args.tools:
        if t not in TOOLS:
            ap.error(f"unknown tool {t}")
    if not os.access(args.ferry, os.X_OK):
        sys.exit(f"no ferry binary at {args.ferry}: cargo build --release")
    built = args.ferry
    args.ferry = B.snapshot_binary(built, os.path.join(B.HERE, ".build", "bin"))
    out_path = args.out or os.path.join(B.RESULTS, f"zstd-{B.timestamp()}.json")
    versions = {t: B.sh(t, "--version", capture=True, check=False).stdout.splitlines()[0] for t in ("tar", "zstd")}
    results = {"kind": "zstd_bench", "started": B.timestamp(), "argv": sys.argv, "machine": B.machine_info(),
               "ferry": dict(B.ferry_identity(built), snapshot=args.ferry), "peers": versions,
               "tools": args.tools, "reps": args.reps, "runs": [], "failures": []}
    B.log(f"results -> {out_path}")
    run(args, results, out_path)
    results["targets"] = targets(results, args)
    results["finished"] = B.timestamp()
    B.write_json(out_path, results)
    print("\n".join(table(results, args)))
    for cache, t in results["targets"].items():
        print(f"\ntargets ({cache}): size {t['size_ratio']:.3f}x tar -I zstd (<= 1.05: "
              f"{'met' if t['size_met'] else 'NOT met'}), pack {t['pack_speedup']:.2f}x faster (>= 1.3: "
              f"{'met' if t['pack_met'] else 'NOT met'}), unpack {t['unpack_speedup']:.2f}x faster (>= 1.3: "
              f"{'met' if t['unpack_met'] else 'NOT met'}), cat {t['cat_ms']:.1f} ms (< 20: "
              f"{'met' if t['cat_met'] else 'NOT met'})")
    print(f"\nresults: {out_path}")
    if results["failures"]:
        sys.exit("FAILURES:\n" + "\n".join(results["failures"]))


if __name__ == "__main__":
    main()
