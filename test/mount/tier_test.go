package mount

import (
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// longTree writes a source tree of about 210 files: 150 with short paths,
// 30 whose last component is 200 to 250 bytes long, and 30 six
// directories of 100-byte names deep (a path of about 640 bytes). Every
// path fits the source; under a tier directory of 3890 bytes only the
// short ones keep a plain name.
func longTree(t *testing.T) (src string, paths, long []string) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "src")
	add := func(p string, size int, isLong bool) {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		if isLong {
			long = append(long, p)
		}
	}
	for i := 0; i < 150; i++ {
		add(fmt.Sprintf("short/c%02d/img%03d.jpg", i%10, i), 1000+i*97, false)
	}
	for i := 0; i < 30; i++ {
		name := fmt.Sprintf("%02d_", i) + strings.Repeat("n", 200+i*46/29-7) + ".jpg"
		if len(name) < 200 || len(name) > 250 {
			t.Fatalf("test setup: a %d-byte name", len(name))
		}
		add("longname/"+name, 2000+i*31, true)
	}
	for i := 0; i < 30; i++ {
		dirs := make([]string, 6)
		for j := range dirs {
			dirs[j] = strings.Repeat(string(rune('a'+(i%3))), 100)
		}
		add(filepath.Join("deep", filepath.Join(dirs...), fmt.Sprintf("f%02d.bin", i)), 3000+i*13, true)
	}
	return src, paths, long
}

// Over-long tier names: files whose plain tier name passes PATH_MAX are
// placed under hashed names; every file reads identically and becomes
// resident in one pass, and the tier never rests.
func TestOverLongPathsArePlacedUnderHashedNames(t *testing.T) {
	src, paths, long := longTree(t)
	e := newEnv(t, src, 1<<30)
	dir := e.tiers[0].dir
	for len(dir) < 3890 {
		dir = filepath.Join(dir, strings.Repeat("t", min(200, 3890-len(dir))))
	}
	e.tiers[0].dir = dir
	e.mount()
	for _, p := range long {
		if n := len(filepath.Join(dir, "data", p)); n < 4096 {
			t.Fatalf("test setup: the plain tier name of %s is only %d bytes", p, n)
		}
	}

	checkAll(t, src, e.mnt, paths)
	e.settle()
	st := e.status()
	if st["files_total"] != strconv.Itoa(len(paths)) || st["files_resident"] != st["files_total"] {
		t.Fatalf("after one pass %s of %s files resident (%d in the tree)", st["files_resident"], st["files_total"], len(paths))
	}
	if st["tier.t0.healthy"] != "yes" || st["tier.t0.errors"] != "0" || st["placements_failed"] != "0" {
		t.Fatalf("tier healthy=%s errors=%s, placements_failed=%s", st["tier.t0.healthy"], st["tier.t0.errors"], st["placements_failed"])
	}
	// The long ones went under hashed names, the short ones did not.
	hashed := 0
	filepath.WalkDir(filepath.Join(dir, "hashed"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			hashed++
		}
		return nil
	})
	if hashed != len(long) {
		t.Errorf("%d files under hashed names, want %d", hashed, len(long))
	}
	for _, p := range long[:3] {
		if got := tierOf(t, filepath.Join(e.mnt, p)); got != "t0" {
			t.Errorf("%s: %s = %q, want t0", p, "user.epochfs.tier", got)
		}
	}
	// The second pass is served from the tier.
	opens := e.num("source_opens")
	checkAll(t, src, e.mnt, paths)
	if got := e.num("source_opens"); got != opens {
		t.Errorf("second pass opened the source %d times", got-opens)
	}
}

// A wiped RAM tier (a fresh tmpfs, as after a reboot) is found at remount:
// status shows the true residency and the lost copies, the files are
// placed again without being read, and warmup --wait waits for them.
func TestWipedTierIsFoundAtRemountAndRefilled(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 8<<20)
	state := filepath.Join(base, "state")
	tierDir := filepath.Join(base, "ram")
	if err := os.Mkdir(tierDir, 0o755); err != nil {
		t.Fatal(err)
	}
	freshTmpfs := func() {
		if err := syscall.Mount("tmpfs", tierDir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
			t.Fatal(err)
		}
	}
	freshTmpfs()
	t.Cleanup(func() { syscall.Unmount(tierDir, syscall.MNT_DETACH) })
	tierFlag := "--tier=mem=" + filepath.Join(tierDir, "epochfs") + ":1GiB"

	binMount(t, src, mnt, state, tierFlag)
	checkAll(t, src, mnt, paths)
	total := strconv.Itoa(len(paths))
	waitFor(t, func() bool {
		st := statusOf(t, mnt)
		return st["files_resident"] == total && st["placements_queued"] == "0"
	})
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %d %s", code, out)
	}

	// The reboot: the RAM tier comes back empty.
	if err := syscall.Unmount(tierDir, 0); err != nil {
		t.Fatal(err)
	}
	freshTmpfs()

	// Copies back at 1 MiB/s: the 8 MiB file keeps the refill going for
	// seconds after the mount returns.
	cfg := filepath.Join(base, "slow.toml")
	os.WriteFile(cfg, []byte("[placement]\nsource_bandwidth = \"1MiB/s\"\n"), 0o644)
	binMount(t, src, mnt, state, "--config", cfg, tierFlag)
	st := statusOf(t, mnt)
	if st["copies_lost"] != total {
		t.Errorf("copies_lost = %q, want %s", st["copies_lost"], total)
	}
	if st["resident_pct"] == "100.00" || st["files_resident"] == total {
		t.Errorf("right after the remount: %s of %s files resident, %s%%", st["files_resident"], total, st["resident_pct"])
	}
	if q, _ := strconv.Atoi(st["placements_queued"]); q == 0 && st["files_resident"] != total {
		t.Errorf("lost copies not queued: %v", st)
	}

	code, out := cli(t, "warmup", "--wait", "95", "--timeout", "2m", mnt)
	if code != 0 {
		t.Fatalf("warmup --wait 95: exit %d: %s", code, out)
	}
	st = statusOf(t, mnt)
	res, _ := strconv.ParseInt(st["bytes_resident"], 10, 64)
	all, _ := strconv.ParseInt(st["bytes_total"], 10, 64)
	if res*100 < all*95 {
		t.Errorf("warmup --wait 95 returned with %d of %d bytes resident", res, all)
	}
	// Nothing read the files: they come back by themselves.
	waitFor(t, func() bool { return statusOf(t, mnt)["files_resident"] == total })
	st = statusOf(t, mnt)
	if st["source_opens"] != st["placements_done"] || st["placements_done"] != total {
		t.Errorf("refill: source_opens=%s placements_done=%s, want %s each (copies only)", st["source_opens"], st["placements_done"], total)
	}
	if st["tier.mem.files"] != total || st["tier.mem.healthy"] != "yes" {
		t.Errorf("tier: files=%s healthy=%s", st["tier.mem.files"], st["tier.mem.healthy"])
	}
	checkAll(t, src, mnt, paths)
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %d %s", code, out)
	}
}
