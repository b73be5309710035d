#!/usr/bin/env bash
# Installs the Debian packages the benchmarks need on top of
# scripts/install-deps.sh (which CI uses): the emulated PFS (sshd, sshfs,
# iproute2 for ip netns + tc), the rclone peer, matplotlib for the plots and
# jq (the cluster and model benchmarks read JSON with it), linux-perf (the
# transport benchmark counts the daemon's system calls with perf stat).
# Safe to run again; does nothing for packages already present.
set -euo pipefail
pkgs=(openssh-server openssh-client sshfs iproute2 rclone python3-matplotlib util-linux jq linux-perf)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
# The benchmark runs its own sshd, inside a network namespace, on its own
# config and keys; the package's sshd service is not needed.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
