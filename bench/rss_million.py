#!/usr/bin/env python3
"""Peak RSS of ferry on a tree of 1,000,000 files: `copy` (issue 2's target: < 64 MiB),
and `pack` and `unpack` beside GNU tar and bsdtar (issue 3's: < 32 MiB whatever the
archive size), and `mount` of ferry's archive: the time until it answers, then one
`find MNT -printf '%s'` on a fresh mount (every directory read, every entry looked up
and statted), with the mount process's peak RSS.

Makes a fresh loop-mounted filesystem with room for twice the inodes (source and
destination live on it), creates DIRS directories of FILES/DIRS files of SIZE bytes
(empty by default), then copies it with ferry (and any other tools asked for), and/or
packs it with each archiver and unpacks that archiver's archive, warm cache, and reports
peak RSS (GNU time's %M: the largest resident set of the process), wall seconds and CPU,
and each archive's size.
Checks the counts of every tree made.

    sudo bench/rss_million.py                          # 1,000,000 empty files in 1,000 dirs
    sudo bench/rss_million.py --dirs 1 --files 1000000 # all in one directory
    sudo bench/rss_million.py --tools ferry,cp,rsync --size 100
    sudo bench/rss_million.py --ops pack,unpack --size 100   # ferry, tar, bsdtar
    sudo bench/rss_million.py --ops pack,mount --archivers ferry --dirs 1
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import copy_bench as C  # noqa: E402
import archive_bench as A  # noqa: E402


def make_tree(root, files, dirs, size):
    data = b"x" * size
    per = files // dirs
    for d in range(dirs):
        dp = os.path.join(root, f"d{d:04d}") if dirs > 1 else root
        os.makedirs(dp, exist_ok=True)
        for i in range(per):
            fd = os.open(os.path.join(dp, f"f{i:07d}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            if size:
                os.write(fd, data)
            os.close(fd)


def daemon_hwm_kib(ferry, mnt):
    """Peak RSS (VmHWM) of the ferry process serving the mount at `mnt`, if found."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if os.fsencode(ferry) in argv and os.fsencode(mnt) in argv and b"mount" in argv:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            return int(line.split()[1])
        except OSError:
            continue
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--dirs", type=int, default=1000)
    ap.add_argument("--size", type=int, default=0, help="bytes per file (default 0: empty)")
    ap.add_argument("--fs", default="ext4", help="ext4 (made with -N for 2x the entries) or xfs")
    ap.add_argument("--ops", default="copy",
                    help="comma list of copy, pack, unpack, mount (unpack and mount pack first; mount: ferry only)")
    ap.add_argument("--tools", default="ferry", help="copy's tools: comma list, as in copy_bench.py")
    ap.add_argument("--archivers", default="ferry,tar,bsdtar", help="pack's and unpack's tools")
    ap.add_argument("-j", "--jobs", type=int, help="ferry -j (default: ferry's own)")
    ap.add_argument("--ferry-j", default="", help="also ferry with each of these -j")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--cache", default="warm", help="warm or cold (or both: warm,cold)")
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--image-size", default="16G")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", help="JSON path (default bench/results/rss-<timestamp>.json)")
    ap.add_argument("--nice", type=int, default=-10, help="niceness of the measured commands (default -10)")
    ap.add_argument("--pack-arg", action="append", default=[],
                    help="extra argument for ferry pack and GNU tar -c (as in archive_bench.py)")
    args = ap.parse_args()
    B.start(args)
    tools = [t for t in args.tools.split(",") if t] + [f"ferry-j{j}" for j in args.ferry_j.split(",") if j]
    built = args.ferry
    args.ferry = B.snapshot_binary(built, os.path.join(B.HERE, ".build", "bin"))
    # what copy_bench.tool_command reads
    args.ferry_arg, args.limitcopy_threads = [], os.cpu_count() or 2
    # what archive_bench's pack_cmd and unpack_cmd read
    args.pack_jobs = args.unpack_jobs = args.jobs
    args.pack_arg = args.pack_arg or []
    ops = [o for o in args.ops.split(",") if o]
    needs_archive = {"pack", "unpack", "mount"} & set(ops)
    out_path = args.out or os.path.join(B.RESULTS, f"rss-{B.timestamp()}.json")
    results = {"kind": "rss_million", "started": B.timestamp(), "argv": sys.argv, "machine": B.machine_info(),
               "ferry": dict(B.ferry_identity(built), snapshot=args.ferry), "runs": []}
    inodes = 2 * (args.files + args.dirs) + 100_000
    with B.LoopFs(args.fs, args.scratch, f"{args.fs}-rss", size=args.image_size,
                  inodes=inodes if args.fs == "ext4" else None) as lfs:
        src, dst = os.path.join(lfs.mnt, "src"), os.path.join(lfs.mnt, "dst")
        B.log(f"creating {args.files:,} files of {args.size} B in {args.dirs:,} dirs on {args.fs}")
        t0 = time.perf_counter()
        os.makedirs(src)
        make_tree(src, args.files, args.dirs, args.size)
        B.sync()
        want = B.tree_stats(src)
        B.log(f"source: {want} (made in {time.perf_counter() - t0:.0f} s)")
        results["source"] = want
        results["loop"] = lfs.info
        rows = []

        def measure(tool, op, cache, cmd, check):
            B.sync()
            if cache == "cold":
                B.drop_caches()
            B.wait_quiet(60)
            run = B.run_measured(cmd, timeout=args.timeout)
            problem = check(run)
            if run["rc"]:
                problem = f"exit {run['rc']}: {run['stderr'].strip()[:300]}; {problem}"
            run.update(tool=tool, op=op, cache=cache, cmd=" ".join(cmd), problem=problem,
                       stdout=run["stdout"][-2000:], stderr=run["stderr"][-2000:])
            rows.append(run)
            B.write_json(out_path, results | {"runs": rows})
            B.log(f"{op} {tool} {cache}: {run['seconds']:.1f} s, peak RSS {(run['maxrss_kib'] or 0) / 1024:.1f} MiB"
                  + (f"  PROBLEM: {problem}" if problem else ""))

        def mount_and_walk(archive, cache):
            mnt = os.path.join(lfs.mnt, "mnt")
            os.makedirs(mnt, exist_ok=True)
            if cache == "warm":
                A.read_file(archive)
            measure("ferry", "mount", cache, [args.ferry, "mount", archive, mnt],
                    lambda run: None if os.path.ismount(mnt) else "not mounted")
            entries = want["files"] + want["dirs"] + 1  # and the root
            measure("ferry", "find", cache, ["sh", "-c", f"find '{mnt}' -printf '%s\\n' | wc -l"],
                    lambda run: None if run["stdout"].strip() == str(entries)
                    else f"find listed {run['stdout'].strip()} entries, not {entries}")
            rows[-1]["mount_hwm_kib"] = daemon_hwm_kib(args.ferry, mnt)
            B.write_json(out_path, results | {"runs": rows})
            hwm = rows[-1]["mount_hwm_kib"]
            B.log(f"mount process peak RSS: {hwm / 1024:.1f} MiB" if hwm else "mount process not found")
            B.run_measured([args.ferry, "umount", mnt], timeout=120)

        for cache in args.cache.split(","):
            if cache == "warm":
                C.warm_source(src)
            for tool in tools if "copy" in ops else []:
                c = C.tool_command(tool, src, dst, args)
                if c is None:
                    B.log(f"{tool}: not installed, skipped")
                    continue
                for rep in range(args.reps):
                    B.rmtree(dst)
                    run_copy = c[0] if not c[1] else ["sh", "-c", c[0]]
                    measure(tool, "copy", cache, run_copy, lambda run: C.check_copy(tool, want, dst, run))
            for tool in [t for t in args.archivers.split(",") if t] if needs_archive else []:
                if not tool.startswith("ferry") and not B.which(tool):
                    B.log(f"{tool}: not installed, skipped")
                    continue
                archive = os.path.join(lfs.mnt, f"archive.{tool}")
                for rep in range(args.reps):
                    B.rmtree(dst)
                    if os.path.exists(archive):
                        os.unlink(archive)
                    # Unpack needs an archive: made by a pack that is measured only if asked for.
                    if "pack" in ops:
                        measure(tool, "pack", cache, A.pack_cmd(tool, src, archive, args), lambda run: None)
                        rows[-1]["archive_bytes"] = os.path.getsize(archive) if os.path.exists(archive) else None
                        B.write_json(out_path, results | {"runs": rows})
                    elif rep == 0 or not os.path.exists(archive):
                        B.run_measured(A.pack_cmd(tool, src, archive, args), timeout=args.timeout)
                    if "unpack" in ops:
                        os.makedirs(dst)
                        if cache == "warm":
                            A.read_file(archive)
                        measure(tool, "unpack", cache, A.unpack_cmd(tool, archive, dst, args),
                                lambda run: C.check_copy(tool, want, dst, run))
                    if "mount" in ops and tool == "ferry":
                        mount_and_walk(archive, cache)
                if os.path.exists(archive):
                    os.unlink(archive)
        B.rmtree(dst)
    results["runs"] = rows
    results["finished"] = B.timestamp()
    B.write_json(out_path, results)
    where = f"{want['dirs']:,} dirs" if want["dirs"] else "one directory"
    print(f"\n== peak RSS on {want['files']:,} files ({args.size} B each) in {where}, {args.fs} ==")
    print(f"{'op':<7} {'tool':<12} {'cache':<5} {'seconds':>8} {'files/s':>9} {'cpu s':>7} {'peak RSS MiB':>13} {'archive MB':>11}  check")
    for r in rows:
        size = r.get("archive_bytes")
        shown = f"{size / 1e6:>11.1f}" if size else f"{'':>11}"
        rss = r.get("mount_hwm_kib") or r["maxrss_kib"] or 0
        print(f"{r['op']:<7} {r['tool']:<12} {r['cache']:<5} {r['seconds']:>8.1f} {want['files'] / r['seconds']:>9,.0f} "
              f"{(r['user'] or 0) + (r['sys'] or 0):>7.1f} {rss / 1024:>13.1f} {shown}  "
              f"{r['problem'] or 'ok'}")
    if any(r["op"] == "find" for r in rows):
        print("(find: the peak RSS is the mount process's; its cpu is find's)")
    print(f"\nresults: {out_path}")
    if any(r["problem"] and r["tool"].startswith("ferry") for r in rows):
        sys.exit("FERRY CORRECTNESS FAILURE (see above)")


if __name__ == "__main__":
    main()
