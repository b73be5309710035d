package mount

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/status"
)

// cli runs the epochfs binary and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// binDirs makes a source tree (its big file of big bytes), and a base
// directory holding an empty mount point.
func binDirs(t *testing.T, big int64) (src string, paths []string, base, mnt string) {
	t.Helper()
	requireFUSE(t)
	src, paths = makeTree(t, big)
	base = t.TempDir()
	mnt = filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	return src, paths, base, mnt
}

// waitWalked waits until the mount's catalog is whole: a first mount walks
// the source in the background (walk_test.go tests that), a remount loads
// the catalog in the background; the other tests look at the whole
// dataset.
func waitWalked(t *testing.T, mnt string) {
	t.Helper()
	waitFor(t, func() bool { st := statusOf(t, mnt)["catalog"]; return st != "walking" && st != "loading" })
}

// binMount mounts src with the binary, waits for its walk and registers a
// lazy unmount.
func binMount(t *testing.T, src, mnt, state string, extra ...string) {
	t.Helper()
	args := append([]string{"mount", "--state", state}, extra...)
	args = append(args, src, mnt)
	code, out := cli(t, args...)
	if code != 0 {
		log, _ := os.ReadFile(filepath.Join(state, "epochfs.log"))
		t.Fatalf("mount: exit %d: %s\nlog:\n%s", code, out, log)
	}
	t.Cleanup(func() {
		if mounted(mnt) {
			cli(t, "unmount", "--lazy", mnt)
		}
	})
	checkTransport(t, statusOf(t, mnt)["transport"])
	waitWalked(t, mnt)
}

func TestBadInputExitsTwoWithOneLine(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	full := filepath.Join(base, "full")
	os.Mkdir(full, 0o755)
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	busy := filepath.Join(base, "busy")
	os.Mkdir(busy, 0o755)
	if err := syscall.Mount("tmpfs", busy, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(busy, syscall.MNT_DETACH)
	cfg := func(body string) string {
		p := filepath.Join(t.TempDir(), "c.toml")
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	tier := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	state := "--state=" + filepath.Join(base, "state")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing source", []string{"mount", tier, state, filepath.Join(base, "nope"), mnt}, "no such file"},
		{"source not a directory", []string{"mount", tier, state, file, mnt}, "not a directory"},
		{"missing mount point", []string{"mount", tier, state, src, filepath.Join(base, "nomnt")}, "mount point"},
		{"non-empty mount point", []string{"mount", tier, state, src, full}, "not empty"},
		{"mount point already a mount", []string{"mount", tier, state, src, busy}, "already a mount"},
		{"tier not writable", []string{"mount", "--tier=mem=" + file + "/tier:1GiB", state, src, mnt}, "tier"},
		{"tier inside source", []string{"mount", "--tier=mem=" + filepath.Join(src, "cache") + ":1GiB", state, src, mnt}, "inside the source"},
		{"source inside tier", []string{"mount", "--tier=mem=" + filepath.Dir(src) + ":1GiB", state, src, mnt}, "lies inside"},
		{"malformed quota", []string{"mount", "--tier=mem=" + filepath.Join(base, "t") + ":4GB?", state, src, mnt}, `"4GB?"`},
		{"duplicate tier names", []string{"mount", tier, "--tier=mem=" + filepath.Join(base, "t2") + ":1GiB", state, src, mnt}, "duplicate"},
		{"unknown config key", []string{"mount", "--config", cfg("[placement]\nwrokers = 3\n"), tier, state, src, mnt}, "wrokers"},
		{"no tier", []string{"mount", state, src, mnt}, "tier"},
		{"one argument", []string{"mount", tier, state, src}, "SOURCE and MOUNTPOINT"},
		{"unknown flag", []string{"mount", "--bogus", src, mnt}, "bogus"},
		{"unknown command", []string{"mounty"}, "unknown command"},
	}
	for _, c := range cases {
		code, out := cli(t, c.args...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2: %s", c.name, code, out)
			continue
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: output %q lacks %q", c.name, out, c.want)
		}
		if c.name != "unknown flag" && strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("%s: want one line, got:\n%s", c.name, out)
		}
	}
	if mounted(mnt) {
		t.Fatal("a failed mount left a mount behind")
	}
	for _, m := range []string{mnt, full, busy} {
		if left := runtimeFiles(m); len(left) > 0 {
			t.Errorf("a failed mount left files in /run/epochfs: %v", left)
		}
	}
}

