package tier

import (
	"bytes"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// fakeDisk is an Options.Statfs hook whose free and total bytes a test sets.
type fakeDisk struct {
	free, total atomic.Uint64
	err         atomic.Value // error or nil
	calls       atomic.Int64
}

func newFakeDisk(free, total uint64) *fakeDisk {
	d := &fakeDisk{}
	d.free.Store(free)
	d.total.Store(total)
	return d
}

func (d *fakeDisk) statfs(string) (uint64, uint64, error) {
	d.calls.Add(1)
	if e, _ := d.err.Load().(error); e != nil {
		return 0, 0, e
	}
	return d.free.Load(), d.total.Load(), nil
}

// plentyOfDisk is a Statfs hook that never limits, so quota tests do not
// depend on the free space of the machine running them.
func plentyOfDisk(string) (uint64, uint64, error) { return 1 << 50, 1 << 51, nil }

func openTier(t *testing.T, o Options) *Tier {
	t.Helper()
	if o.Name == "" {
		o.Name = "test"
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(t.TempDir(), "tier")
	}
	if o.Statfs == nil {
		o.Statfs = plentyOfDisk
	}
	tr, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%+v): %v", o, err)
	}
	return tr
}

// install copies data into the tier as rel through the public API.
func install(t *testing.T, tr *Tier, rel string, data []byte) {
	t.Helper()
	res, err := tr.Reserve(int64(len(data)))
	if err != nil {
		t.Fatalf("Reserve(%d) for %s: %v", len(data), rel, err)
	}
	tp, err := tr.Create(rel, res)
	if err != nil {
		t.Fatalf("Create(%s): %v", rel, err)
	}
	defer tp.Close()
	if _, err := tp.Write(data); err != nil {
		t.Fatalf("Write(%s): %v", rel, err)
	}
	if err := tp.Install(int64(len(data))); err != nil {
		t.Fatalf("Install(%s): %v", rel, err)
	}
}

func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s): %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func checkAccounting(t *testing.T, tr *Tier, used, files, reserved int64) {
	t.Helper()
	if got := tr.Used(); got != used {
		t.Errorf("Used() = %d, want %d", got, used)
	}
	if got := tr.Files(); got != files {
		t.Errorf("Files() = %d, want %d", got, files)
	}
	if got := tr.Reserved(); got != reserved {
		t.Errorf("Reserved() = %d, want %d", got, reserved)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{
		{Dir: dir, Quota: 1},
		{Name: "x", Quota: 1},
		{Name: "x", Dir: dir, Quota: 0},
		{Name: "x", Dir: dir, Quota: -1},
	} {
		if _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded, want an error", o)
		}
	}
}

func TestOpenCreatesDirectories0700(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "tier")
	// A world-writable root (say /dev/shm itself) is refused and left
	// as it is; a tier below it is created 0700.
	shared := filepath.Join(root, "shared")
	if err := os.MkdirAll(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	if _, err := Open(Options{Name: "test", Dir: shared, Quota: 1 << 20}); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("a world-writable tier root: %v, want ErrUnsafeDir", err)
	}
	if st, _ := os.Stat(shared); st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("a refused tier root changed mode to %v", st.Mode())
	}
	openTier(t, Options{Dir: filepath.Join(shared, "mine"), Quota: 1 << 20})
	tr := openTier(t, Options{Dir: dir, Quota: 1 << 20})
	install(t, tr, "class1/sub/img.jpg", []byte("jpeg"))
	for _, d := range []string{
		dir,
		filepath.Join(dir, dataDir),
		filepath.Join(dir, hashedDir),
		filepath.Join(dir, tmpDir),
		filepath.Join(dir, dataDir, "class1"),
		filepath.Join(dir, dataDir, "class1", "sub"),
	} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatalf("stat %s: %v", d, err)
		}
		if !st.IsDir() {
			t.Errorf("%s is not a directory", d)
		}
		if perm := st.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s has mode %o, want 700", d, perm)
		}
	}
	if tr.Name() != "test" || tr.Dir() != dir || tr.Quota() != 1<<20 {
		t.Errorf("Name/Dir/Quota = %q %q %d", tr.Name(), tr.Dir(), tr.Quota())
	}
}

