#!/usr/bin/env python3
"""What the all-zero block check costs ferry on dense data (the issue's target: < 2%).

The catch: ferry has no switch for "buffered copy without the scan". `--sparse=never`
turns the scan off but also switches the data path to copy_file_range (no user-space
copy at all), so auto-vs-never measures the scan AND the path change. This script
therefore reports three things, on dense trees (2,000 x 256 KiB + 64 x 16 MiB by default),
on a fresh ext4 (no reflink, so `auto` really reads and writes through memory):

1. wall and CPU of ferry `--sparse=auto` (buffered + scan), `--sparse=always` (same on a
   local copy), `--sparse=never` (copy_file_range, no scan), and, as references without
   ferry's metadata work, limitcopy with RW=1 (buffered, no scan) and limitcopy
   (copy_file_range). auto vs never is NOT the scan alone: see the caveat it prints.
2. perf (cpu-clock sampling) of ferry `--sparse=auto`: the share of ferry's samples that
   land in ferry_core's zero.rs (is_zero / data_runs, inlined or not). That share times
   ferry's CPU seconds is the scan's CPU cost, which bounds its wall-time cost.
3. If ferry honours an environment switch that keeps the buffered path but skips the scan
   (pass it with --noscan-env NAME=VALUE, e.g. FERRY_NO_ZERO_SCAN=1), the variant
   "auto+noscan" is the clean A/B: auto vs auto+noscan.

Two data sets: `random` (random bytes: the check stops at the first 64 bytes of each
block) and `worst` (each 4 KiB block is zeros but its last byte: the check reads every
byte). Real dense data lies in between.

    sudo bench/zero_scan.py
    sudo bench/zero_scan.py --data random --reps 5 --cache warm,cold
    sudo bench/zero_scan.py --noscan-env FERRY_NO_ZERO_SCAN=1
"""
import argparse
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402


def make_dense(root, kind, small, small_kib, big, big_mib, seed=7):
    rnd = random.Random(seed)
    if kind == "random":
        pool = rnd.randbytes(32 << 20)
    else:  # worst: every 4 KiB block is 4095 zero bytes and one non-zero byte at its end
        pool = (b"\0" * 4095 + b"\x01") * (8 << 10)  # 32 MiB
    def write(path, size):
        with open(path, "wb") as f:
            left = size
            while left:
                n = min(left, 16 << 20)
                off = rnd.randrange(0, len(pool) - n + 1, 4096)
                f.write(pool[off:off + n])
                left -= n
    os.makedirs(os.path.join(root, "small"))
    os.makedirs(os.path.join(root, "big"))
    for i in range(small):
        write(os.path.join(root, "small", f"f{i:05d}"), small_kib << 10)
    for i in range(big):
        write(os.path.join(root, "big", f"f{i:03d}"), big_mib << 20)


def variants(args):
    f = args.ferry
    v = [
        ("ferry auto", [f, "copy", "--json", "--reflink=never", "--sparse=auto"], {}),
        ("ferry always", [f, "copy", "--json", "--reflink=never", "--sparse=always"], {}),
        ("ferry never", [f, "copy", "--json", "--reflink=never", "--sparse=never"], {}),
    ]
    if args.noscan_env:
        name, _, val = args.noscan_env.partition("=")
        v.insert(1, ("ferry auto+noscan", v[0][1], {name: val}))
    lc = os.path.join(B.HERE, ".build", "limitcopy")
    if os.access(lc, os.X_OK):
        v.append(("limitcopy RW=1", [lc], {"RW": "1"}))
        v.append(("limitcopy cfr", [lc], {}))
    if args.jobs:
        for _, cmd, _ in v:
            if cmd[0] == f:
                cmd[2:2] = ["-j", str(args.jobs)]
    return v


def cmd_for(cmd, src, dst, args):
    if os.path.basename(cmd[0]) == "limitcopy":
        return cmd + [src, dst, str(args.limitcopy_threads)]
    return cmd + [src, dst]


PERF_ZERO = re.compile(r"zero\.rs|zero::|is_zero|data_runs")


