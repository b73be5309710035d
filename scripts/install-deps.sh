#!/usr/bin/env bash
# Installs the Debian packages epochfs's build, tests and demo need.
# Safe to run again; does nothing for packages already present.
set -euo pipefail
pkgs=(fuse3 libturbojpeg0-dev python3-torch python3-torchvision python3-numpy python3-pil python3-venv python3-pip python3-setuptools mate-backgrounds openssh-server sshfs iproute2)
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
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