// A tier under a directory the daemon cannot write is refused: for a user,
// a directory without write permission; for root (CI, and the daemon),
// which may write any directory, a read-only file system.
func TestOpenFailsOnUnwritableDir(t *testing.T) {
	parent := t.TempDir()
	if os.Geteuid() == 0 {
		if err := unix.Mount("tmpfs", parent, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
			t.Fatalf("mount a read-only tmpfs: %v", err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(parent, 0); err != nil {
				t.Errorf("unmount %s: %v", parent, err)
			}
		})
	} else {
		if err := os.Chmod(parent, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(parent, 0o700) })
	}
	if _, err := Open(Options{Name: "ro", Dir: filepath.Join(parent, "tier"), Quota: 1}); err == nil {
		t.Fatal("Open under an unwritable directory succeeded")
	}
}

func TestOpenRemovesLeftoverTempFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tier")
	tr := openTier(t, Options{Dir: dir, Quota: 1 << 20})
	install(t, tr, "kept.bin", []byte("kept"))

	// A crash mid-copy leaves temp files (and maybe stray directories).
	tmp := filepath.Join(dir, tmpDir)
	if err := os.WriteFile(filepath.Join(tmp, "copy-123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tmp, "stray", "deep"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "stray", "deep", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	tr2 := openTier(t, Options{Dir: dir, Quota: 1 << 20})
	if names := readDirNames(t, tmp); len(names) != 0 {
		t.Errorf("after reopen %s holds %v, want it empty", tmp, names)
	}
	// Installed files survive a reopen.
	got, err := os.ReadFile(tr2.Path("kept.bin"))
	if err != nil || string(got) != "kept" {
		t.Errorf("installed file after reopen = %q, %v; want \"kept\"", got, err)
	}
}

func TestPath(t *testing.T) {
	tr := openTier(t, Options{Quota: 1})
	want := filepath.Join(tr.Dir(), "data", "a", "b.jpg")
	if got := tr.Path("a/b.jpg"); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
}

func TestQuotaExhaustionReturnsErrNoSpaceAndSmallerFilesStillFit(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	install(t, tr, "big", bytes.Repeat([]byte{1}, 60))
	checkAccounting(t, tr, 60, 1, 0)

	if _, err := tr.Reserve(41); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(41) with 40 left: err = %v, want ErrNoSpace", err)
	}
	// A misfit does not stop smaller files from fitting.
	r1, err := tr.Reserve(30)
	if err != nil {
		t.Fatalf("Reserve(30) with 40 left: %v", err)
	}
	checkAccounting(t, tr, 60, 1, 30)
	if _, err := tr.Reserve(11); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(11) with 10 left: err = %v, want ErrNoSpace", err)
	}
	r2, err := tr.Reserve(10)
	if err != nil {
		t.Fatalf("Reserve(10) with exactly 10 left: %v", err)
	}
	if _, err := tr.Reserve(1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(1) on a full tier: err = %v, want ErrNoSpace", err)
	}
	// A zero-byte file fits even on a full tier.
	if _, err := tr.Reserve(0); err != nil {
		t.Fatalf("Reserve(0) on a full tier: %v", err)
	}
	r1.Release()
	r1.Release() // idempotent
	checkAccounting(t, tr, 60, 1, 10)
	r2.Release()
	if _, err := tr.Reserve(40); err != nil {
		t.Fatalf("Reserve(40) after releases: %v", err)
	}
	if tr.Healthy() != true || tr.Errors() != 0 {
		t.Errorf("ErrNoSpace changed health: Healthy=%v Errors=%d", tr.Healthy(), tr.Errors())
	}
}

func TestReserveLargerThanQuotaNeverFits(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	for _, size := range []int64{101, 1 << 40, math.MaxInt64} {
		if _, err := tr.Reserve(size); !errors.Is(err, ErrNoSpace) {
			t.Errorf("Reserve(%d) on an empty 100-byte tier: err = %v, want ErrNoSpace", size, err)
		}
	}
	if _, err := tr.Reserve(1); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Reserve(math.MaxInt64); !errors.Is(err, ErrNoSpace) {
		t.Errorf("Reserve(MaxInt64) with 1 byte reserved: err = %v, want ErrNoSpace", err)
	}
	checkAccounting(t, tr, 0, 0, 1)
}

