#!/usr/bin/env bash
# Runs every ferry test on a fresh machine: installs what the tests need (Debian packages
# for the real filesystems and peers), then checks formatting, lints and runs all tests.
# As root, the loop-mounted XFS/btrfs tests run too; as another user they say why they skip.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v mkfs.xfs >/dev/null || need_pkgs+=(xfsprogs)
command -v mkfs.btrfs >/dev/null || need_pkgs+=(btrfs-progs)
command -v bsdtar >/dev/null || need_pkgs+=(libarchive-tools)
command -v pax >/dev/null || need_pkgs+=(pax)
command -v busybox >/dev/null || need_pkgs+=(busybox)
command -v setpriv >/dev/null || need_pkgs+=(util-linux)
command -v script >/dev/null || need_pkgs+=(bsdutils)
command -v zstd >/dev/null || need_pkgs+=(zstd)
command -v xz >/dev/null || need_pkgs+=(xz-utils)
command -v bzip2 >/dev/null || need_pkgs+=(bzip2)
command -v lz4 >/dev/null || need_pkgs+=(lz4)
command -v lzop >/dev/null || need_pkgs+=(lzop)
command -v lzip >/dev/null || need_pkgs+=(lzip)
command -v compress >/dev/null || need_pkgs+=(ncompress)
command -v pigz >/dev/null || need_pkgs+=(pigz)
command -v fusermount3 >/dev/null || need_pkgs+=(fuse3)
command -v pgrep >/dev/null || need_pkgs+=(procps)
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v rsync >/dev/null || need_pkgs+=(rsync)
command -v rclone >/dev/null || need_pkgs+=(rclone)
command -v zsh >/dev/null || need_pkgs+=(zsh)
command -v fish >/dev/null || need_pkgs+=(fish)
command -v man >/dev/null || need_pkgs+=(man-db)
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need_pkgs+=(openssh-server)
command -v ssh >/dev/null || need_pkgs+=(openssh-client)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing ${need_pkgs[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  else
    echo "test.sh: not root, cannot install ${need_pkgs[*]}; tests that need them will skip"
  fi
fi

# The S3 tests start a real Garage (tests/s3); building it takes a while, once.
export PATH="$HOME/.cargo/bin:$PATH"
command -v garage >/dev/null || cargo install garage --locked

cargo fmt --all --check
# The ci profile is release with overflow checks on (Cargo.toml): integer overflow that
# input can reach panics in a test instead of wrapping. The mutation fuzz loops run for
# a bounded time each (FERRY_FUZZ_SECS; longer runs: set it higher).
export FERRY_FUZZ_SECS="${FERRY_FUZZ_SECS:-10}"
cargo clippy --workspace --all-targets --profile ci -- -D warnings
cargo test --workspace --profile ci
