#!/usr/bin/env python3
"""Plot of a mount_bench.py result: seconds (log scale) until usable (first mount, with a
cached index), for `find | wc -l` and for reading every file, per tool, one panel per
cache mode; a step stopped at its time limit is drawn hatched at the limit. A last panel
shows the 1,000,000-member set (until usable), when the run has it. Needs matplotlib
(Debian's python3-matplotlib: run it with /usr/bin/python3).

    /usr/bin/python3 bench/plot_mount.py bench/results/mount-*.json -o docs/img

Writes OUTDIR/mount-kernel.png and prints its path.
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"native": "0.55", "ferry": "tab:orange", "ferry-tar": "#f5b041", "ratarmount": "tab:blue",
          "archivemount": "tab:green", "ferry-kernel": "tab:red", "ferry-kernel-tar": "#f1948a"}
LABELS = {"native": "native (extracted tree)", "ferry": "ferry (its own archive)", "ferry-tar": "ferry (GNU tar)",
          "ratarmount": "ratarmount (GNU tar)", "archivemount": "archivemount (GNU tar)",
          "ferry-kernel": "ferry --kernel (its own archive)", "ferry-kernel-tar": "ferry --kernel (GNU tar)"}
OPS = [("usable_first_s", "usable\n(first mount)"), ("usable_cached_s", "usable\n(cached index)"),
       ("find_s", "find | wc -l"), ("read_s", "read every file")]


def bars(ax, groups, tools, values, title, ylabel):
    """values[(group, tool)] = (seconds, stopped)."""
    width = 0.8 / max(1, len(tools))
    for i, tool in enumerate(tools):
        for g, _ in enumerate(groups):
            v = values.get((g, tool))
            if not v or v[0] is None:
                continue
            x = g + (i - (len(tools) - 1) / 2) * width
            ax.bar(x, v[0], width, color=COLORS.get(tool, "k"), hatch="//" if v[1] else None,
                   edgecolor="k" if v[1] else None, label=LABELS.get(tool, tool) if g == 0 or True else None)
            txt = (f"> {v[0]:.0f}" if v[1] else (f"{v[0]:.3f}" if v[0] < 1 else f"{v[0]:.1f}"))
            ax.text(x, v[0] * 1.08, txt, ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", which="major", alpha=0.3)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 6)
    h, lab = ax.get_legend_handles_labels()
    seen = {}
    for hh, ll in zip(h, lab):
        seen.setdefault(ll, hh)
    ax.legend(seen.values(), seen.keys(), fontsize=7, loc="upper left")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("-o", "--outdir", default="docs/img")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    summ = res.get("kernel", {}).get("summary", {})
    caches = [c for c in res.get("cache", []) if c in summ]
    mil = [m for m in res.get("million", {}).get("runs", []) if m.get("cache") == "warm"]
    n = len(caches) + (1 if mil else 0)
    if not n:
        return
    fig, axes = plt.subplots(1, n, figsize=(6.2 * n, 5.2), squeeze=False)
    tree = res.get("tree", {}).get("want", {})
    for ax, cache in zip(axes[0], caches):
        tools = [t for t in res["tools"] if t in summ[cache]]
        vals = {}
        for g, (key, _) in enumerate(OPS):
            for t in tools:
                s = summ[cache][t]
                op = key.removesuffix("_s")
                if s.get(key) is not None:
                    vals[(g, t)] = (s[key], False)
                elif s.get(f"{op}_stopped"):
                    vals[(g, t)] = (s.get(f"{op}_limit"), True)
        bars(ax, [lab for _, lab in OPS], tools, vals,
             f"kernel tree ({tree.get('files', 0):,} files, {tree.get('bytes', 0) / 1e9:.2f} GB), {cache} cache",
             "seconds (log)")
    if mil:
        ax = axes[0][-1]
        tools = [m["tool"] for m in mil]
        lim = res.get("limits", {}).get("million", 600)
        vals = {}
        for g, kind in enumerate(("first", "cached")):
            for m in mil:
                v = m.get(f"usable_{kind}_s")
                if v is not None:
                    vals[(g, m["tool"])] = (v, False)
                elif m.get(f"usable_{kind}_stopped"):
                    vals[(g, m["tool"])] = (lim, True)
        mm = res["million"]
        bars(ax, ["usable\n(first mount)", "usable\n(cached index)"], tools, vals,
             f"{mm['files']:,} files of {mm['size']} B, warm cache", "seconds (log)")
    fig.suptitle("ferry mount vs ratarmount vs archivemount (hatched: stopped at the time limit)", fontsize=10)
    fig.tight_layout()
    os.makedirs(a.outdir, exist_ok=True)
    out = os.path.join(a.outdir, "mount-kernel.png")
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