func TestMinFreeBytesFloor(t *testing.T) {
	disk := newFakeDisk(1000, 10000)
	tr := openTier(t, Options{Quota: 1 << 30, MinFreeBytes: 600, Statfs: disk.statfs})

	if _, err := tr.Reserve(401); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(401) with 1000 free and a 600 floor: err = %v, want ErrNoSpace", err)
	}
	r, err := tr.Reserve(400)
	if err != nil {
		t.Fatalf("Reserve(400) with 1000 free and a 600 floor: %v", err)
	}
	// Reserved bytes are not written yet, so they count against free space.
	if _, err := tr.Reserve(1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(1) with 400 reserved: err = %v, want ErrNoSpace", err)
	}
	r.Release()
	// The disk fills up from elsewhere.
	disk.free.Store(650)
	if _, err := tr.Reserve(51); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(51) with 650 free: err = %v, want ErrNoSpace", err)
	}
	if _, err := tr.Reserve(50); err != nil {
		t.Fatalf("Reserve(50) with 650 free: %v", err)
	}
	// Below the floor already: nothing fits, not even a byte.
	disk.free.Store(500)
	if _, err := tr.Reserve(1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(1) below the floor: err = %v, want ErrNoSpace", err)
	}
	if disk.calls.Load() == 0 {
		t.Error("the Statfs hook was never called")
	}
	if !tr.Healthy() || tr.Errors() != 0 {
		t.Errorf("a full disk changed health: Healthy=%v Errors=%d", tr.Healthy(), tr.Errors())
	}
}

func TestMinFreePercentFloor(t *testing.T) {
	disk := newFakeDisk(1500, 10000)
	tr := openTier(t, Options{Quota: 1 << 30, MinFreePct: 10, Statfs: disk.statfs})
	// 10% of 10000 = 1000 must stay free: 500 bytes fit, 501 do not.
	if _, err := tr.Reserve(501); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(501): err = %v, want ErrNoSpace", err)
	}
	if _, err := tr.Reserve(500); err != nil {
		t.Fatalf("Reserve(500): %v", err)
	}
}

func TestMinFreeLargerFloorWins(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int64
		pct   float64
		fits  int64 // largest reservation that fits with 3000 free of 10000
	}{
		{"percent larger", 200, 10, 2000},
		{"bytes larger", 2500, 10, 500},
		{"percent only", 0, 25, 500},
		{"neither", 0, 0, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := newFakeDisk(3000, 10000)
			tr := openTier(t, Options{Quota: 1 << 30, MinFreeBytes: tc.bytes, MinFreePct: tc.pct, Statfs: disk.statfs})
			if _, err := tr.Reserve(tc.fits + 1); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Reserve(%d): err = %v, want ErrNoSpace", tc.fits+1, err)
			}
			if _, err := tr.Reserve(tc.fits); err != nil {
				t.Fatalf("Reserve(%d): %v", tc.fits, err)
			}
		})
	}
}

func TestStatfsErrorRefusesReservation(t *testing.T) {
	disk := newFakeDisk(1<<30, 1<<31)
	tr := openTier(t, Options{Quota: 1 << 20, Statfs: disk.statfs})
	disk.err.Store(error(syscall.EIO))
	_, err := tr.Reserve(1)
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "statfs") {
		t.Fatalf("Reserve with a failing statfs: err = %v, want ErrUnhealthy naming statfs", err)
	}
	if tr.Errors() != 1 {
		t.Errorf("Errors() = %d, want 1", tr.Errors())
	}
	checkAccounting(t, tr, 0, 0, 0)
}

