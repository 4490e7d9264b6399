#!/usr/bin/env python3
"""ferry over the network (issue #23), side by side with its peers, over loopback onto a
fresh loop-mounted ext4, warm cache.

Parts (-p):
  tree    The Linux source tree (Debian's linux-source, extracted onto the ext4): ferry
          copy to a `ferry serve --listen` daemon over TLS and with --insecure (and with
          --per-client-buffer), ferry copy over ssh (a throwaway sshd on a loopback
          port), the rsync daemon, rsync -e ssh, tar | nc | tar, tar | ssh | tar, the
          local ferry copy (the floor) and ferry pack - | ferry unpack -; raw ssh
          throughput for the same bytes (the tree as one tar, `ssh 'cat >/dev/null'`).
  clients 1, 16 and 128 clients at once (-n), each uploading the same small tree (3,000
          files of 1 KiB to 16 KiB and 4 of 1 MiB: about 30 MB) to its own directory on one
          daemon (--insecure, --memory 64M), with the shared pool and with
          --per-client-buffer: aggregate MB/s (all bytes over the wall time of the
          slowest) and the daemon's peak RSS (VmHWM).
  delay   10,000 files of 1 KiB in 100 directories through a proxy written here that
          delays every chunk 20 ms each way (loopback, bounded): ferry (TLS and
          --insecure) against the rsync daemon and tar | nc | tar through it, and
          ferry's two without the proxy (the floor once round trips are taken away).

Results JSON in bench/results/net-*.json; a table per part on stdout.

    sudo bench/net_bench.py                  # all parts, 3 runs each
    sudo bench/net_bench.py -p delay -r 1
"""
import argparse
import os
import queue
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

