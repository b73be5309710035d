#!/usr/bin/env bash
# epochfs under a real Slurm: a one-node cluster on localhost (Debian's
# slurmctld, slurmd and munge), our prolog and epilog from contrib/slurm/,
# jobs run by an ordinary user. It checks what the admin guide promises:
#
#   1. two jobs back to back: both read the dataset correctly; the second
#      reads nothing from the source (the tiers kept the copies);
#   2. two dataset jobs started together, and a job that does not use the
#      dataset: both checksums correct, no drained node, the mount goes
#      only after the last dataset job;
#   3. the daemon killed in the middle of a job: the next job's prolog
#      remounts and the job reads correctly; the killed job's epilog leaves
#      the new mount alone;
#   4. a job whose mount fails (its source is gone) with
#      EPOCHFS_ON_FAILURE=deny: the job fails with "Permission denied", the
#      node is not drained;
#   5. the mount of the systemd template (contrib/systemd/epochfs@.service,
#      its ExecStartPre and ExecStart run as systemd runs them for
#      epochfs@imagenet): a dataset job uses it, its epilog leaves it
#      mounted, and SIGTERM (systemctl stop) unmounts it;
#   6. an EPOCHFS_MOUNT left in the settings that is not the config's
#      mountpoint: the prolog fails naming both, the node drains, nothing
#      is mounted;
#   7. a failed mount with EPOCHFS_ON_FAILURE=drain (the default): the node
#      drains, the job does not run, the log says why;
#   8. a failed mount with EPOCHFS_ON_FAILURE=source: the job reads the
#      source bind-mounted read-only, and its epilog unmounts it;
#   9. an earlier daemon still draining (a file held open on its detached
#      mount) when the next job starts: the prolog waits for it and mounts;
#  10. a requeue-able training job (contrib/slurm/train-requeue.sbatch):
#      signalled as --signal=USR1@120 would, it checkpoints the model and
#      the sampler's state, requeues itself, and the requeued job (on a
#      mount its prolog made again) finishes the epoch, each sample once.
#
# Everything lives in one temp directory; munged, slurmctld and slurmd run
# in the foreground as background processes of this script and are stopped
# by pid at the end, with any mount left. Needs root. Without the Debian
# packages it skips, unless EPOCHFS_REQUIRE_FUSE=1 (CI), when it fails.
#
#   bash test/slurm/run.sh [path/to/epochfs]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$ROOT/bin/epochfs}
USER_NAME=epochfs-test
T0=$(date +%s)

say() { echo "slurm test: $*"; }
die() {
	echo "slurm test: FAIL: $*" >&2
	FAILED=1
	exit 1
}

missing=()
for c in slurmctld slurmd munged sbatch squeue sinfo scontrol; do
	command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || missing+=("$c")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "${EPOCHFS_REQUIRE_FUSE:-}" = 1 ]; then
		echo "slurm test: FAIL: missing ${missing[*]} (apt-get install slurmctld slurmd slurm-client munge) and EPOCHFS_REQUIRE_FUSE=1" >&2
		exit 1
	fi
	say "SKIP: missing ${missing[*]} (apt-get install slurmctld slurmd slurm-client munge)"
	exit 0
fi
[ "$(id -u)" = 0 ] || die "needs root"
[ -x "$BIN" ] || die "no epochfs binary at $BIN (make build)"
id -u munge >/dev/null 2>&1 || die "no munge user (the munge package makes it)"
MADE_USER=
if ! id -u "$USER_NAME" >/dev/null 2>&1; then
	useradd --system --no-create-home --shell /usr/sbin/nologin "$USER_NAME" || die "useradd $USER_NAME"
	MADE_USER=1 # removed at the end
fi

W=$(mktemp -d /tmp/epochfs-slurm.XXXXXX)
chmod 755 "$W"
MNT=$W/mnt/imagenet
SRC=$W/src
FAILED=0
PIDS=()
# The prolog's source fallback keeps its state in /run/epochfs-slurm:
# removed at the end unless it was there before.
HAD_BIND_DIR=
[ -d /run/epochfs-slurm ] && HAD_BIND_DIR=1