func TestInstallMakesFileVisibleOnlyAfterSuccess(t *testing.T) {
	tr := openTier(t, Options{Quota: 1 << 20})
	rel := "train/n01440764/img 1.JPEG"
	data := bytes.Repeat([]byte("0123456789"), 100)

	res, err := tr.Reserve(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tr.Create(rel, res)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if _, err := tp.Write(data[:500]); err != nil {
		t.Fatal(err)
	}

	// Half written: nothing under data/, the temp lives under .tmp.
	if names := readDirNames(t, filepath.Join(tr.Dir(), dataDir)); len(names) != 0 {
		t.Errorf("data/ holds %v while a copy is in progress, want nothing", names)
	}
	if got := filepath.Dir(tp.File().Name()); got != filepath.Join(tr.Dir(), tmpDir) {
		t.Errorf("temp file in %s, want it under %s", got, filepath.Join(tr.Dir(), tmpDir))
	}
	if _, err := os.Open(tr.Path(rel)); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("open of %s before Install: err = %v, want ENOENT", tr.Path(rel), err)
	}
	if f, err := tr.OpenFile(rel); !errors.Is(err, fs.ErrNotExist) {
		if f != nil {
			f.Close()
		}
		t.Errorf("OpenFile before Install: err = %v, want ErrNotExist", err)
	}
	checkAccounting(t, tr, 0, 0, int64(len(data)))

	// Readers may pread what has been written so far.
	buf := make([]byte, 10)
	if _, err := tp.File().ReadAt(buf, 490); err != nil || string(buf) != "0123456789" {
		t.Errorf("pread of the temp file = %q, %v", buf, err)
	}

	if _, err := tp.Write(data[500:]); err != nil {
		t.Fatal(err)
	}
	if err := tp.Install(int64(len(data))); err != nil {
		t.Fatalf("Install: %v", err)
	}
	checkAccounting(t, tr, int64(len(data)), 1, 0)

	got, err := os.ReadFile(tr.Path(rel))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("installed file: %d bytes, err %v; want the %d bytes written", len(got), err, len(data))
	}
	f, err := tr.OpenFile(rel)
	if err != nil {
		t.Fatalf("OpenFile after Install: %v", err)
	}
	f.Close()
	// The temp's descriptor now is the installed file.
	if _, err := tp.File().ReadAt(buf, 0); err != nil || string(buf) != "0123456789" {
		t.Errorf("pread through File() after Install = %q, %v", buf, err)
	}
	if names := readDirNames(t, filepath.Join(tr.Dir(), tmpDir)); len(names) != 0 {
		t.Errorf(".tmp holds %v after Install, want nothing", names)
	}
	if tr.Errors() != 0 {
		t.Errorf("Errors() = %d after a clean install (a missing file is not an I/O error)", tr.Errors())
	}
}

func TestInstallWrongSizeReturnsErrShortCopy(t *testing.T) {
	for _, tc := range []struct {
		name          string
		written, want int64
	}{
		{"short", 10, 11},
		{"long", 12, 11},
		{"empty", 0, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := openTier(t, Options{Quota: 100})
			res, err := tr.Reserve(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			tp, err := tr.Create("f", res)
			if err != nil {
				t.Fatal(err)
			}
			defer tp.Close()
			if _, err := tp.Write(make([]byte, tc.written)); err != nil {
				t.Fatal(err)
			}
			err = tp.Install(tc.want)
			if !errors.Is(err, ErrShortCopy) {
				t.Fatalf("Install(%d) after writing %d: err = %v, want ErrShortCopy", tc.want, tc.written, err)
			}
			for _, s := range []string{"f", fmt.Sprint(tc.written), fmt.Sprint(tc.want)} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if _, err := os.Lstat(tp.File().Name()); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("temp file still exists after a failed Install: %v", err)
			}
			if _, err := os.Lstat(tr.Path("f")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a failed Install left %s: %v", tr.Path("f"), err)
			}
			checkAccounting(t, tr, 0, 0, 0)
			// The whole quota is available again.
			if _, err := tr.Reserve(100); err != nil {
				t.Errorf("Reserve(quota) after a failed Install: %v", err)
			}
			// A size mismatch is the source's fault, not the tier's.
			if tr.Errors() != 0 || !tr.Healthy() {
				t.Errorf("ErrShortCopy counted as a tier error: Errors=%d Healthy=%v", tr.Errors(), tr.Healthy())
			}
		})
	}
}