PARTS = ["tree", "clients", "delay"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


class Daemon:
    """ferry serve --listen on a free port, state and client config in `work`."""

    def __init__(self, ferry, root, work, args=()):
        self.ferry, self.root, self.work = ferry, root, work
        self.port = free_port()
        os.makedirs(root, exist_ok=True)
        self.log = open(os.path.join(work, f"serve-{self.port}.log"), "w")
        self.proc = subprocess.Popen(
            [ferry, "serve", "--listen", f"127.0.0.1:{self.port}", "--root", root,
             "--state-dir", os.path.join(work, "state"), "--busy-timeout", "600", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        wait_port(self.port, self.proc)

    def url(self, path, port=None):
        return f"ferry://127.0.0.1:{port or self.port}/{path}"

    def env(self):
        return {"XDG_CONFIG_HOME": os.path.join(self.work, "client")}

    def peak_rss_kib(self):
        return peak_rss_kib(self.proc.pid)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


class Sshd:
    """A throwaway sshd on a loopback port (as tests/net/sshd.rs starts it)."""

    def __init__(self, work):
        self.dir = os.path.join(work, "sshd")
        os.makedirs(self.dir, exist_ok=True)
        for key in ("host_key", "user_key"):
            path = os.path.join(self.dir, key)
            if not os.path.exists(path):
                B.sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path)
        os.makedirs("/run/sshd", exist_ok=True)
        self.port = free_port()
        d = self.dir
        config = os.path.join(d, "sshd_config")
        with open(config, "w") as f:
            f.write(f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
                    f"PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/user_key.pub\n"
                    "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\nPermitRootLogin yes\n")
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", config],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(d, "sshd.log"), "w"))
        wait_port(self.port, self.proc)
        self.rsh = (f"ssh -p {self.port} -i {d}/user_key -o StrictHostKeyChecking=no "
                    "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class RsyncDaemon:
    """rsync --daemon serving module `m` at `path` on a free loopback port."""

    def __init__(self, path, work):
        self.port = free_port()
        conf = os.path.join(work, f"rsyncd-{self.port}.conf")
        with open(conf, "w") as f:
            f.write(f"pid file = {work}/rsyncd-{self.port}.pid\nuse chroot = no\n"
                    f"[m]\npath = {path}\nread only = no\nuid = root\ngid = root\n")
        self.proc = subprocess.Popen(["rsync", "--daemon", "--no-detach", "--address=127.0.0.1",
                                      f"--port={self.port}", f"--config={conf}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class DelayProxy:
    """Forwards 127.0.0.1:port to `target`, each chunk delayed `delay` s each way
    (a delay, not a rate: chunks keep flowing while earlier ones wait). Serves until
    stopped; each connection's threads end with it."""

    def __init__(self, target, delay):
        self.target, self.delay = target, delay
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stopped:
            try:
                r, _, _ = select.select([self.sock], [], [], 0.2)
                if not r:
                    continue
                client, _ = self.sock.accept()
            except (OSError, ValueError):
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, server), (server, client)):
                a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, src, dst):
        q = queue.Queue()

        def writer():
            while True:
                due, data = q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if data is None:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return
        t = threading.Thread(target=writer, daemon=True)
        t.start()
        while True:
            try:
                data = src.recv(1 << 20)
            except OSError:
                data = b""
            q.put((time.monotonic() + self.delay, data or None))
            if not data:
                break
        t.join(timeout=600)

    def stop(self):
        self.stopped = True
        self.sock.close()


def measured(label, cmd, reps, before, env=None, check_tree=None, expect=None, results=None):
    """Runs `cmd` (a shell line) `reps` times, `before()` ahead of each; records seconds."""
    runs = []
    for i in range(reps):
        before()
        r = B.run_measured(cmd, shell=True, env=env, timeout=1800)
        ok = r["rc"] == 0
        if ok and check_tree and expect:
            st = B.tree_stats(check_tree)
            ok = st["files"] == expect["files"] and st["bytes"] == expect["bytes"]
            if not ok:
                B.log(f"{label}: tree differs: {st} vs {expect}")
        if not ok:
            B.log(f"{label}: rc {r['rc']}: {r['stderr'][-400:]}")
        runs.append({"seconds": r["seconds"], "rc": r["rc"], "ok": ok,
                     "maxrss_kib": r["maxrss_kib"], "user": r["user"], "sys": r["sys"]})
        B.log(f"{label} run {i + 1}: {r['seconds']:.2f} s{'' if ok else ' FAILED'}")
    med = B.median([x["seconds"] for x in runs if x["ok"]])
    row = {"way": label, "cmd": cmd, "runs": runs, "median": med}
    if results is not None:
        results.append(row)
    return row


def part_tree(args, fs, work, out):
    src = os.path.join(fs.mnt, "src")
    dst_parent = os.path.join(fs.mnt, "dst")
    os.makedirs(dst_parent, exist_ok=True)
    tar = kernel_tar(args)
    if not os.path.exists(src):
        os.makedirs(src)
        B.sh("tar", "-C", src, "-xf", tar)
    expect = B.tree_stats(src)
    B.log(f"tree: {expect}")
    dst = os.path.join(dst_parent, "t")
    f = args.ferry

    def fresh():
        B.rmtree(dst)
        B.sync()
        # warm: the source read once
        B.sh("sh", "-c", f"tar -C {src} -cf - . >/dev/null")

    rows = []
    tls = Daemon(f, dst_parent, work)
    plain = Daemon(f, dst_parent, work, ["--insecure"])
    baseline = Daemon(f, dst_parent, work, ["--per-client-buffer"])
    sshd = Sshd(work)
    rsyncd = RsyncDaemon(dst_parent, work)
    ncport = free_port()
    ssh = sshd.rsh
    try:
        # The TLS pin is made once, before the measured runs.
        pin = os.path.join(work, "pin")
        os.makedirs(pin, exist_ok=True)
        for d in (tls, baseline):
            B.sh(f, "copy", "--no-progress", pin, d.url("pin"), env={**os.environ, **d.env()})
        ways = [
            ("ferry copy (local, the floor)", f"{f} copy --no-progress {src} {dst}", None),
            ("ferry pack - | ferry unpack -", f"{f} pack {src} - | {f} unpack - {dst}", None),
            ("ferry TLS daemon", f"{f} copy --no-progress {src} {tls.url('t')}", tls.env()),
            ("ferry TLS daemon, --per-client-buffer",
             f"{f} copy --no-progress {src} {baseline.url('t')}", baseline.env()),
            ("ferry --insecure daemon", f"{f} copy --no-progress --insecure {src} {plain.url('t')}", None),
            ("ferry over ssh", f"{f} copy --no-progress -e '{ssh}' --remote-ferry {f} {src} 127.0.0.1:{dst}",
             None),
            ("rsync daemon", f"rsync -a {src}/ rsync://127.0.0.1:{rsyncd.port}/m/t/", None),
            ("rsync -e ssh", f"rsync -a -e '{ssh}' {src}/ 127.0.0.1:{dst}/", None),
            ("tar | nc | tar",
             f"mkdir -p {dst} && {{ nc -l 127.0.0.1 {ncport} | tar -C {dst} -xf - & }} && sleep 0.3 && "
             f"tar -C {src} -cf - . | nc -N 127.0.0.1 {ncport}; wait", None),
            ("tar | ssh | tar", f"tar -C {src} -cf - . | {ssh} 127.0.0.1 'mkdir -p {dst} && tar -C {dst} -xf -'",
             None),
        ]
        for label, cmd, env in ways:
            if args.ways and not any(w in label for w in args.ways):
                continue
            measured(label, cmd, args.reps, fresh, env=env, check_tree=dst, expect=expect, results=rows)
        size = os.path.getsize(tar)
        raw = measured("raw ssh, the tree as one tar (cat >/dev/null)",
                       f"{ssh} 127.0.0.1 'cat >/dev/null' < {tar}", args.reps, lambda: None, results=rows)
        raw["bytes"] = size
        raw_aes = measured("raw ssh aes128-gcm (cat >/dev/null)",
                           f"{ssh} -c aes128-gcm@openssh.com 127.0.0.1 'cat >/dev/null' < {tar}",
                           args.reps, lambda: None, results=rows)
        raw_aes["bytes"] = size
        if args.perf:
            fresh()
            data = os.path.join(work, "perf-daemon.data")
            p = subprocess.Popen(["perf", "record", "-g", "-o", data, "-p", str(tls.proc.pid)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            B.sh("sh", "-c", f"{f} copy --no-progress {src} {tls.url('t')}", env={**os.environ, **tls.env()})
            p.send_signal(2)
            p.wait()
            rep = B.sh("perf", "report", "-i", data, "--no-children", "--stdio", "--percent-limit", "1.5",
                       "-g", "none", capture=True, check=False).stdout
            out["perf_daemon_top"] = [l for l in rep.splitlines() if l.strip() and not l.startswith("#")][:30]
    finally:
        for s in (tls, plain, baseline, sshd, rsyncd):
            s.stop()
    floor = next((r["median"] for r in rows if r["way"].startswith("ferry copy (local")), None)
    for r in rows:
        r["vs_local_copy"] = (r["median"] / floor) if floor and r["median"] else None
    out["tree"] = {"stats": expect, "rows": rows}


def small_tree(root, seed=1):
    import random
    rnd = random.Random(seed)
    pool = rnd.randbytes(1 << 20)
    for d in range(60):
        dp = os.path.join(root, f"d{d:02d}")
        os.makedirs(dp)
        for i in range(50):
            size = rnd.randint(1024, 16384)
            with open(os.path.join(dp, f"f{i:03d}"), "wb") as fh:
                fh.write(pool[:size])
    for i in range(4):
        with open(os.path.join(root, f"big{i}"), "wb") as fh:
            fh.write(rnd.randbytes(1 << 20))


def part_clients(args, fs, work, out):
    src = os.path.join(fs.mnt, "small")
    if not os.path.exists(src):
        small_tree(src)
    st = B.tree_stats(src)
    rows = []
    for mode in ("pool", "per-client-buffer"):
        for n in args.clients:
            root = os.path.join(fs.mnt, "clients")
            B.rmtree(root)
            B.sync()
            extra = ["--insecure", "--memory", "64M"] + (["--per-client-buffer"] if mode != "pool" else [])
            d = Daemon(args.ferry, root, work, extra)
            try:
                t0 = time.perf_counter()
                procs = [subprocess.Popen([args.ferry, "copy", "--no-progress", "--insecure", src,
                                           d.url(f"c{i}")], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                         for i in range(n)]
                failed = 0
                for p in procs:
                    _, err = p.communicate()
                    if p.returncode != 0:
                        failed += 1
                        B.log(f"client: {err.decode()[-300:]}")
                secs = time.perf_counter() - t0
                rss = d.peak_rss_kib()
            finally:
                d.stop()
            mbps = n * st["bytes"] / secs / 1e6
            rows.append({"mode": mode, "clients": n, "seconds": secs, "aggregate_MBps": mbps,
                         "server_peak_rss_kib": rss, "failed": failed})
            B.log(f"clients {mode} x{n}: {secs:.2f} s, {mbps:.1f} MB/s, server peak {rss / 1024:.1f} MiB, "
                  f"{failed} failed")
    out["clients"] = {"tree": st, "rows": rows}


def part_delay(args, fs, work, out):
    src = os.path.join(fs.mnt, "tiny")
    if not os.path.exists(src):
        for d in range(100):
            os.makedirs(os.path.join(src, f"d{d:02d}"))
            for i in range(100):
                with open(os.path.join(src, f"d{d:02d}", f"f{i:03d}"), "wb") as fh:
                    fh.write(os.urandom(1024))
    expect = B.tree_stats(src)
    dst_parent = os.path.join(fs.mnt, "dly")
    os.makedirs(dst_parent, exist_ok=True)
    dst = os.path.join(dst_parent, "t")

    def fresh():
        B.rmtree(dst)
        B.sync()

    f = args.ferry
    tls = Daemon(f, dst_parent, work)
    plain = Daemon(f, dst_parent, work, ["--insecure"])
    rsyncd = RsyncDaemon(dst_parent, work)
    ncport = free_port()
    proxies = {name: DelayProxy(port, args.delay) for name, port in
               (("tls", tls.port), ("plain", plain.port), ("rsync", rsyncd.port), ("nc", ncport))}
    rows = []
    try:
        B.sh(f, "copy", "--no-progress", os.path.join(src, "d00"),
             tls.url("pin", proxies["tls"].port), env={**os.environ, **tls.env()})
        ways = [
            ("ferry TLS daemon", f"{f} copy --no-progress {src} {tls.url('t', proxies['tls'].port)}", tls.env()),
            ("ferry --insecure daemon",
             f"{f} copy --no-progress --insecure {src} {plain.url('t', proxies['plain'].port)}", None),
            # The same copies without the proxy: what is left of the delayed ones once
            # their round trips are taken away (the floor they approach).
            ("ferry TLS daemon, no delay", f"{f} copy --no-progress {src} {tls.url('t')}", tls.env()),
            ("ferry --insecure daemon, no delay",
             f"{f} copy --no-progress --insecure {src} {plain.url('t')}", None),
            ("rsync daemon", f"rsync -a {src}/ rsync://127.0.0.1:{proxies['rsync'].port}/m/t/", None),
            ("tar | nc | tar",
             f"mkdir -p {dst} && {{ nc -l 127.0.0.1 {ncport} | tar -C {dst} -xf - & }} && sleep 0.3 && "
             f"tar -C {src} -cf - . | nc -N 127.0.0.1 {proxies['nc'].port}; wait", None),
        ]
        for label, cmd, env in ways:
            measured(label, cmd, args.reps, fresh, env=env, check_tree=dst, expect=expect, results=rows)
    finally:
        for p in proxies.values():
            p.stop()
        for s in (tls, plain, rsyncd):
            s.stop()
    out["delay"] = {"stats": expect, "delay_each_way_s": args.delay, "rows": rows}


def kernel_tar(args):
    sys.path.insert(0, B.HERE)
    import copy_bench
    tar = copy_bench.kernel_tarball(args.kernel_cache)
    if tar is None:
        raise SystemExit("no /usr/src/linux-source-*.tar.*: run bench/setup.sh")
    return tar


def print_tables(out):
    if "tree" in out:
        rows = [[r["way"], f"{r['median']:.2f}" if r["median"] else "failed",
                 f"{r['vs_local_copy']:.2f}" if r.get("vs_local_copy") else "",
                 ", ".join(f"{x['seconds']:.2f}" for x in r["runs"])] for r in out["tree"]["rows"]]
        print("\n".join(B.format_table(["way", "median s", "x local copy", "runs"], rows)))
    if "clients" in out:
        rows = [[r["mode"], str(r["clients"]), f"{r['seconds']:.2f}", f"{r['aggregate_MBps']:.1f}",
                 f"{r['server_peak_rss_kib'] / 1024:.1f}", str(r["failed"])] for r in out["clients"]["rows"]]
        print("\n".join(B.format_table(["mode", "clients", "s", "MB/s", "server RSS MiB", "failed"], rows)))
    if "delay" in out:
        rows = [[r["way"], f"{r['median']:.2f}" if r["median"] else "failed",
                 ", ".join(f"{x['seconds']:.2f}" for x in r["runs"])] for r in out["delay"]["rows"]]
        print("\n".join(B.format_table(["way (20 ms each way)", "median s", "runs"], rows)))


def main():
    csv = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", "--parts", type=csv, default=PARTS)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("-n", "--clients", type=lambda s: [int(x) for x in csv(s)], default=[1, 16, 128])
    ap.add_argument("-w", "--ways", type=csv, default=[], help="only the tree ways whose label holds one of these")
    ap.add_argument("--delay", type=float, default=0.020, help="seconds the delay proxy adds each way")
    ap.add_argument("--perf", action="store_true", help="perf record the TLS daemon during one upload")
    ap.add_argument("--ferry", default=B.default_ferry())
    ap.add_argument("--scratch", default=B.DEFAULT_SCRATCH + "-net")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--nice", type=int)
    ap.add_argument("--cleanup", action="store_true")
    args = ap.parse_args()
    B.start(args)
    ferry = os.path.join(tempfile.mkdtemp(prefix="ferry-net-bench-"), "ferry")
    shutil.copy2(args.ferry, ferry)
    args.ferry = ferry
    out = {"machine": B.machine_info(), "ferry": B.ferry_identity(ferry), "args": vars(args),
           "uptime_before": open("/proc/loadavg").read().strip()}
    work = tempfile.mkdtemp(prefix="ferry-net-work-")
    with B.LoopFs("ext4", args.scratch, "ext4", size="12G") as fs:
        for part in args.parts:
            {"tree": part_tree, "clients": part_clients, "delay": part_delay}[part](args, fs, work, out)
    out["uptime_after"] = open("/proc/loadavg").read().strip()
    path = os.path.join(B.RESULTS, f"net-{B.timestamp()}.json")
    B.write_json(path, out)
    print_tables(out)
    if "perf_daemon_top" in out:
        print("\n".join(out["perf_daemon_top"]))
    B.log(f"wrote {path}")


if __name__ == "__main__":
    main()
