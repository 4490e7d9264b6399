#!/usr/bin/env python3
"""Keeping a remote copy in step over ssh (issue #34), ferry beside rsync, over a
throwaway sshd on loopback onto freshly made loop-mounted filesystems, warm cache.

Parts (-p):
  incremental  The Linux source tree, mirrored once; then 50 scattered changes to SRC
               (edits, same-size rewrites, appends, new files, deletions, a renamed
               and a removed directory, mode changes): `ferry copy --delete` over ssh
               against `rsync -a --delete -e ssh`, each onto its own copy of the old
               mirror (reset before each run), on ext4. Beside them: `ssh HOST true`,
               the floor of any run over ssh, and both tools again over one ssh
               connection kept open (ControlMaster), which leaves only the session's
               start to pay.
  delta        A 256 MiB file with 64 changed 4 KiB blocks, onto ext4 and onto XFS
               (reflink): ferry over ssh against rsync -e ssh (its own delta), the
               bytes on ssh's pipes each way counted by a relay around ssh (in runs of
               their own: the relay costs CPU), and on XFS the bytes of the new file
               that share blocks with the old one (filefrag).

Results JSON in bench/results/mirror-*.json; a table per part on stdout.

    sudo bench/net_mirror.py                 # both parts, 3 runs each
    sudo bench/net_mirror.py -p delta -r 1
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import net_bench as N  # noqa: E402

PARTS = ["incremental", "delta"]

# A relay between the rsh command and ssh that counts the bytes each way, appending
# `to_remote from_remote` to the file named by FERRY_WIRE_COUNT.
RELAY = r'''
import os, subprocess, sys, threading
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
n = {"up": 0, "down": 0}
def up():
    while True:
        b = os.read(0, 1 << 16)
        if not b:
            break
        n["up"] += len(b)
        p.stdin.write(b)
        p.stdin.flush()
    p.stdin.close()
t = threading.Thread(target=up, daemon=True)
t.start()
while True:
    b = p.stdout.read1(1 << 16)
    if not b:
        break
    n["down"] += len(b)
    os.write(1, b)
rc = p.wait()
with open(os.environ["FERRY_WIRE_COUNT"], "a") as f:
    f.write(f"{n['up']} {n['down']}\n")
sys.exit(rc)
'''


def counted_rsh(work, rsh):
    relay = os.path.join(work, "relay.py")
    with open(relay, "w") as f:
        f.write(RELAY)
    return f"python3 {relay} {rsh}"


def wire_bytes(cmd, work, env=None):
    """Runs `cmd` (its rsh wrapped in the relay) once; bytes (up, down) on ssh's pipes."""
    count = os.path.join(work, "wire.count")
    if os.path.exists(count):
        os.remove(count)
    r = B.run_measured(cmd, shell=True, env={**(env or {}), "FERRY_WIRE_COUNT": count}, timeout=1800)
    if r["rc"] != 0:
        B.log(f"counted run failed: {r['stderr'][-400:]}")
        return None
    up = down = 0
    with open(count) as f:
        for line in f:
            a, b = line.split()
            up, down = up + int(a), down + int(b)
    return {"up": up, "down": down, "total": up + down}


