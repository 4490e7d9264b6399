#!/usr/bin/env python3
"""ferry mount side by side with ratarmount and archivemount, and the extracted tree
read natively (the floor): issue 22.

On the Linux source tree, extracted onto a fresh loop-mounted ext4 and packed there by
GNU tar (`tar -C SRC -cf kernel.tar .`) and by ferry (`ferry pack SRC kernel.far`):

  tool           what is mounted                       "first mount"        "cached"
  native         the extracted tree itself (no mount)  -                    -
  ferry          ferry mount kernel.far (its own)      empty --cache-dir    second mount
  ferry-tar      ferry mount kernel.tar (GNU tar)      empty --cache-dir    second mount
  ratarmount     ratarmount kernel.tar                 no .index.sqlite     index kept
                 (--index-minimum-file-count 0: an index file even for the small --quick tree)
  archivemount   archivemount -o ro kernel.tar         (it keeps no index: every mount is a first)
  ferry-kernel   ferry mount --kernel kernel.far       empty --cache-dir    the image kept
                 (issue 26: an EROFS image of the tree, mounted by the kernel, the archive
                 as its data device; root only)
  ferry-kernel-tar  ferry mount --kernel kernel.tar    empty --cache-dir    the image kept

For each cache mode (-c warm,cold), repetition (-r) and tool, each operation runs on a
fresh mount (so the kernel's dentry/attribute caches of the FUSE mount start empty and
what is measured is the filesystem, not the kernel's cache of it):

  usable first   clear the index; time from starting the mount command until a stat()
                 of the deepest file of the tree inside the mount succeeds (polled every
                 0.5 ms: ferry returns once ready; ratarmount and archivemount daemonize)
  usable cached  the same with the index the first mount left (the mount kept for:)
  first byte     open() + read(1) of one small file chosen with a fixed seed, in ms
  find           `find . | wc -l` in the mount (count checked against the tree)
  read all       `tar -cf - . | wc -c` in the mount (every file read; bytes checked
                 against the same pipeline on the tree); --read-limit (archivemount:
                 --archivemount-read-limit) stops it, reported as "> N s (stopped)"
  index          `ferry index` of the GNU tar into an empty cache dir (ferry-tar only)
  image          ferry-kernel*: the time ferry says it took to build the EROFS image on the
                 first mount (for ferry-kernel-tar it includes the scan of the tar)

cold = `sync; echo 3 > /proc/sys/vm/drop_caches` right before every timed step (also
after the untimed mount that precedes find / read all / first byte); warm = the archive
(or, for native, the tree) was read once before the series and stays in the page cache.
RSS: VmRSS of the serving process right after the mount is usable, and its VmHWM (peak)
just before every unmount (max over the session); the serving process is the one with
/dev/fuse open whose command line names the mountpoint (ferry: the `ferry mount
--foreground` child). "launcher RSS" is GNU time's peak of the command started (for
ferry's first mount the launcher is what builds the index).

Then, unless --no-million: 1,000,000 files of 100 B in 1,000 directories on their own
image, packed by ferry and by GNU tar: usable (first and cached), RSS, and `find | wc -l`
for ferry, ferry-tar, ratarmount (each step bounded by --million-limit).

With --perf (default on): after the timed runs, the warm find and read-all of `ferry`
are run again under `perf record` of the serving process, and under the fuse:
tracepoint to count FUSE requests by opcode; the top symbols and the counts go in the
JSON and on stdout.

    sudo bench/mount_bench.py                 # everything (about 30 min)
    sudo bench/mount_bench.py --quick         # smoke test: one subtree, 1 rep, no 1M set
    sudo bench/mount_bench.py --cleanup       # unmount leftovers after a hard kill

Tables go to stdout, progress to stderr, everything to bench/results/mount-<ts>.json,
the plot (bench/plot_mount.py, /usr/bin/python3 with matplotlib) to docs/img/mount-kernel.png.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import copy_bench as C  # noqa: E402  (kernel_tarball, fmt)
import rss_million as R  # noqa: E402  (make_tree)

TOOLS = ["native", "ferry", "ferry-tar", "ratarmount", "archivemount", "ferry-kernel", "ferry-kernel-tar"]
KERNEL_TOOLS = ("ferry-kernel", "ferry-kernel-tar")
MOUNTERS = ["ferry", "ferry-tar", "ratarmount", "archivemount"]
RATARMOUNT_VENV = os.path.join(B.HERE, ".build", "ratarmount-venv")
MiB = 1 << 20


# ---------------------------------------------------------------- helpers

def ratarmount_bin():
    p = os.path.join(RATARMOUNT_VENV, "bin", "ratarmount")
    return p if os.access(p, os.X_OK) else B.which("ratarmount")


def tool_version(tool, args):
    if tool.startswith("ferry"):
        return B.sh(args.ferry, "--version", capture=True, check=False).stdout.strip()
    if tool == "ratarmount":
        out = B.sh(args.ratarmount, "--version", capture=True, check=False).stdout
        return next((l.strip() for l in out.splitlines() if l.startswith("ratarmount ")), out[:60])
    if tool == "archivemount":
        r = B.sh("archivemount", "--version", capture=True, check=False)
        return " / ".join(l.strip() for l in (r.stdout + r.stderr).splitlines()[:2])
    return None


def archive_of(tool, ws):
    return ws["far"] if tool in ("ferry", "ferry-kernel") else ws["tar"]


def clear_index(tool, ws):
    """Remove what makes the next mount a cached one."""
    if tool.startswith("ferry"):
        B.rmtree(ws["cache_dir"])
        os.makedirs(ws["cache_dir"])
    elif tool == "ratarmount":
        a = archive_of(tool, ws)
        for p in (a + ".index.sqlite",):
            if os.path.exists(p):
                os.unlink(p)
        home = os.path.expanduser("~/.ratarmount")
        if os.path.isdir(home):
            key = a.replace("/", "_")
            for n in os.listdir(home):
                if key in n:
                    os.unlink(os.path.join(home, n))


def mount_cmd(tool, ws, mnt, args):
    a = archive_of(tool, ws)
    if tool in KERNEL_TOOLS:
        return [args.ferry, "mount", "--kernel", "--cache-dir", ws["cache_dir"], a, mnt]
    if tool.startswith("ferry"):
        return [args.ferry, "mount", "--cache-dir", ws["cache_dir"], "-j", str(args.ferry_jobs),
                "--log", os.path.join(ws["root"], "ferry-mount.log"), a, mnt]
    if tool == "ratarmount":
        return [args.ratarmount, "--index-minimum-file-count", "0", a, mnt]
    if tool == "archivemount":
        return ["archivemount", "-o", "ro", a, mnt]
    raise ValueError(tool)


def nice_prefix():
    return ["nice", "-n", str(B.NICE)] if B.NICE else []


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def proc_cpu(pid):
    """utime + stime of a process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / B.CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