// A tier on a tiny file system fills; every read still succeeds from the
// source. A file removed from the source: when it is read from the source
// the open finds it gone (ENOENT, and it leaves the dataset); a resident
// copy already validated this mount is served until a refresh (the
// default validate = "once"), which removes it.
func TestFullTierAndVanishedSourceFile(t *testing.T) {
	requireFUSE(t)
	src, paths := makeTree(t, 4<<20)
	base := t.TempDir()
	tierDir := filepath.Join(base, "tier")
	os.Mkdir(tierDir, 0o755)
	// 1 MiB of real disk under a 1 GiB quota: copies fail with ENOSPC.
	if err := syscall.Mount("tmpfs", tierDir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(tierDir, syscall.MNT_DETACH) })
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=small="+tierDir+":1GiB")
	// The small file is copied first: a copy of the 1 MiB file may fill the
	// whole file system and leave no room for it.
	waitFor(t, func() bool {
		os.ReadFile(filepath.Join(mnt, "a/small.txt"))
		return tierOf(t, filepath.Join(mnt, "a/small.txt")) != "source"
	})
	// Then copies race for what is left (one may fail with ENOSPC while
	// another fills it); every read succeeds.
	for pass := 0; pass < 2; pass++ {
		checkAll(t, src, mnt, paths)
	}
	if tierOf(t, filepath.Join(mnt, "big.bin")) != "source" {
		t.Fatal("big.bin (4 MiB) was placed in a 1 MiB tier")
	}
	for _, p := range []string{"a/small.txt", "big.bin"} {
		if err := os.Remove(filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := os.ReadFile(filepath.Join(mnt, "big.bin"))
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("read of a vanished source file: %v, want ENOENT", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "big.bin")); !errors.Is(err, syscall.ENOENT) {
		waitFor(t, func() bool { _, err := os.Stat(filepath.Join(mnt, "big.bin")); return errors.Is(err, syscall.ENOENT) })
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "a/small.txt")); err != nil || len(got) != 5 {
		t.Fatalf("validated resident copy of a vanished file: %d bytes, %v (want the copy until a refresh)", len(got), err)
	}
	if code, out := cli(t, "refresh", mnt); code != 0 || !strings.Contains(out, "1 removed") {
		t.Fatalf("refresh: exit %d: %s", code, out)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "a/small.txt")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("after a refresh, a vanished resident file: %v, want ENOENT", err)
	}
	rest := paths[:0:0]
	for _, p := range paths {
		if p != "a/small.txt" && p != "big.bin" {
			rest = append(rest, p)
		}
	}
	checkAll(t, src, mnt, rest)
	st := statusOf(t, mnt)
	if st["files_total"] != "8" || st["files_removed"] != "2" {
		t.Fatalf("status after removals: files_total=%s files_removed=%s", st["files_total"], st["files_removed"])
	}
	log, _ := os.ReadFile(filepath.Join(base, "state", "epochfs.log"))
	if !bytes.Contains(log, []byte("big.bin")) || !bytes.Contains(log, []byte("gone from the source")) {
		t.Errorf("the removal is not logged:\n%s", log)
	}
}

