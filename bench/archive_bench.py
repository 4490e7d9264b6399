#!/usr/bin/env python3
"""ferry pack / unpack / ls / cat against GNU tar and bsdtar, side by side, on fresh
loop-mounted filesystems.

Experiments (-e):
  avatar  The AvaTar paper's experiment on a fresh XFS (mkfs.xfs -m reflink=1): COUNT files
          of each --sizes (default 1,024 x 64 KiB, 256 KiB, 1 MiB, 4 MiB) and --split-total
          (1 GiB) split into each of --splits (64, 256, 1,024, 4,096) files, all in one
          directory. Each set is packed and unpacked by every tool (each tool unpacks the
          archive it made). On the split sets, `ferry ls` / `ferry cat` of one member are
          timed in ms beside `tar -tf` / `tar -xOf` and `bsdtar -tf` / `bsdtar -xOf`.
  kernel  The Linux source tree (Debian's linux-source, extracted once per filesystem) on a
          fresh ext4 and a fresh XFS (-f): pack and unpack with every tool.
  compressed
          The same tree as one plain tar (made by GNU tar), compressed with each of
          --compressions (gzip -1, zstd): every tool unpacks the same compressed file
          (`ferry unpack A DST`, `tar -C DST -xf A`, `bsdtar -C DST -xf A`; all three
          recognise the compression themselves). Unpack only: ferry does not compress.
  stream  The same tree through a pipe, as a network copy sends it (issue #23), beside a
          copy, on a fresh ext4 (and XFS with -f), warm cache only: `ferry copy SRC DST`,
          `ferry pack SRC - | ferry unpack - DST` and `tar -C SRC -cf - . | tar -C DST -xf -`
          (each --stream-ferry binary too, for a before/after in one run); ratios against
          ferry copy. Not among the default experiments.

For each set, cache mode (-c warm,cold) and repetition (-r 3), the tools take turns:
  pack    rm ARCHIVE; tool packs SRC into ARCHIVE (same filesystem)
  unpack  rm -rf DST; tool unpacks its own ARCHIVE into DST (same filesystem)
cold = `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed run; warm = the input
(source tree or archive) is read right before every timed run, plus one untimed run of the
first tool before the series. Seconds are the tool's wall time (median), the sync after it
is timed apart; peak RSS from GNU time. After every unpack the tree's counts and bytes are
compared with the source's; a ferry mismatch stops the run (unless --keep-going).

    sudo bench/archive_bench.py                         # everything (about 1.5 h)
    sudo bench/archive_bench.py -e avatar -c cold       # one experiment
    sudo bench/archive_bench.py -e avatar --count 16 --sizes 64K,1M --split-total 16M \\
        --splits 4,16 -e avatar,kernel -r 1 --quiet-wait 0 --plot-dir /tmp   # smoke test
    sudo bench/archive_bench.py --cleanup               # unmount leftovers

Tables go to stdout, progress to stderr, everything to bench/results/archive-<ts>.json,
plots (bench/plot_archive.py, needs matplotlib: /usr/bin/python3) to docs/img/archive-*.png.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import copy_bench as C  # noqa: E402  (kernel_tarball, warm_source, finish_rows, fmt)

EXPERIMENTS = ["avatar", "kernel", "compressed", "stream"]
# name -> (file suffix, command that compresses standard input to standard output)
COMPRESSIONS = {"gzip": ("gz", "gzip -1"), "zstd": ("zst", "zstd -q -T0"), "xz": ("xz", "xz -T0 -1"),
                "bzip2": ("bz2", "bzip2 -1")}
TOOLS = ["ferry", "tar", "bsdtar"]
OPTIONAL_TOOLS = ["ferry-noreflink"]  # ferry --reflink=never: what the clones are worth
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


# ---------------------------------------------------------------- data sets

def parse_size(s):
    s = s.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": KiB, "M": MiB, "G": GiB}.get(s[-1:], 1)
    return int(float(s.rstrip("KMG")) * mult)


def human(n):
    for unit, m in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= m and n % m == 0:
            return f"{n // m} {unit}"
    return f"{n} B" if n < KiB else f"{n / MiB:.1f} MiB"


def avatar_sets(args):
    """The distinct (count, size) sets, each tagged with the figure groups it belongs to:
    'size' (COUNT files of each size) and 'split' (TOTAL split into N files)."""
    sets = {}
    for s in args.sizes:
        sets.setdefault((args.count, s), set()).add("size")
    for n in args.splits:
        if args.split_total % n:
            raise SystemExit(f"--split-total {args.split_total} is not a multiple of {n}")
        sets.setdefault((n, args.split_total // n), set()).add("split")
    return [{"count": c, "size": s, "groups": sorted(g), "name": f"{c:,} x {human(s)}"}
            for (c, s), g in sorted(sets.items(), key=lambda kv: kv[0][0] * kv[0][1])]


def make_avatar(root, count, size):
    """COUNT files of SIZE bytes in one directory. Whole MiB: ../shared/tools/mkdata.py
    avatar (as the brief says); otherwise our own generator (random, distinct contents)."""
    if size % MiB == 0:
        B.sh(sys.executable, os.path.join(B.SHARED, "tools", "mkdata.py"), "avatar", root,
             str(count), str(size // MiB))
        return "mkdata.py avatar"
    os.makedirs(root, exist_ok=True)
    rnd = random.Random(2)
    pool = rnd.randbytes(max(2 * size, 4 * MiB))
    for i in range(count):
        off = rnd.randrange(0, len(pool) - size)
        fd = os.open(os.path.join(root, f"f{i:05d}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, pool[off:off + size])
        finally:
            os.close(fd)
    return "archive_bench generator"


# ---------------------------------------------------------------- tools

def pack_cmd(tool, src, archive, args):
    if tool.startswith("ferry"):
        cmd = [args.ferry, "pack", "--json"] + (["-j", str(args.pack_jobs)] if args.pack_jobs else [])
        if tool == "ferry-noreflink":
            cmd.append("--reflink=never")
        return cmd + args.ferry_arg + args.pack_arg + [src, archive]
    extra = args.pack_arg if tool == "tar" else []
    return [tool] + extra + ["-C", src, "-cf", archive, "."]


def unpack_cmd(tool, archive, dst, args):
    if tool.startswith("ferry"):
        cmd = [args.ferry, "unpack", "--json"] + (["-j", str(args.unpack_jobs)] if args.unpack_jobs else [])
        if tool == "ferry-noreflink":
            cmd.append("--reflink=never")
        return cmd + args.ferry_arg + [archive, dst]
    return [tool, "-C", dst, "-xf", archive]


def ferry_summary(run):
    try:
        return json.loads(run["stdout"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def read_file(path):
    """Read a file once (untimed), so a warm run finds it in the page cache."""
    B.sh("sh", "-c", 'cat "$1" >/dev/null', "sh", path)


def timed(cmd, cache, args, stdout_path=None):
    """One measured run: sync (and drop caches if cold), wait for a quiet machine, run,
    then time the sync after it."""
    B.sync()
    if cache == "cold":
        B.drop_caches()
    waited, quiet = B.wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else (0.0, None)
    if quiet is False:
        B.log(f"machine still busy after {waited:.0f} s; running anyway")
    run = B.run_measured(cmd, timeout=args.timeout, stdout_path=stdout_path)
    run["quiet_wait"], run["was_quiet"] = waited, quiet
    t = time.perf_counter()
    B.sync()
    run["sync_seconds"] = time.perf_counter() - t
    return run


class FerryFailure(SystemExit):
    pass


# ---------------------------------------------------------------- pack / unpack series

def series(ctx, src, want, args, results, out_path, label, entries, archive=None):
    """Pack then unpack, for each cache mode; appends one entry per (cache, op) to
    `entries` (which is already in `results`, so the JSON has what was done so far).
    Given `archive`, every tool only unpacks that one file."""
    mnt = ctx.mnt
    arch = {t: archive or os.path.join(mnt, f"archive.{t}.tar") for t in args.tools}
    dst = os.path.join(mnt, "dst")
    for cache in args.cache:
        for op in ("unpack",) if archive else ("pack", "unpack"):
            rows = {t: {"tool": t, "runs": []} for t in args.tools}
            if op == "pack":
                for t in args.tools:
                    rows[t]["cmd"] = " ".join(pack_cmd(t, "SRC", "ARCHIVE", args))
            else:
                for t in args.tools:
                    rows[t]["cmd"] = " ".join(unpack_cmd(t, "ARCHIVE", "DST", args))
                missing = [t for t in args.tools if not os.path.exists(arch[t])]
                if missing:
                    raise SystemExit(f"no archive from {missing} to unpack")

            def one(tool, timed_run=True):
                if op == "pack":
                    if os.path.exists(arch[tool]):
                        os.unlink(arch[tool])
                    cmd = pack_cmd(tool, src, arch[tool], args)
                    if cache == "warm":
                        C.warm_source(src)
                else:
                    B.rmtree(dst)
                    if not tool.startswith("ferry"):
                        os.mkdir(dst)  # ferry creates DST itself; tar needs it to exist
                    cmd = unpack_cmd(tool, arch[tool], dst, args)
                    if cache == "warm":
                        read_file(arch[tool])
                if not timed_run:
                    B.run_measured(cmd, timeout=args.timeout)
                    return None
                run = timed(cmd, cache, args)
                problems = []
                if run["rc"] != 0:
                    problems.append(f"exit {run['rc']}: {run['stderr'].strip()[:300]}")
                if tool.startswith("ferry"):
                    s = ferry_summary(run)
                    run["ferry_summary"] = s
                    if s is None:
                        problems.append("no JSON summary on stdout")
                    elif s.get("errors"):
                        problems.append(f"ferry reported {s['errors']} errors")
                if op == "pack":
                    # (ferry's summary counts a hardlinked file's bytes once, tree_stats per name:
                    # the counts are checked after unpack, on the tree itself)
                    run["archive_bytes"] = os.path.getsize(arch[tool]) if os.path.exists(arch[tool]) else None
                else:
                    # the correctness guard: the unpacked tree against the source
                    try:
                        got = B.tree_stats(dst)
                        problems += [f"{k} {got[k]} != {want[k]}" for k in want if got[k] != want[k]]
                    except OSError as e:
                        problems.append(f"cannot walk DST: {e}")
                    B.rmtree(dst)
                run["problem"] = "; ".join(problems) or None
                run["stdout"] = run["stdout"][-2000:]
                run["stderr"] = run["stderr"][-2000:]
                return run

            if cache == "warm" and args.warmup != "none":
                # untimed: the first run on a fresh filesystem pays for things later runs
                # do not (first use of allocation groups, the log)
                for tool in args.tools[:1 if args.warmup == "first" else None]:
                    one(tool, timed_run=False)
                    if op == "unpack":
                        B.rmtree(dst)
            for rep in range(args.reps):
                for tool in args.tools:
                    run = one(tool)
                    rows[tool]["runs"].append(run)
                    s = run.get("ferry_summary") or {}
                    B.log(f"{label}/{cache}/{op} rep {rep + 1}/{args.reps} {tool}: {run['seconds']:.3f} s, "
                          f"sync {run['sync_seconds']:.2f} s, {(run['maxrss_kib'] or 0) / 1024:.1f} MiB"
                          + (f", cloned {s.get('cloned')} kcopied {s.get('kernel_copied')} buffered {s.get('buffered')}"
                             if s else "")
                          + (f"  PROBLEM: {run['problem']}" if run["problem"] else ""))
                    if run["problem"] and tool.startswith("ferry"):
                        msg = f"FERRY CORRECTNESS FAILURE on {label}/{cache}/{op}: {run['problem']}"
                        print("\n" + "!" * 78 + "\n" + msg + "\n" + "!" * 78, file=sys.stderr, flush=True)
                        results["failures"].append(msg)
                        if not args.keep_going:
                            entries.append(make_entry(cache, op, rows, want))
                            raise FerryFailure(msg)
            entries.append(make_entry(cache, op, rows, want))
            B.write_json(out_path, results)
    B.rmtree(dst)


def make_entry(cache, op, rows, want):
    C.finish_rows(rows)
    base = rows.get("ferry", {}).get("median_seconds")
    for r in rows.values():
        m = r.get("median_seconds")
        r["ratio_vs_ferry"] = (m / base) if (m and base) else None
        sums = [x["ferry_summary"] for x in r["runs"] if x.get("ferry_summary")]
        for k in ("cloned", "kernel_copied", "buffered"):
            r[f"median_{k}"] = B.median([s.get(k) for s in sums]) if sums else None
        r["median_ferry_seconds"] = B.median([s.get("seconds") for s in sums]) if sums else None
        r["archive_bytes"] = B.median([x.get("archive_bytes") for x in r["runs"]]) if op == "pack" else None
    return {"cache": cache, "op": op, "tools": list(rows.values())}


# ---------------------------------------------------------------- ls / cat

def lscat(ctx, src, want, args, label):
    """`ferry ls` / `ferry cat` of one member of the ferry archive, in ms, beside tar -tf /
    tar -xOf and bsdtar on the same archive, and GNU tar on its own archive."""
    mnt = ctx.mnt
    fa = os.path.join(mnt, "archive.ferry.tar")
    ta = os.path.join(mnt, "archive.tar.tar")
    names = B.sh(args.ferry, "ls", fa, capture=True).stdout.splitlines()
    files = [n for n in names if not n.endswith("/")]
    member = files[-1]  # the last member in archive order: the worst case for a scanner
    msize = os.path.getsize(os.path.join(src, member))
    got = B.sh("sh", "-c", '"$1" cat "$2" "$3" | wc -c', "sh", args.ferry, fa, member, capture=True).stdout.strip()
    notes = []
    if int(got or -1) != msize:
        notes.append(f"ferry cat {member}: {got} bytes, want {msize}")
    tnames = B.sh("tar", "-tf", fa, capture=True).stdout.splitlines()
    if set(tnames) != set(names):
        notes.append(f"ferry ls and tar -tf disagree: {len(names)} vs {len(tnames)} names")
    tools = [("floor", "ls", ["/bin/true"]), ("floor", "cat", ["/bin/true"]),
             ("ferry", "ls", [args.ferry, "ls", fa]), ("ferry", "cat", [args.ferry, "cat", fa, member]),
             ("tar", "ls", ["tar", "-tf", fa]), ("tar", "cat", ["tar", "-xOf", fa, member]),
             ("bsdtar", "ls", ["bsdtar", "-tf", fa]), ("bsdtar", "cat", ["bsdtar", "-xOf", fa, member])]
    if os.path.exists(ta):  # GNU tar on the archive GNU tar made (members named ./NAME)
        tools += [("tar (own archive)", "ls", ["tar", "-tf", ta]),
                  ("tar (own archive)", "cat", ["tar", "-xOf", ta, "./" + member])]
    rows = []
    for cache in args.cache:
        if cache == "warm":
            for _tool, _op, cmd in tools:  # untimed: archives and binaries in the page cache
                B.run_measured(cmd, timeout=args.timeout, stdout_path=os.devnull)
        for tool, op, cmd in tools:
            runs = []
            for _ in range(args.lscat_reps):
                r = timed(cmd, cache, args, stdout_path=os.devnull)
                r["stderr"] = r["stderr"][-500:]
                runs.append(r)
            ok = [r for r in runs if r["rc"] == 0]
            row = {"tool": tool, "op": op, "cache": cache, "cmd": " ".join(cmd), "runs": runs,
                   "median_ms": (B.median([r["seconds"] for r in ok]) or 0) * 1000 if ok else None,
                   "min_ms": min(r["seconds"] for r in ok) * 1000 if ok else None,
                   "max_ms": max(r["seconds"] for r in ok) * 1000 if ok else None,
                   "max_rss_mib": max((r["maxrss_kib"] or 0) for r in runs) / 1024,
                   "failed_runs": len(runs) - len(ok),
                   "noisy_runs": sum(1 for r in runs if r.get("was_quiet") is False)}
            if row["failed_runs"]:
                notes.append(f"{tool} {op} {cache}: {row['failed_runs']} run(s) failed: {runs[0]['stderr'][:200]}")
            B.log(f"{label}/{cache} {tool} {op}: {fmt_ms(row['median_ms'])} ms")
            rows.append(row)
    return {"archive": "ferry's (tar (own archive): GNU tar's)", "member": member, "member_bytes": msize,
            "entries": len(names), "rows": rows, "notes": notes}


def fmt_ms(x):
    return "-" if x is None else (f"{x:.1f}" if x < 100 else f"{x:,.0f}")


# ---------------------------------------------------------------- tables

F = C.fmt


def print_avatar_tables(av, args):
    """One table per (group, op, cache): a row per set, tools side by side."""
    tools = args.tools
    for group, title in (("size", f"{args.count:,} files of each size"),
                         ("split", f"{human(args.split_total)} split into N files")):
        sets = sorted((s for s in av["sets"] if group in s["groups"] and s.get("entries")),
                      key=lambda s: s["size"] if group == "size" else s["count"])
        if not sets:
            continue
        for op in ("pack", "unpack"):
            for cache in args.cache:
                cols = ["set"] + [f"{t} s" for t in tools] + ["ferry min-max"] + \
                       [f"{t}/ferry" for t in tools if t != "ferry"] + \
                       [f"{t} RSS" for t in tools] + ["ferry cloned", "ferry kcopy", "ferry buf", "ferry sync s"]
                lines = []
                notes = []
                for s in sets:
                    e = next((e for e in s["entries"] if e["op"] == op and e["cache"] == cache), None)
                    if e is None:
                        continue
                    r = {x["tool"]: x for x in e["tools"]}
                    fr = r.get("ferry", {})
                    line = [s["name"]] + [F(r[t]["median_seconds"], ".3f", "FAIL") for t in tools] + \
                           [f"{fr['min_seconds']:.3f}-{fr['max_seconds']:.3f}" if fr.get("median_seconds") else "-"] + \
                           [F(r[t]["ratio_vs_ferry"], ".1f") for t in tools if t != "ferry"] + \
                           [f"{r[t]['max_rss_mib']:.1f}" for t in tools] + \
                           [F(fr.get("median_cloned"), ".0f"), F(fr.get("median_kernel_copied"), ".0f"),
                            F(fr.get("median_buffered"), ".0f"), F(fr.get("median_sync_seconds"), ".2f")]
                    lines.append(line)
                    for t in tools:
                        for p in r[t]["problems"]:
                            notes.append(f"{s['name']}: {t}: {p}")
                        if r[t].get("noisy_runs"):
                            notes.append(f"{s['name']}: {t}: {r[t]['noisy_runs']} run(s) started while the machine was busy")
                print(f"\n== AvaTar on XFS: {title}: {op}, {cache} cache, median of {args.reps} ==")
                print("\n".join(B.format_table(cols, lines)))
                for n in notes:
                    print("   note:", n)
                print("   s: wall seconds (median); RSS: peak MiB (max over runs); t/ferry: ratio of medians "
                      "(>1: ferry faster); cloned/kcopy/buf: ferry's files by data path; sync s: the sync after ferry")
    for s in av["sets"]:
        lc = s.get("lscat")
        if not lc:
            continue
        ltools = []
        for row in lc["rows"]:
            if row["tool"] not in ltools:
                ltools.append(row["tool"])
        cols = ["op"] + [f"{t} {c} ms" for t in ltools for c in args.cache]
        lines = []
        for op in ("ls", "cat"):
            line = [op]
            for t in ltools:
                for c in args.cache:
                    row = next((x for x in lc["rows"] if x["tool"] == t and x["op"] == op and x["cache"] == c), None)
                    line.append(fmt_ms(row and row["median_ms"]))
            lines.append(line)
        print(f"\n== ls / cat on the {s['name']} archive ({human(s['count'] * s['size'])}, {lc['entries']:,} entries): "
              f"median of {args.lscat_reps}, ms ==\n   member: {lc['member']} ({lc['member_bytes']:,} bytes), the last "
              f"in archive order; ferry, tar, bsdtar read ferry's archive; 'tar (own archive)' GNU tar's")
        print("\n".join(B.format_table(cols, lines)))
        for n in lc["notes"]:
            print("   note:", n)
        print("   ls: ferry ls / tar -tf / bsdtar -tf; cat: ferry cat / tar -xOf / bsdtar -xOf, stdout to /dev/null; "
              "floor: /bin/true through the same harness")


def print_kernel_table(k, args, title="kernel source"):
    src = k["source"]
    for cache in args.cache:
        cols = ["op", "tool", "seconds", "min-max", "cpu s", "sync s", "RSS MiB", "vs ferry", "other cpu",
                "archive MB", "cloned", "kcopy", "buf"]
        lines, notes = [], []
        for op in ("pack", "unpack"):
            e = next((e for e in k["entries"] if e["op"] == op and e["cache"] == cache), None)
            if e is None:
                continue
            for r in e["tools"]:
                m = r["median_seconds"]
                lines.append([op, r["tool"], F(m, ".2f", "FAIL"),
                              f"{r['min_seconds']:.2f}-{r['max_seconds']:.2f}" if m is not None else "-",
                              F(r["median_cpu"], ".2f"), F(r["median_sync_seconds"], ".2f"), f"{r['max_rss_mib']:.1f}",
                              F(r["ratio_vs_ferry"], ".2f"), F(r["median_other_cpu"], ".2f"),
                              F(r["archive_bytes"] and r["archive_bytes"] / 1e6, ",.0f"),
                              F(r["median_cloned"], ".0f"), F(r["median_kernel_copied"], ".0f"),
                              F(r["median_buffered"], ".0f")])
                for p in r["problems"]:
                    notes.append(f"{op} {r['tool']}: {p}")
                if r.get("noisy_runs"):
                    notes.append(f"{op} {r['tool']}: {r['noisy_runs']} run(s) started while the machine was busy")
        print(f"\n== {title} on {k['fs']}, {cache} cache, median of {args.reps} == {src['files']:,} files, "
              f"{src['dirs']:,} dirs, {src['symlinks']:,} symlinks, {src['bytes'] / 1e6:,.1f} MB")
        print("\n".join(B.format_table(cols, lines, left=2)))
        for n in notes:
            print("   note:", n)
        print("   vs ferry: tool seconds / ferry seconds (>1: ferry faster); cpu s: user+sys; sync s: the sync "
              "after the run (not in seconds); other cpu: CPU seconds the rest of the machine used meanwhile")


# ---------------------------------------------------------------- targets

def med(entries, op, cache, tool):
    e = next((e for e in entries if e["op"] == op and e["cache"] == cache), None)
    r = next((r for r in (e or {}).get("tools", []) if r["tool"] == tool), None)
    return r and r.get("median_seconds")


def targets(results, args):
    out = []

    def add(name, value, goal, met, detail):
        out.append({"target": name, "value": value, "goal": goal, "met": met, "detail": detail})

    av = results.get("avatar")
    if av:
        big = next((s for s in av["sets"] if s["count"] == 1024 and s["size"] == 4 * MiB and s.get("entries")), None)
        if big:
            for cache in args.cache:
                f = med(big["entries"], "unpack", cache, "ferry")
                t = med(big["entries"], "unpack", cache, "tar")
                add(f"avatar unpack 1,024 x 4 MiB < 0.1 s ({cache})", f, 0.1, f is not None and f < 0.1,
                    f"ferry {F(f, '.3f')} s")
                ratio = t / f if (t and f) else None
                add(f"avatar unpack 1,024 x 4 MiB >= 50x GNU tar ({cache})", ratio, 50,
                    ratio is not None and ratio >= 50, f"tar {F(t, '.3f')} s / ferry {F(f, '.3f')} s = {F(ratio, '.1f')}x")
        rss = [(s["name"], e["op"], e["cache"], r["max_rss_mib"]) for s in av["sets"] for e in s.get("entries", [])
               for r in e["tools"] if r["tool"] == "ferry"]
        for op in ("unpack", "pack"):
            xs = [x for x in rss if x[1] == op]
            if xs:
                worst = max(xs, key=lambda x: x[3])
                add(f"avatar ferry {op} peak RSS < 32 MiB, every set", worst[3], 32, worst[3] < 32,
                    f"max {worst[3]:.1f} MiB on {worst[0]} ({worst[2]})")
        for s in av["sets"]:
            lc = s.get("lscat")
            if not lc:
                continue
            for op in ("ls", "cat"):
                for cache in args.cache:
                    row = next((x for x in lc["rows"] if x["tool"] == "ferry" and x["op"] == op and x["cache"] == cache), None)
                    if row and row["median_ms"] is not None and s["count"] * s["size"] >= GiB:
                        add(f"ferry {op} on the {s['name']} archive in ms (< 100 ms) ({cache})", row["median_ms"], 100,
                            row["median_ms"] < 100, f"{fmt_ms(row['median_ms'])} ms")
    for k in results.get("kernel", []):
        for cache in args.cache:
            f = med(k["entries"], "pack", cache, "ferry")
            t = med(k["entries"], "pack", cache, "tar")
            b = med(k["entries"], "pack", cache, "bsdtar")
            fu = med(k["entries"], "unpack", cache, "ferry")
            tu = med(k["entries"], "unpack", cache, "tar")
            if k["fs"] == "ext4":
                best = min(x for x in (t, b) if x) if (t or b) else None
                r = best / f if (best and f) else None
                add(f"kernel ext4 pack >= 1.3x the faster of tar/bsdtar ({cache})", r, 1.3, r is not None and r >= 1.3,
                    f"tar {F(t, '.2f')} s, bsdtar {F(b, '.2f')} s, ferry {F(f, '.2f')} s: {F(r, '.2f')}x")
                r = tu / fu if (tu and fu) else None
                add(f"kernel ext4 unpack >= 2.5x GNU tar ({cache})", r, 2.5, r is not None and r >= 2.5,
                    f"tar {F(tu, '.2f')} s, ferry {F(fu, '.2f')} s: {F(r, '.2f')}x")
            if k["fs"] == "xfs":
                r = t / f if (t and f) else None
                add(f"kernel xfs pack >= 3x GNU tar ({cache})", r, 3, r is not None and r >= 3,
                    f"tar {F(t, '.2f')} s, ferry {F(f, '.2f')} s: {F(r, '.2f')}x")
    return out


def print_targets(ts):
    if not ts:
        return
    print("\n== targets (issue 3) ==")
    lines = [[t["target"], "met" if t["met"] else "NOT MET", t["detail"]] for t in ts]
    print("\n".join(B.format_table(["target", "", "measured"], lines, left=3)))


# ---------------------------------------------------------------- experiments

def fstrim(mnt):
    """Give freed blocks back to the sparse image (loop punches holes), so a long run does
    not grow it to the sum of every set."""
    B.sh("fstrim", mnt, check=False, capture=True)


def run_avatar(args, results, out_path):
    sets = avatar_sets(args)
    biggest = max(s["count"] * s["size"] for s in sets)
    size = args.image_size or f"{max(8, -(-(biggest * (len(args.tools) + 2) + 2 * GiB) // GiB))}G"
    av = results["avatar"] = {"fs": "xfs", "mkfs": "mkfs.xfs -m reflink=1", "image_size": size,
                              "sets": [dict(s, entries=[]) for s in sets]}
    try:
        avatar_sets_on_xfs(av, size, args, results, out_path)
    finally:
        print_avatar_tables(av, args)


def avatar_sets_on_xfs(av, size, args, results, out_path):
    with B.LoopFs("xfs", args.scratch, "archive-avatar", size=size, direct_io=not args.no_direct_io,
                  mkfs_args=("-m", "reflink=1")) as lfs:
        av["loop"] = lfs.info
        av["xfs_info"] = B.sh("xfs_info", lfs.mnt, capture=True, check=False).stdout
        for s in av["sets"]:
            src = os.path.join(lfs.mnt, "src")
            B.rmtree(src)
            t0 = time.perf_counter()
            s["generator"] = make_avatar(src, s["count"], s["size"])
            B.sync()
            want = s["source"] = B.tree_stats(src)
            B.log(f"avatar {s['name']}: {want} (made in {time.perf_counter() - t0:.1f} s)")
            series(lfs, src, want, args, results, out_path, f"avatar {s['name']}", s["entries"])
            if "split" in s["groups"] and not args.no_lscat:
                s["lscat"] = lscat(lfs, src, want, args, f"ls/cat {s['name']}")
            B.write_json(out_path, results)
            for t in args.tools:
                p = os.path.join(lfs.mnt, f"archive.{t}.tar")
                if os.path.exists(p):
                    os.unlink(p)
            B.rmtree(src)
            B.sync()
            fstrim(lfs.mnt)


def kernel_tar(args, results, experiment):
    """The kernel tarball to extract; None (noted as skipped for `experiment`) when there is none."""
    tar = args.kernel_tarball or C.kernel_tarball(args.kernel_cache)
    if tar is None:
        results["skipped"].append(f"{experiment}: no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
        B.log(results["skipped"][-1])
    return tar


def extract_source(lfs, tar):
    """Extracts `tar` into MNT/src of the fresh filesystem `lfs`; returns that path, its tree_stats
    and the seconds extracting took."""
    src = os.path.join(lfs.mnt, "src")
    os.makedirs(src)
    t0 = time.perf_counter()
    B.sh("tar", "-C", src, "-xf", tar)
    B.sync()
    return src, B.tree_stats(src), time.perf_counter() - t0


def run_kernel(args, results, out_path):
    tar = kernel_tar(args, results, "kernel")
    if tar is None:
        return
    for fs in args.fs:
        k = {"fs": fs, "tarball": tar, "entries": []}
        results["kernel"].append(k)
        mkfs = ("-m", "reflink=1") if fs == "xfs" else ()
        with B.LoopFs(fs, args.scratch, f"archive-kernel-{fs}", size=args.kernel_image_size,
                      direct_io=not args.no_direct_io, mkfs_args=mkfs) as lfs:
            k["loop"] = lfs.info
            src, want, took = extract_source(lfs, tar)
            k["source"] = want
            B.log(f"kernel/{fs}: {want} (extracted in {took:.1f} s)")
            try:
                series(lfs, src, want, args, results, out_path, f"kernel/{fs}", k["entries"])
            finally:
                B.write_json(out_path, results)
                print_kernel_table(k, args)


def run_compressed(args, results, out_path):
    tar = kernel_tar(args, results, "compressed")
    if tar is None:
        return
    for fs in args.fs:
        with B.LoopFs(fs, args.scratch, f"archive-compressed-{fs}", size=args.kernel_image_size,
                      direct_io=not args.no_direct_io) as lfs:
            src, want, _ = extract_source(lfs, tar)
            for name in args.compressions:
                suffix, compress = COMPRESSIONS[name]
                archive = os.path.join(lfs.mnt, f"kernel.tar.{suffix}")
                t0 = time.perf_counter()
                B.sh("sh", "-c", f'tar -C "$1" -cf - . | {compress} > "$2"', "sh", src, archive)
                k = {"fs": fs, "compression": name, "compress_cmd": compress, "source": want, "entries": [],
                     "archive_bytes": os.path.getsize(archive)}
                results["compressed"].append(k)
                B.log(f"compressed/{fs}/{name}: {k['archive_bytes'] / 1e6:,.0f} MB "
                      f"(made in {time.perf_counter() - t0:.1f} s)")
                try:
                    series(lfs, src, want, args, results, out_path, f"compressed/{fs}/{name}", k["entries"],
                           archive=archive)
                finally:
                    B.write_json(out_path, results)
                    print_kernel_table(k, args, f"kernel tree as tar | {compress} ({k['archive_bytes'] / 1e6:,.0f} MB)")
                os.unlink(archive)


# bash -c SCRIPT bash FERRY SRC DST
STREAM_PIPES = {
    "copy": '"$1" copy "$2" "$3"',
    "pack|unpack": 'set -o pipefail; "$1" pack "$2" - | "$1" unpack - "$3"',
    "tar|tar": 'set -o pipefail; mkdir "$3" && tar -C "$2" -cf - . | tar -C "$3" -xf -',
}


def run_stream(args, results, out_path):
    """`ferry pack - | ferry unpack -` beside `ferry copy` and tar | tar (see the doc)."""
    tar = kernel_tar(args, results, "stream")
    if tar is None:
        return
    ferries = [("ferry", args.ferry)] + [(f"ferry@{os.path.basename(b)}", b) for b in args.stream_ferry]
    runs = [(f"{name} {op}" if op != "tar|tar" else op, ferry, op)
            for op in ("copy", "pack|unpack") for name, ferry in ferries] + [("tar|tar", args.ferry, "tar|tar")]
    for fs in args.fs:
        with B.LoopFs(fs, args.scratch, f"archive-stream-{fs}", size=args.kernel_image_size,
                      direct_io=not args.no_direct_io) as lfs:
            src, want, _ = extract_source(lfs, tar)
            dst = os.path.join(lfs.mnt, "dst")
            k = {"fs": fs, "source": want, "rows": {}, "uptime": []}
            results["stream"].append(k)

            def one(label, ferry, op, timed_run=True):
                B.rmtree(dst)
                C.warm_source(src)
                cmd = ["bash", "-c", STREAM_PIPES[op], "bash", ferry, src, dst]
                if not timed_run:
                    B.run_measured(cmd, timeout=args.timeout)
                    return None
                k["uptime"].append(B.sh("uptime", capture=True).stdout.strip())
                run = timed(cmd, "warm", args)
                problems = [f"exit {run['rc']}: {run['stderr'].strip()[:300]}"] if run["rc"] else []
                try:
                    got = B.tree_stats(dst)
                    problems += [f"{x} {got[x]} != {want[x]}" for x in want if got[x] != want[x]]
                except OSError as e:
                    problems.append(f"cannot walk DST: {e}")
                run["problem"] = "; ".join(problems) or None
                run["stdout"], run["stderr"] = run["stdout"][-2000:], run["stderr"][-2000:]
                return run

            one(*runs[0], timed_run=False)
            rows = {label: {"tool": label, "cmd": STREAM_PIPES[op], "runs": []} for label, _, op in runs}
            for rep in range(args.reps):
                for label, ferry, op in runs:
                    run = one(label, ferry, op)
                    rows[label]["runs"].append(run)
                    B.log(f"stream/{fs} rep {rep + 1}/{args.reps} {label}: {run['seconds']:.2f} s, cpu "
                          f"{(run['user'] or 0) + (run['sys'] or 0):.2f} s"
                          + (f"  PROBLEM: {run['problem']}" if run["problem"] else ""))
                    if run["problem"] and label.startswith("ferry"):
                        results["failures"].append(f"stream/{fs} {label}: {run['problem']}")
            B.rmtree(dst)
            C.finish_rows(rows)
            k["rows"] = rows
            B.write_json(out_path, results)
            base = rows[runs[0][0]]["median_seconds"]
            lines = [[r["tool"], F(r["median_seconds"], ".2f", "FAIL"),
                      F(r["min_seconds"], ".2f") + "-" + F(r["max_seconds"], ".2f"), F(r["median_cpu"], ".2f"),
                      F(r["median_sync_seconds"], ".2f"), f"{r['max_rss_mib']:.1f}",
                      F(r["median_seconds"] and base and r["median_seconds"] / base, ".2f"),
                      F(r["median_other_cpu"], ".2f")] for r in rows.values()]
            print(f"\n== kernel tree through a pipe on {fs}, warm cache, median of {args.reps} == "
                  f"{want['files']:,} files, {want['dirs']:,} dirs, {want['symlinks']:,} symlinks, "
                  f"{want['bytes'] / 1e6:,.1f} MB")
            cols = ["run", "seconds", "min-max", "cpu s", "sync s", "RSS MiB", "vs copy", "other cpu"]
            print("\n".join(B.format_table(cols, lines, left=1)))
            for r in rows.values():
                for p in r["problems"]:
                    print(f"   note: {r['tool']}: {p}")
            print(f"   vs copy: seconds / {runs[0][0]} seconds; load before the runs: {k['uptime'][0]}")


def plot(out_path, args):
    return B.plot(os.path.join(B.HERE, "plot_archive.py"), out_path, args.plot_python, args.plot_dir)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csv = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    sizes = lambda s: [parse_size(x) for x in csv(s)]  # noqa: E731
    ap.add_argument("-e", "--experiments", type=csv, default=EXPERIMENTS[:3],
                    help=f"comma list of {','.join(EXPERIMENTS)}")
    ap.add_argument("--compressions", type=csv, default=["gzip", "zstd"],
                    help=f"for the compressed experiment: comma list of {','.join(COMPRESSIONS)}")
    ap.add_argument("-f", "--fs", type=csv, default=["ext4", "xfs"],
                    help="filesystems for the kernel and compressed experiments")
    ap.add_argument("-c", "--cache", type=csv, default=["warm", "cold"], help="comma list of warm,cold")
    ap.add_argument("-r", "--reps", type=int, default=3, help="timed runs per tool and op (median reported)")
    ap.add_argument("-t", "--tools", type=csv, default=TOOLS,
                    help=f"comma list of {','.join(TOOLS + OPTIONAL_TOOLS)} (ferry first: the ratios are against it)")
    ap.add_argument("--count", type=int, default=1024, help="files per set in the size sets")
    ap.add_argument("--sizes", type=sizes, default=sizes("64K,256K,1M,4M"), help="file sizes of the size sets")
    ap.add_argument("--split-total", type=parse_size, default=GiB, help="total of the split sets")
    ap.add_argument("--splits", type=lambda s: [int(x) for x in csv(s)], default=[64, 256, 1024, 4096],
                    help="file counts of the split sets")
    ap.add_argument("--no-lscat", action="store_true", help="skip ls/cat on the split sets")
    ap.add_argument("--lscat-reps", type=int, default=5)
    ap.add_argument("--stream-ferry", action="append", default=[],
                    help="stream experiment: another ferry binary to run beside --ferry (e.g. a build from before)")
    ap.add_argument("--pack-jobs", type=int, help="ferry pack -j (default: ferry's own)")
    ap.add_argument("--unpack-jobs", type=int, help="ferry unpack -j (default: ferry's own)")
    ap.add_argument("--ferry-arg", action="append", default=[], help="extra argument for ferry pack and unpack")
    ap.add_argument("--pack-arg", action="append", default=[],
                    help="extra argument for ferry pack and GNU tar -c (bsdtar is left as it is), "
                         "e.g. --pack-arg=--sort=name")
    ap.add_argument("--ferry", default=B.default_ferry(), help="ferry binary (default target/release/ferry)")
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-archive",
                    help="where the images go (apart from copy_bench's, so its --cleanup leaves ours alone)")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH,
                    help="where the decompressed kernel tarball is kept (shared with copy_bench: CACHE/cache)")
    ap.add_argument("--kernel-tarball", help="extract this (uncompressed) tar instead of the kernel's "
                    "(e.g. a small one for a smoke test)")
    ap.add_argument("--image-size", help="avatar image size (default: room for the biggest set, all archives "
                    "and a destination)")
    ap.add_argument("--kernel-image-size", default="16G")
    ap.add_argument("--no-direct-io", action="store_true", help="loop devices without direct I/O")
    ap.add_argument("--warmup", choices=["first", "all", "none"], default="first",
                    help="warm cache: one untimed run of the first tool before each series (default), every tool, none")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--quiet-wait", type=float, default=60, help="before each timed run, wait up to this many "
                    "seconds for the rest of the machine to be idle (0: do not wait)")
    ap.add_argument("--keep-going", action="store_true", help="do not stop at a ferry correctness failure")
    ap.add_argument("--out", help="JSON path (default bench/results/archive-<timestamp>.json)")
    ap.add_argument("--plot-dir", default=os.path.join(B.ROOT, "docs", "img"), help="where archive-*.png go")
    ap.add_argument("--plot-python", default="/usr/bin/python3", help="a python with matplotlib ('' = no plots)")
    ap.add_argument("--cleanup", action="store_true", help="unmount and detach leftovers under --scratch, then exit")
    args = ap.parse_args()
    B.start(args)
    for e in args.experiments:
        if e not in EXPERIMENTS:
            ap.error(f"unknown experiment {e}")
    for c in args.compressions:
        if c not in COMPRESSIONS:
            ap.error(f"unknown compression {c}")
        if "compressed" in args.experiments and not shutil.which(COMPRESSIONS[c][1].split()[0]):
            ap.error(f"{c} is not installed (bench/setup.sh)")
    for t in args.tools:
        if t not in TOOLS + OPTIONAL_TOOLS:
            ap.error(f"unknown tool {t}")
        if not t.startswith("ferry") and not shutil.which(t):
            ap.error(f"{t} is not installed (bench/setup.sh)")
    if "ferry" not in args.tools:
        ap.error("the tools must include ferry (the ratios are against it)")
    if not os.access(args.ferry, os.X_OK):
        sys.exit(f"no ferry binary at {args.ferry}: cargo build --release")
    built = args.ferry
    args.ferry = B.snapshot_binary(built, os.path.join(B.HERE, ".build", "bin"))
    B.log(f"measuring {built} as its snapshot {args.ferry}")
    out_path = args.out or os.path.join(B.RESULTS, f"archive-{B.timestamp()}.json")
    versions = {t: B.sh(t, "--version", capture=True, check=False).stdout.splitlines()[0]
                for t in args.tools if not t.startswith("ferry")}
    results = {"kind": "archive_bench", "started": B.timestamp(), "argv": sys.argv, "machine": B.machine_info(),
               "ferry": dict(B.ferry_identity(built), snapshot=args.ferry), "peers": versions,
               "tools": args.tools, "reps": args.reps, "lscat_reps": args.lscat_reps, "cache": args.cache,
               "kernel": [], "compressed": [], "stream": [], "failures": [], "skipped": []}
    B.log(f"results -> {out_path}")
    status = 0
    try:
        if "avatar" in args.experiments:
            run_avatar(args, results, out_path)
        if "kernel" in args.experiments:
            run_kernel(args, results, out_path)
        if "compressed" in args.experiments:
            run_compressed(args, results, out_path)
        if "stream" in args.experiments:
            run_stream(args, results, out_path)
    except FerryFailure as e:
        status = str(e)
    results["targets"] = targets(results, args)
    results["finished"] = B.timestamp()
    B.write_json(out_path, results)
    print_targets(results["targets"])
    print(f"\nresults: {out_path}")
    if args.plot_dir and args.plot_python:
        for p in plot(out_path, args):
            print(f"plot: {p}")
    if results["failures"]:
        sys.exit("FERRY CORRECTNESS FAILURES:\n" + "\n".join(results["failures"]))
    if status:
        sys.exit(status)


if __name__ == "__main__":
    main()