def perf_share(args, src, dst, workdir, env):
    """Samples of ferry --sparse=auto in zero.rs, by symbol and by source file."""
    data = os.path.join(workdir, "perf.data")
    B.rmtree(dst)
    B.sync()
    cmd = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.perf_freq), "-o", data, "--"] + \
        cmd_for(variants(args)[0][1], src, dst, args)
    r = B.sh(*cmd, check=False, capture=True, env=dict(os.environ, **env))
    if r.returncode != 0:
        return {"error": f"perf record failed: {r.stderr.strip()[:300]}"}
    out = {}
    for key in ("sym", "srcfile"):
        rep = B.sh("perf", "report", "-i", data, "--stdio", "--no-children",
                   "--sort", key, "--percent-limit", "0", check=False, capture=True,
                   stdin=open(os.devnull))
        if rep.returncode != 0:
            out[key] = {"error": rep.stderr.strip()[:300]}
            continue
        total, zero, top = 0.0, 0.0, []
        for line in rep.stdout.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(.*)$", line)
            if not m:
                continue
            pct, name = float(m.group(1)), m.group(2).strip()
            total += pct
            if PERF_ZERO.search(name):
                zero += pct
            if len(top) < 12:
                top.append(f"{pct:5.2f}% {name[:90]}")
        out[key] = {"zero_pct": zero, "sum_pct": total, "top": top}
    os.unlink(data)
    B.rmtree(dst)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="random,worst", help="comma list of random,worst")
    ap.add_argument("--small", type=int, default=2000, help="number of small files")
    ap.add_argument("--small-kib", type=int, default=256)
    ap.add_argument("--big", type=int, default=64, help="number of big files")
    ap.add_argument("--big-mib", type=int, default=16)
    ap.add_argument("--cache", default="warm,cold")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fs", default="ext4")
    ap.add_argument("-j", "--jobs", type=int, help="ferry -j")
    ap.add_argument("--limitcopy-threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--noscan-env", help="NAME=VALUE that makes ferry skip the zero check (adds 'auto+noscan')")
    ap.add_argument("--no-perf", action="store_true")
    ap.add_argument("--quiet-wait", type=float, default=60, help="wait up to this long for an idle machine before each run")
    ap.add_argument("--perf-freq", type=int, default=2999)
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--image-size", default="8G")
    ap.add_argument("--out", help="JSON path (default bench/results/zeroscan-<timestamp>.json)")
    ap.add_argument("--nice", type=int, default=-10, help="niceness of the measured commands (default -10)")
    args = ap.parse_args()
    B.start(args)
    built = args.ferry
    args.ferry = B.snapshot_binary(built, os.path.join(B.HERE, ".build", "bin"))
    out_path = args.out or os.path.join(B.RESULTS, f"zeroscan-{B.timestamp()}.json")
    results = {"kind": "zero_scan", "started": B.timestamp(), "argv": sys.argv, "machine": B.machine_info(),
               "ferry": dict(B.ferry_identity(built), snapshot=args.ferry), "sets": []}
    vs = variants(args)
    for kind in args.data.split(","):
        with B.LoopFs(args.fs, args.scratch, f"{args.fs}-zeroscan", size=args.image_size) as lfs:
            src, dst = os.path.join(lfs.mnt, "src"), os.path.join(lfs.mnt, "dst")
            B.log(f"{kind}: creating {args.small} x {args.small_kib} KiB + {args.big} x {args.big_mib} MiB")
            make_dense(src, kind, args.small, args.small_kib, args.big, args.big_mib)
            B.sync()
            want = B.tree_stats(src)
            entry = {"data": kind, "source": want, "source_du_kib": B.du_kib(src), "loop": lfs.info, "caches": {}}
            for cache in args.cache.split(","):
                runs = {name: [] for name, _, _ in vs}
                if cache == "warm":
                    B.sh("sh", "-c", 'tar -C "$1" -cf - . | cat >/dev/null', "sh", src)
                for rep in range(args.reps):
                    for name, cmd, env in vs:
                        B.rmtree(dst)
                        B.sync()
                        if cache == "cold":
                            B.drop_caches()
                        waited, quiet = B.wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else (0.0, None)
                        r = B.run_measured(cmd_for(cmd, src, dst, args), env=env)
                        r["quiet_wait"], r["was_quiet"] = waited, quiet
                        t = time.perf_counter()
                        B.sync()
                        r["sync_seconds"] = time.perf_counter() - t
                        got = B.tree_stats(dst)
                        r["problem"] = None if (got["files"], got["bytes"]) == (want["files"], want["bytes"]) \
                            and r["rc"] == 0 else f"rc {r['rc']}, got {got}: {r['stderr'][:200]}"
                        r["du_kib"] = B.du_kib(dst)
                        r["stdout"], r["stderr"] = r["stdout"][-1000:], r["stderr"][-1000:]
                        runs[name].append(r)
                        B.log(f"{kind}/{cache} {rep + 1}/{args.reps} {name}: {r['seconds']:.2f} s, "
                              f"cpu {r['user'] + r['sys']:.2f} s" + (f" PROBLEM {r['problem']}" if r["problem"] else ""))
                B.rmtree(dst)
                summary = {}
                for name, rs in runs.items():
                    summary[name] = {
                        "median_seconds": B.median([r["seconds"] for r in rs]),
                        "median_cpu": B.median([r["user"] + r["sys"] for r in rs]),
                        "median_user": B.median([r["user"] for r in rs]),
                        "median_sync": B.median([r["sync_seconds"] for r in rs]),
                        "du_mib": B.median([r["du_kib"] / 1024 for r in rs if r["du_kib"] is not None]),
                        "problems": sorted({r["problem"] for r in rs if r["problem"]}),
                        "runs": rs,
                    }
                entry["caches"][cache] = summary
            if not args.no_perf and B.which("perf"):
                B.sh("sh", "-c", 'tar -C "$1" -cf - . | cat >/dev/null', "sh", src)
                entry["perf"] = perf_share(args, src, dst, args.scratch, {})
            results["sets"].append(entry)
            B.write_json(out_path, results)
            print_set(entry, args)
    results["finished"] = B.timestamp()
    B.write_json(out_path, results)
    print(f"\nresults: {out_path}")