func TestSIGKILLThenLazyUnmountThenRemountReusesCopies(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 48<<20)
	state := filepath.Join(base, "state")
	tierDir := filepath.Join(base, "tier")
	cfg := filepath.Join(base, "c.toml")
	// A slow source so the big copy is still in flight at the kill.
	os.WriteFile(cfg, []byte("[placement]\nsource_bandwidth = \"8MiB/s\"\n"), 0o644)
	binMount(t, src, mnt, state, "--config", cfg, "--tier=disk="+tierDir+":1GiB")
	small := []string{}
	for _, p := range paths {
		if p != "big.bin" {
			small = append(small, p)
		}
	}
	checkAll(t, src, mnt, small)
	// Every small copy installed and recorded (a busy catalog writes a
	// batch per 250 ms: a crash loses the copies not yet recorded).
	waitFor(t, func() bool {
		st := statusOf(t, mnt)
		return st["files_resident"] == strconv.Itoa(len(small)) && st["catalog_pending"] == "0"
	})
	// Start the big copy, then kill the daemon in the middle of it.
	f, err := os.Open(filepath.Join(mnt, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f.Read(make([]byte, 4096))
	f.Close()
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	if pid <= 0 {
		t.Fatal("no pid in status")
	}
	if statusOf(t, mnt)["placements_queued"] == "0" {
		t.Fatal("big copy not in flight")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, func() bool { return !processAlive(pid) })
	if code, out := cli(t, "unmount", "--lazy", mnt); code != 0 {
		t.Fatalf("unmount --lazy of a dead mount: exit %d: %s", code, out)
	}
	if mounted(mnt) {
		t.Fatal("dead mount still there")
	}
	binMount(t, src, mnt, state, "--tier=disk="+tierDir+":1GiB")
	st := statusOf(t, mnt)
	if st["files_resident"] != strconv.Itoa(len(small)) || tierOf(t, filepath.Join(mnt, "big.bin")) != "source" {
		t.Fatalf("after the kill: %s files resident (want %d), big.bin in %s", st["files_resident"], len(small), tierOf(t, filepath.Join(mnt, "big.bin")))
	}
	entries, _ := os.ReadDir(filepath.Join(tierDir, ".tmp"))
	if len(entries) != 0 {
		t.Fatalf("partial copies left in the tier: %v", entries)
	}
	checkAll(t, src, mnt, paths)
	if st := statusOf(t, mnt); st["source_opens"] != "1" {
		t.Fatalf("remount read %s files from the source, want only big.bin", st["source_opens"])
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %d %s", code, out)
	}
}

func TestSIGTERMUnmountsCleanly(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	cmd := exec.Command(binPath, "mount", "--foreground", "--state", filepath.Join(base, "state"),
		"--tier=mem="+filepath.Join(base, "tier")+":1GiB", src, mnt)
	var out bytes.Buffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	waitFor(t, func() bool { return mounted(mnt) })
	if _, err := os.ReadFile(filepath.Join(mnt, "a/small.txt")); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v\n%s", err, out.String())
	}
	if mounted(mnt) {
		t.Fatal("still mounted after SIGTERM")
	}
}

func TestUnprivilegedUserSeesSourcePermissions(t *testing.T) {
	requireFUSE(t)
	src, _ := makeTree(t, 1<<10)
	os.WriteFile(filepath.Join(src, "secret"), []byte("root only"), 0o600)
	base := t.TempDir()
	// Let others reach the mount point inside the test's private temp dir.
	for d := base; d != "/" && d != "/tmp"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	uid, gid := testUser(t)
	run := func(file string) error {
		cmd := exec.Command("cat", filepath.Join(mnt, file))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run("a/small.txt"); err != nil {
		t.Fatalf("user cannot read a 0644 file: %v", err)
	}
	err := run("secret")
	if err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("user read a 0600 root file: %v", err)
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
}

// testUser creates an unprivileged user for the permission test, removed
// when the test ends (unless it existed before).
func testUser(t *testing.T) (uint32, uint32) {
	t.Helper()
	const name = "epochfs-test"
	if _, err := user.Lookup(name); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("userdel", name).Run() })
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uint32(uid), uint32(gid)
}

