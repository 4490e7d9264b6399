#!/usr/bin/env python3
"""CPU-seconds of each way of moving the kernel tree over loopback, to show the floor a
2-core machine puts under the network targets (issue 23): the whole machine's busy time
(/proc/stat, user + system + softirq, all processes: sender, receiver, ssh, sshd and
the kernel's TCP work), the wall time, and wall / (busy / cores), how well the way
kept the cores busy. Run on a quiet machine: other processes' time counts too.

    sudo bench/net_cpu.py [-r 3]

Ways: local `ferry copy`; `ferry pack - | ferry unpack -`; ferry to `ferry serve` over
TLS and --insecure; raw `ssh 'cat >/dev/null'` of the tree as one tar; ferry over ssh;
`tar | ssh | tar`; a fresh ext4 loop filesystem each run, warm source."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import net_bench as N  # noqa: E402


def busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return v[0] + v[1] + v[2] + v[5] + v[6]


def measure(cmd, env=None):
    hz = os.sysconf("SC_CLK_TCK")
    b0, t0 = busy_jiffies(), time.perf_counter()
    r = subprocess.run(["sh", "-c", cmd], env={**os.environ, **(env or {})},
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall, busy = time.perf_counter() - t0, (busy_jiffies() - b0) / hz
    if r.returncode != 0:
        raise RuntimeError(f"{cmd}: {r.stderr.decode()[-400:]}")
    return wall, busy


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--ferry", default=os.path.join(B.ROOT, "target/release/ferry"))
    ap.add_argument("--scratch", default="/var/tmp/ferry-bench-netcpu")
    ap.add_argument("--kernel-cache", default=B.DEFAULT_SCRATCH)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.makedirs(args.scratch, exist_ok=True)
    cores = os.cpu_count()
    f = args.ferry
    rows = {}
    with B.LoopFs("ext4", args.scratch, "netcpu", size="12G") as fs:
        src = os.path.join(fs.mnt, "src")
        os.makedirs(src)
        B.sh("tar", "-C", src, "-xf", N.kernel_tar(args))
        work = os.path.join(fs.mnt, "work")
        os.makedirs(work, exist_ok=True)
        tarball = os.path.join(fs.mnt, "tree.tar")
        subprocess.run(["tar", "-C", src, "-cf", tarball, "."], check=True)
        sshd = N.Sshd(work)
        ssh = sshd.rsh
        tls = N.Daemon(f, os.path.join(fs.mnt, "tlsroot"), work)
        plain = N.Daemon(f, os.path.join(fs.mnt, "plainroot"), work, ["--insecure"])
        dst = os.path.join(fs.mnt, "dst")
        ways = [
            ("ferry copy (local)", f"{f} copy --no-progress {src} {dst}", None),
            ("ferry pack - | ferry unpack -", f"{f} pack {src} - | {f} unpack - {dst}", None),
            ("ferry TLS", f"{f} copy --no-progress {src} {tls.url('dst')}", tls.env()),
            ("ferry --insecure", f"{f} copy --no-progress --insecure {src} {plain.url('dst')}", plain.env()),
            ("raw ssh of the tar", f"{ssh} 127.0.0.1 'cat >/dev/null' < {tarball}", None),
            ("ferry over ssh", f"{f} copy --no-progress -e '{ssh}' --remote-ferry {f} {src} 127.0.0.1:{dst}", None),
            ("tar | ssh | tar", f"tar -C {src} -cf - . | {ssh} 127.0.0.1 'mkdir -p {dst} && tar -C {dst} -xf -'", None),
        ]
        try:
            subprocess.run(["tar", "-C", src, "-cf", "/dev/null", "."])
            subprocess.run(["cat", tarball], stdout=subprocess.DEVNULL)
            for rep in range(args.reps):
                for name, cmd, env in ways:
                    for d in (dst, os.path.join(fs.mnt, "tlsroot/dst"), os.path.join(fs.mnt, "plainroot/dst")):
                        shutil.rmtree(d, ignore_errors=True)
                    subprocess.run(["sync"])
                    wall, busy = measure(cmd, env)
                    rows.setdefault(name, []).append((wall, busy))
                    B.log(f"{name}: {wall:.2f} s wall, {busy:.2f} CPU-s")
        finally:
            tls.stop()
            plain.stop()
            sshd.stop()
    med = {n: (B.median([w for w, _ in v]), B.median([c for _, c in v])) for n, v in rows.items()}
    print(f"\n== CPU of each way ({cores} cores), medians of {args.reps} ==")
    table = [[n, f"{w:.2f}", f"{c:.2f}", f"{c / cores:.2f}", f"{w / (c / cores):.2f}"] for n, (w, c) in med.items()]
    print("\n".join(B.format_table(["way", "wall s", "CPU s", "CPU s / cores (floor)", "wall / floor"], table)))
    out = args.out or os.path.join(B.ROOT, "bench/results", f"netcpu-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    with open(out, "w") as fh:
        json.dump({"cores": cores, "runs": rows, "median": med}, fh, indent=1)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