func TestAbortRemovesTempAndReleases(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	res, err := tr.Reserve(50)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tr.Create("f", res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	tp.Abort()
	tp.Abort() // idempotent: releases once
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if names := readDirNames(t, filepath.Join(tr.Dir(), tmpDir)); len(names) != 0 {
		t.Errorf(".tmp holds %v after Abort", names)
	}
	checkAccounting(t, tr, 0, 0, 0)
}

func TestInstallReplacesDirectoryConflictFails(t *testing.T) {
	// A directory in the way of the rename makes Install fail cleanly: the
	// temp is removed and the reservation released.
	tr := openTier(t, Options{Quota: 100})
	if err := os.MkdirAll(filepath.Join(tr.Path("d"), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Reserve(3)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tr.Create("d", res)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if _, err := tp.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	err = tp.Install(3)
	if err == nil {
		t.Fatal("Install over a non-empty directory succeeded")
	}
	if !strings.Contains(err.Error(), "tier test") || !strings.Contains(err.Error(), "rename") {
		t.Errorf("error %q does not name the tier and the operation", err)
	}
	if names := readDirNames(t, filepath.Join(tr.Dir(), tmpDir)); len(names) != 0 {
		t.Errorf(".tmp holds %v after a failed Install", names)
	}
	checkAccounting(t, tr, 0, 0, 0)
	// A directory in the way is that file's problem, not the tier's.
	if tr.Errors() != 0 || !tr.Healthy() {
		t.Errorf("Errors() = %d, Healthy() = %v; want 0, true", tr.Errors(), tr.Healthy())
	}
}

func TestRemoveUpdatesAccounting(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	install(t, tr, "a/one", make([]byte, 40))
	install(t, tr, "a/two", make([]byte, 50))
	checkAccounting(t, tr, 90, 2, 0)
	if _, err := tr.Reserve(11); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(11) with 10 left: %v", err)
	}

	if err := tr.Remove("a/one", 40); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	checkAccounting(t, tr, 50, 1, 0)
	if _, err := os.Lstat(tr.Path("a/one")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed file still exists: %v", err)
	}
	if f, err := tr.OpenFile("a/one"); err == nil {
		f.Close()
		t.Error("OpenFile of a removed file succeeded")
	}
	// The freed space is usable again.
	if _, err := tr.Reserve(50); err != nil {
		t.Fatalf("Reserve(50) after Remove: %v", err)
	}
	if tr.Errors() != 0 {
		t.Errorf("Errors() = %d, want 0", tr.Errors())
	}
}

func TestAccountAddsCatalogFiles(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	tr.Account(70)
	tr.Account(20)
	checkAccounting(t, tr, 90, 2, 0)
	if _, err := tr.Reserve(11); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(11) with 90 of 100 accounted: err = %v, want ErrNoSpace", err)
	}
	if _, err := tr.Reserve(10); err != nil {
		t.Fatal(err)
	}
}

func TestRepeatedIOErrorsMakeTierUnhealthy(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	ioErr := &os.PathError{Op: "read", Path: "x", Err: syscall.EIO}
	for i := 1; i < maxErrors; i++ {
		tr.NoteError(ioErr)
		if !tr.Healthy() {
			t.Fatalf("unhealthy after %d errors, want healthy until %d", i, maxErrors)
		}
	}
	tr.NoteError(errors.New("some other failure"))
	if tr.Healthy() {
		t.Fatalf("healthy after %d consecutive I/O errors", maxErrors)
	}
	if tr.Errors() != maxErrors {
		t.Errorf("Errors() = %d, want %d", tr.Errors(), maxErrors)
	}
	if _, err := tr.Reserve(1); !errors.Is(err, ErrUnhealthy) {
		t.Fatalf("Reserve on an unhealthy tier: err = %v, want ErrUnhealthy", err)
	}
	checkAccounting(t, tr, 0, 0, 0)

	// The rest ends after the cool-down.
	tr.restUntil.Store(1)
	if !tr.Healthy() {
		t.Fatal("still unhealthy after the cool-down ended")
	}
	if _, err := tr.Reserve(1); err != nil {
		t.Fatalf("Reserve after the cool-down: %v", err)
	}
}

func TestSuccessfulInstallResetsErrorRun(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	for i := 0; i < maxErrors-1; i++ {
		tr.NoteError(syscall.EIO)
	}
	install(t, tr, "ok", []byte("x"))
	for i := 0; i < maxErrors-1; i++ {
		tr.NoteError(syscall.EIO)
	}
	if !tr.Healthy() {
		t.Fatalf("unhealthy after %d errors, a success and %d errors; only consecutive errors count", maxErrors-1, maxErrors-1)
	}
	if got, want := tr.Errors(), int64(2*(maxErrors-1)); got != want {
		t.Errorf("Errors() = %d, want %d", got, want)
	}
}

func TestNoSpaceErrorsDoNotMarkUnhealthy(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	errs := []error{
		syscall.ENOSPC,
		syscall.EDQUOT,
		&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC},
		fmt.Errorf("wrapped: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}),
	}
	for i := 0; i < 3*maxErrors; i++ {
		tr.NoteError(errs[i%len(errs)])
	}
	if !tr.Healthy() {
		t.Fatal("ENOSPC/EDQUOT errors made the tier unhealthy")
	}
	if got := tr.Errors(); got != 3*maxErrors {
		t.Errorf("Errors() = %d, want %d (no-space errors are still counted)", got, 3*maxErrors)
	}
	if _, err := tr.Reserve(1); err != nil {
		t.Fatalf("Reserve after no-space errors: %v", err)
	}
	// Nor do they break a run of I/O errors apart from counting.
	for i := 0; i < maxErrors; i++ {
		tr.NoteError(syscall.EIO)
	}
	if tr.Healthy() {
		t.Error("healthy after a run of EIO")
	}
}

func TestNilAndNotExistErrorsIgnored(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	for i := 0; i < 2*maxErrors; i++ {
		tr.NoteError(nil)
		tr.NoteError(fs.ErrNotExist)
		tr.NoteError(&os.PathError{Op: "open", Path: "x", Err: syscall.ENOENT})
	}
	if !tr.Healthy() || tr.Errors() != 0 {
		t.Errorf("nil/ENOENT errors counted: Healthy=%v Errors=%d", tr.Healthy(), tr.Errors())
	}
}

func TestWrapMapsNoSpaceToErrNoSpace(t *testing.T) {
	tr := openTier(t, Options{Name: "nvme", Quota: 100})
	err := tr.wrap("write", "a/b", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})
	if !errors.Is(err, ErrNoSpace) {
		t.Errorf("wrap(ENOSPC) = %v, want it to match ErrNoSpace", err)
	}
	for _, s := range []string{"tier nvme", "write", "a/b"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	err = tr.wrap("open", "c", syscall.EIO)
	if !errors.Is(err, syscall.EIO) || errors.Is(err, ErrNoSpace) {
		t.Errorf("wrap(EIO) = %v, want EIO and not ErrNoSpace", err)
	}
}

func TestConcurrentReserveNeverExceedsQuota(t *testing.T) {
	const quota = 1000
	tr := openTier(t, Options{Quota: quota})
	var held atomic.Int64 // bytes the goroutines believe they hold
	var wg sync.WaitGroup
	var over atomic.Int64
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			size := int64(7 + g%13)
			var mine []*Reservation
			for i := 0; i < 200; i++ {
				r, err := tr.Reserve(size)
				if err == nil {
					if h := held.Add(size); h > quota {
						over.Store(h)
					}
					mine = append(mine, r)
				} else if !errors.Is(err, ErrNoSpace) {
					t.Errorf("Reserve: %v", err)
					return
				}
				if len(mine) > 3 || (err != nil && len(mine) > 0) {
					held.Add(-size)
					mine[0].Release()
					mine = mine[1:]
				}
			}
			for _, r := range mine {
				held.Add(-size)
				r.Release()
			}
		}(g)
	}
	wg.Wait()
	if h := over.Load(); h != 0 {
		t.Fatalf("reservations held %d bytes at once, quota %d", h, quota)
	}
	checkAccounting(t, tr, 0, 0, 0)
}