def changes(root, n=50, seed=7):
    """Makes `n` scattered changes to the tree at `root`; returns what it did."""
    rnd = random.Random(seed)
    files = []
    dirs = []
    for d, ds, fs in os.walk(root):
        dirs += [os.path.join(d, x) for x in ds]
        files += [os.path.join(d, x) for x in fs if not os.path.islink(os.path.join(d, x))]
    files.sort()
    dirs.sort()
    done = []
    # A renamed and a removed directory (small ones, deep in the tree).
    small = [d for d in dirs if len(os.listdir(d)) < 6 and all(os.path.isfile(os.path.join(d, x))
                                                                 for x in os.listdir(d))]
    rnd.shuffle(small)
    renamed, removed = small[0], small[1]
    os.rename(renamed, renamed + ".renamed")
    shutil.rmtree(removed)
    done += [f"rename {renamed}", f"rmtree {removed}"]
    gone = (renamed, removed)
    files = [f for f in files if not f.startswith(gone)]
    kinds = ["edit", "same-size", "append", "new", "delete", "chmod"]
    for i in range(n - 2):
        kind = kinds[i % len(kinds)]
        f = files.pop(rnd.randrange(len(files)))
        if kind == "edit":
            with open(f, "ab") as fh:
                fh.write(b"\n/* edited */\n")
        elif kind == "same-size":
            data = bytearray(open(f, "rb").read())
            if data:
                data[len(data) // 2] ^= 1
            st = os.stat(f)
            open(f, "wb").write(data)
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
        elif kind == "append":
            with open(f, "ab") as fh:
                fh.write(rnd.randbytes(3000))
        elif kind == "new":
            with open(f + ".new", "wb") as fh:
                fh.write(rnd.randbytes(rnd.randrange(100, 20000)))
        elif kind == "delete":
            os.remove(f)
        else:
            os.chmod(f, 0o600)
        done.append(f"{kind} {f}")
    return done


def part_incremental(args, fs, work, out):
    f = args.ferry
    old = os.path.join(fs.mnt, "old")
    new = os.path.join(fs.mnt, "new")
    if not os.path.exists(old):
        os.makedirs(old)
        B.sh("tar", "-C", old, "-xf", N.kernel_tar(args))
    B.rmtree(new)
    B.sh(f, "copy", "--no-progress", old, new)
    made = changes(new)
    expect = B.tree_stats(new)
    sshd = N.Sshd(work)
    ssh = sshd.rsh
    rows = []
    dsts = {w: os.path.join(fs.mnt, f"mirror-{w}") for w in ("ferry", "rsync")}
    try:
        for d in dsts.values():
            B.rmtree(d)
            B.sh(f, "copy", "--no-progress", old, d)

        def reset(d):
            def go():
                B.sh(f, "copy", "--no-progress", "--delete", old + "/", d + "/")
                B.sync()
                B.sh("sh", "-c", f"tar -C {new} -cf - . >/dev/null")
            return go

        ways = [
            ("ferry copy --delete over ssh",
             f"{f} copy --no-progress --delete -e '{ssh}' --remote-ferry {f} {new}/ 127.0.0.1:{dsts['ferry']}/",
             dsts["ferry"]),
            ("rsync -a --delete -e ssh",
             f"rsync -a --delete -e '{ssh}' {new}/ 127.0.0.1:{dsts['rsync']}/", dsts["rsync"]),
        ]
        for label, cmd, d in ways:
            row = N.measured(label, cmd, args.reps, reset(d), check_tree=d, expect=expect, results=rows)
            reset(d)()
            wrapped = cmd.replace(f"-e '{ssh}'", f"-e '{counted_rsh(work, ssh)}'")
            row["wire"] = wire_bytes(wrapped, work)
            diff = subprocess.run(["diff", "-r", "--no-dereference", new, d], capture_output=True)
            row["same_tree"] = diff.returncode == 0
        # The floor of every run: ssh's own connection and session, doing nothing.
        N.measured("ssh 127.0.0.1 true (the floor)", f"{ssh} 127.0.0.1 true", args.reps,
                   lambda: None, results=rows)
        # The same runs over one ssh connection kept open (ControlMaster), so that
        # what each tool itself takes shows: only the session's start is left.
        sock = os.path.join(work, "ssh-mux.sock")
        master = subprocess.Popen(f"{ssh} -o ControlMaster=yes -o ControlPath={sock} -N 127.0.0.1",
                                  shell=True)
        try:
            for _ in range(100):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            mux = f"{ssh} -o ControlPath={sock}"
            N.measured("ssh 127.0.0.1 true, multiplexed", f"{mux} 127.0.0.1 true", args.reps,
                       lambda: None, results=rows)
            for label, cmd, d in ways:
                N.measured(label + ", multiplexed", cmd.replace(f"-e '{ssh}'", f"-e '{mux}'"),
                           args.reps, reset(d), check_tree=d, expect=expect, results=rows)
        finally:
            master.terminate()
            master.wait()
    finally:
        sshd.stop()
    base = next((r["median"] for r in rows if r["way"].startswith("rsync")), None)
    for r in rows:
        r["rsync_over_this"] = (base / r["median"]) if base and r["median"] and not r["way"].startswith("ssh") else None
    mux_base = next((r["median"] for r in rows if r["way"].startswith("rsync") and "multiplexed" in r["way"]), None)
    for r in rows:
        if "multiplexed" in r["way"] and not r["way"].startswith("ssh"):
            r["rsync_over_this"] = (mux_base / r["median"]) if mux_base and r["median"] else None
    out["incremental"] = {"stats": expect, "changes": made, "rows": rows}


def shared_bytes(path):
    """Bytes of `path` in extents marked shared (filefrag -v)."""
    out = B.sh("filefrag", "-v", "-b4096", path, capture=True).stdout
    shared = 0
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(":")]
        if len(parts) >= 4 and parts[0].isdigit() and "shared" in line:
            length = parts[3].split()[0] if parts[3] else "0"
            shared += int(length.rstrip(".")) * 4096
    return shared