func TestWarmupCLI(t *testing.T) {
	src, _, base, mnt := binDirs(t, 16<<20)
	cfg := filepath.Join(base, "c.toml")
	os.WriteFile(cfg, []byte("[placement]\nsource_bandwidth = \"4MiB/s\"\nworkers = 1\n"), 0o644)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--config", cfg, "--tier=mem="+filepath.Join(base, "tier")+":1GiB")

	code, out := cli(t, "warmup", "--dry-run", mnt, "class1")
	if code != 0 || !strings.Contains(out, "files:        2") || !strings.Contains(out, "fits") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	if st := statusOf(t, mnt); st["placements_queued"] != "0" {
		t.Fatal("a dry run queued files")
	}
	code, out = cli(t, "warmup", mnt, "no/such")
	if code != 2 || !strings.Contains(out, "no/such") {
		t.Fatalf("bad path: exit %d: %s", code, out)
	}
	// The 16 MiB file at 4 MiB/s cannot be done in 1 s: exit 3.
	code, out = cli(t, "warmup", "--wait", "100", "--timeout", "1s", mnt)
	if code != 3 || !strings.Contains(out, "timed out") {
		t.Fatalf("timeout: exit %d: %s", code, out)
	}
	code, out = cli(t, "warmup", "--wait", "100", "--timeout", "2m", mnt)
	if code != 0 || !strings.Contains(out, "100.0%") {
		t.Fatalf("wait: exit %d: %s", code, out)
	}
	if st := statusOf(t, mnt); st["files_resident"] != st["files_total"] {
		t.Fatalf("after warmup: %s of %s resident", st["files_resident"], st["files_total"])
	}
}

func statusOf(t *testing.T, mnt string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "status"))
	if err != nil {
		t.Fatal(err)
	}
	m := status.Parse(data).Map()
	return m
}

// waitFor polls cond; the deadline is a liveness bound, not a speed test.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestModelCtlFileShowsTheSplit(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	cfg := filepath.Join(base, "c.toml")
	os.WriteFile(cfg, []byte("[model]\nmemory_budget = \"1GiB\"\nt_decode_augment = 500\nt_augment = 1500\nb_storage = \"100MB/s\"\nt_gpu = 2000\n"), 0o644)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--config", cfg, "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "model"))
	if err != nil {
		t.Fatal(err)
	}
	kv := status.Parse(data).Map()
	// One job, the views rules: the tiny dataset fits decoded, and
	// augmented memory buys one job nothing.
	if kv["rules"] != "views" || kv["split_augmented_pct"] != "0" || kv["split_decoded_pct"] == "0" || kv["predicted_samples_per_s"] == "" {
		t.Fatalf(".epochfs/model:\n%s", data)
	}
	cli(t, "unmount", mnt)
}

// unmount refuses, with exit 2 and whatever the flags, a mount point whose
// mount is not epochfs's (a tmpfs, a bind mount), and leaves it mounted.
func TestUnmountRefusesWhatIsNotAnEpochfsMount(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	scratch, bind := filepath.Join(base, "scratch"), filepath.Join(base, "bind")
	for _, d := range []string{scratch, bind} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount("tmpfs", scratch, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(scratch, syscall.MNT_DETACH) })
	if err := syscall.Mount(base, bind, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(bind, syscall.MNT_DETACH) })
	os.WriteFile(filepath.Join(scratch, "keep"), []byte("scratch data"), 0o644)
	for _, mnt := range []string{scratch, bind} {
		for _, flags := range [][]string{nil, {"--lazy"}, {"--user-ref", "job-1"}, {"--strict"}, {"--lazy", "--user-ref", "job-2"}} {
			code, out := cli(t, append(append([]string{"unmount"}, flags...), mnt)...)
			if code != 2 || !strings.Contains(out, "not an epochfs mount") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Errorf("unmount %v %s: exit %d, %q; want exit 2 and one line saying it is not an epochfs mount", flags, mnt, code, out)
			}
			if _, ok := mounts.FindMount(mnt); !ok {
				t.Fatalf("unmount %v %s unmounted it", flags, mnt)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(scratch, "keep")); err != nil || string(b) != "scratch data" {
		t.Errorf("the tmpfs's file after the refused unmounts: %q, %v", b, err)
	}
}

