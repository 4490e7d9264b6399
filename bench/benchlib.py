"""Shared pieces of the ferry benchmarks (stdlib only).

- LoopFs: a fresh filesystem on a loop device, always unmounted and detached on exit.
- run_measured: run one command, return wall seconds, peak RSS and CPU from wait4().
- tree_stats: count entries and bytes of a tree (the cheap correctness check).
- drop_caches / sync.
"""
import datetime
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.environ.get("FERRY_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
DEFAULT_SCRATCH = os.environ.get("FERRY_BENCH_SCRATCH", "/var/tmp/ferry-bench")
RESULTS = os.path.join(HERE, "results")


def log(*a):
    print(time.strftime("[%H:%M:%S]"), *a, file=sys.stderr, flush=True)


def sh(*argv, check=True, capture=False, **kw):
    """Run a helper command (not a measured one)."""
    if capture:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
    r = subprocess.run(list(argv), check=False, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {r.returncode}: "
                           f"{(r.stderr or '').strip()[:500]}")
    return r


def sync():
    os.sync()


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def install_signal_handlers():
    """SIGTERM / SIGHUP raise SystemExit, so `finally` blocks unmount the loop images."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


class LoopFs:
    """A fresh ext4 or xfs on a sparse image under `scratch`, mounted at scratch/mnt-NAME.

    Uses an explicit loop device (direct I/O on by default, so the backing file is not
    cached twice) and always unmounts and detaches it in __exit__.
    """

    def __init__(self, fstype, scratch, name, size="8G", inodes=None, direct_io=True, mkfs_args=()):
        self.fstype, self.scratch, self.name = fstype, scratch, name
        self.size, self.inodes, self.direct_io = size, inodes, direct_io
        self.mkfs_args = list(mkfs_args)  # extra mkfs options, e.g. ("-m", "reflink=1") for xfs
        self.img = os.path.join(scratch, f"{name}.img")
        self.mnt = os.path.join(scratch, f"mnt-{name}")
        self.dev = None
        self.mounted = False
        self.info = {}

    def __enter__(self):
        os.makedirs(self.scratch, exist_ok=True)
        os.makedirs(self.mnt, exist_ok=True)
        if os.path.ismount(self.mnt):
            raise RuntimeError(f"{self.mnt} is already mounted: run with --cleanup first")
        if os.path.exists(self.img):
            os.unlink(self.img)
        sh("truncate", "-s", self.size, self.img)
        if self.fstype == "ext4":
            # No lazy init: otherwise ext4lazyinit zeroes inode tables in the background
            # during the first minutes of the benchmark.
            cmd = ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]
            if self.inodes:
                cmd += ["-N", str(self.inodes)]
            sh(*cmd, *self.mkfs_args, self.img)
        elif self.fstype == "xfs":
            sh("mkfs.xfs", "-q", "-f", *self.mkfs_args, self.img)
        elif self.fstype == "btrfs":
            sh("mkfs.btrfs", "-q", "-f", *self.mkfs_args, self.img)
        else:
            raise ValueError(f"unknown filesystem {self.fstype}")
        try:
            args = ["losetup", "--find", "--show"]
            if self.direct_io:
                args.append("--direct-io=on")
            self.dev = sh(*args, self.img, capture=True).stdout.strip()
            sh("mount", self.dev, self.mnt)
            self.mounted = True
            base = os.path.basename(self.dev)
            try:
                with open(f"/sys/block/{base}/loop/dio") as f:
                    self.info["loop_dio"] = f.read().strip() == "1"
            except OSError:
                pass
            self.info.update(fstype=self.fstype, size=self.size, inodes=self.inodes, dev=self.dev)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        os.sync()
        if self.mounted:
            for attempt in range(10):
                r = sh("umount", self.mnt, check=False, capture=True)
                if r.returncode == 0:
                    break
                time.sleep(1)
            else:
                log(f"umount {self.mnt} failed; lazy unmount")
                sh("umount", "-l", self.mnt, check=False)
            self.mounted = False
        if self.dev:
            sh("losetup", "-d", self.dev, check=False)
            self.dev = None
        if os.path.exists(self.img):
            os.unlink(self.img)
        return False


def cleanup_scratch(scratch):
    """Unmount and detach whatever an interrupted run left under `scratch`."""
    scratch = os.path.realpath(scratch)
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for m in mounts:
        if m.startswith(scratch + "/"):
            log("umount", m)
            sh("umount", m, check=False)
    r = sh("losetup", "-n", "-O", "NAME,BACK-FILE", "-l", check=False, capture=True)
    for line in (r.stdout or "").splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().startswith(scratch + "/"):
            log("losetup -d", parts[0])
            sh("losetup", "-d", parts[0], check=False)
    if os.path.isdir(scratch):
        for name in os.listdir(scratch):
            if name.endswith(".img"):
                os.unlink(os.path.join(scratch, name))


def rmtree(path):
    """Remove a tree quickly (rm -rf is faster than shutil on 100k files)."""
    if os.path.lexists(path):
        sh("rm", "-rf", "--one-file-system", path)


def run_measured(argv, *, shell=False, env=None, timeout=3600, cwd=None, stdout_path=None):
    """Run a command; return dict(seconds, maxrss_kib, user, sys, rc, stdout, stderr).

    stdout_path: send the command's standard output there (e.g. /dev/null, for a command
    whose output is large or beside the point) instead of capturing it; "stdout" is then "".

    Wall seconds are taken here around the whole run. Peak RSS, user and system CPU come
    from GNU time (/usr/bin/time), which forks from a small process: wait4() on a child
    forked from this Python would report Python's own RSS as the child's peak. For a shell
    pipeline, peak RSS is that of the largest single process (the kernel folds waited-for
    descendants into it), not a sum.
    """
    if shell:
        argv = ["sh", "-c", argv]
    with (open(stdout_path, "wb") if stdout_path else tempfile.TemporaryFile()) as out, \
            tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        timed = [TIME, "-q", "-f", "%M %U %S", "-o", tf.name] + list(argv)
        if NICE:
            timed = ["nice", "-n", str(NICE)] + timed
        busy0 = busy_seconds()
        t0 = time.perf_counter()
        p = subprocess.Popen(timed, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=err, env=full_env, cwd=cwd, start_new_session=True)
        timer = threading.Timer(timeout, lambda: _killpg(p.pid))
        timer.start()
        try:
            _, status, _ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        t1 = time.perf_counter()
        busy1 = busy_seconds()
        p.returncode = os.waitstatus_to_exitcode(status)
        if not stdout_path:
            out.seek(0)
        err.seek(0)
        maxrss = user = system = None
        for line in tf.read().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0].isdigit():
                maxrss, user, system = int(parts[0]), float(parts[1]), float(parts[2])
        other = None
        if busy0 is not None and busy1 is not None and user is not None:
            other = max(0.0, busy1 - busy0 - user - system)
        return {
            "seconds": t1 - t0,
            # CPU seconds the rest of the machine used meanwhile (noise; kernel threads
            # doing the copy's writeback count here too)
            "other_cpu": other,
            "maxrss_kib": maxrss,
            "user": user,
            "sys": system,
            "rc": p.returncode,
            "stdout": "" if stdout_path else out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
        }


TIME = "/usr/bin/time"
# Measured commands run at this niceness (set from --nice): on a 2-core machine shared
# with builds and test suites, a negative value keeps them from losing their CPUs.
NICE = 0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def busy_seconds():
    """CPU seconds all CPUs have been busy since boot (not idle, not waiting for I/O)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...
    return (sum(v[:8]) - v[3] - v[4]) / CLK_TCK