def server_pid(mnt):
    """The process serving the FUSE mount at `mnt`: /dev/fuse open, `mnt` on its command line."""
    best = None
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if mnt.encode() not in argv:
                continue
            if os.path.basename(argv[0]).startswith(b"fusermount"):
                continue
            fds = os.listdir(f"/proc/{d}/fd")
            if any(os.readlink(f"/proc/{d}/fd/{fd}") == "/dev/fuse" for fd in fds):
                best = int(d)
        except OSError:
            continue
    return best


def is_mounted(mnt):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == mnt for line in f)


def prep(cache, args):
    """Right before a timed step: sync, drop the caches if cold, wait for a quiet machine."""
    B.sync()
    if cache == "cold":
        B.drop_caches()
    if args.quiet_wait > 0:
        waited, quiet = B.wait_quiet(args.quiet_wait)
        if not quiet:
            B.log(f"machine still busy after {waited:.0f} s; running anyway")
        return quiet
    return None


class Mount:
    """One mount of `tool` on `mnt`: started and timed until a stat of `probe` answers;
    always taken down in __exit__ (bounded waits, lazy unmount and SIGKILL as last resorts)."""

    def __init__(self, tool, ws, mnt, probe, args, limit):
        self.tool, self.ws, self.mnt, self.probe, self.args, self.limit = tool, ws, mnt, probe, args, limit
        self.pid = None
        self.launcher = None
        self.result = {"tool": tool}

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        if is_mounted(self.mnt):
            raise RuntimeError(f"{self.mnt} is already mounted")
        cmd = mount_cmd(self.tool, self.ws, self.mnt, self.args)
        tf = tempfile.NamedTemporaryFile("r", suffix=".time")
        logf = tempfile.TemporaryFile()
        argv = nice_prefix() + [B.TIME, "-q", "-f", "%M %e", "-o", tf.name] + cmd
        done = threading.Event()
        got = {}

        def poll():
            while not done.is_set():
                try:
                    os.stat(self.probe)
                    got["t"] = time.perf_counter()
                    break
                except OSError:
                    time.sleep(0.0005)
            done.set()

        t0 = time.perf_counter()
        self.launcher = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                         start_new_session=True)
        threading.Thread(target=poll, daemon=True).start()
        deadline = t0 + self.limit
        failed = None
        while not done.wait(0.002):
            rc = self.launcher.poll()
            if rc not in (None, 0):
                failed = f"mount command exited {rc}"
                break
            if time.perf_counter() > deadline:
                failed = f"not usable after {self.limit:.0f} s (stopped)"
                break
        done.set()
        launch_rc = None
        try:
            launch_rc = self.launcher.wait(timeout=max(5.0, self.limit - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            pass
        logf.seek(0)
        out = logf.read().decode(errors="replace")
        parts = tf.read().split()
        tf.close()
        self.result.update(cmd=" ".join(cmd), launcher_rc=launch_rc, output=out[-1500:],
                           launcher_rss_mib=int(parts[0]) / 1024 if parts and parts[0].isdigit() else None,
                           launcher_seconds=float(parts[1]) if len(parts) > 1 else None)
        if "t" in got and not failed:
            self.result["usable_s"] = got["t"] - t0
        else:
            self.result["usable_s"] = None
            self.result["problem"] = failed or "not usable"
            self.result["stopped"] = bool(failed and "stopped" in failed)
        for _ in range(0 if self.tool in KERNEL_TOOLS else 200):  # the server may still be starting its threads
            self.pid = server_pid(self.mnt)
            if self.pid or not is_mounted(self.mnt):
                break
            time.sleep(0.01)
        if self.pid:
            st = proc_status(self.pid)
            self.result["rss_after_mount_mib"] = st.get("VmRSS", 0) / 1024
            self.result["server_pid"] = self.pid
            self.result["threads"] = st.get("Threads")
        return self

    def peak(self):
        st = proc_status(self.pid) if self.pid else {}
        return st.get("VmHWM", 0) / 1024 if st else None

    def __exit__(self, *exc):
        self.result["peak_rss_mib"] = self.peak()
        self.result["server_cpu_s"] = proc_cpu(self.pid) if self.pid else None
        if self.launcher and self.launcher.poll() is None:
            try:
                os.killpg(self.launcher.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.launcher.wait()
        if is_mounted(self.mnt):
            if self.tool.startswith("ferry"):
                r = B.sh(self.args.ferry, "umount", self.mnt, check=False, capture=True)
            else:
                r = B.sh("fusermount", "-u", self.mnt, check=False, capture=True)
            if r.returncode != 0:
                B.log(f"unmount {self.mnt} ({self.tool}): {(r.stderr or '').strip()[:200]}; lazy")
                B.sh("fusermount", "-u", "-z", self.mnt, check=False, capture=True)
                B.sh("umount", "-l", self.mnt, check=False, capture=True)
        if self.pid:
            for _ in range(150):
                if not os.path.exists(f"/proc/{self.pid}") or _zombie(self.pid):
                    break
                time.sleep(0.1)
            else:
                B.log(f"{self.tool} server {self.pid} still there 15 s after unmount: SIGKILL")
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return False


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return s[s.rindex(")") + 2] == "Z"
    except (OSError, ValueError, IndexError):
        return True


def run_shell(cmd, cwd, limit):
    """A timed shell pipeline in `cwd` (its own session, killed at `limit`)."""
    argv = nice_prefix() + ["sh", "-c", cmd]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
        return {"seconds": time.perf_counter() - t0, "rc": p.returncode,
                "stdout": out.decode(errors="replace").strip()[-300:],
                "stderr": err.decode(errors="replace").strip()[-300:], "stopped": False}
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        return {"seconds": None, "rc": None, "stopped": True, "limit": limit,
                "stdout": "", "stderr": f"stopped after {limit:.0f} s"}


def first_byte(path):
    """open + read(1) + close, in ms (in this process: no fork in the measurement)."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        b = os.read(fd, 1)
    finally:
        os.close(fd)
    return (time.perf_counter() - t0) * 1000, len(b)


FIND = "find . | wc -l"
READ_ALL = "tar -cf - . | wc -c"


# ---------------------------------------------------------------- the kernel tree

def workspace(lfs, args, results):
    root = lfs.mnt
    src = os.path.join(root, "src")
    os.makedirs(src)
    tarball = args.kernel_tarball or C.kernel_tarball(args.kernel_cache)
    if tarball is None:
        raise SystemExit("no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
    t0 = time.perf_counter()
    members = []
    if args.quick and not args.kernel_tarball:
        top = B.sh("sh", "-c", 'tar -tf "$1" | head -1', "sh", tarball, capture=True).stdout.strip().split("/")[0]
        members = [f"{top}/{m}" for m in args.quick_subtrees]
    B.sh("tar", "-C", src, "-xf", tarball, *members)
    B.sync()
    want = B.tree_stats(src)
    B.log(f"tree: {want} (extracted in {time.perf_counter() - t0:.1f} s)")
    ws = {"root": root, "src": src, "tar": os.path.join(root, "kernel.tar"),
          "far": os.path.join(root, "kernel.far"), "cache_dir": os.path.join(root, "ferry-cache"),
          "want": want, "tarball": tarball, "members": members}
    t0 = time.perf_counter()
    B.sh("tar", "-C", src, "-cf", ws["tar"], ".")
    ws["tar_pack_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = B.sh(args.ferry, "pack", "--json", src, ws["far"], capture=True)
    ws["far_pack_s"] = time.perf_counter() - t0
    B.sync()
    ws["tar_bytes"], ws["far_bytes"] = os.path.getsize(ws["tar"]), os.path.getsize(ws["far"])
    B.log(f"GNU tar {ws['tar_bytes'] / 1e6:,.0f} MB in {ws['tar_pack_s']:.1f} s; ferry archive "
          f"{ws['far_bytes'] / 1e6:,.0f} MB in {ws['far_pack_s']:.1f} s ({r.stdout.strip()[-200:]})")
    # The probe: the deepest file (ties: first in byte order). The first-byte file: a
    # small file (<= 4 KiB, not empty) chosen with a fixed seed.
    deepest, small = None, []
    for d, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(d, src)
        for f in sorted(files):
            p = f if rel == "." else os.path.join(rel, f)
            full = os.path.join(d, f)
            if os.path.islink(full):
                continue
            depth = p.count("/")
            if deepest is None or depth > deepest[0] or (depth == deepest[0] and p < deepest[1]):
                deepest = (depth, p)
            sz = os.path.getsize(full)
            if 0 < sz <= 4096:
                small.append(p)
    small.sort()
    ws["probe"] = deepest[1]
    ws["small_file"] = random.Random(args.seed).choice(small)
    ws["find_count"] = int(run_shell(FIND, src, 600)["stdout"])
    ws["read_bytes"] = int(run_shell(READ_ALL, src, 3600)["stdout"])
    results["tree"] = {k: v for k, v in ws.items() if k not in ("root",)}
    B.log(f"probe {ws['probe']}; small file {ws['small_file']}; find {ws['find_count']:,}; "
          f"tar stream {ws['read_bytes']:,} B")
    return ws


def bench_tool(tool, cache, ws, args, rep):
    """Every step for one tool: returns a dict of measurements."""
    m = {"tool": tool, "cache": cache, "rep": rep, "problems": [], "peaks": [], "quiet": []}
    mnt = os.path.join(args.scratch, f"fuse-{tool}")
    probe_rel = ws["probe"]
    read_limit = args.archivemount_read_limit if tool == "archivemount" else args.read_limit

    def add_problem(what):
        m["problems"].append(what)
        B.log(f"  {tool}/{cache}: PROBLEM {what}")

    def mount(kind):
        if cache == "warm":
            read_archive(tool, ws)
        return Mount(tool, ws, mnt, os.path.join(mnt, probe_rel), args, args.mount_limit)

    def note_mount(mo, kind):
        r = mo.result
        m.setdefault("mounts", []).append(dict(r, kind=kind))
        if r.get("problem"):
            add_problem(f"{kind} mount: {r['problem']}: {r.get('output', '')[-300:]}")
        if r.get("peak_rss_mib") is not None:
            m["peaks"].append(r["peak_rss_mib"])

    if tool == "native":
        root = ws["src"]
        m["quiet"].append(prep(cache, args))
        ms, n = first_byte(os.path.join(root, ws["small_file"]))
        m["first_byte_ms"] = ms
        m["quiet"].append(prep(cache, args))
        r = run_shell(FIND, root, args.read_limit)
        m["find_s"] = r["seconds"]
        m["quiet"].append(prep(cache, args))
        r = run_shell(READ_ALL, root, args.read_limit)
        m["read_s"] = r["seconds"]
        return m

    # ferry index of the GNU tar (ferry-tar only): into an empty cache dir
    if tool == "ferry-tar":
        clear_index(tool, ws)
        if cache == "warm":
            read_archive(tool, ws)
        m["quiet"].append(prep(cache, args))
        r = run_shell(f'"{args.ferry}" index --cache-dir "{ws["cache_dir"]}" "{ws["tar"]}"', ws["root"],
                      args.mount_limit)
        m["index_s"] = r["seconds"]
        m["index_output"] = r["stdout"] + r["stderr"]
        if r["rc"] != 0:
            add_problem(f"ferry index: exit {r['rc']}: {r['stderr']}")

    # usable, first mount (no index)
    clear_index(tool, ws)
    if cache == "warm":
        read_archive(tool, ws)
    m["quiet"].append(prep(cache, args))
    with Mount(tool, ws, mnt, os.path.join(mnt, probe_rel), args, args.mount_limit) as mo:
        pass
    note_mount(mo, "first")
    m["usable_first_s"] = mo.result["usable_s"]
    m["usable_first_stopped"] = mo.result.get("stopped")
    m["rss_after_first_mount_mib"] = mo.result.get("rss_after_mount_mib")
    m["launcher_rss_first_mib"] = mo.result.get("launcher_rss_mib")
    built = re.search(r"built in (\d+) ms", mo.result.get("output") or "")
    if tool in KERNEL_TOOLS:
        m["image_ms"] = int(built.group(1)) if built else None
    if mo.result["usable_s"] is None:
        return m  # no index: the rest cannot run

    # usable with the index, then the first byte of the small file on that mount
    if cache == "warm":
        read_archive(tool, ws)
    m["quiet"].append(prep(cache, args))
    with Mount(tool, ws, mnt, os.path.join(mnt, probe_rel), args, args.mount_limit) as mo:
        m["usable_cached_s"] = mo.result["usable_s"]
        m["rss_after_mount_mib"] = mo.result.get("rss_after_mount_mib")
        m["launcher_rss_cached_mib"] = mo.result.get("launcher_rss_mib")
        if mo.result["usable_s"] is not None:
            m["quiet"].append(prep(cache, args))
            try:
                ms, n = first_byte(os.path.join(mnt, ws["small_file"]))
                m["first_byte_ms"] = ms
                if n != 1:
                    add_problem(f"first byte: read {n} bytes")
            except OSError as e:
                add_problem(f"first byte: {e}")
    note_mount(mo, "cached")
    if mo.result["usable_s"] is None:
        return m

    # find, then read all, each on a fresh mount
    for op, cmd, limit in (("find", FIND, read_limit), ("read", READ_ALL, read_limit)):
        with mount(op) as mo:
            if mo.result["usable_s"] is None:
                note_mount(mo, op)
                continue
            m["quiet"].append(prep(cache, args))
            cpu0 = proc_cpu(mo.pid) if mo.pid else None
            r = run_shell(cmd, mnt, limit)
            cpu1 = proc_cpu(mo.pid) if mo.pid else None
            m[f"{op}_s"] = r["seconds"]
            m[f"{op}_stopped"] = r["stopped"]
            m[f"{op}_limit"] = limit
            if cpu0 is not None and cpu1 is not None:
                m[f"{op}_server_cpu_s"] = cpu1 - cpu0
            if r["stopped"]:
                B.log(f"  {tool}/{cache}: {op} stopped after {limit:.0f} s")
            else:
                got = int(r["stdout"]) if r["stdout"].isdigit() else None
                want = ws["find_count"] if op == "find" else ws["read_bytes"]
                m[f"{op}_result"] = got
                if got != want:
                    add_problem(f"{op}: {got} (native: {want}); rc {r['rc']} {r['stderr'][:200]}")
                if op == "read" and cache == "warm":
                    # Again on the same mount: what a mount that stays up gives (for
                    # native, a second warm read of the tree); a kernel mount has its
                    # own page cache, filled by the first read.
                    m["quiet"].append(prep(cache, args))
                    again = run_shell(cmd, mnt, limit)
                    if not again["stopped"] and again["stdout"].strip() == str(want):
                        m["read_again_s"] = again["seconds"]
                    elif not again["stopped"]:
                        add_problem(f"read again: {again['stdout'][:40]} (native: {want})")
        note_mount(mo, op)
    return m


_warm_done = set()


def read_archive(tool, ws):
    """Warm: the archive (and a ferry cache dir) in the page cache; once per file is enough
    (24 GiB of RAM), but cheap to repeat after a cold series: done each time."""
    a = archive_of(tool, ws)
    B.sh("sh", "-c", 'cat "$1" >/dev/null', "sh", a)


def run_kernel(args, results, out_path):
    k = results["kernel"] = {"runs": [], "summary": {}}
    with B.LoopFs("ext4", args.scratch, "mount-kernel", size=args.image_size,
                  direct_io=not args.no_direct_io) as lfs:
        k["loop"] = lfs.info
        ws = workspace(lfs, args, results)
        for cache in args.cache:
            if cache == "warm":
                C.warm_source(ws["src"])
            for rep in range(args.reps):
                for tool in args.tools:
                    if rep > 0 and tool in ("ratarmount", "archivemount") and rep >= args.peer_reps:
                        continue
                    B.log(f"kernel {cache} rep {rep + 1}/{args.reps}: {tool}")
                    m = bench_tool(tool, cache, ws, args, rep)
                    k["runs"].append(m)
                    B.log(f"  {tool}/{cache}: " + ", ".join(
                        f"{key} {fmtv(m.get(key))}" for key in
                        ("usable_first_s", "usable_cached_s", "first_byte_ms", "find_s", "read_s",
                         "rss_after_mount_mib") if key in m) +
                        (f", peak {max(m['peaks']):.1f} MiB" if m["peaks"] else ""))
                    B.write_json(out_path, results)
        k["summary"] = summarize(k["runs"], args)
        B.write_json(out_path, results)
        if args.perf and "ferry" in args.tools:
            k["perf"] = {}
            for tool in [t for t in ("ferry", "ferry-tar") if t in args.tools]:
                try:
                    k["perf"][tool] = perf_diagnosis(tool, ws, args)
                except Exception as e:  # a diagnosis that fails must not lose the run
                    B.log(f"perf {tool}: {e!r}")
                    k["perf"][tool] = {"error": repr(e)}
                B.write_json(out_path, results)


def fmtv(x):
    if x is None:
        return "-"
    return f"{x:.4f}" if isinstance(x, float) else str(x)


KEYS = ["usable_first_s", "usable_cached_s", "index_s", "image_ms", "first_byte_ms", "find_s", "read_s", "read_again_s",
        "rss_after_mount_mib", "launcher_rss_first_mib", "find_server_cpu_s", "read_server_cpu_s"]


def summarize(runs, args):
    """{cache: {tool: {key: median, ...}}}."""
    out = {}
    for cache in args.cache:
        out[cache] = {}
        for tool in args.tools:
            rs = [r for r in runs if r["tool"] == tool and r["cache"] == cache]
            if not rs:
                continue
            s = {"reps": len(rs)}
            for key in KEYS:
                vals = [r.get(key) for r in rs if r.get(key) is not None]
                s[key] = B.median(vals) if vals else None
                s[key + "_all"] = vals
            for op in ("find", "read", "usable_first"):
                st = [r for r in rs if r.get(f"{op}_stopped")]
                if st:
                    s[f"{op}_stopped"] = True
                    s[f"{op}_limit"] = st[0].get(f"{op}_limit") or args.mount_limit
            s["peak_rss_mib"] = max((p for r in rs for p in r["peaks"]), default=None)
            s["problems"] = sorted({p for r in rs for p in r["problems"]})
            s["noisy"] = sum(1 for r in rs for q in r["quiet"] if q is False)
            out[cache][tool] = s
        nat = out[cache].get("native", {})
        fer = out[cache].get("ferry", {})
        for tool, s in out[cache].items():
            for op in ("find", "read", "first_byte"):
                key = f"{op}_s" if op != "first_byte" else "first_byte_ms"
                v = s.get(key)
                s[f"{op}_vs_native"] = v / nat[key] if (v and nat.get(key)) else None
                s[f"{op}_vs_ferry"] = v / fer[key] if (v and fer.get(key)) else None
            v, n = s.get("read_again_s"), nat.get("read_again_s") or nat.get("read_s")
            s["read_again_vs_native"] = v / n if (v and n) else None
            for key in ("usable_first_s", "usable_cached_s"):
                v = s.get(key)
                s[key.replace("_s", "") + "_vs_ferry"] = v / fer[key] if (v and fer.get(key)) else None
    return out


# ---------------------------------------------------------------- perf

def perf_diagnosis(tool, ws, args):
    """Warm find and read-all of `tool` again: (1) FUSE requests by opcode (the fuse:
    tracepoints, system-wide, during the op) with the server's and the reader's CPU;
    (2) `perf record` of the server, top symbols by self time."""
    out = {}
    mnt = os.path.join(args.scratch, f"fuse-{tool}")
    tmp = os.path.join(args.scratch, "perf")
    os.makedirs(tmp, exist_ok=True)
    read_archive(tool, ws)
    for op, cmd in (("find", FIND), ("read", READ_ALL)):
        res = out[op] = {}
        # (1) request counts
        with Mount(tool, ws, mnt, os.path.join(mnt, ws["probe"]), args, args.mount_limit) as mo:
            data = os.path.join(tmp, f"{tool}-{op}-fuse.data")
            pr = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "fuse:fuse_request_send", "-o", data],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            time.sleep(1.0)
            conn = os.minor(os.stat(mnt).st_dev)
            cpu0 = proc_cpu(mo.pid)
            t0 = os.times()
            r = run_shell(f"/usr/bin/time -f '%U %S' sh -c '{cmd}'", mnt, args.read_limit)
            cpu1 = proc_cpu(mo.pid)
            os.kill(pr.pid, signal.SIGINT)
            pr.wait(timeout=60)
            res["seconds"] = r["seconds"]
            res["server_cpu_s"] = (cpu1 - cpu0) if (cpu0 is not None and cpu1 is not None) else None
            tl = r["stderr"].split()
            if len(tl) >= 2:
                try:
                    res["reader_user_s"], res["reader_sys_s"] = float(tl[-2]), float(tl[-1])
                except ValueError:
                    pass
            res["server_threads"] = mo.result.get("threads")
            s = B.sh("perf", "script", "-i", data, "-F", "trace", capture=True, check=False).stdout
            # The tracepoint is system-wide: count only this mount's connection (the minor
            # number of its st_dev), not other FUSE mounts on the machine.
            res["fuse_connection"] = conn
            counts = {}
            others = 0
            for line in s.splitlines():
                if f"connection {conn} " not in line:
                    others += 1
                    continue
                mm = re.search(r"\((FUSE_\w+)\)", line)
                if mm:
                    counts[mm.group(1)] = counts.get(mm.group(1), 0) + 1
            res["fuse_requests"] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
            res["fuse_requests_total"] = sum(counts.values())
            res["fuse_requests_other_mounts"] = others
            tot = res["fuse_requests_total"]
            if tot and res["seconds"]:
                # the wall time per request, and how busy the 2 sides kept the CPUs
                res["us_per_request"] = res["seconds"] / tot * 1e6
                busy = (res.get("server_cpu_s") or 0) + res.get("reader_user_s", 0) + res.get("reader_sys_s", 0)
                res["cpu_busy_s"] = busy
                res["cpus_busy"] = busy / res["seconds"]
            os.unlink(data)
        # (2) where the server's CPU goes
        with Mount(tool, ws, mnt, os.path.join(mnt, ws["probe"]), args, args.mount_limit) as mo:
            data = os.path.join(tmp, f"{tool}-{op}.data")
            pr = subprocess.Popen(["perf", "record", "-q", "-F", "1999", "-p", str(mo.pid), "-o", data],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            time.sleep(1.0)
            run_shell(cmd, mnt, args.read_limit)
            os.kill(pr.pid, signal.SIGINT)
            pr.wait(timeout=60)
            rep = B.sh("perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                       "--sort", "symbol", "--percent-limit", "1.5", capture=True, check=False).stdout
            res["top_symbols"] = [l for l in rep.splitlines() if l.strip() and not l.startswith("#")][:25]
            rep = B.sh("perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                       "--sort", "dso", "--percent-limit", "1", capture=True, check=False).stdout
            res["top_dsos"] = [l for l in rep.splitlines() if l.strip() and not l.startswith("#")][:10]
            os.unlink(data)
        B.log(f"perf {tool} {op}: {res['seconds'] and round(res['seconds'], 3)} s, server cpu "
              f"{res.get('server_cpu_s')}, reader {res.get('reader_user_s')}+{res.get('reader_sys_s')}, "
              f"{res['fuse_requests_total']:,} FUSE requests {res['fuse_requests']}")
    return out


# ---------------------------------------------------------------- 1,000,000 members

def run_million(args, results, out_path):
    mil = results["million"] = {"files": args.million_files, "dirs": args.million_dirs, "size": 100,
                                "runs": []}
    inodes = args.million_files + args.million_dirs + 100_000
    with B.LoopFs("ext4", args.scratch, "mount-million", size=args.million_image_size, inodes=inodes,
                  direct_io=not args.no_direct_io) as lfs:
        root = lfs.mnt
        src = os.path.join(root, "src")
        os.makedirs(src)
        t0 = time.perf_counter()
        B.log(f"million: creating {args.million_files:,} files of 100 B in {args.million_dirs:,} dirs")
        R.make_tree(src, args.million_files, args.million_dirs, 100)
        B.sync()
        mil["made_s"] = time.perf_counter() - t0
        want = mil["source"] = B.tree_stats(src)
        ws = {"root": root, "src": src, "tar": os.path.join(root, "m.tar"), "far": os.path.join(root, "m.far"),
              "cache_dir": os.path.join(root, "ferry-cache"), "want": want}
        t0 = time.perf_counter()
        B.sh("tar", "-C", src, "-cf", ws["tar"], ".")
        mil["tar_pack_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        B.sh(args.ferry, "pack", src, ws["far"], capture=True)
        mil["far_pack_s"] = time.perf_counter() - t0
        B.sync()
        mil["tar_bytes"], mil["far_bytes"] = os.path.getsize(ws["tar"]), os.path.getsize(ws["far"])
        ws["probe"] = f"d{args.million_dirs - 1:04d}/f{args.million_files // args.million_dirs - 1:07d}"
        ws["find_count"] = want["files"] + want["dirs"] + 1
        B.log(f"million: {want} made in {mil['made_s']:.0f} s; tar {mil['tar_bytes'] / 1e6:,.0f} MB "
              f"({mil['tar_pack_s']:.0f} s), ferry {mil['far_bytes'] / 1e6:,.0f} MB ({mil['far_pack_s']:.0f} s)")
        B.write_json(out_path, results)
        margs = argparse.Namespace(**vars(args))
        margs.mount_limit = args.million_limit
        for cache in args.million_cache:
            for tool in args.million_tools:
                m = {"tool": tool, "cache": cache, "problems": []}
                mnt = os.path.join(args.scratch, f"fuse-{tool}")
                probe = os.path.join(mnt, ws["probe"])
                if tool == "ferry-tar":
                    clear_index(tool, ws)
                    if cache == "warm":
                        read_archive(tool, ws)
                    prep(cache, args)
                    r = run_shell(f'"{args.ferry}" index --cache-dir "{ws["cache_dir"]}" "{ws["tar"]}"', root,
                                  args.million_limit)
                    m["index_s"], m["index_output"] = r["seconds"], r["stdout"] + r["stderr"]
                stop = False
                for kind in ("first", "cached"):
                    if kind == "first":
                        clear_index(tool, ws)
                    if cache == "warm":
                        read_archive(tool, ws)
                    prep(cache, args)
                    with Mount(tool, ws, mnt, probe, margs, args.million_limit) as mo:
                        if kind == "cached" and mo.result["usable_s"] is not None:
                            prep(cache, args)
                            r = run_shell(FIND, mnt, args.million_limit)
                            m["find_s"], m["find_stopped"] = r["seconds"], r["stopped"]
                            got = int(r["stdout"]) if r["stdout"].isdigit() else None
                            if not r["stopped"] and got != ws["find_count"]:
                                m["problems"].append(f"find: {got} (want {ws['find_count']})")
                    res = mo.result
                    m[f"usable_{kind}_s"] = res["usable_s"]
                    m[f"usable_{kind}_stopped"] = res.get("stopped")
                    m[f"rss_after_{kind}_mount_mib"] = res.get("rss_after_mount_mib")
                    m[f"peak_rss_{kind}_mib"] = res.get("peak_rss_mib")
                    m[f"launcher_rss_{kind}_mib"] = res.get("launcher_rss_mib")
                    if res.get("problem"):
                        m["problems"].append(f"{kind} mount: {res['problem']} {res.get('output', '')[-200:]}")
                        stop = True
                    B.log(f"million {cache} {tool} {kind}: usable {fmtv(res['usable_s'])} s, RSS "
                          f"{fmtv(res.get('rss_after_mount_mib'))} MiB, peak {fmtv(res.get('peak_rss_mib'))} MiB, "
                          f"launcher {fmtv(res.get('launcher_rss_mib'))} MiB"
                          + (f", find {fmtv(m.get('find_s'))} s" if kind == "cached" else ""))
                    if stop:
                        break
                mil["runs"].append(m)
                B.write_json(out_path, results)


# ---------------------------------------------------------------- tables and targets

F = C.fmt


def sec(s, key, spec=".3f"):
    if s is None:
        return "-"
    op = key.replace("_s", "")
    if s.get(f"{op}_stopped") and s.get(key) is None:
        return f"> {s.get(f'{op}_limit', 0):.0f} s (stopped)"
    return F(s.get(key), spec)


def print_kernel(results, args):
    k = results.get("kernel")
    if not k or not k.get("summary"):
        return
    t = results["tree"]
    for cache in args.cache:
        summ = k["summary"].get(cache, {})
        cols = ["tool", "usable 1st s", "usable cached s", "index s", "image ms", "1st byte ms", "find s", "find/native",
                "find/ferry", "read all s", "read/native", "read/ferry", "again s", "again/native", "RSS mount MiB",
                "peak RSS MiB",
                "launcher 1st MiB"]
        lines = []
        notes = []
        for tool in args.tools:
            s = summ.get(tool)
            if not s:
                continue
            lines.append([tool, sec(s, "usable_first_s"), sec(s, "usable_cached_s"), F(s.get("index_s"), ".3f"),
                          F(s.get("image_ms"), ".0f"),
                          F(s.get("first_byte_ms"), ".2f"), sec(s, "find_s"), F(s.get("find_vs_native"), ".2f"),
                          F(s.get("find_vs_ferry"), ".2f"), sec(s, "read_s", ".2f"), F(s.get("read_vs_native"), ".2f"),
                          F(s.get("read_vs_ferry"), ".2f"), F(s.get("read_again_s"), ".2f"),
                          F(s.get("read_again_vs_native"), ".2f"), F(s.get("rss_after_mount_mib"), ".1f"),
                          F(s.get("peak_rss_mib"), ".1f"), F(s.get("launcher_rss_first_mib"), ".1f")])
            for p in s["problems"]:
                notes.append(f"{tool}: {p}")
            if s.get("noisy"):
                notes.append(f"{tool}: {s['noisy']} step(s) started while the machine was busy")
        w = t["want"]
        print(f"\n== mount: kernel tree ({w['files']:,} files, {w['dirs']:,} dirs, {w['symlinks']:,} symlinks, "
              f"{w['bytes'] / 1e6:,.0f} MB; find {t['find_count']:,}), {cache} cache, median of "
              f"{args.reps} (ratarmount, archivemount: {min(args.reps, args.peer_reps)}) ==")
        print("\n".join(B.format_table(cols, lines)))
        for n in notes:
            print("   note:", n)
    print("   usable: mount command started -> stat of the deepest file answers; 1st: no index (ferry: empty "
          "--cache-dir; ratarmount: no .index.sqlite); cached: the index the first mount left; index: `ferry "
          "index` of the GNU tar; find: `find . | wc -l`; read all: `tar -cf - . | wc -c`; each on a fresh "
          "mount. x/native, x/ferry: ratios of medians (>1: slower than native / than ferry on its own archive). "
          "RSS mount: VmRSS of the server right after mount; peak: its VmHWM before unmount, max over all "
          "mounts; launcher: GNU time's peak of the mount command on the first mount")


def print_million(results, args):
    mil = results.get("million")
    if not mil or not mil.get("runs"):
        return
    cols = ["tool", "cache", "index s", "usable 1st s", "usable cached s", "find s", "RSS mount MiB",
            "peak RSS MiB", "launcher 1st MiB"]
    lines = []
    for m in mil["runs"]:
        def u(kind):
            if m.get(f"usable_{kind}_stopped"):
                return f"> {args.million_limit:.0f} s (stopped)"
            return F(m.get(f"usable_{kind}_s"), ".3f")
        peak = max([x for x in (m.get("peak_rss_first_mib"), m.get("peak_rss_cached_mib")) if x is not None],
                   default=None)
        lines.append([m["tool"], m["cache"], F(m.get("index_s"), ".2f"), u("first"), u("cached"),
                      "> limit (stopped)" if m.get("find_stopped") else F(m.get("find_s"), ".2f"),
                      F(m.get("rss_after_cached_mount_mib"), ".1f"), F(peak, ".1f"),
                      F(m.get("launcher_rss_first_mib"), ".1f")])
    print(f"\n== mount: {mil['files']:,} files of 100 B in {mil['dirs']:,} dirs (GNU tar "
          f"{mil.get('tar_bytes', 0) / 1e6:,.0f} MB, ferry archive {mil.get('far_bytes', 0) / 1e6:,.0f} MB), one run ==")
    print("\n".join(B.format_table(cols, lines, left=2)))
    for m in mil["runs"]:
        for p in m["problems"]:
            print(f"   note: {m['tool']}/{m['cache']}: {p}")


def targets(results, args):
    out = []

    def add(name, value, met, detail):
        out.append({"target": name, "value": value, "met": met, "detail": detail})

    k = results.get("kernel", {}).get("summary", {}).get("warm", {})
    am = k.get("archivemount", {})
    rt = k.get("ratarmount", {})
    for tool in ("ferry", "ferry-tar"):
        f = k.get(tool)
        if not f:
            continue
        name = "ferry archive" if tool == "ferry" else "GNU tar (ferry)"
        if tool == "ferry":
            for kind in ("first", "cached"):
                v = f.get(f"usable_{kind}_s")
                add(f"kernel warm: ferry archive usable < 50 ms ({kind} mount)", v, v is not None and v < 0.05,
                    f"{F(v and v * 1000, '.1f')} ms")
        else:
            v, a = f.get("usable_first_s"), am.get("usable_first_s")
            add("kernel warm: GNU tar indexed (ferry first mount) faster than archivemount mounts it", v,
                v is not None and a is not None and v < a, f"ferry {F(v, '.3f')} s vs archivemount {F(a, '.3f')} s")
            i = f.get("index_s")
            add("kernel warm: `ferry index` of the GNU tar faster than archivemount mounts it", i,
                i is not None and a is not None and i < a, f"ferry index {F(i, '.3f')} s vs archivemount {F(a, '.3f')} s")
        fv, fn = f.get("find_vs_native"), f.get("find_s")
        add(f"kernel warm: {name}: find within 3x of native", fv, fv is not None and fv <= 3,
            f"{F(fn, '.3f')} s = {F(fv, '.2f')}x native")
        r = rt.get("find_s") / fn if (rt.get("find_s") and fn) else None
        add(f"kernel warm: {name}: find >= 8x faster than ratarmount", r, r is not None and r >= 8,
            f"ratarmount {F(rt.get('find_s'), '.3f')} s / {F(fn, '.3f')} s = {F(r, '.1f')}x")
        rv, rn = f.get("read_vs_native"), f.get("read_s")
        add(f"kernel warm: {name}: read all within 2.5x of native", rv, rv is not None and rv <= 2.5,
            f"{F(rn, '.2f')} s = {F(rv, '.2f')}x native")
        rr = rt.get("read_s") / rn if (rt.get("read_s") and rn) else None
        add(f"kernel warm: {name}: read all >= 20x faster than ratarmount", rr, rr is not None and rr >= 20,
            f"ratarmount {sec(rt, 'read_s', '.1f')} s / {F(rn, '.2f')} s = {F(rr, '.1f')}x")
        p = f.get("peak_rss_mib")
        add(f"kernel warm: {name}: server peak RSS < 64 MiB", p, p is not None and p < 64, f"{F(p, '.1f')} MiB")
        lp = f.get("launcher_rss_first_mib")
        add(f"kernel warm: {name}: mount command (first mount) peak RSS < 64 MiB", lp, lp is not None and lp < 64,
            f"{F(lp, '.1f')} MiB")
    cold = results.get("kernel", {}).get("summary", {}).get("cold", {})
    for tool in KERNEL_TOOLS:
        f, c = k.get(tool), cold.get(tool, {})
        if not f:
            continue
        name = "ferry archive" if tool == "ferry-kernel" else "GNU tar (ferry)"
        if tool == "ferry-kernel":
            for kind, limit in (("first", 0.5), ("cached", 0.05)):
                v = f.get(f"usable_{kind}_s")
                add(f"kernel warm: --kernel, ferry archive usable < {limit * 1000:.0f} ms ({kind} mount)", v,
                    v is not None and v < limit, f"{F(v and v * 1000, '.1f')} ms")
        i = f.get("image_ms")
        add(f"kernel warm: --kernel, {name}: image built well under 1 s", i, i is not None and i < 500,
            f"{F(i, '.0f')} ms" + (" (with the scan of the tar)" if tool != "ferry-kernel" else ""))
        for op, what in (("find", "find"), ("read", "read all")):
            v, n = f.get(f"{op}_vs_native"), f.get(f"{op}_s")
            add(f"kernel warm: --kernel, {name}: {what} within 1.3x of native", v, v is not None and v <= 1.3,
                f"{F(n, '.3f')} s = {F(v, '.2f')}x native")
        v, n = f.get("read_again_vs_native"), f.get("read_again_s")
        add(f"kernel warm: --kernel, {name}: read all again on the same mount within 1.3x of native", v,
            v is not None and v <= 1.3, f"{F(n, '.3f')} s = {F(v, '.2f')}x native")
        v, n = c.get("read_vs_native"), c.get("read_s")
        add(f"kernel cold: --kernel, {name}: read all within 1.3x of native", v, v is not None and v <= 1.3,
            f"{F(n, '.3f')} s = {F(v, '.2f')}x native")
    for m in results.get("million", {}).get("runs", []):
        if m["tool"] not in ("ferry", "ferry-tar") or m["cache"] != "warm":
            continue
        name = "ferry archive" if m["tool"] == "ferry" else "GNU tar (ferry)"
        for kind in ("first", "cached") if m["tool"] == "ferry" else ("cached",):
            v = m.get(f"usable_{kind}_s")
            add(f"1M warm: {name} usable < 100 ms ({kind} mount)", v, v is not None and v < 0.1,
                f"{F(v and v * 1000, '.1f')} ms")
        peaks = [x for x in (m.get("peak_rss_first_mib"), m.get("peak_rss_cached_mib"),
                             m.get("launcher_rss_first_mib")) if x is not None]
        p = max(peaks) if peaks else None
        add(f"1M warm: {name} RSS < 64 MiB (server peak and mount command)", p, p is not None and p < 64,
            f"server peak {F(m.get('peak_rss_cached_mib'), '.1f')} MiB, first-mount command "
            f"{F(m.get('launcher_rss_first_mib'), '.1f')} MiB")
    return out


def print_targets(ts):
    if not ts:
        return
    print("\n== targets (issues 22, 26) ==")
    lines = [[t["target"], "met" if t["met"] else "NOT MET", t["detail"]] for t in ts]
    print("\n".join(B.format_table(["target", "", "measured"], lines, left=3)))


def print_perf(results):
    for tool, d in (results.get("kernel", {}).get("perf") or {}).items():
        for op, r in d.items():
            if not isinstance(r, dict):
                continue
            print(f"\n== perf: {tool} {op} (warm, fresh mount): {F(r.get('seconds'), '.3f')} s wall, server CPU "
                  f"{F(r.get('server_cpu_s'), '.2f')} s, reader {F(r.get('reader_user_s'), '.2f')} user + "
                  f"{F(r.get('reader_sys_s'), '.2f')} sys ({F(r.get('cpus_busy'), '.2f')} CPUs busy of "
                  f"{os.cpu_count()}), {r.get('fuse_requests_total', 0):,} FUSE requests "
                  f"({F(r.get('us_per_request'), '.1f')} us each) ==")
            print("   requests: " + ", ".join(f"{k.removeprefix('FUSE_')} {v:,}"
                                              for k, v in (r.get("fuse_requests") or {}).items()))
            for line in r.get("top_symbols", [])[:15]:
                print("   " + line.rstrip())


def plot(out_path, args):
    return B.plot(os.path.join(B.HERE, "plot_mount.py"), out_path, args.plot_python, args.plot_dir)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csv = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: a few subtrees of the kernel tree, 1 rep, no 1M set, short limits")
    ap.add_argument("--quick-subtrees", type=csv, default=["fs/ext4", "fs/xfs", "Documentation/filesystems"])
    ap.add_argument("-t", "--tools", type=csv, default=TOOLS, help=f"comma list of {','.join(TOOLS)}")
    ap.add_argument("-c", "--cache", type=csv, default=["warm", "cold"])
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--peer-reps", type=int, default=1,
                    help="reps for ratarmount and archivemount (their read-all takes minutes)")
    ap.add_argument("--read-limit", type=float, default=300, help="time limit of find / read all (s)")
    ap.add_argument("--archivemount-read-limit", type=float, default=120)
    ap.add_argument("--mount-limit", type=float, default=300, help="time limit of a mount becoming usable")
    ap.add_argument("--ferry-jobs", type=int, default=4, help="ferry mount -j (FUSE threads)")
    ap.add_argument("--seed", type=int, default=22, help="picks the first-byte file")
    ap.add_argument("--no-million", action="store_true")
    ap.add_argument("--no-kernel", action="store_true", help="only the 1M set")
    ap.add_argument("--million-files", type=int, default=1_000_000)
    ap.add_argument("--million-dirs", type=int, default=1000)
    ap.add_argument("--million-tools", type=csv, default=["ferry", "ferry-tar", "ratarmount"])
    ap.add_argument("--million-cache", type=csv, default=["warm"])
    ap.add_argument("--million-limit", type=float, default=600)
    ap.add_argument("--million-image-size", default="10G")
    ap.add_argument("--no-perf", dest="perf", action="store_false")
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--ratarmount", default=None, help="default: bench/.build/ratarmount-venv (setup.sh)")
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-mount")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--kernel-tarball")
    ap.add_argument("--image-size", default="8G")
    ap.add_argument("--no-direct-io", action="store_true")
    ap.add_argument("--quiet-wait", type=float, default=30)
    ap.add_argument("--nice", type=int, default=-10)
    ap.add_argument("--out")
    ap.add_argument("--plot-dir", default=os.path.join(B.ROOT, "docs", "img"))
    ap.add_argument("--plot-python", default="/usr/bin/python3")
    ap.add_argument("--cleanup", action="store_true")
    args = ap.parse_args()
    if args.cleanup:
        B.require_root()
        cleanup_fuse(args.scratch)
    B.start(args)
    if args.quick:
        args.reps, args.no_million = 1, True
        args.read_limit, args.archivemount_read_limit = min(args.read_limit, 60), min(args.archivemount_read_limit, 20)
    args.ratarmount = args.ratarmount or ratarmount_bin()
    for t in list(args.tools):
        if t == "ratarmount" and not args.ratarmount or t == "archivemount" and not B.which("archivemount"):
            B.log(f"{t} is not installed (bench/setup.sh): skipped")
            args.tools.remove(t)
        elif t not in TOOLS:
            ap.error(f"unknown tool {t}")
    args.million_tools = [t for t in args.million_tools if t in MOUNTERS and (t != "ratarmount" or args.ratarmount)]
    built = args.ferry
    if not os.access(built, os.X_OK):
        sys.exit(f"no ferry binary at {built}: cargo build --release")
    args.ferry = B.snapshot_binary(built, os.path.join(B.HERE, ".build", "bin"))
    out_path = args.out or os.path.join(B.RESULTS, f"mount-{B.timestamp()}.json")
    results = {"kind": "mount_bench", "started": B.timestamp(), "argv": sys.argv, "machine": B.machine_info(),
               "ferry": dict(B.ferry_identity(built), snapshot=args.ferry),
               "peers": {t: tool_version(t, args) for t in ("ratarmount", "archivemount") if t in args.tools},
               "tools": args.tools, "reps": args.reps, "peer_reps": args.peer_reps, "cache": args.cache,
               "quick": args.quick, "limits": {"read": args.read_limit, "archivemount_read": args.archivemount_read_limit,
                                                "mount": args.mount_limit, "million": args.million_limit}}
    B.log(f"results -> {out_path}")
    os.makedirs(args.scratch, exist_ok=True)
    try:
        if not args.no_kernel:
            run_kernel(args, results, out_path)
        if not args.no_million:
            run_million(args, results, out_path)
    finally:
        cleanup_fuse(args.scratch, quiet=True)
        results["targets"] = targets(results, args)
        results["finished"] = B.timestamp()
        B.write_json(out_path, results)
        print_kernel(results, args)
        print_million(results, args)
        print_perf(results)
        print_targets(results["targets"])
        print(f"\nresults: {out_path}")
    if args.plot_dir and args.plot_python:
        for p in plot(out_path, args):
            print(f"plot: {p}")


def cleanup_fuse(scratch, quiet=False):
    """Lazily unmount FUSE and EROFS mounts left under `scratch` (FUSE servers then exit)."""
    scratch = os.path.realpath(scratch)
    with open("/proc/mounts") as f:
        mounts = [(line.split()[1], line.split()[2]) for line in f
                  if line.split()[2].startswith("fuse") or line.split()[2] == "erofs"]
    for m, kind in mounts:
        if m.startswith(scratch + "/"):
            if not quiet:
                B.log("unmount (lazily)", m)
            if kind == "erofs":
                B.sh("umount", "-l", m, check=False, capture=True)
            else:
                B.sh("fusermount", "-u", "-z", m, check=False, capture=True)


if __name__ == "__main__":
    main()