// A tier directory serves one catalog: a second mount with another state
// directory on the same tier is refused (exit 2, naming the first mount),
// whether the first is still mounted or not, and the first mount is left
// as it was. The same state directory mounts it again.
func TestASecondCatalogOnATierIsRefused(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	other := filepath.Join(base, "other")
	os.Mkdir(other, 0o755)
	tierFlag := "--tier=disk=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, filepath.Join(base, "state"), tierFlag)
	checkAll(t, src, mnt, paths)
	refused := func(when string) {
		t.Helper()
		code, out := cli(t, "mount", "--state", filepath.Join(base, "state2"), tierFlag, src, other)
		if code != 2 || !strings.Contains(out, filepath.Join(base, "state")) || !strings.Contains(out, mnt) {
			t.Errorf("%s: a second catalog on the tier: exit %d, %q; want exit 2 naming the first mount", when, code, out)
		}
		if mounted(other) {
			t.Fatalf("%s: the second mount is up", when)
		}
	}
	refused("while the first is mounted")
	checkAll(t, src, mnt, paths)
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
	refused("after the first was unmounted")
	binMount(t, src, mnt, filepath.Join(base, "state"), tierFlag)
	if st := statusOf(t, mnt); st["files_resident"] != strconv.Itoa(len(paths)) {
		t.Errorf("the first catalog's remount: %s of %d files resident", st["files_resident"], len(paths))
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
}

// warmup -f: the paths of a list (here find -print0 through bash into
// stdin with -z, names with spaces and non-ASCII letters among them) are
// warmed, and only they.
func TestWarmupFromAList(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB", noFill(t))
	code, out := shell(t, false, `find "$1/class1" "$1/ünïcødé ñame.dat" -type f -print0 | "$2" warmup -z -f - --wait 100 --timeout 30s "$1"`, mnt, binPath)
	if code != 0 {
		t.Fatalf("warmup -z -f -: exit %d: %s", code, out)
	}
	wantTiers(t, mnt, paths, "after warmup -f", func(p string) string {
		if strings.HasPrefix(p, "class1/") || p == "ünïcødé ñame.dat" {
			return "mem"
		}
		return "source"
	})
	if code, out := cli(t, "warmup", "-f", filepath.Join(base, "missing.list"), mnt); code != 2 || !strings.Contains(out, "missing.list") {
		t.Errorf("warmup -f of a missing list: exit %d: %s", code, out)
	}
}

// epochfs list names a mount with its source, state directory, daemon and
// state, as a table and as JSON.
func TestListShowsTheMount(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	state := filepath.Join(base, "state")
	binMount(t, src, mnt, state, "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	pid := statusOf(t, mnt)["pid"]
	code, out := cli(t, "list")
	found := false
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == mnt {
			found = true
			if f[1] != src || f[2] != state || f[3] != pid || f[4] != "serving" {
				t.Errorf("list row %q; want %s %s %s %s serving", l, mnt, src, state, pid)
			}
		}
	}
	if code != 0 || !found || !strings.HasPrefix(out, "MOUNTPOINT") {
		t.Fatalf("epochfs list: exit %d, no row for %s:\n%s", code, mnt, out)
	}
	code, out = cli(t, "list", "--json")
	var rows []struct {
		Mountpoint, Source, State string
		StateDir                  string `json:"state_dir"`
		PID                       int
	}
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("list --json: exit %d, %v:\n%s", code, err, out)
	}
	ok := false
	for _, r := range rows {
		ok = ok || r.Mountpoint == mnt && r.State == "serving" && r.StateDir == state && strconv.Itoa(r.PID) == pid
	}
	if !ok {
		t.Errorf("list --json has no serving row for %s: %s", mnt, out)
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
}

// epochfs drop removes the copies of the paths it is given (a directory:
// its files), reads of them go to the source and give the same bytes, a
// user other than root is refused, and --all drops the rest.
func TestDropRemovesCopiesOnPurpose(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	for d := base; d != "/" && d != "/tmp"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // the test user reaches the mount point
	}
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	if code, out := cli(t, "warmup", "--wait", "100", "--timeout", "30s", mnt); code != 0 {
		t.Fatalf("warmup: exit %d: %s", code, out)
	}
	code, out := cli(t, "drop", mnt, "class1", filepath.Join(mnt, "a/small.txt"))
	if code != 0 || !strings.Contains(out, "dropped 3 copies") {
		t.Fatalf("drop class1 a/small.txt: exit %d: %s", code, out)
	}
	wantTiers(t, mnt, paths, "after the drop", func(p string) string {
		if strings.HasPrefix(p, "class1/") || p == "a/small.txt" {
			return "source"
		}
		return "mem"
	})
	checkAll(t, src, mnt, paths)
	if code, out := shell(t, true, `printf 'all\n' > "$1/.epochfs/drop"`, mnt); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("the test user writing drop: exit %d: %s", code, out)
	}
	if code, out := cli(t, "drop", mnt, "no/such"); code != 2 || !strings.Contains(out, "no/such") {
		t.Errorf("drop of an unknown path: exit %d: %s", code, out)
	}
	waitFor(t, func() bool { return statusOf(t, mnt)["placements_queued"] == "0" })
	if code, out := cli(t, "drop", "--all", mnt); code != 0 || !strings.Contains(out, "dropped") {
		t.Fatalf("drop --all: exit %d: %s", code, out)
	}
	if st := statusOf(t, mnt); st["files_resident"] != "0" {
		t.Errorf("files_resident=%s after drop --all", st["files_resident"])
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
}

