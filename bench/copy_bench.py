#!/usr/bin/env python3
"""ferry copy against its peers, side by side, on fresh loop-mounted filesystems.

For each filesystem and workload: make a fresh image, mount it, create the source tree on
it once, then for each cache mode, repetition and tool copy the source into a fresh
destination on the same filesystem, timing wall seconds and taking peak RSS and CPU from
wait4(). The destination is synced (timed separately, not in "seconds"), counted, and
deleted before the next run. Prints one table per (filesystem, workload, cache) and writes
everything to bench/results/<timestamp>.json.

    sudo bench/copy_bench.py                                  # everything, 3 reps
    sudo bench/copy_bench.py -w kernel -f ext4 -c warm,cold  # one workload
    sudo bench/copy_bench.py -w kernel -t ferry --ferry-j 2,4,8,16   # -j sweep
    sudo bench/copy_bench.py --cleanup                       # unmount leftovers

Run bench/setup.sh first. See bench/README.md.
"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

WORKLOADS = ["kernel", "small4k", "flat", "zcmde", "sparse", "vmimg"]
TOOLS = ["ferry", "cp", "rsync", "tar", "fcp", "xcp", "cpz", "limitcopy"]


# ---------------------------------------------------------------- workloads

def kernel_tarball(scratch):
    """The Debian linux-source tarball, decompressed once into scratch/cache (xz is slow)."""
    srcs = sorted(f for f in os.listdir("/usr/src") if f.startswith("linux-source-") and ".tar" in f) \
        if os.path.isdir("/usr/src") else []
    if not srcs:
        return None
    xz = os.path.join("/usr/src", srcs[-1])
    cache = os.path.join(scratch, "cache")
    os.makedirs(cache, exist_ok=True)
    tar = os.path.join(cache, srcs[-1].split(".tar")[0] + ".tar")
    if not os.path.exists(tar) or os.path.getmtime(tar) < os.path.getmtime(xz):
        B.log(f"decompressing {xz} into {tar} (once)")
        tmp = tar + ".part"
        with open(tmp, "wb") as out:
            B.sh("xz", "-dc", "-T0", xz, stdout=out)
        os.replace(tmp, tar)
    return tar


def make_files(root, dirs, per_dir, size_fn, seed):
    rnd = random.Random(seed)
    pool = rnd.randbytes(1 << 20)
    for d in range(dirs):
        dpath = os.path.join(root, f"d{d:03d}") if dirs > 1 else root
        os.makedirs(dpath, exist_ok=True)
        for i in range(per_dir):
            size = size_fn(rnd)
            off = rnd.randrange(0, len(pool) - size) if size < len(pool) else 0
            fd = os.open(os.path.join(dpath, f"f{i:06d}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                # not all-zero, so zero-block detection has nothing to skip
                os.write(fd, pool[off:off + size])
            finally:
                os.close(fd)


def create_workload(name, src, args):
    """Create workload `name` at src (on the loop fs). Returns a one-line description."""
    os.makedirs(src)
    if name == "kernel":
        tar = kernel_tarball(args.scratch)
        if tar is None:
            raise SkipWorkload("no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
        B.sh("tar", "-C", src, "-xf", tar)
        return f"Linux source tree extracted from {os.path.basename(tar)}"
    if name == "small4k":
        n = args.files
        make_files(src, 100, n // 100, lambda r: 4096, 4)
        return f"{n:,} x 4 KiB files in 100 directories"
    if name == "flat":
        n = args.files
        make_files(src, 1, n, lambda r: r.randint(1, 8192), 5)
        return f"{n:,} files of 1 B-8 KiB (uniform) in one directory"
    if name == "zcmde":
        B.sh(sys.executable, os.path.join(B.SHARED, "tools", "mkdata.py"), "zcmde", src, str(args.zcmde_n))
        return f"mkdata.py zcmde N={args.zcmde_n}: 12 folders of N files of 512 B..1 MiB + mix"
    if name == "sparse":
        B.sh(sys.executable, os.path.join(B.SHARED, "tools", "mkdata.py"), "sparse", src)
        return "mkdata.py sparse: 300 MiB + 10 x 10 MiB zero-filled files, 1 GiB vm.img with 10% data"
    if name == "vmimg":
        B.sh(sys.executable, os.path.join(B.SHARED, "tools", "mkdata.py"), "sparse", src)
        for f in os.listdir(src):
            if f != "vm.img":
                os.unlink(os.path.join(src, f))
        return "only the 1 GiB vm.img of mkdata.py sparse (10% data in 1 MiB runs, the rest holes)"
    raise ValueError(name)


class SkipWorkload(Exception):
    pass


# ---------------------------------------------------------------- tools

def tool_command(tool, src, dst, args):
    """(argv or shell string, shell?, env) for copying the contents of src to a new dst,
    or None when the tool is not installed."""
    if tool == "ferry" or tool.startswith("ferry-j"):
        cmd = [args.ferry, "copy", "--json"]
        if tool.startswith("ferry-j"):
            cmd += ["-j", tool[len("ferry-j"):]]
        elif args.jobs:
            cmd += ["-j", str(args.jobs)]
        cmd += args.ferry_arg
        return cmd + [src, dst], False
    if tool == "cp":
        return ["cp", "-a", src, dst], False
    if tool == "cp-nosparse":
        return ["cp", "-a", "--sparse=never", src, dst], False
    if tool == "rsync":
        return ["rsync", "-a", src + "/", dst + "/"], False
    if tool == "tar":
        q = lambda s: "'" + s.replace("'", "'\\''") + "'"  # noqa: E731
        return f"mkdir {q(dst)} && tar -C {q(src)} -cf - . | tar -C {q(dst)} -xf -", True
    if tool == "fcp":  # fcp SRC DST: DST (absent) becomes a copy of SRC
        exe = B.which("fcp")
        return ([exe, src, dst], False) if exe else None
    if tool == "xcp":  # default 4 workers, keeps modes and times
        exe = B.which("xcp")
        return ([exe, "-r", "--no-progress", src, dst], False) if exe else None
    if tool == "cpz":  # `cpz a b` makes b become a
        exe = B.which("cpz")
        return ([exe, src, dst], False) if exe else None
    if tool == "limitcopy":
        exe = os.path.join(B.HERE, ".build", "limitcopy")
        return ([exe, src, dst, str(args.limitcopy_threads)], False) if os.access(exe, os.X_OK) else None
    raise ValueError(f"unknown tool {tool}")


def check_copy(tool, want, dst, run):
    """Compare counts and bytes of dst with the source's. Returns None if equal, else a
    description. limitcopy copies neither symlinks nor special files: it is held only to
    directories, files and bytes."""
    try:
        got = B.tree_stats(dst)
    except OSError as e:
        return f"cannot walk destination: {e}"
    keys = ["dirs", "files", "bytes"] if tool == "limitcopy" else ["dirs", "files", "symlinks", "others", "bytes"]
    diff = [f"{k} {got[k]} != {want[k]}" for k in keys if got[k] != want[k]]
    if tool.startswith("ferry"):
        try:
            summary = __import__("json").loads(run["stdout"].strip().splitlines()[-1])
            run["ferry_summary"] = summary
            if summary.get("errors"):
                diff.append(f"ferry reported {summary['errors']} errors")
        except (ValueError, IndexError):
            diff.append("no JSON summary on stdout")
    return "; ".join(diff) or None


# ---------------------------------------------------------------- running

def warm_source(src):
    """Read every file and directory once, so a warm run finds the source in the page cache."""
    B.sh("sh", "-c", 'tar -C "$1" -cf - . | cat >/dev/null', "sh", src)


def bench_one(fs, workload, args, results, out_path):
    size = args.image_size
    with B.LoopFs(fs, args.scratch, f"{fs}-{workload}", size=size, direct_io=not args.no_direct_io) as lfs:
        src = os.path.join(lfs.mnt, "src")
        dst = os.path.join(lfs.mnt, "dst")
        B.log(f"{fs}/{workload}: creating source")
        t0 = time.perf_counter()
        desc = create_workload(workload, src, args)
        B.sync()
        want = B.tree_stats(src)
        B.log(f"{fs}/{workload}: {desc}: {want} (made in {time.perf_counter() - t0:.1f} s)")
        src_du = B.du_kib(src)
        tools = list(args.tools)
        if workload in ("sparse", "vmimg") and "cp" in tools and "cp-nosparse" not in tools:
            tools.insert(tools.index("cp") + 1, "cp-nosparse")
        for cache in args.cache:
            rows = {}
            cmds = {}
            for tool in tools:
                c = tool_command(tool, src, dst, args)
                if c is None:
                    B.log(f"{tool}: not installed, skipped")
                    continue
                cmds[tool] = c
                rows[tool] = {"tool": tool, "cmd": c[0] if c[1] else " ".join(c[0]), "runs": []}
            if cache == "warm":
                warm_source(src)
                if args.warmup != "none":
                    # untimed: the first run on a fresh filesystem pays for things later
                    # runs do not (first use of block groups, journal), and it should not
                    # be the first tool's alone
                    for tool, (cmd, shell) in list(cmds.items())[:1 if args.warmup == "first" else None]:
                        B.rmtree(dst)
                        B.run_measured(cmd, shell=shell, timeout=args.timeout)
                        B.rmtree(dst)
                        B.sync()
            for rep in range(args.reps):
                for tool, (cmd, shell) in cmds.items():
                    B.rmtree(dst)
                    B.sync()
                    if cache == "cold":
                        B.drop_caches()
                    waited, quiet = B.wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else (0.0, None)
                    if quiet is False:
                        B.log(f"machine still busy after {waited:.0f} s; running anyway")
                    run = B.run_measured(cmd, shell=shell, timeout=args.timeout)
                    run["quiet_wait"], run["was_quiet"] = waited, quiet
                    t = time.perf_counter()
                    B.sync()
                    run["sync_seconds"] = time.perf_counter() - t
                    problem = None
                    if run["rc"] != 0:
                        problem = f"exit {run['rc']}: {run['stderr'].strip()[:300]}"
                    chk = check_copy(tool, want, dst, run)
                    if chk:
                        problem = f"{problem}; {chk}" if problem else chk
                    run["problem"] = problem
                    if workload in ("sparse", "vmimg") or args.du:
                        run["du_kib"] = B.du_kib(dst)
                    run["stderr"] = run["stderr"][-2000:]
                    run["stdout"] = run["stdout"][-2000:]
                    rows[tool]["runs"].append(run)
                    B.log(f"{fs}/{workload}/{cache} rep {rep + 1}/{args.reps} {tool}: "
                          f"{run['seconds']:.2f} s, sync {run['sync_seconds']:.2f} s, "
                          f"{(run['maxrss_kib'] or 0) / 1024:.1f} MiB" + (f"  PROBLEM: {problem}" if problem else ""))
                    if problem and tool.startswith("ferry"):
                        msg = f"FERRY CORRECTNESS FAILURE on {fs}/{workload}/{cache}: {problem}"
                        print("\n" + "!" * 78 + "\n" + msg + "\n" + "!" * 78, file=sys.stderr, flush=True)
                        results["failures"].append(msg)
                        if not args.keep_going:
                            finish_rows(rows)
                            results["runs"].append(entry(fs, workload, cache, desc, want, src_du, lfs, rows))
                            B.write_json(out_path, results)
                            raise SystemExit(msg)
            B.rmtree(dst)
            finish_rows(rows)
            e = entry(fs, workload, cache, desc, want, src_du, lfs, rows)
            results["runs"].append(e)
            B.write_json(out_path, results)
            print_table(e, args.reps)


def finish_rows(rows):
    for r in rows.values():
        ok = [x for x in r["runs"] if x["rc"] == 0]
        r["median_seconds"] = B.median([x["seconds"] for x in ok])
        r["min_seconds"] = min((x["seconds"] for x in ok), default=None)
        r["max_seconds"] = max((x["seconds"] for x in ok), default=None)
        r["median_cpu"] = B.median([x["user"] + x["sys"] for x in ok if x["user"] is not None])
        r["median_other_cpu"] = B.median([x.get("other_cpu") for x in ok])
        r["median_sync_seconds"] = B.median([x["sync_seconds"] for x in ok])
        r["max_rss_mib"] = max((x["maxrss_kib"] or 0 for x in r["runs"]), default=0) / 1024
        r["median_du_mib"] = B.median([x.get("du_kib") / 1024 for x in ok if x.get("du_kib") is not None])
        r["problems"] = sorted({x["problem"] for x in r["runs"] if x["problem"]})
        r["failed_runs"] = len(r["runs"]) - len(ok)
        r["noisy_runs"] = sum(1 for x in r["runs"] if x.get("was_quiet") is False)


def entry(fs, workload, cache, desc, want, src_du, lfs, rows):
    base = rows.get("ferry", {}).get("median_seconds")
    for r in rows.values():
        m = r.get("median_seconds")
        r["ratio_vs_ferry"] = (m / base) if (m and base) else None
        nondir = want["files"] + want["symlinks"] + want["others"]
        r["files_per_s"] = nondir / m if m else None
        r["mb_per_s"] = want["bytes"] / 1e6 / m if m else None
    return {"fs": fs, "workload": workload, "cache": cache, "description": desc, "source": want,
            "source_du_kib": src_du, "loop": lfs.info, "tools": list(rows.values())}


def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def print_table(e, reps):
    src = e["source"]
    head = (f"\n== {e['workload']} on {e['fs']}, {e['cache']} cache, median of {reps} == "
            f"{e['description']}\n   source: {src['files']:,} files, {src['dirs']:,} dirs, "
            f"{src['symlinks']:,} symlinks, {src['bytes'] / 1e6:,.1f} MB, du {e['source_du_kib'] / 1024:,.1f} MiB")
    show_du = any(r.get("median_du_mib") is not None for r in e["tools"])
    cols = ["tool", "seconds", "min-max", "files/s", "MB/s", "cpu s", "sync s", "RSS MiB", "vs ferry", "other cpu"]
    if show_du:
        cols.append("du MiB")
    lines = []
    for r in e["tools"]:
        m = r["median_seconds"]
        row = [r["tool"],
               fmt(m, ".2f", "FAIL"),
               f"{r['min_seconds']:.2f}-{r['max_seconds']:.2f}" if m is not None else "-",
               fmt(r["files_per_s"], ",.0f"),
               fmt(r["mb_per_s"], ",.1f"),
               fmt(r["median_cpu"], ".2f"),
               fmt(r["median_sync_seconds"], ".2f"),
               f"{r['max_rss_mib']:.1f}",
               fmt(r["ratio_vs_ferry"], ".2f"),
               fmt(r["median_other_cpu"], ".2f")]
        if show_du:
            row.append(fmt(r["median_du_mib"], ",.1f"))
        lines.append(row)
    widths = [max(len(c), *(len(l[i]) for l in lines)) if lines else len(c) for i, c in enumerate(cols)]
    out = [head, "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths)))]
    for l in lines:
        out.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(l, widths))))
    for r in e["tools"]:
        if r.get("noisy_runs"):
            out.append(f"   note: {r['tool']}: {r['noisy_runs']} run(s) started while the machine was busy")
        for p in r["problems"]:
            out.append(f"   note: {r['tool']}: {p}")
    out.append("   seconds: wall, median; cpu s: user+sys of the tool; sync s: the sync after it (not in seconds);"
               " other cpu: CPU seconds the rest of the machine used during the run")
    print("\n".join(out), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csv = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("-w", "--workloads", type=csv, default=WORKLOADS, help=f"comma list of {','.join(WORKLOADS)}")
    ap.add_argument("-f", "--fs", type=csv, default=["ext4", "xfs"], help="comma list of ext4,xfs,btrfs")
    ap.add_argument("-c", "--cache", type=csv, default=["warm", "cold"], help="comma list of warm,cold")
    ap.add_argument("-r", "--reps", type=int, default=3, help="timed runs per tool (median reported)")
    ap.add_argument("-t", "--tools", type=csv, default=TOOLS, help=f"comma list of {','.join(TOOLS)},cp-nosparse")
    ap.add_argument("-j", "--jobs", type=int, help="ferry -j for the 'ferry' tool (default: ferry's own)")
    ap.add_argument("--ferry-j", type=csv, default=[], help="also run ferry with each of these -j (tools ferry-jN)")
    ap.add_argument("--ferry-arg", action="append", default=[], help="extra argument for ferry (repeatable)")
    ap.add_argument("--ferry", default=B.default_ferry(), help="ferry binary (default target/release/ferry)")
    ap.add_argument("--limitcopy-threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--files", type=int, default=100_000, help="files in small4k and flat")
    ap.add_argument("--zcmde-n", type=int, default=128, help="N for mkdata.py zcmde (128: ~290 MB)")
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH, help="where images and caches go")
    ap.add_argument("--image-size", default="8G")
    ap.add_argument("--no-direct-io", action="store_true", help="loop device without direct I/O")
    ap.add_argument("--warmup", choices=["first", "all", "none"], default="first",
                    help="warm cache, after a tar read pass over the source: one untimed run of the first "
                    "tool (default), of every tool, or none")
    ap.add_argument("--du", action="store_true", help="report du of the destination for every workload")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--quiet-wait", type=float, default=60, help="before each timed run, wait up to this many "
                    "seconds for the rest of the machine to be idle (0: do not wait)")
    ap.add_argument("--keep-going", action="store_true", help="do not stop at a ferry correctness failure")
    ap.add_argument("--out", help="JSON path (default bench/results/<timestamp>.json)")
    ap.add_argument("--cleanup", action="store_true", help="unmount and detach leftovers under --scratch, then exit")
    ap.add_argument("--nice", type=int, default=-10, help="niceness of the measured commands (default -10)")
    args = ap.parse_args()
    B.start(args)
    for w in args.workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w}")
    args.tools = args.tools + [f"ferry-j{j}" for j in args.ferry_j]
    if any(t.startswith("ferry") for t in args.tools):
        if not os.access(args.ferry, os.X_OK):
            sys.exit(f"no ferry binary at {args.ferry}: cargo build --release")
        built = args.ferry_built = args.ferry
        args.ferry = B.snapshot_binary(built, os.path.join(B.HERE, ".build", "bin"))
        B.log(f"measuring {built} as its snapshot {args.ferry}")
    out_path = args.out or os.path.join(B.RESULTS, f"copy-{B.timestamp()}.json")
    results = {"kind": "copy_bench", "started": B.timestamp(), "argv": sys.argv, "machine": B.machine_info(),
               "ferry": dict(B.ferry_identity(getattr(args, "ferry_built", args.ferry)), snapshot=args.ferry), "peers": {}, "runs": [], "failures": [], "skipped": []}
    for t in args.tools:
        c = tool_command(t, "SRC", "DST", args)
        results["peers"][t] = None if c is None else (c[0] if c[1] else c[0][0])
    B.log(f"results -> {out_path}")
    for fs in args.fs:
        for w in args.workloads:
            try:
                bench_one(fs, w, args, results, out_path)
            except SkipWorkload as e:
                B.log(f"{fs}/{w}: skipped: {e}")
                results["skipped"].append(f"{fs}/{w}: {e}")
    results["finished"] = B.timestamp()
    B.write_json(out_path, results)
    print(f"\nresults: {out_path}")
    if results["failures"]:
        sys.exit("FERRY CORRECTNESS FAILURES:\n" + "\n".join(results["failures"]))


if __name__ == "__main__":
    main()