def wait_quiet(max_wait=180.0, threshold=0.25, window=1.0):
    """Wait until the rest of the machine is nearly idle (under `threshold` CPUs busy over a
    `window`-second sample), at most `max_wait` seconds. Other jobs on a 2-core machine
    (a build, a test suite) distort a copy benchmark badly. Returns seconds waited (and
    whether it got quiet)."""
    t0 = time.perf_counter()
    while True:
        b0 = busy_seconds()
        time.sleep(window)
        b1 = busy_seconds()
        waited = time.perf_counter() - t0
        if b0 is None or b1 is None or (b1 - b0) / window < threshold:
            return waited, True
        if waited >= max_wait:
            return waited, False


def snapshot_binary(path, into):
    """Copy a binary under `into` named by its hash, so a rebuild during a long run does
    not change what is measured. Returns the copy's path."""
    with open(path, "rb") as f:
        data = f.read()
    h = hashlib.sha256(data).hexdigest()[:12]
    os.makedirs(into, exist_ok=True)
    dst = os.path.join(into, f"{os.path.basename(path)}-{h}")
    if not os.path.exists(dst):
        with open(dst + ".tmp", "wb") as f:
            f.write(data)
        os.chmod(dst + ".tmp", 0o755)
        os.replace(dst + ".tmp", dst)
    return dst


