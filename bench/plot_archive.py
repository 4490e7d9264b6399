#!/usr/bin/env python3
"""Plots of an archive_bench.py result, shaped like the AvaTar paper's figures: median
seconds (log scale) against the number of files for the split sets (a fixed total split
into N files) and against the file size for the fixed-count sets, ferry vs GNU tar vs
bsdtar, one panel per (pack/unpack, warm/cold); and bars for the kernel tree. Needs
matplotlib (Debian's python3-matplotlib: run it with /usr/bin/python3).

    /usr/bin/python3 bench/plot_archive.py bench/results/archive-*.json -o docs/img

Writes OUTDIR/archive-files.png, archive-size.png, archive-kernel.png (those it has data
for) and prints their paths.
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

STYLE = {"ferry": dict(color="tab:orange", marker="o", lw=2.2),
         "ferry-noreflink": dict(color="tab:red", marker="v", ls="--"),
         "tar": dict(color="tab:blue", marker="s"),
         "bsdtar": dict(color="tab:green", marker="^")}


def size_label(n):
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m:
            return f"{n / m:g} {unit}"
    return f"{n} B"


def series_of(sets, group, xkey, op, cache):
    """{tool: [(x, median seconds)]} for the sets of one group."""
    out = {}
    for s in sets:
        if group not in s["groups"]:
            continue
        e = next((e for e in s.get("entries", []) if e["op"] == op and e["cache"] == cache), None)
        for r in (e or {}).get("tools", []):
            if r.get("median_seconds"):
                out.setdefault(r["tool"], []).append((s[xkey], r["median_seconds"], r.get("min_seconds"),
                                                      r.get("max_seconds")))
    return {t: sorted(v) for t, v in out.items()}


def line_figure(d, group, xkey, xlabel, title, path):
    sets = d["avatar"]["sets"]
    caches = d.get("cache", ["warm", "cold"])
    ops = ["pack", "unpack"]
    fig, axes = plt.subplots(len(caches), len(ops), figsize=(5.4 * len(ops), 3.9 * len(caches)), squeeze=False)
    any_data = False
    for i, cache in enumerate(caches):
        for j, op in enumerate(ops):
            ax = axes[i][j]
            ser = series_of(sets, group, xkey, op, cache)
            xs_all = set()
            for tool, pts in ser.items():
                any_data = True
                xs = [p[0] for p in pts]
                ys = [p[1] for p in pts]
                xs_all.update(xs)
                lo = [p[1] - (p[2] or p[1]) for p in pts]
                hi = [(p[3] or p[1]) - p[1] for p in pts]
                ax.errorbar(xs, ys, yerr=[lo, hi], label=tool, capsize=2, **STYLE.get(tool, {}))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            xs_sorted = sorted(xs_all)
            ax.set_xticks(xs_sorted)
            ax.set_xticklabels([size_label(x) if xkey == "size" else f"{x:,}" for x in xs_sorted], fontsize=8)
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_title(f"{op}, {cache} cache", fontsize=10)
            ax.set_xlabel(xlabel, fontsize=9)
            ax.set_ylabel("seconds (median, log)", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            ax.tick_params(labelsize=8)
            ax.legend(fontsize=8)
    if not any_data:
        plt.close(fig)
        return None
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def kernel_figure(d, path):
    ks = [k for k in d.get("kernel", []) if k.get("entries")]
    if not ks:
        return None
    caches = d.get("cache", ["warm", "cold"])
    fig, axes = plt.subplots(1, len(ks), figsize=(5.6 * len(ks), 3.8), squeeze=False)
    for ax, k in zip(axes[0], ks):
        groups = [(op, c) for c in caches for op in ("pack", "unpack")]
        tools = []
        for e in k["entries"]:
            for r in e["tools"]:
                if r["tool"] not in tools:
                    tools.append(r["tool"])
        width = 0.8 / max(1, len(tools))
        for ti, tool in enumerate(tools):
            ys = []
            for op, c in groups:
                e = next((e for e in k["entries"] if e["op"] == op and e["cache"] == c), None)
                r = next((r for r in (e or {}).get("tools", []) if r["tool"] == tool), None)
                ys.append((r or {}).get("median_seconds") or 0)
            xs = [g + (ti - (len(tools) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(xs, ys, width, label=tool, color=STYLE.get(tool, {}).get("color"))
            for x, y in zip(xs, ys):
                if y:
                    ax.text(x, y, f"{y:.2f}" if y < 10 else f"{y:.0f}", ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{op}\n{c}" for op, c in groups], fontsize=8)
        ax.set_ylabel("seconds (median)", fontsize=9)
        src = k.get("source", {})
        ax.set_title(f"Linux source on {k['fs']} ({src.get('files', 0):,} files, {src.get('bytes', 0) / 1e9:.2f} GB)",
                     fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", help="an archive_bench JSON file")
    ap.add_argument("-o", "--outdir", default="docs/img")
    args = ap.parse_args()
    with open(args.result) as f:
        d = json.load(f)
    os.makedirs(args.outdir, exist_ok=True)
    made = []
    if d.get("avatar"):
        sets = d["avatar"]["sets"]
        split = [s for s in sets if "split" in s["groups"]]
        if split:
            total = split[0]["count"] * split[0]["size"]
            made.append(line_figure(d, "split", "count", "number of files",
                                    f"{size_label(total)} split into N files, XFS (reflink)",
                                    os.path.join(args.outdir, "archive-files.png")))
        size = [s for s in sets if "size" in s["groups"]]
        if size:
            made.append(line_figure(d, "size", "size", "file size",
                                    f"{size[0]['count']:,} files of each size, XFS (reflink)",
                                    os.path.join(args.outdir, "archive-size.png")))
    made.append(kernel_figure(d, os.path.join(args.outdir, "archive-kernel.png")))
    for p in made:
        if p:
            print(p)


if __name__ == "__main__":
    main()
