#!/usr/bin/env python3
"""Bar charts of a copy_bench.py result: one panel per (workload, filesystem, cache),
median seconds per tool, ferry highlighted. Needs matplotlib (bench/setup.sh installs
Debian's python3-matplotlib, so run it with /usr/bin/python3 if your python3 lacks it).

    /usr/bin/python3 bench/plot.py bench/results/copy-*.json -o docs/benchmarks.png
"""
import argparse
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="copy_bench JSON files (panels from all of them)")
    ap.add_argument("-o", "--out", default="benchmarks.png")
    args = ap.parse_args()
    panels = []
    for path in args.results:
        with open(path) as f:
            d = json.load(f)
        for e in d.get("runs", []):
            panels.append(e)
    if not panels:
        raise SystemExit("no runs in the results")
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, e in zip(axes.flat, panels):
        tools = [t for t in e["tools"] if t.get("median_seconds")]
        names = [t["tool"] for t in tools]
        secs = [t["median_seconds"] for t in tools]
        colors = ["tab:orange" if n.startswith("ferry") else ("tab:gray" if n == "limitcopy" else "tab:blue")
                  for n in names]
        ax.barh(names[::-1], secs[::-1], color=colors[::-1])
        for y, s in enumerate(secs[::-1]):
            ax.text(s, y, f" {s:.2f}", va="center", fontsize=8)
        ax.set_title(f"{e['workload']} / {e['fs']} / {e['cache']} cache", fontsize=10)
        ax.set_xlabel("seconds (median, lower is better)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.set_xlim(0, max(secs) * 1.2 if secs else 1)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