def _killpg(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def tree_stats(root):
    """Counts of a tree, without following symlinks: dirs (not counting the root), regular
    files, symlinks, others, and bytes (the sum of the regular files' sizes)."""
    st = {"dirs": 0, "files": 0, "symlinks": 0, "others": 0, "bytes": 0}
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    st["dirs"] += 1
                    stack.append(e.path)
                elif e.is_symlink():
                    st["symlinks"] += 1
                elif e.is_file(follow_symlinks=False):
                    st["files"] += 1
                    st["bytes"] += e.stat(follow_symlinks=False).st_size
                else:
                    st["others"] += 1
    return st


def du_kib(path):
    """Disk usage of a tree in KiB (du -s)."""
    r = sh("du", "-s", "--block-size=1K", path, capture=True, check=False)
    try:
        return int(r.stdout.split()[0])
    except (IndexError, ValueError):
        return None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ferry_identity(ferry):
    """What ferry build is being measured: version, git commit of the tree, binary hash."""
    ident = {"path": ferry}
    try:
        ident["version"] = sh(ferry, "--version", capture=True, check=False).stdout.strip()
        with open(ferry, "rb") as f:
            ident["sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
        ident["mtime"] = datetime.datetime.fromtimestamp(os.path.getmtime(ferry)).isoformat(timespec="seconds")
    except OSError as e:
        ident["error"] = str(e)
    r = sh("git", "-C", ROOT, "rev-parse", "--short", "HEAD", capture=True, check=False)
    ident["git_head"] = (r.stdout or "").strip()
    r = sh("git", "-C", ROOT, "status", "--porcelain", "--", "src", "crates", "Cargo.toml",
           "Cargo.lock", capture=True, check=False)
    ident["git_dirty"] = bool((r.stdout or "").strip())
    return ident


def machine_info():
    info = {"nproc": os.cpu_count(), "kernel": os.uname().release}
    try:
        with open("/proc/meminfo") as f:
            info["mem_total"] = f.readline().split(":")[1].strip()
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def default_ferry():
    return os.environ.get("FERRY", os.path.join(ROOT, "target", "release", "ferry"))


def timestamp():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def require_root():
    if os.geteuid() != 0:
        sys.exit("the benchmarks mount loop images and drop caches: run them as root")


def start(args):
    """What every benchmark script does first with its parsed `args`: insist on root,
    set the measured commands' niceness (`--nice`), clean up on a signal, and for
    `--cleanup` unmount and detach leftovers under `--scratch` and exit."""
    global NICE
    require_root()
    if getattr(args, "nice", None) is not None:
        NICE = args.nice
    install_signal_handlers()
    if getattr(args, "cleanup", False):
        cleanup_scratch(args.scratch)
        sys.exit(0)


def format_table(cols, rows, left=1):
    """Aligned text table: `cols` the header, `rows` lists of strings; the first `left`
    columns are left-aligned, the rest right-aligned. Returns the lines."""
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]

    def line(vals):
        return "  ".join(v.ljust(w) if i < left else v.rjust(w)
                         for i, (v, w) in enumerate(zip(vals, widths))).rstrip()
    return [line(cols)] + [line(r) for r in rows]


def which(name):
    return shutil.which(name, path=os.environ.get("PATH", "") + ":" + os.path.expanduser("~/.cargo/bin"))


def plot(script, out_path, py, plot_dir):
    """Runs the plotting `script` with the Python `py` (which must have matplotlib) on the
    results at `out_path`, writing into `plot_dir`; returns the files it made."""
    if not py or subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode != 0:
        log(f"no matplotlib for {py}: run {script} yourself")
        return []
    r = sh(py, script, out_path, "-o", plot_dir, check=False, capture=True)
    if r.returncode != 0:
        log(f"plot failed: {r.stderr.strip()[-500:]}")
        return []
    return r.stdout.split()