cleanup() {
	local rc=$?
	set +e
	if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
		scancel --full --quiet -u "$USER_NAME" 2>/dev/null
	fi
	# Stop the daemons we started, last first, by pid.
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		kill -TERM "${PIDS[i]}" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	# A mount the epilogs did not take down (a failure): take it down, and
	# wait for its daemon.
	if mountpoint -q "$MNT" 2>/dev/null || [ -e "/run/epochfs/$(key "$MNT").json" ]; then
		"$BIN" unmount --lazy --timeout 30s "$MNT" >/dev/null 2>&1
	fi
	if mountpoint -q "$MNT" 2>/dev/null; then
		echo "slurm test: FAIL: $MNT still mounted at the end" >&2
		umount -l "$MNT"
		rc=1
	fi
	rm -f "/run/epochfs/$(key "$MNT")".{json,users,lock}
	[ -z "$HAD_BIND_DIR" ] && rm -rf /run/epochfs-slurm
	if [ $rc -ne 0 ] || [ "$FAILED" = 1 ] || [ -n "${VERBOSE:-}" ]; then
		for f in "$W"/log/*; do
			[ -f "$f" ] || continue
			echo "---- $(basename "$f") (last 40 lines)" >&2
			tail -n 40 "$f" >&2
		done
		[ -f "$W/state/epochfs.log" ] && { echo "---- epochfs.log" >&2; tail -n 40 "$W/state/epochfs.log" >&2; }
	fi
	rm -rf "$W"
	[ -n "$MADE_USER" ] && userdel "$USER_NAME" 2>/dev/null
	say "took $(($(date +%s) - T0))s"
	exit $rc
}
trap cleanup EXIT

# key is the name of a mount point's runtime files (daemon.Key, for paths
# of letters, digits and ./-_).
key() { local k=${1#/}; printf '%s' "${k//\//%2F}"; }

mkdir -p "$W"/{munge,etc,slurmstate,spool,log,prolog.d,epilog.d,jobs,tier,state} "$W/mnt"
# The dataset: 150 files of 40-120 KB in 3 classes, and its checksums.
for c in 0 1 2; do
	mkdir -p "$SRC/class$c"
	for i in $(seq 50); do
		head -c $((40000 + (i * 1600))) /dev/urandom >"$SRC/class$c/img$i.bin"
	done
done
# Scenario 10's images: 40 small JPEGs in 2 classes, for an ImageFolder.
TRAIN_PY=/usr/bin/python3
if "$TRAIN_PY" -c 'import torch, torchvision' 2>/dev/null; then
	"$TRAIN_PY" - "$SRC/images" <<'PY' || die "JPEGs for scenario 10"
import os, random, sys
from PIL import Image
random.seed(1)
for c in range(2):
    d = os.path.join(sys.argv[1], f"cls{c}")
    os.makedirs(d)
    for i in range(20):
        Image.effect_noise((24, 24), 40 + i).convert("RGB").save(os.path.join(d, f"im{i:02d}.jpg"))
PY
elif [ "${EPOCHFS_REQUIRE_FUSE:-}" = 1 ]; then
	die "no torch and torchvision for $TRAIN_PY (apt-get install python3-torch python3-torchvision) and EPOCHFS_REQUIRE_FUSE=1"
else
	TRAIN_PY=
fi
(cd "$SRC" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$W/jobs/SHA256SUMS"
chmod -R a+rX "$SRC" "$W/jobs"
chmod 1777 "$W/jobs"

# munge, with its own key and socket (a munged of the system, if any, is
# left alone).
chown munge:munge "$W/munge"
head -c 1024 /dev/urandom >"$W/munge/munge.key"
chown munge:munge "$W/munge/munge.key"
chmod 400 "$W/munge/munge.key"
setpriv --reuid munge --regid munge --clear-groups /usr/sbin/munged --foreground \
	--socket="$W/munge/munge.sock" --key-file="$W/munge/munge.key" \
	--pid-file="$W/munge/munged.pid" --seed-file="$W/munge/munged.seed" >"$W/log/munged.log" 2>&1 &
PIDS+=($!)

HOST=$(hostname -s)
export SLURM_CONF=$W/etc/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=epochfsci
SlurmctldHost=$HOST
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
# cred_expire: a requeued job waits this long before it runs again (so that
# its node's slurmd forgot its credential and runs the prolog again);
# 120 s by default, shortened for scenario 10.
AuthInfo=socket=$W/munge/munge.sock,cred_expire=20
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$W/slurmstate
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
# No systemd and no cgroups here.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
# A job whose begin time passes (a requeued one) is started at the next
# scheduling pass: every 60 s by default.
SchedulerParameters=sched_interval=2
MpiDefault=none
ReturnToService=2
MinJobAge=600
# What contrib/slurm/slurm.conf.example asks for.
Prolog=$W/prolog.d/*
Epilog=$W/epilog.d/*
PrologFlags=Alloc
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) Features=imagenet State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
# Our scripts as shipped, and their settings beside slurm.conf.
install -m 0755 "$ROOT/contrib/slurm/epochfs-prolog" "$W/prolog.d/epochfs"
install -m 0755 "$ROOT/contrib/slurm/epochfs-epilog" "$W/epilog.d/epochfs"
cat >"$W/imagenet.toml" <<EOF
source = "$SRC"
mountpoint = "$MNT"
state_dir = "$W/state"

[[tier]]
name = "disk"
path = "$W/tier"
quota = "1GiB"

[placement]
workers = 2
EOF
settings() {
	cat >"$W/etc/epochfs.env" <<EOF
EPOCHFS=$BIN
EPOCHFS_CONFIG=$1
${2:+EPOCHFS_MOUNT=$2}
EPOCHFS_ON_FAILURE=${ON_FAILURE:-drain}
EPOCHFS_MOUNT_WAIT=30
EPOCHFS_FEATURE=imagenet
EPOCHFS_WARMUP=all
EPOCHFS_KEEP=0
EPOCHFS_SLURM_LOG=$W/log/epochfs-slurm.log
EOF
}
settings "$W/imagenet.toml"

/usr/sbin/slurmctld -D -f "$SLURM_CONF" >"$W/log/slurmctld.out" 2>&1 &
PIDS+=($!)
/usr/sbin/slurmd -D -f "$SLURM_CONF" >"$W/log/slurmd.out" 2>&1 &
PIDS+=($!)

# wait_for CMD... polls until CMD succeeds; the bound is a liveness bound.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 600); do
		"$@" && return 0
		sleep 0.1
	done
	die "not reached in 60s: $what"
}
node_idle() { [ "$(sinfo -h -n "$HOST" -o %T 2>/dev/null)" = idle ]; }
wait_for "node idle" node_idle

# as_user runs a Slurm command as the ordinary user.
as_user() { setpriv --reuid "$USER_NAME" --regid "$USER_NAME" --clear-groups env -i PATH=/usr/bin:/bin SLURM_CONF="$SLURM_CONF" "$@"; }
# submit NAME [sbatch options] -- script: prints the job id.
submit() {
	local name=$1
	shift
	as_user sbatch --parsable -J "$name" -o "$W/jobs/$name.out" -e "$W/jobs/$name.out" -D "$W/jobs" "$@"
}
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
finished() { case "$(job_state "$1")" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return 0 ;; esac; return 1; }
running() { [ "$(job_state "$1")" = RUNNING ]; }
wait_done() { wait_for "job $1 finished" finished "$1"; }
mounted() { mountpoint -q "$MNT"; }
no_drain() {
	local r
	r=$(sinfo -R -h)
	[ -z "$r" ] || die "a drained node: $r"
	local st
	st=$(sinfo -h -n "$HOST" -o %T)
	case "$st" in idle | mixed | allocated) ;; *) die "node state $st" ;; esac
}
status_of() { cat "$MNT/.epochfs/status"; }
drained() { sinfo -R -h | grep -q .; }

# The job that checks the dataset: every file's checksum, then the status.
CHECK="cd $MNT && sha256sum --quiet -c $W/jobs/SHA256SUMS && echo CHECKSUMS-OK; grep -E '^(source_reads|pid)=' $MNT/.epochfs/status"

say "1: two jobs back to back"
j1=$(submit back1 --constraint=imagenet --wrap "$CHECK")
wait_done "$j1"
grep -q CHECKSUMS-OK "$W/jobs/back1.out" || die "job 1: $(cat "$W/jobs/back1.out")"
[ "$(job_state "$j1")" = COMPLETED ] || die "job 1 $(job_state "$j1")"
wait_for "job 1's epilog unmounted" sh -c "! mountpoint -q $MNT"
j2=$(submit back2 --constraint=imagenet --wrap "$CHECK")
wait_done "$j2"
grep -q CHECKSUMS-OK "$W/jobs/back2.out" || die "job 2: $(cat "$W/jobs/back2.out")"
grep -qx 'source_reads=0' "$W/jobs/back2.out" || die "job 2 read the source again: $(cat "$W/jobs/back2.out")"
wait_for "job 2's epilog unmounted" sh -c "! mountpoint -q $MNT"
no_drain

say "2: two dataset jobs together and a job without the dataset"
ja=$(submit togetherA --constraint=imagenet --wrap "$CHECK; touch $W/jobs/A-done")
jb=$(submit togetherB --constraint=imagenet --wrap "$CHECK; while [ ! -e $W/jobs/B-go ]; do sleep 0.1; done")
jc=$(submit plain --wrap "ls / >/dev/null && echo PLAIN-OK")
wait_done "$ja"
wait_done "$jc"
grep -q CHECKSUMS-OK "$W/jobs/togetherA.out" || die "job A: $(cat "$W/jobs/togetherA.out")"
grep -q PLAIN-OK "$W/jobs/plain.out" || die "the job without the dataset: $(cat "$W/jobs/plain.out")"
running "$jb" || die "job B is $(job_state "$jb"), want RUNNING"
# A's epilog ran (A is completed): B still uses the mount.
wait_for "B's checksums" grep -q CHECKSUMS-OK "$W/jobs/togetherB.out"
mounted || die "A's epilog unmounted under B"
status_of >/dev/null || die "the mount does not answer while B runs"
no_drain
touch "$W/jobs/B-go"
wait_done "$jb"
[ "$(job_state "$jb")" = COMPLETED ] || die "job B $(job_state "$jb")"
wait_for "the last job's epilog unmounted" sh -c "! mountpoint -q $MNT"
no_drain

say "3: the daemon killed in the middle of a job"
jd=$(submit killed --constraint=imagenet --wrap "while [ ! -e $W/jobs/D-go ]; do sleep 0.1; done; cat $MNT/class0/img1.bin >/dev/null 2>&1 || echo READ-FAILED")
wait_for "job D running" running "$jd"
wait_for "D's mount" mounted
pid=$(sed -n 's/^pid=//p' "$MNT/.epochfs/status")
[ -n "$pid" ] || die "no daemon pid"
kill -KILL "$pid"
wait_for "daemon $pid gone" sh -c "! kill -0 $pid 2>/dev/null"
je=$(submit afterkill --constraint=imagenet --wrap "$CHECK")
wait_done "$je"
grep -q CHECKSUMS-OK "$W/jobs/afterkill.out" || die "the job after the kill: $(cat "$W/jobs/afterkill.out")"
grep -q "cleared the dead epochfs mount" "$W/log/epochfs-slurm.log" || die "the prolog did not clear the dead mount"
mounted || die "E's epilog unmounted under D"
touch "$W/jobs/D-go"
wait_done "$jd"
wait_for "the last job's epilog unmounted" sh -c "! mountpoint -q $MNT"
no_drain

say "4: a job whose mount fails, EPOCHFS_ON_FAILURE=deny"
ON_FAILURE=deny settings "$W/imagenet.toml"
# The tier is a file, not a directory: the mount fails. (A source that is
# missing no longer fails it: the mount serves what the last one left.)
mv "$W/tier" "$W/tier-away"
touch "$W/tier"
jf=$(submit nomount --constraint=imagenet --wrap "ls $MNT")
wait_done "$jf"
rm "$W/tier"
mv "$W/tier-away" "$W/tier"
[ "$(job_state "$jf")" = FAILED ] || die "the job without its mount is $(job_state "$jf"), want FAILED"
grep -q "Permission denied" "$W/jobs/nomount.out" || die "the job without its mount: $(cat "$W/jobs/nomount.out"), want Permission denied"
mounted && die "something is mounted"
settings "$W/imagenet.toml"
no_drain

say "5: the systemd template's mount (epochfs@imagenet) outlives the jobs; systemctl stop unmounts it"
# The unit's lines with the instance, the binary and /etc/epochfs of this test.
unit_line() {
	sed -n "s/^$1=//p" "$ROOT/contrib/systemd/epochfs@.service" | sed "s|/usr/bin/epochfs|$BIN|g; s|/etc/epochfs/|$W/|g; s|%i|imagenet|g"
}
[ -n "$(unit_line ExecStart)" ] || die "the template has no ExecStart"
eval "$(unit_line ExecStartPre)" || die "the template's ExecStartPre failed"
(eval "exec $(unit_line ExecStart)") >"$W/log/unit.out" 2>&1 &
unit_pid=$!
wait_for "the template's mount" mounted
jg=$(submit onadmin --constraint=imagenet --wrap "$CHECK")
wait_done "$jg"
grep -q CHECKSUMS-OK "$W/jobs/onadmin.out" || die "the job on the template's mount: $(cat "$W/jobs/onadmin.out")"
[ "$(job_state "$jg")" = COMPLETED ] || die "the job on the template's mount is $(job_state "$jg")"
wait_for "the job's epilog logged" grep -q "epilog job $jg: epochfs unmount" "$W/log/epochfs-slurm.log"
mounted || die "the job's epilog unmounted the template's mount: $(grep "job $jg" "$W/log/epochfs-slurm.log")"
status_of >/dev/null || die "the template's mount does not answer after the job"
kill -TERM "$unit_pid"
wait "$unit_pid" || die "the template's daemon exited with $? on SIGTERM: $(tail -3 "$W/log/unit.out")"
mounted && die "the template's mount is still there after SIGTERM"
no_drain

say "6: an EPOCHFS_MOUNT that is not the config's mountpoint"
settings "$W/imagenet.toml" "$W/mnt/elsewhere"
jm=$(submit mismatch --constraint=imagenet --wrap "ls $MNT")
wait_for "the node drained by the failed prolog" drained
grep -q "FATAL: EPOCHFS_MOUNT=$W/mnt/elsewhere in .* is not the mountpoint of $W/imagenet.toml ($MNT)" "$W/log/epochfs-slurm.log" ||
	die "the prolog did not name the mismatch: $(tail -3 "$W/log/epochfs-slurm.log")"
mounted && die "mounted despite the mismatch"
[ -e "$W/mnt/elsewhere" ] && die "the prolog made the mismatched mount point"
scancel "$jm"
settings "$W/imagenet.toml"
scontrol update nodename="$HOST" state=resume
wait_for "node idle again" node_idle
no_drain

say "7: a job whose mount fails, EPOCHFS_ON_FAILURE=drain (the default)"
mv "$W/tier" "$W/tier-away" # (as in 4: the mount fails)
touch "$W/tier"
jh=$(submit faildrain --constraint=imagenet --wrap "ls $MNT")
wait_for "the node drained by the failed mount" drained
rm "$W/tier"
mv "$W/tier-away" "$W/tier"
grep -q "prolog job $jh: FATAL: the mount failed (EPOCHFS_ON_FAILURE=drain)" "$W/log/epochfs-slurm.log" ||
	die "the prolog did not say why it drained: $(tail -3 "$W/log/epochfs-slurm.log")"
[ -e "$W/jobs/faildrain.out" ] && grep -q . "$W/jobs/faildrain.out" && die "the job ran: $(cat "$W/jobs/faildrain.out")"
scancel "$jh"
scontrol update nodename="$HOST" state=resume
wait_for "node idle again" node_idle
no_drain

say "8: a job whose mount fails, EPOCHFS_ON_FAILURE=source"
# The mount fails (its tier belongs to another catalog) while the source is there.
mkdir -p "$W/tier"
printf '{"state_dir":"/elsewhere/state","source":"/elsewhere","mountpoint":"/elsewhere/mnt"}\n' >"$W/tier/owner.json"
ON_FAILURE=source settings "$W/imagenet.toml"
ji=$(submit failsource --constraint=imagenet --wrap "$CHECK; findmnt -n -o FSTYPE $MNT")
wait_done "$ji"
grep -q CHECKSUMS-OK "$W/jobs/failsource.out" || die "the job on the bind-mounted source: $(cat "$W/jobs/failsource.out")"
grep -q "prolog job $ji: the job reads the source directly" "$W/log/epochfs-slurm.log" ||
	die "the prolog did not say it fell back to the source: $(tail -3 "$W/log/epochfs-slurm.log")"
wait_for "the bind mount's last epilog unmounted it" sh -c "! mountpoint -q $MNT"
[ -e /run/epochfs-slurm/bind.users ] && die "the bind mount's users file is left"
rm -f "$W/tier/owner.json"
settings "$W/imagenet.toml"
no_drain

say "9: an earlier daemon still draining when the next job starts"
"$BIN" mount --config "$W/imagenet.toml" >"$W/log/admin-mount.out" 2>&1 || die "admin mount: $(cat "$W/log/admin-mount.out")"
# A process outside any job keeps a file open for 8 s; the lazy unmount
# leaves its daemon draining until then.
(exec 3<"$MNT/class0/img1.bin"; sleep 8) &
holder=$!
PIDS+=("$holder")
sleep 0.5
"$BIN" unmount --lazy --timeout 1s "$MNT" >/dev/null 2>&1
mounted && die "the lazy unmount left the mount"
jj=$(submit afterdrain --constraint=imagenet --wrap "$CHECK")
wait_done "$jj"
grep -q CHECKSUMS-OK "$W/jobs/afterdrain.out" || die "the job after the draining daemon: $(cat "$W/jobs/afterdrain.out")"
grep -q "prolog job $jj: epochfs mount: exit 1: .*still draining" "$W/log/epochfs-slurm.log" ||
	die "the prolog never met the draining daemon: $(grep "job $jj" "$W/log/epochfs-slurm.log")"
wait "$holder" 2>/dev/null
wait_for "the job's epilog unmounted" sh -c "! mountpoint -q $MNT"
no_drain

say "10: a requeue-able training job, signalled, checkpointed, requeued and resumed"
if [ -z "$TRAIN_PY" ]; then
	say "SKIP 10: no torch and torchvision for /usr/bin/python3"
else
	# The user reads the script, the example and the package from copies (the checkout may be
	# private to root).
	mkdir -m 0777 "$W/train"
	mkdir -p "$W/train/py"
	cp -r "$ROOT/python/epochfs" "$W/train/py/"
	cp "$ROOT/docs/examples/train_resumable.py" "$ROOT/contrib/slurm/train-requeue.sbatch" "$W/train/"
	chmod -R a+rX "$W/train"
	jt=$(submit train --export=ALL,DATA="$MNT/images",CKPT="$W/train/ckpt.pt",TRAIN="$W/train/train_resumable.py",PYTHON="$TRAIN_PY",PYTHONPATH="$W/train/py" \
		"$W/train/train-requeue.sbatch" --epochs 2 --batch-size 4 --every 2 --workers 1 --pace 0.3 --log "$W/train")
	# 10 steps an epoch; the signal comes after its checkpoint of step 4, as the time limit's
	# warning would (--signal=B:USR1@120 sends it to the batch script alone).
	wait_for "the training's step 5" grep -qs '^1 5 ' "$W/train/rank-0.log"
	scancel --signal=USR1 --batch "$jt" || die "scancel --signal=USR1 $jt"
	wait_for "the job requeued" grep -qs "checkpointed: requeueing job $jt" "$W/jobs/train.out"
	# The requeued job waits cred_expire (20 s here) before it runs again, its prolog first.
	for _ in $(seq 900); do
		grep -q "start 1" "$W/jobs/train.out" && break
		sleep 0.1
	done
	grep -q "start 1" "$W/jobs/train.out" || die "the requeued job did not start again in 90 s: $(scontrol show job "$jt")"
	wait_done "$jt"
	[ "$(job_state "$jt")" = COMPLETED ] || die "the training job is $(job_state "$jt"): $(cat "$W/jobs/train.out")"
	grep -q "start 1" "$W/jobs/train.out" || die "the job did not run again: $(cat "$W/jobs/train.out")"
	grep -q "resumed at epoch 1" "$W/jobs/train.out" || die "the requeued job did not resume: $(cat "$W/jobs/train.out")"
	# Across both runs, epoch 1's samples up to the checkpoint and after it: each of the 40 once.
	"$TRAIN_PY" - "$W/train/rank-0.log" 40 <<'PY' || die "the resumed epoch: $(cat "$W/train/rank-0.log")"
import sys
lines = open(sys.argv[1]).read().split("\n")
n = int(sys.argv[2])
cut = lines.index(next(l for l in lines if l.startswith("resume ")))
g = int(lines[cut].split()[1])
def steps(part):
    for l in part:
        f = l.split()
        if len(f) == 3:
            yield int(f[0]), int(f[1]), [int(i) for i in f[2].split(",")]
first = [i for e, s, idx in steps(lines[:cut]) if e == 1 and s <= g for i in idx]
rest = [i for e, s, idx in steps(lines[cut:]) if e == 1 for i in idx]
after = [i for e, s, idx in steps(lines[cut:]) if e == 2 for i in idx]
killed_after = max(s for e, s, idx in steps(lines[:cut]))
assert g >= 2 and killed_after >= g, (g, killed_after)
assert sorted(first + rest) == list(range(n)), ("epoch 1", sorted(first + rest))
assert sorted(after) == list(range(n)), ("epoch 2", sorted(after))
print(f"epoch 1: {len(first)} samples before the checkpoint of step {g}, {len(rest)} after the requeue")
PY
	wait_for "the training job's epilog unmounted" sh -c "! mountpoint -q $MNT"
	no_drain
fi

say "ok: 10 scenarios, $(($(date +%s) - T0))s"
