#!/usr/bin/env bash
# Install what the benchmarks in bench/ need. Idempotent: rerun at will.
#   Debian: rsync xfsprogs btrfs-progs libarchive-tools time linux-source python3-matplotlib restic
#           zstd xz-utils bzip2 (the compressed archive experiment)
#           archivemount fuse3 python3-venv (mount_bench.py; fuse3 gives fusermount3)
#   bench/.build/ratarmount-venv   ratarmount from PyPI in a venv of the system python3 (mount_bench.py)
#   bench/.build/limitcopy     built from ../shared/tools/limitcopy.c (the floor)
#   peers from crates.io:      fcp, xcp, cpz (into ~/.cargo/bin; a peer that fails is noted and skipped)
#   target/release/ferry       cargo build --release (skip with NO_FERRY_BUILD=1)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
shared="${FERRY_SHARED:-$root/../shared}"
status=0

need_pkgs=()
for p in rsync xfsprogs btrfs-progs libarchive-tools time linux-source python3-matplotlib restic gcc zstd xz-utils bzip2 \
         archivemount fuse3 python3-venv; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_pkgs+=("$p")
done
# linux-source is a metapackage: the versioned package ships /usr/src/linux-source-*.tar.xz
if [ ${#need_pkgs[@]} -gt 0 ] || ! ls /usr/src/linux-source-*.tar.* >/dev/null 2>&1; then
  echo "setup: apt-get install ${need_pkgs[*]:-linux-source}"
  apt-get -o DPkg::Lock::Timeout=900 update -q || status=1
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends \
    "${need_pkgs[@]:-linux-source}" || status=1
fi
ls /usr/src/linux-source-*.tar.* >/dev/null 2>&1 || { echo "setup: WARNING no /usr/src/linux-source-*.tar.*: the kernel workload will be skipped"; status=1; }

# The floor.
mkdir -p "$here/.build"
if [ ! -x "$here/.build/limitcopy" ] || [ "$shared/tools/limitcopy.c" -nt "$here/.build/limitcopy" ]; then
  gcc -O2 -pthread -o "$here/.build/limitcopy" "$shared/tools/limitcopy.c" || { echo "setup: limitcopy did not build"; status=1; }
fi

# ratarmount (mount_bench.py's peer) from PyPI, in a venv of Debian's python3 (it needs
# libfuse, which archivemount's and fuse3's packages bring). Optional like the others.
venv="$here/.build/ratarmount-venv"
if [ ! -x "$venv/bin/ratarmount" ]; then
  echo "setup: pip install ratarmount into $venv"
  if ! { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q ratarmount; } >"$here/.build/install-ratarmount.log" 2>&1; then
    echo "setup: NOTE ratarmount did not install (see bench/.build/install-ratarmount.log); mount_bench.py will skip it"
    tail -5 "$here/.build/install-ratarmount.log"
  fi
fi
"$venv/bin/ratarmount" --version 2>/dev/null | head -1 | sed 's/^/setup: /'

# Peers from crates.io. Each one is optional: the harness skips what is not on PATH.
export PATH="$HOME/.cargo/bin:$PATH"
for spec in fcp:fcp xcp:xcp cpz:cpz; do
  crate="${spec%%:*}"; bin="${spec##*:}"
  if command -v "$bin" >/dev/null 2>&1; then echo "setup: $bin already installed ($(command -v "$bin"))"; continue; fi
  echo "setup: cargo install --locked $crate"
  if ! cargo install --locked "$crate" >"$here/.build/install-$crate.log" 2>&1; then
    echo "setup: cargo install --locked $crate failed; retrying without --locked"
    if ! cargo install "$crate" >>"$here/.build/install-$crate.log" 2>&1; then
      echo "setup: NOTE peer $crate did not install (see bench/.build/install-$crate.log); the harness will skip it"
      tail -5 "$here/.build/install-$crate.log"
    fi
  fi
done

# ferry itself.
if [ -z "${NO_FERRY_BUILD:-}" ]; then
  (cd "$root" && cargo build --release) || { echo "setup: ferry did not build (yet)"; status=1; }
fi
exit $status