// doctor on a live mount: the mount answers (exit 0); a directory with no
// mount fails.
func TestDoctorOnALiveMount(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	code, out := cli(t, "doctor", mnt)
	if code != 0 || !strings.Contains(out, "ok    mount") || !strings.Contains(out, src) {
		t.Errorf("doctor %s: exit %d:\n%s", mnt, code, out)
	}
	if code, out := cli(t, "doctor", base); code != 1 || !strings.Contains(out, "FAIL  mount") {
		t.Errorf("doctor of a directory with no mount: exit %d:\n%s", code, out)
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
}

// status prints a summary for people, --raw the key=value lines of
// .epochfs/status, and stats a line per interval.
func TestStatusForPeopleRawForScriptsAndStats(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	checkAll(t, src, mnt, paths)
	code, out := cli(t, "status", mnt)
	if code != 0 || !strings.Contains(out, "epochfs ") || !strings.Contains(out, "resident  ") || !strings.Contains(out, "mem "+filepath.Join(base, "tier")) {
		t.Errorf("status: exit %d:\n%s", code, out)
	}
	code, out = cli(t, "status", "--raw", mnt)
	raw, _ := os.ReadFile(filepath.Join(mnt, ".epochfs", "status"))
	if code != 0 || !strings.HasPrefix(out, "version=") || strings.Count(out, "\n") != strings.Count(string(raw), "\n") {
		t.Errorf("status --raw: exit %d, %d lines; .epochfs/status has %d:\n%s", code, strings.Count(out, "\n"), strings.Count(string(raw), "\n"), out)
	}
	code, out = cli(t, "stats", "--count", "2", "--interval", "50ms", mnt)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "time") {
		t.Errorf("stats --count 2: exit %d:\n%s", code, out)
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
}

// wantTiers checks that each of paths is in the tier want names
// (user.epochfs.tier: a tier's name, or "source").
func wantTiers(t *testing.T, mnt string, paths []string, when string, want func(p string) string) {
	t.Helper()
	for _, p := range paths {
		if got, w := tierOf(t, filepath.Join(mnt, p)), want(p); got != w {
			t.Errorf("%s is in %s %s, want %s", p, got, when, w)
		}
	}
}