def print_set(e, args):
    src = e["source"]
    print(f"\n== zero scan, {e['data']} data: {src['files']:,} files, {src['bytes'] / 1e6:,.0f} MB, "
          f"median of {args.reps} ==")
    for cache, summ in e["caches"].items():
        base = summ["ferry auto"]
        print(f"-- {cache} cache")
        print(f"{'variant':<20} {'seconds':>8} {'cpu s':>7} {'user s':>7} {'sync s':>7} {'MB/s':>8} "
              f"{'vs auto':>8} {'du MiB':>9}")
        for name, s in summ.items():
            m = s["median_seconds"]
            print(f"{name:<20} {m:>8.3f} {s['median_cpu']:>7.2f} {s['median_user']:>7.2f} {s['median_sync']:>7.2f} "
                  f"{src['bytes'] / 1e6 / m:>8,.0f} {m / base['median_seconds']:>8.3f} {s['du_mib'] or 0:>9,.0f}"
                  + (f"  PROBLEM {s['problems']}" if s["problems"] else ""))
        if "ferry auto+noscan" in summ:
            a, n = base["median_seconds"], summ["ferry auto+noscan"]["median_seconds"]
            print(f"   scan cost, clean A/B (auto vs auto+noscan): {100 * (a - n) / n:+.1f}% wall, "
                  f"{100 * (base['median_cpu'] - summ['ferry auto+noscan']['median_cpu']) / summ['ferry auto+noscan']['median_cpu']:+.1f}% cpu")
        print("   caveat: 'never' uses copy_file_range (no user-space copy), so auto vs never is the scan "
              "plus the buffered path, not the scan alone")
    p = e.get("perf")
    if p:
        warm = e["caches"].get("warm", next(iter(e["caches"].values())))["ferry auto"]
        for key in ("sym", "srcfile"):
            q = p.get(key, {})
            if "zero_pct" in q:
                cpu_s = q["zero_pct"] / 100 * warm["median_cpu"]
                print(f"   perf (--sort {key}): {q['zero_pct']:.2f}% of ferry's samples in zero.rs "
                      f"(= {cpu_s:.3f} CPU s of {warm['median_cpu']:.2f}; <= {100 * cpu_s / warm['median_seconds']:.1f}% "
                      f"of the warm wall time {warm['median_seconds']:.2f} s)")
                for t in q["top"][:8]:
                    print(f"      {t}")
            else:
                print(f"   perf (--sort {key}): {q.get('error', p.get('error'))}")


if __name__ == "__main__":
    main()
