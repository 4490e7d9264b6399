#!/usr/bin/env python3
"""A nightly backup to S3: the first upload, 60 scattered changes, the rerun, and a
restore of the older snapshot, for ferry, restic and rclone, side by side on a real
Garage on loopback.

A fresh XFS holds the kernel tree (Debian's linux-source), Garage's data and every
destination. Each repetition extracts the tree anew, and then:

  1. first upload, each tool to its own empty prefix (warm source):
       ferry     ferry copy TREE s3://B/ferry
       restic    restic backup TREE (Debian's restic, repository s3:.../restic)
       rclone64  rclone sync --transfers 64 --checkers 64 TREE garage:B/rclone
  2. 60 scattered changes to TREE, the same for all (bench/net_mirror.py's: edits,
     same-size rewrites, appends, new files, deletions, mode changes, a renamed and a
     removed directory)
  3. the rerun, each tool as in 1
  4. restore of the older snapshot into a fresh DST (ferry copy s3://B/ferry@FIRST DST,
     restic restore FIRST --target DST; rclone keeps no snapshots), its tree counted
     against TREE's as it was
  4b. the restore's floor: ferry unpack - of the same tree, packed before the changes,
     from a pipe (`cat ARCHIVE | ferry unpack - DST`: the bytes pass through ferry as
     they do from S3), into a fresh DST on the same filesystem
  5. ferry cat of one member of the older snapshot, warm (median of 5)
  6. prune to the newest snapshot (ferry prune --keep 1; restic forget --keep-last 1
     --prune), its time and what the prefix holds after
  7. a big night: two of every three files, in path order, appended to (a scattered
     change to most of every shard); the rerun, then a prune to the newest again,
     and what the prefix holds against a fresh upload of the same tree to an empty
     prefix ("packed"): the issue's bound is 1.5x

"written" is the bytes of objects the rerun added or replaced under the tool's prefix
(listed before and after, by key, size and server time). Seconds are wall time, the
median of -r repetitions.

    sudo bench/s3_snapshots.py -r 3

Tables go to stdout, progress to stderr, everything to bench/results/s3-snapshots-<ts>.json.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import copy_bench as C  # noqa: E402  (kernel_tarball, warm_source)
import net_mirror as N  # noqa: E402  (changes)
import s3_bench as S  # noqa: E402  (Garage)

TOOLS = ["ferry", "restic", "rclone64"]
# Each tool's prefix in the bucket.
PREFIX = {"ferry": "ferry", "restic": "restic", "rclone64": "rclone"}
PASSWORD = "bench"


def env_for(g, mnt):
    env = g.env()
    env.update({"TMPDIR": os.path.join(mnt, "tmp"), "XDG_CACHE_HOME": os.path.join(mnt, "cache"),
                "RESTIC_PASSWORD": PASSWORD, "RESTIC_CACHE_DIR": os.path.join(mnt, "cache", "restic"),
                "RESTIC_REPOSITORY": f"s3:http://127.0.0.1:{g.port}/{S.BUCKET}/restic"})
    os.makedirs(env["TMPDIR"], exist_ok=True)
    return env


def upload_cmd(tool, tree, args):
    if tool == "ferry":
        return f"{args.ferry} copy {tree} s3://{S.BUCKET}/ferry"
    if tool == "restic":
        return f"restic backup --quiet --host bench {tree}"
    return f"rclone sync --transfers 64 --checkers 64 {tree} garage:{S.BUCKET}/{PREFIX[tool]}"


def listing(tool, env, prefix=None):
    """(key, size, server time) of every object under the tool's prefix."""
    r = subprocess.run(["rclone", "lsjson", "-R", "--files-only", "--use-server-modtime",
                        f"garage:{S.BUCKET}/{prefix or PREFIX[tool]}"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return set()
    return {(o["Path"], o["Size"], o["ModTime"]) for o in json.loads(r.stdout or "[]")}


def run(cmd, env, args):
    B.wait_quiet(args.quiet_wait)
    r = B.run_measured(cmd, shell=True, env=env, timeout=args.timeout)
    if r["rc"] != 0:
        B.log(f"FAILED ({r['rc']}): {cmd}\n{r['stderr'][-2000:]}")
    return r


def first_snapshot(tool, env, args):
    if tool == "ferry":
        r = subprocess.run([args.ferry, "ls", "--snapshots", f"s3://{S.BUCKET}/ferry"], env=env,
                           capture_output=True, text=True, check=True)
        return r.stdout.split()[0]
    r = subprocess.run(["restic", "snapshots", "--json"], env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)[0]["id"]


def prune_cmd(tool, args):
    if tool == "ferry":
        return f"{args.ferry} prune --keep 1 s3://{S.BUCKET}/ferry"
    return "restic forget --quiet --keep-last 1 --prune"


def stored(tool, env, prefix=None):
    return sum(size for (_, size, _) in listing(tool, env, prefix))


def big_night(tree):
    """Appends a line to two of every three files, in path order; returns how many."""
    files = []
    for d, _, fs in os.walk(tree):
        files += [os.path.join(d, x) for x in fs if not os.path.islink(os.path.join(d, x))]
    files.sort()
    n = 0
    for i, f in enumerate(files):
        if i % 3 != 2:
            with open(f, "ab") as fh:
                fh.write(b"\n/* a big night */\n")
            n += 1
    return n


def prune_step(tool, key, env, args, row, rep):
    r = run(prune_cmd(tool, args), env, args)
    row[tool][f"{key}_prune"] = r["seconds"]
    row[tool][f"{key}_prune_rc"] = r["rc"]
    row[tool][f"{key}_stored"] = stored(tool, env)
    if tool == "ferry":
        row[tool][f"{key}_prune_said"] = r["stderr"][-600:]
    B.log(f"rep {rep} {tool} prune ({key}): {r['seconds']:.2f} s, "
          f"{row[tool][f'{key}_stored'] / 2**20:.1f} MiB stored")


def fresh_size(tool, tree, env, args):
    """What a first upload of `tree` to an empty prefix stores."""
    if tool == "ferry":
        B.sh(args.ferry, "copy", tree, f"s3://{S.BUCKET}/ferry-fresh", env=env, capture=True)
        return stored(tool, env, "ferry-fresh")
    fenv = dict(os.environ)
    fenv.update(env)
    fenv["RESTIC_REPOSITORY"] = env["RESTIC_REPOSITORY"] + "-fresh"
    B.sh("restic", "init", env=fenv, capture=True)
    B.sh("restic", "backup", "--quiet", "--host", "bench", tree, env=fenv, capture=True)
    return stored(tool, env, "restic-fresh")


def restore_cmd(tool, first, dst, tree, args):
    if tool == "ferry":
        return f"{args.ferry} copy s3://{S.BUCKET}/ferry@{first} {dst}", dst
    return f"restic restore --quiet {first} --target {dst}", os.path.join(dst, tree.lstrip("/"))


def unpack_floor(archive, mnt, args):
    """The floor of a restore here: ferry's own unpack of the same tree from a pipe
    (the bytes through ferry as from S3, no clone or copy_file_range), warm, into a
    fresh directory on the same filesystem."""
    dst = os.path.join(mnt, "unpack-floor")
    B.rmtree(dst)
    B.sync()
    r = run(f"cat {archive} | {args.ferry} unpack - {dst}", {}, args)
    B.rmtree(dst)
    B.log(f"ferry unpack - of the older tree from a pipe: {r['seconds']:.2f} s")
    return r["seconds"]


def cpu_split(row, key, r):
    """The CPU a step took, split: the tool's own (user + system, its children's
    included), and the rest of the machine's while it ran (Garage, the kernel's
    flushing): what the same run against a store on other machines would not pay here.
    And the floor: all of it over the cores."""
    row[f"{key}_floor"] = S.cpu_floor(r)
    row[f"{key}_client_cpu"] = (r["user"] or 0) + (r["sys"] or 0)
    row[f"{key}_store_cpu"] = r["other_cpu"] or 0


def one_rep(rep, tar, mnt, g, args, out):
    tree = os.path.join(mnt, "tree")
    B.rmtree(tree)
    os.makedirs(tree)
    B.sh("tar", "-C", tree, "--strip-components=1", "-xf", tar)
    env = env_for(g, mnt)
    for prefix in list(PREFIX.values()) + ["ferry-fresh", "restic-fresh"]:
        subprocess.run(["rclone", "purge", f"garage:{S.BUCKET}/{prefix}"], env=env, capture_output=True)
    B.rmtree(env["XDG_CACHE_HOME"])
    if "restic" in args.tools:
        B.sh("restic", "init", env=dict(os.environ, **env), capture=True)
    then = B.tree_stats(tree)
    out.setdefault("stats", then)
    # The tree as it is now, packed, for the restore's floor (step 4b).
    then_tree_archive = os.path.join(mnt, "then.far")
    if "ferry" in args.tools:
        B.sh(args.ferry, "pack", tree, then_tree_archive, capture=True)
    row = {t: {} for t in args.tools}
    for tool in args.tools:
        C.warm_source(tree)
        r = run(upload_cmd(tool, tree, args), env, args)
        row[tool]["first"] = r["seconds"]
        cpu_split(row[tool], "first", r)
        row[tool]["first_rc"] = r["rc"]
        B.log(f"rep {rep} {tool} first upload: {r['seconds']:.2f} s")
    done = N.changes(tree, n=60)
    B.log(f"rep {rep}: {len(done)} changes")
    for tool in args.tools:
        before = listing(tool, env)
        C.warm_source(tree)
        r = run(upload_cmd(tool, tree, args), env, args)
        after = listing(tool, env)
        row[tool]["rerun"] = r["seconds"]
        cpu_split(row[tool], "rerun", r)
        row[tool]["rerun_rc"] = r["rc"]
        row[tool]["written"] = sum(size for (_, size, _) in after - before)
        row[tool]["largest_written"] = sorted(((size, key) for (key, size, _) in after - before),
                                              reverse=True)[:8]
        row[tool]["stored"] = sum(size for (_, size, _) in after)
        B.log(f"rep {rep} {tool} rerun: {r['seconds']:.2f} s, {row[tool]['written'] / 2**20:.1f} MiB written")
    for tool in [t for t in args.tools if t != "rclone64"]:
        first = first_snapshot(tool, env, args)
        dst = os.path.join(mnt, f"restore-{tool}")
        B.rmtree(dst)
        B.sync()
        cmd, root = restore_cmd(tool, first, dst, tree, args)
        r = run(cmd, env, args)
        got = B.tree_stats(root) if os.path.isdir(root) else None
        row[tool]["restore"] = r["seconds"]
        cpu_split(row[tool], "restore", r)
        row[tool]["restore_ok"] = got == then
        B.log(f"rep {rep} {tool} restore of {first}: {r['seconds']:.2f} s, tree ok {got == then}")
        if got != then:
            B.log(f"{tool}: restored {got} != {then}")
        B.rmtree(dst)
        if tool == "ferry":
            url = f"s3://{S.BUCKET}/ferry@{first}"
            cat = f"{args.ferry} cat {url} {args.cat_member}"
            B.run_measured(cat, shell=True, env=env, stdout_path="/dev/null")
            ms = [B.run_measured(cat, shell=True, env=env, stdout_path="/dev/null")["seconds"] * 1000
                  for _ in range(5)]
            row[tool]["cat_ms"] = B.median(ms)
            B.log(f"rep {rep} ferry cat {args.cat_member} of {first}, warm: {B.median(ms):.1f} ms")
    if "ferry" in args.tools:
        row["ferry"]["unpack_floor"] = unpack_floor(then_tree_archive, mnt, args)
    pruners = [t for t in args.tools if t != "rclone64"]
    for tool in pruners:
        prune_step(tool, "nightly", env, args, row, rep)
    changed = big_night(tree)
    B.log(f"rep {rep}: big night, {changed} files appended to")
    for tool in pruners:
        before = listing(tool, env)
        C.warm_source(tree)
        r = run(upload_cmd(tool, tree, args), env, args)
        row[tool]["big_rerun"] = r["seconds"]
        row[tool]["big_written"] = sum(size for (_, size, _) in listing(tool, env) - before)
        B.log(f"rep {rep} {tool} big-night rerun: {r['seconds']:.2f} s, "
              f"{row[tool]['big_written'] / 2**20:.1f} MiB written")
        row[tool]["big_unpruned"] = stored(tool, env)
        prune_step(tool, "big", env, args, row, rep)
        row[tool]["packed"] = fresh_size(tool, tree, env, args)
        B.log(f"rep {rep} {tool}: {row[tool]['big_stored'] / row[tool]['packed']:.2f}x a fresh upload's "
              f"{row[tool]['packed'] / 2**20:.1f} MiB")
    out["reps"].append({"changes": done, "big_night": changed, "tools": row})


def print_tables(out):
    reps = out["reps"]
    med = lambda tool, key: B.median([r["tools"][tool].get(key) for r in reps])  # noqa: E731
    print(f"\nkernel tree ({out['stats']['files']} files), 60 changes, warm, median of {len(reps)}")
    rows = []
    for tool in out["tools"]:
        first, rerun, written = med(tool, "first"), med(tool, "rerun"), med(tool, "written")
        restore = med(tool, "restore")
        rows.append([tool, f"{first:.2f}", f"{rerun:.2f}", f"{rerun / first:.2f}",
                     f"{written / 2**20:.1f}", "-" if restore is None else f"{restore:.2f}"])
    for line in B.format_table(["tool", "first s", "rerun s", "rerun/first", "written MiB", "restore older s"], rows):
        print(line)
    if "ferry" in out["tools"]:
        print(f"ferry cat of a member of the older snapshot, warm: {med('ferry', 'cat_ms'):.1f} ms")
        if med("ferry", "unpack_floor") is not None:
            print(f"the restore's floor, ferry unpack - of the older tree from a pipe: "
                  f"{med('ferry', 'unpack_floor'):.2f} s")
    rows = []
    for tool in out["tools"]:
        cells = [tool]
        for step in ["first", "rerun", "restore"]:
            client, rest = med(tool, f"{step}_client_cpu"), med(tool, f"{step}_store_cpu")
            cells += ["-", "-"] if client is None else [f"{client:.2f}", f"{rest:.2f}"]
        rows.append(cells)
    print("\nCPU seconds: the tool's own, and the rest of the machine's meanwhile (Garage, the kernel)")
    head = ["tool", "first: tool", "rest", "rerun: tool", "rest", "restore: tool", "rest"]
    for line in B.format_table(head, rows):
        print(line)
    pruners = [t for t in out["tools"] if t != "rclone64"]
    rows = []
    for tool in pruners:
        if med(tool, "big_prune") is None:
            continue
        mib = lambda key: f"{med(tool, key) / 2**20:.1f}"  # noqa: E731
        rows.append([tool, f"{med(tool, 'nightly_prune'):.2f}", f"{med(tool, 'big_rerun'):.2f}",
                     mib("big_written"), mib("big_unpruned"), f"{med(tool, 'big_prune'):.2f}",
                     mib("big_stored"), mib("packed"),
                     f"{B.median([r['tools'][tool]['big_stored'] / r['tools'][tool]['packed'] for r in reps]):.2f}"])
    if rows:
        print("\nprune to the newest, after the nightly rerun and after a big night (2 of 3 files appended to)")
        for line in B.format_table(["tool", "prune s", "big rerun s", "written MiB", "before prune MiB",
                                    "prune s", "after MiB", "fresh MiB", "after/fresh"], rows):
            print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("-t", "--tools", type=lambda s: [x for x in s.split(",") if x], default=TOOLS)
    ap.add_argument("--cat-member", default="drivers/net/dummy.c")
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-s3snap")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--image-size", default="24G")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--quiet-wait", type=float, default=20)
    ap.add_argument("--nice", type=int)
    ap.add_argument("--cleanup", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    B.start(args)
    out = {"machine": B.machine_info(), "ferry": B.ferry_identity(args.ferry), "args": vars(args),
           "restic": B.sh("restic", "version", capture=True, check=False).stdout.strip(),
           "rclone": B.sh("rclone", "version", capture=True).stdout.splitlines()[0],
           "garage": B.sh(B.which("garage"), "--version", capture=True, check=False).stdout.strip(),
           "tools": args.tools, "reps": []}
    path = args.out or os.path.join(B.ROOT, "bench", "results", f"s3-snapshots-{B.timestamp()}.json")
    tar = C.kernel_tarball(args.kernel_cache)
    if not tar:
        sys.exit("no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
    with B.LoopFs("xfs", args.scratch, "s3snap", size=args.image_size, mkfs_args=("-m", "reflink=1")) as lfs:
        with S.Garage(os.path.join(lfs.mnt, "garage")) as g:
            for rep in range(args.reps):
                one_rep(rep, tar, lfs.mnt, g, args, out)
                B.write_json(path, out)
    print_tables(out)
    B.log(f"results: {path}")


if __name__ == "__main__":
    main()
