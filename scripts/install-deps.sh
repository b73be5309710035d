#!/usr/bin/env bash
# Installs the Debian packages epochfs's build, tests and demo need.
# Safe to run again; does nothing for packages already present.
set -euo pipefail
# slurmctld, slurmd, slurm-client and munge: the Slurm test (test/slurm/); python3-venv, -pip and
# -setuptools: the Python package's install test.
# redis-server and redis-tools: the Redis Cluster tests (cluster/, test/mount/cluster_test.go).
# prometheus (promtool and the server), lintian, rpm, man-db, groff-base, bash-completion, zsh,
# fish and systemd (systemd-analyze): the package, its man pages and completion, the alert rules
# and the dashboard (make docs-check, make test-package, make test-alerts).
pkgs=(fuse3 libturbojpeg0-dev python3-torch python3-torchvision python3-numpy python3-pil python3-venv python3-pip
  python3-setuptools mate-backgrounds openssh-server sshfs iproute2 slurmctld slurmd slurm-client munge
  redis-server redis-tools prometheus lintian rpm man-db groff-base bash-completion zsh fish systemd)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
# Install services without starting them (munged, slurmd, sshd): the tests
# start their own, with their own sockets and ports.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
