#!/usr/bin/env bash
# The package as an admin meets it (make test-package, after make package;
# root, Debian's apt, lintian and rpm):
#   1. lintian finds no error in the .deb; the .rpm holds the same files;
#   2. apt-get install ./dist/epochfs_*.deb installs it, with its
#      dependencies named;
#   3. epochfs version, man epochfs (and a subcommand's page, mount.epochfs(8),
#      epochfs.toml(5)) and bash, fish and zsh completion work from the
#      installed files;
#   4. epochfs doctor passes for a config in /etc/epochfs;
#   5. the template unit verifies for that config (systemd-analyze);
#   6. a line in /etc/fstab mounts with `mount -a` through the installed
#      helper (/usr/sbin/mount.epochfs), serves the dataset, completion
#      names its mount point, and umount unmounts it;
#   7. a reinstall (an upgrade) leaves the admin's /etc/epochfs file alone;
#   8. apt-get purge removes every file the package installed and nothing
#      else: the admin's config, the state directory and the tier stay, and
#      the removal says where they are.
# Leaves no mount, no daemon and /etc/fstab as it was.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
say() { echo "package test: $*"; }
die() {
	echo "package test: FAIL: $*" >&2
	exit 1
}
skip() {
	if [ "${EPOCHFS_REQUIRE_FUSE:-0}" = 1 ]; then die "$* (EPOCHFS_REQUIRE_FUSE=1)"; fi
	echo "package test: SKIP: $*"
	exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root (apt-get install, mount)"
[ -e /dev/fuse ] || skip "no /dev/fuse"
for t in lintian rpm apt-get dpkg-deb systemd-analyze man fish zsh; do
	command -v "$t" >/dev/null || die "no $t (scripts/install-deps.sh installs it)"
done
shopt -s nullglob
debs=(dist/epochfs_*_amd64.deb)
rpms=(dist/epochfs-*.x86_64.rpm)
[ ${#debs[@]} = 1 ] && [ ${#rpms[@]} = 1 ] || die "want one .deb and one .rpm in dist/ (make package), have ${debs[*]} ${rpms[*]}"
deb=${debs[0]} rpm=${rpms[0]}
if dpkg-query -W -f='${Status}' epochfs 2>/dev/null | grep -q "ok installed"; then
	die "epochfs is installed on this machine: this test installs and purges it; remove it first (apt-get purge epochfs)"
fi

W=$(mktemp -d /tmp/epochfs-package.XXXXXX)
CFG=/etc/epochfs/pkgtest-$$.toml
MNT=$W/mnt
fstab_saved=$W/fstab
cp /etc/fstab "$fstab_saved"
cleanup() {
	set +e
	if grep -qs " $MNT fuse.epochfs" /proc/mounts; then umount -l "$MNT"; fi
	cp "$fstab_saved" /etc/fstab
	if dpkg-query -W -f='${Status}' epochfs 2>/dev/null | grep -q "ok installed"; then
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq epochfs >/dev/null 2>&1
	fi
	rm -f "$CFG"
	rmdir /etc/epochfs 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

say "1: lintian, and the .rpm's files against the .deb's"
lintian --fail-on error "$deb" >"$W/lintian.out" 2>&1 || die "lintian: $(cat "$W/lintian.out")"
grep '^E:' "$W/lintian.out" && die "lintian errors"
diff <(rpm -qlp "$rpm" 2>/dev/null | sort) <(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' | grep -v '/$' | sort) >"$W/lists.diff" ||
	die "the .rpm's files are not the .deb's: $(cat "$W/lists.diff")"
grep -q "fuse3" <<<"$(dpkg-deb -f "$deb" Depends)" || die "the .deb does not depend on fuse3"
grep -q "libturbojpeg0" <<<"$(dpkg-deb -f "$deb" Depends)" || die "the .deb does not depend on libturbojpeg0"

say "2: apt-get install ./$deb"
snapshot() { { find /usr /etc /var/lib/epochfs -xdev \( -path /etc/ld.so.cache -o -path '/usr/lib/python3*' -o -name '__pycache__' \) -prune -o -print 2>/dev/null || true; } | sort; }
snapshot >"$W/before"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$deb" >"$W/install.out" 2>&1 || die "apt-get install: $(tail -5 "$W/install.out")"
mapfile -t installed < <(dpkg -L epochfs | sort)
[ -x /usr/bin/epochfs ] || die "no /usr/bin/epochfs"
[ "$(readlink -f /usr/sbin/mount.epochfs)" = /usr/bin/epochfs ] || die "/usr/sbin/mount.epochfs is not a link to /usr/bin/epochfs"
for f in /lib/systemd/system/epochfs@.service /usr/share/epochfs/slurm/epochfs-prolog /usr/share/epochfs/slurm/epochfs-epilog \
	/usr/share/epochfs/slurm/epochfs.env /usr/share/doc/epochfs/examples/imagenet.toml /usr/share/doc/epochfs/admin.md \
	/usr/share/bash-completion/completions/epochfs /usr/share/zsh/vendor-completions/_epochfs /usr/share/fish/vendor_completions.d/epochfs.fish; do
	[ -f "$f" ] || die "the package did not install $f"
done
grep -q '^EPOCHFS=/usr/bin/epochfs$' /usr/share/epochfs/slurm/epochfs.env || die "the packaged Slurm settings do not name /usr/bin/epochfs"

say "3: version, man pages, completion"
version=$(/usr/bin/epochfs version)
grep -qx "epochfs $(dpkg-deb -f "$deb" Version)" <<<"$version" || die "epochfs version: $(/usr/bin/epochfs version)"
grep -q "^commit: " <<<"$version" || die "epochfs version names no commit"
for page in epochfs epochfs-mount epochfs-warmup mount.epochfs "5 epochfs.toml"; do
	# shellcheck disable=SC2086
	out=$(MANWIDTH=80 man $page 2>&1 | col -b) || die "man $page: $out"
	grep -q "^NAME" <<<"$out" || die "man $page shows no NAME: $(head -5 <<<"$out")"
done
grep -q -- "--dry-run" <<<"$(MANWIDTH=80 man epochfs-warmup | col -b)" || die "man epochfs-warmup does not show --dry-run"
grep -q "source_timeout" <<<"$(MANWIDTH=80 man 5 epochfs.toml | col -b)" || die "man 5 epochfs.toml does not show source_timeout"
complete_words() { # the words bash completion offers for a command line
	bash --norc -c 'source /usr/share/bash-completion/bash_completion
		__load_completion epochfs || exit 9
		COMP_LINE=$1; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<<"$1"
		[[ $1 == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		__start_epochfs epochfs "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
		printf "%s\n" "${COMPREPLY[@]}"' _ "$1" 2>/dev/null
}
[ "$(complete_words "epochfs sta" | tr '\n' ' ')" = "stats status " ] || die "completing 'epochfs sta': $(complete_words "epochfs sta")"
# grep reads all the words, not -q: under pipefail, a grep that stops at the first match can leave the
# completion's later writes to a closed pipe, and its SIGPIPE fails the check (3 runs in 100 by hand).
complete_words "epochfs unmount --" | grep -x -- "--timeout" >/dev/null || die "completing 'epochfs unmount --': $(complete_words "epochfs unmount --")"
# fish finds the vendor completion by itself; zsh's compinit registers _epochfs.
fishhome=$W/fishhome
mkdir -p "$fishhome"
got=$(HOME=$fishhome XDG_CONFIG_HOME=$fishhome fish -c "complete -C 'epochfs sta'" | cut -f1 | tr '\n' ' ')
[ "$got" = "stats status " ] || die "fish completing 'epochfs sta': $got"
got=$(zsh -f -c 'autoload -Uz compinit; compinit -u -d '"$W"'/zcompdump; print -r -- ${_comps[epochfs]}')
[ "$got" = _epochfs ] || die "zsh's compinit does not register _epochfs for epochfs: $got"

say "4: doctor for /etc/epochfs/$(basename "$CFG")"
mkdir -p "$W/src/train/cat" "$W/state" "$MNT"
for i in 1 2 3; do head -c 100000 /dev/urandom >"$W/src/train/cat/$i.bin"; done
mkdir -p /etc/epochfs
cat >"$CFG" <<TOML
source = "$W/src"
mountpoint = "$MNT"
state_dir = "$W/state"

[[tier]]
name = "mem"
path = "$W/tier"
quota = "64MiB"
TOML
/usr/bin/epochfs doctor --config "$CFG" >"$W/doctor.out" 2>&1 || die "epochfs doctor: $(cat "$W/doctor.out")"

say "5: epochfs@$(basename "$CFG" .toml).service verifies"
systemd-analyze verify "epochfs@$(basename "$CFG" .toml).service" >"$W/verify.out" 2>&1 || die "systemd-analyze verify: $(cat "$W/verify.out")"
[ -s "$W/verify.out" ] && die "systemd-analyze verify: $(cat "$W/verify.out")"

say "6: /etc/fstab and mount -a through /usr/sbin/mount.epochfs"
echo "none $MNT epochfs config=$CFG,_netdev,nofail 0 0" >>/etc/fstab
mount -a -t epochfs >"$W/mount.out" 2>&1 || die "mount -a: $(cat "$W/mount.out")"
grep -qs " $MNT fuse.epochfs " /proc/mounts || die "mount -a mounted nothing at $MNT: $(cat "$W/mount.out")"
# The row of this mount point: the node may have other epochfs mounts, dead ones too.
pid=$(/usr/bin/epochfs list --json | awk -v m="\"mountpoint\": \"$MNT\"," '
	index($0, m) { mine = 1 }
	/^  }/ { mine = 0 }
	mine && /"pid":/ { gsub(/[^0-9]/, ""); print }')
[ -n "$pid" ] || die "epochfs list names no daemon of $MNT: $(/usr/bin/epochfs list --json)"
[ "$(readlink "/proc/$pid/exe")" = /usr/bin/epochfs ] || die "the daemon (pid $pid) is $(readlink "/proc/$pid/exe"), not the installed binary"
cmp "$W/src/train/cat/2.bin" "$MNT/train/cat/2.bin" || die "the mount serves another file"
complete_words "epochfs status " | grep -x "$MNT" >/dev/null || die "completing 'epochfs status ': $(complete_words "epochfs status ")"
complete_words "epochfs warmup $MNT tr" | grep -x "train/" >/dev/null || die "completing a path under the mount: $(complete_words "epochfs warmup $MNT tr")"
umount "$MNT" || die "umount $MNT"
for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && die "the daemon $pid still runs 20 s after umount"
cp "$fstab_saved" /etc/fstab

say "7: a reinstall leaves /etc/epochfs alone"
sum=$(sha256sum "$CFG")
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "./$deb" >"$W/reinstall.out" 2>&1 || die "reinstall: $(tail -5 "$W/reinstall.out")"
[ "$(sha256sum "$CFG")" = "$sum" ] || die "the reinstall changed $CFG"

say "8: apt-get purge removes what it installed and nothing else"
DEBIAN_FRONTEND=noninteractive apt-get purge -y epochfs >"$W/purge.out" 2>&1 || die "apt-get purge: $(tail -5 "$W/purge.out")"
grep -q "$CFG: its state directory $W/state" "$W/purge.out" || die "the removal did not say where the state directory is: $(cat "$W/purge.out")"
for f in "${installed[@]}"; do
	[ -d "$f" ] && continue # shared directories (/usr/share/doc) stay
	[ -e "$f" ] || [ -L "$f" ] && die "the purge left $f"
done
[ -f "$CFG" ] || die "the purge removed the admin's $CFG"
[ -d "$W/state" ] && [ -d "$W/tier" ] || die "the purge removed the state directory or the tier"
rm -f "$CFG"
rmdir /etc/epochfs 2>/dev/null || true
snapshot >"$W/after"
diff "$W/before" "$W/after" >"$W/snap.diff" || die "the install and purge changed the file system: $(head -20 "$W/snap.diff")"
say "PASS"