func TestConcurrentReserveAndCommitNeverExceedQuota(t *testing.T) {
	// Like above, but reservations are turned into installed bytes and
	// then removed, so Reserve races with the move from reserved to used.
	const quota = 1000
	tr := openTier(t, Options{Quota: quota})
	var held atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			size := int64(100 + g)
			for i := 0; i < 2000; i++ {
				r, err := tr.Reserve(size)
				if err != nil {
					continue
				}
				if h := held.Add(size); h > quota {
					over.Store(h)
				}
				r.commit()
				held.Add(-size)
				tr.used.Add(-size)
				tr.files.Add(-1)
			}
		}(g)
	}
	wg.Wait()
	if h := over.Load(); h != 0 {
		t.Fatalf("reserved+installed bytes reached %d, quota %d", h, quota)
	}
	checkAccounting(t, tr, 0, 0, 0)
}

func TestConcurrentInstallsAccountExactly(t *testing.T) {
	tr := openTier(t, Options{Quota: 1 << 20})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				rel := fmt.Sprintf("d%d/f%d", g, i)
				data := bytes.Repeat([]byte{byte(i)}, 100+i)
				res, err := tr.Reserve(int64(len(data)))
				if err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				tp, err := tr.Create(rel, res)
				if err != nil {
					t.Errorf("Create: %v", err)
					return
				}
				if _, err := tp.Write(data); err != nil {
					t.Errorf("Write: %v", err)
				}
				if err := tp.Install(int64(len(data))); err != nil {
					t.Errorf("Install: %v", err)
				}
				tp.Close()
			}
		}(g)
	}
	wg.Wait()
	var want int64
	for i := 0; i < 10; i++ {
		want += int64(100 + i)
	}
	checkAccounting(t, tr, 8*want, 80, 0)
}