def part_delta(args, fs, work, out):
    f = args.ferry
    src = os.path.join(fs.mnt, "delta-src")
    os.makedirs(src, exist_ok=True)
    old = os.path.join(work, "big.old")
    rnd = random.Random(1)
    size = 256 << 20
    with open(old, "wb") as fh:
        for _ in range(size // (4 << 20)):
            fh.write(rnd.randbytes(4 << 20))
    big = os.path.join(src, "big")
    shutil.copyfile(old, big)
    with open(big, "r+b") as fh:
        for _ in range(64):
            fh.seek(rnd.randrange(size // 4096) * 4096)
            fh.write(rnd.randbytes(4096))
    sshd = N.Sshd(work)
    ssh = sshd.rsh
    results = []
    try:
        with B.LoopFs("xfs", args.scratch + "-xfs", "xfs", size="2G", mkfs_args=["-m", "reflink=1"]) as xfs:
            for fsname, mnt in (("ext4", fs.mnt), ("xfs", xfs.mnt)):
                dsts = {w: os.path.join(mnt, f"delta-{w}") for w in ("ferry", "rsync")}
                rows = []

                def reset(d):
                    def go():
                        B.rmtree(d)
                        os.makedirs(d)
                        shutil.copyfile(old, os.path.join(d, "big"))
                        B.sync()
                        B.sh("cat", big, stdout=subprocess.DEVNULL)
                    return go

                ways = [
                    ("ferry over ssh",
                     f"{f} copy --no-progress -e '{ssh}' --remote-ferry {f} {src}/ 127.0.0.1:{dsts['ferry']}/",
                     dsts["ferry"]),
                    ("rsync -e ssh", f"rsync -a -e '{ssh}' {src}/ 127.0.0.1:{dsts['rsync']}/", dsts["rsync"]),
                ]
                for label, cmd, d in ways:
                    row = N.measured(f"{label} onto {fsname}", cmd, args.reps, reset(d), results=rows)
                    if fsname == "xfs":
                        # What the new file shares with the old one, kept aside by a clone.
                        reset(d)()
                        keep = os.path.join(mnt, "old-kept")
                        B.rmtree(keep)
                        B.sh("cp", "--reflink=always", os.path.join(d, "big"), keep)
                        B.sh("sh", "-c", cmd)
                        row["shared_with_old_bytes"] = shared_bytes(os.path.join(d, "big"))
                        os.remove(keep)
                    reset(d)()
                    wrapped = cmd.replace(f"-e '{ssh}'", f"-e '{counted_rsh(work, ssh)}'")
                    row["wire"] = wire_bytes(wrapped, work)
                    same = subprocess.run(["cmp", big, os.path.join(d, "big")]).returncode == 0
                    row["same_file"] = same
                results.append({"fs": fsname, "rows": rows})
    finally:
        sshd.stop()
    out["delta"] = {"size": size, "changed_blocks": 64, "results": results}


def print_tables(out):
    if "incremental" in out:
        rows = [[r["way"], f"{r['median']:.2f}" if r["median"] else "failed",
                 f"{r['rsync_over_this']:.2f}" if r.get("rsync_over_this") else "",
                 f"{r['wire']['total'] / 1e6:.2f}" if r.get("wire") else "",
                 str(r.get("same_tree")), ", ".join(f"{x['seconds']:.2f}" for x in r["runs"])]
                for r in out["incremental"]["rows"]]
        print("\n".join(B.format_table(["way (50 changes)", "median s", "rsync / this", "wire MB",
                                        "same tree", "runs"], rows)))
    if "delta" in out:
        rows = []
        for res in out["delta"]["results"]:
            for r in res["rows"]:
                rows.append([r["way"], f"{r['median']:.2f}" if r["median"] else "failed",
                             f"{r['wire']['total'] / 1e6:.3f}" if r.get("wire") else "",
                             f"{r['shared_with_old_bytes'] / 2**20:.1f}" if "shared_with_old_bytes" in r else "",
                             str(r.get("same_file")), ", ".join(f"{x['seconds']:.2f}" for x in r["runs"])])
        print("\n".join(B.format_table(["way (256 MiB, 64 blocks)", "median s", "wire MB",
                                        "shared MiB", "same", "runs"], rows)))


def main():
    csv = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", "--parts", type=csv, default=PARTS)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-mirror")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--nice", type=int)
    ap.add_argument("--cleanup", action="store_true")
    args = ap.parse_args()
    B.start(args)
    ferry = os.path.join(tempfile.mkdtemp(prefix="ferry-mirror-bench-"), "ferry")
    shutil.copy2(args.ferry, ferry)
    args.ferry = ferry
    out = {"machine": B.machine_info(), "ferry": B.ferry_identity(ferry), "args": vars(args),
           "uptime_before": open("/proc/loadavg").read().strip()}
    work = tempfile.mkdtemp(prefix="ferry-mirror-work-")
    with B.LoopFs("ext4", args.scratch, "ext4", size="8G") as fs:
        for part in args.parts:
            {"incremental": part_incremental, "delta": part_delta}[part](args, fs, work, out)
    out["uptime_after"] = open("/proc/loadavg").read().strip()
    path = os.path.join(B.RESULTS, f"mirror-{B.timestamp()}.json")
    B.write_json(path, out)
    print_tables(out)
    B.log(f"wrote {path}")


if __name__ == "__main__":
    main()