func TestCheckPaths(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) string {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	src := mk("data/src")
	mk("data/src2")
	mk("tiers/outer/src")
	if err := os.Symlink(src, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "data"), filepath.Join(root, "datalink")); err != nil {
		t.Fatal(err)
	}
	j := func(p string) string { return filepath.Join(root, p) }

	for _, tc := range []struct {
		name, src, dir string
		want           string // substring of the error, "" for none
	}{
		{"tier inside source", j("data/src"), j("data/src/cache"), "inside the source"},
		{"tier inside source, existing", j("data/src"), mk("data/src/exists"), "inside the source"},
		{"tier is source", j("data/src"), j("data/src"), "inside"},
		{"source inside tier", j("tiers/outer/src"), j("tiers"), "the source"},
		{"source inside tier, deep", j("tiers/outer/src"), j("tiers/outer"), "the source"},
		{"siblings", j("data/src"), j("data/cache"), ""},
		{"sibling sharing a prefix", j("data/src"), j("data/src2"), ""},
		{"sibling sharing a prefix, nested", j("data/src"), j("data/src2/cache"), ""},
		{"source sharing a prefix with tier", j("data/src2"), j("data/src"), ""},
		{"trailing slashes", j("data/src") + "/", j("data/src/cache") + "/", "inside the source"},
		{"trailing slash on source", j("tiers/outer/src") + "/", j("tiers") + "//", "the source"},
		{"dot segments", j("data/src"), j("data/x/../src/cache"), "inside the source"},
		{"symlinked source", j("link"), j("data/src/cache"), "inside the source"},
		{"symlinked source, sibling tier", j("link"), j("data/cache"), ""},
		{"tier through a symlink", j("data/src"), j("link/cache/deep"), "inside the source"},
		{"tier through a symlinked parent", j("data/src"), j("datalink/src/cache"), "inside the source"},
		{"source through a symlinked parent inside tier", j("datalink/src"), j("data"), "the source"},
		{"missing source inside tier", j("tiers/nope/src"), j("tiers"), "the source"},
		{"tier at the root", j("data/src"), "/", "the source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPaths(tc.src, tc.dir)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckPaths(%q, %q) = %v, want nil", tc.src, tc.dir, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckPaths(%q, %q) = nil, want an error containing %q", tc.src, tc.dir, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckPaths(%q, %q) = %q, want it to contain %q", tc.src, tc.dir, err, tc.want)
			}
			// The message names the paths as given.
			if !strings.Contains(err.Error(), tc.dir) || !strings.Contains(err.Error(), tc.src) {
				t.Errorf("error %q does not name %q and %q", err, tc.src, tc.dir)
			}
		})
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, root string
		want    bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a", "/a/b", false},
		{"/x", "/", true},
		{"/", "/", true},
	} {
		if got := within(tc.p, tc.root); got != tc.want {
			t.Errorf("within(%q, %q) = %v, want %v", tc.p, tc.root, got, tc.want)
		}
	}
}
