package mount

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/epochfs/epochfs/internal/placement"
)

func TestEveryFileReadsIdenticalThroughTheMount(t *testing.T) {
	src, paths := makeTree(t, 64<<20)
	e := newEnv(t, src, 1<<30)
	e.mount()
	checkAll(t, src, e.mnt, paths)
	target, err := os.Readlink(filepath.Join(e.mnt, "link"))
	if err != nil || target != "a/small.txt" {
		t.Fatalf("readlink: %q, %v", target, err)
	}
	via, err := os.ReadFile(filepath.Join(e.mnt, "link"))
	if err != nil || string(via) == "" {
		t.Fatalf("read through symlink: %v", err)
	}
	// Attributes come from the source unchanged.
	for _, p := range append(paths, "a", "a/b") {
		var ss, ms syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(src, p), &ss); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Lstat(filepath.Join(e.mnt, p), &ms); err != nil {
			t.Fatal(err)
		}
		if ss.Mode != ms.Mode || ss.Uid != ms.Uid || ss.Gid != ms.Gid || ss.Size != ms.Size || ss.Mtim != ms.Mtim {
			t.Errorf("%s: mount attrs %+v differ from source %+v", p, ms, ss)
		}
	}
}

func TestSecondPassSendsNoReadsToTheSource(t *testing.T) {
	src, paths := makeTree(t, 8<<20)
	e := newEnv(t, src, 1<<30)
	e.mount()
	checkAll(t, src, e.mnt, paths)
	e.settle()
	st := e.status()
	if st["files_resident"] != st["files_total"] {
		t.Fatalf("after one pass %s of %s files resident", st["files_resident"], st["files_total"])
	}
	reads, bytesRead := e.num("source_reads"), e.num("source_bytes")
	if total := e.num("bytes_total"); bytesRead != total {
		// One shared copy per file: readers read the copy in flight.
		t.Errorf("first pass took %d bytes from the source for a %d-byte dataset", bytesRead, total)
	}
	checkAll(t, src, e.mnt, paths)
	if got := e.num("source_reads"); got != reads {
		t.Fatalf("second pass: source_reads went from %d to %d", reads, got)
	}
	if e.status()["passthrough"] != "on" {
		t.Errorf("passthrough = %q on a kernel that has it", e.status()["passthrough"])
	}
}

func TestQuotaOf40PercentHoldsAndEveryFileStillReads(t *testing.T) {
	src, paths := makeTree(t, 4<<20)
	var total int64
	for _, p := range paths {
		st, _ := os.Stat(filepath.Join(src, p))
		total += st.Size()
	}
	quota := total * 40 / 100
	e := newEnv(t, src, quota)
	e.mount()
	checkAll(t, src, e.mnt, paths)
	e.settle()
	checkAll(t, src, e.mnt, paths)
	if used := e.num("bytes_resident"); used > quota || used == 0 {
		t.Fatalf("resident %d bytes with a quota of %d", used, quota)
	}
	if e.num("placements_skipped_nospace") == 0 {
		t.Fatal("the 4 MiB file cannot fit 40% of the dataset, yet nothing was skipped")
	}
	// Smaller files kept being placed after the misfit.
	if e.num("files_resident") < 5 {
		t.Fatalf("only %d files resident", e.num("files_resident"))
	}
}

func TestRemountDoesNoWalkAndNoCopy(t *testing.T) {
	src, paths := makeTree(t, 1<<20)
	e := newEnv(t, src, 1<<30)
	e.mount()
	checkAll(t, src, e.mnt, paths)
	e.settle()
	resident := e.num("files_resident")
	e.unmount()

	e.mount()
	if e.cat.Walked() {
		t.Fatal("remount walked the source")
	}
	if got := e.num("files_resident"); got != resident {
		t.Fatalf("remount: %d files resident, was %d", got, resident)
	}
	checkAll(t, src, e.mnt, paths)
	if n := e.num("source_opens"); n != 0 {
		t.Fatalf("remount: %d source opens", n)
	}
	if n := e.num("placements_done"); n != 0 {
		t.Fatalf("remount: %d copies made", n)
	}
}

// The kernel refuses a passthrough open while a cached-mode open of the
// same inode is live (fs/fuse/iomode.c); the second open must still work.
func TestOpenAfterPlacementWhileCachedHandleIsOpen(t *testing.T) {
	src, _ := makeTree(t, 1<<20)
	e := newEnv(t, src, 1<<30)
	e.mount()
	p := filepath.Join(e.mnt, "class2/img004.jpg")
	first, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	buf := make([]byte, 4096)
	if _, err := first.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if tierOf(t, p) == "source" {
		t.Fatal("file not placed")
	}
	second, err := os.Open(p)
	if err != nil {
		t.Fatalf("second open while a cached-mode handle is live: %v", err)
	}
	got, err := readAll(second)
	second.Close()
	want, _ := os.ReadFile(filepath.Join(src, "class2/img004.jpg"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("second handle read %d bytes, err %v", len(got), err)
	}
	first.Close()
	// Right after a cached-mode release (the kernel sends RELEASE in the
	// background) an open must work too, in whichever mode.
	if again, err := os.Open(p); err != nil {
		t.Fatalf("open right after a cached-mode release: %v", err)
	} else {
		again.Close()
	}
	// With no cached handle left, the next open goes through passthrough.
	e.waitNoHandles()
	third, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close() // a failure below must not leave the mount busy
	if n := e.num("handles_passthrough"); n != 1 {
		t.Errorf("an open with no other handle live: %d handles in passthrough mode, want 1", n)
	}
	got, err = readAll(third)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("third handle: %v", err)
	}
	// And a fourth open while that passthrough handle is live.
	fourth, err := os.Open(p)
	if err != nil {
		t.Fatalf("open beside a passthrough handle: %v", err)
	}
	fourth.Close()
	third.Close()
}

func readAll(f *os.File) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.Bytes(), err
}

func tierOf(t *testing.T, p string) string {
	t.Helper()
	buf := make([]byte, 64)
	n, err := syscall.Getxattr(p, "user.epochfs.tier", buf)
	if err != nil {
		t.Fatalf("getxattr %s: %v", p, err)
	}
	return string(buf[:n])
}

// The mmap check runs in a child process: a page fault on a FUSE mount
// served by the same Go process can deadlock the runtime's stop-the-world.
func TestMmapOfDatasetFiles(t *testing.T) {
	src, _ := makeTree(t, 1<<20)
	e := newEnv(t, src, 1<<30)
	e.mount()
	check := func(stage string) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(),
			"EPOCHFS_MMAP_FILE="+filepath.Join(e.mnt, "class1/img001.jpg"),
			"EPOCHFS_MMAP_WANT="+filepath.Join(src, "class1/img001.jpg"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "mmap ok") {
			t.Fatalf("%s: mmap child: %v\n%s", stage, err, out)
		}
	}
	check("non-resident")
	e.settle()
	check("resident")
}

// mmapChild maps file with MAP_SHARED and MAP_PRIVATE and compares it
// with wantPath; it runs as TestMmapOfDatasetFiles's child (TestMain).
func mmapChild(file, wantPath string) error {
	want, err := os.ReadFile(wantPath)
	if err != nil {
		return err
	}
	var f *os.File
	if file == "/proc/self/fd/3" {
		// Not reopened: the parent's open file itself.
		f = os.NewFile(3, "parent's")
	} else if f, err = os.Open(file); err != nil {
		return err
	}
	defer f.Close()
	for _, flags := range []int{syscall.MAP_SHARED, syscall.MAP_PRIVATE} {
		m, err := syscall.Mmap(int(f.Fd()), 0, len(want), syscall.PROT_READ, flags)
		if err != nil {
			return fmt.Errorf("mmap: %w", err)
		}
		same := bytes.Equal(m, want)
		syscall.Munmap(m)
		if !same {
			return fmt.Errorf("mmap (flags %#x) content differs", flags)
		}
	}
	fmt.Println("mmap ok")
	return nil
}

func TestWritesAnswerEROFS(t *testing.T) {
	src, _ := makeTree(t, 1<<10)
	e := newEnv(t, src, 1<<30)
	e.mount()
	p := filepath.Join(e.mnt, "a/small.txt")
	checks := map[string]error{}
	_, err := os.OpenFile(p, os.O_WRONLY, 0)
	checks["open for write"] = err
	_, err = os.OpenFile(p, os.O_RDWR, 0)
	checks["open rdwr"] = err
	_, err = os.Create(filepath.Join(e.mnt, "new"))
	checks["create"] = err
	checks["mkdir"] = os.Mkdir(filepath.Join(e.mnt, "d"), 0o755)
	checks["remove"] = os.Remove(p)
	checks["rename"] = os.Rename(p, filepath.Join(e.mnt, "x"))
	checks["chmod"] = os.Chmod(p, 0o600)
	checks["truncate"] = os.Truncate(p, 0)
	checks["symlink"] = os.Symlink("x", filepath.Join(e.mnt, "s"))
	checks["setxattr"] = syscall.Setxattr(p, "user.x", []byte("1"), 0)
	for what, err := range checks {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: got %v, want EROFS", what, err)
		}
	}
}

func TestCtlDirIsHiddenFromReaddirButReachable(t *testing.T) {
	src, _ := makeTree(t, 1<<10)
	e := newEnv(t, src, 1<<30)
	e.mount()
	out, err := exec.Command("ls", "-a", e.mnt).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), ".epochfs") {
		t.Fatalf("ls -a lists .epochfs:\n%s", out)
	}
	if !strings.Contains(string(out), "class1") {
		t.Fatalf("ls -a misses the dataset:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(e.mnt, ".epochfs", "status")); err != nil {
		t.Fatal(err)
	}
}

func TestStatusHasEveryDocumentedKey(t *testing.T) {
	src, _ := makeTree(t, 1<<10)
	e := newEnv(t, src, 1<<30)
	e.mount()
	st := e.status()
	for _, k := range []string{"version", "source", "mountpoint", "passthrough", "files_total", "bytes_total",
		"files_resident", "bytes_resident", "resident_pct", "source_opens", "source_reads", "source_bytes",
		"placements_queued", "placements_done", "placements_failed", "placements_skipped_nospace", "demand_fallbacks",
		"tier.t0.path", "tier.t0.quota", "tier.t0.used", "tier.t0.files"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %s", k)
		}
	}
	if st["files_total"] != "10" {
		t.Errorf("files_total = %s, want 10", st["files_total"])
	}
	data, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "stats.json"))
	if err != nil || !bytes.Contains(data, []byte(`"files_total":10`)) {
		t.Fatalf("stats.json: %s %v", data, err)
	}
}

func TestBadCtlWriteFailsWithEINVALAndChangesNothing(t *testing.T) {
	src, _ := makeTree(t, 1<<10)
	e := newEnv(t, src, 1<<30)
	e.mount()
	w := filepath.Join(e.mnt, ".epochfs", "warmup")
	for _, bad := range []string{"a/small.txt\nno/such/file\n", "\n\n", "all\na/small.txt\n", "x\x00y\n"} {
		err := os.WriteFile(w, []byte(bad), 0)
		if !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("write %q: got %v, want EINVAL", bad, err)
		}
	}
	data, _ := os.ReadFile(w)
	if !bytes.Contains(data, []byte("queued=0\n")) || !bytes.Contains(data, []byte("pct=0.00\n")) {
		t.Fatalf("a rejected write queued files, or nothing queued reads as done:\n%s", data)
	}
	errs, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "errors"))
	if !bytes.Contains(errs, []byte(`line 2 "no/such/file": no such file or directory in the dataset`)) {
		t.Fatalf(".epochfs/errors lacks the reason:\n%s", errs)
	}
	// A good write is taken.
	if err := os.WriteFile(w, []byte("class1\n"), 0); err != nil {
		t.Fatal(err)
	}
	e.settle()
	data, _ = os.ReadFile(w)
	if !bytes.Contains(data, []byte("queued=2\n")) || !bytes.Contains(data, []byte("pct=100.00\n")) {
		t.Fatalf("warmup of class1:\n%s", data)
	}
	if tierOf(t, filepath.Join(e.mnt, "class1/img001.jpg")) != "t0" || tierOf(t, filepath.Join(e.mnt, "class2/img003.jpg")) != "source" {
		t.Fatal("warmup placed the wrong files")
	}
}

// TestSourceChangeWhileAPassthroughHandleIsOpen: a file's source changes
// while a passthrough handle of its old tier copy is open; the next open
// must read the new content (validate = "open").
func TestSourceChangeWhileAPassthroughHandleIsOpen(t *testing.T) {
	src, _ := makeTree(t, 1<<20)
	e := newEnv(t, src, 1<<30)
	e.opts.validate = placement.ValidateOpen
	e.mount()
	rel := "class1/img001.jpg"
	p := filepath.Join(e.mnt, rel)
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if tierOf(t, p) == "source" {
		t.Fatal("file not placed")
	}
	e.waitNoHandles() // the cached-mode read's RELEASE has been served
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldWant, _ := os.ReadFile(filepath.Join(src, rel))
	if got, err := readAll(old); err != nil || !bytes.Equal(got, oldWant) {
		t.Fatalf("old handle: %v", err)
	}
	requirePassthrough(t, e)
	if n := e.num("handles_passthrough"); n != 1 {
		t.Fatalf("the old handle is not in passthrough mode (%d passthrough handles)", n)
	}
	newWant := append([]byte("changed "), oldWant...)
	if err := os.WriteFile(filepath.Join(src, rel), newWant, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		f, err := os.Open(p)
		if err != nil {
			t.Fatalf("open %d after the source changed, beside a passthrough handle: %v", i+1, err)
		}
		got, err := readAll(f)
		f.Close()
		if err != nil || !bytes.Equal(got, newWant) {
			t.Fatalf("open %d after the change read %d bytes %q (err %v), want the new %d", i+1, len(got), got[:8], err, len(newWant))
		}
	}
	if got, err := old.ReadAt(make([]byte, 16), 0); err != nil || got != 16 {
		t.Fatalf("the old handle stopped working: %d, %v", got, err)
	}
	old.Close()
	// Once the old handle is gone, opens pass the new copy through.
	e.settle()
	e.waitNoHandles()
	if st, err := os.Stat(p); err != nil || st.Size() != int64(len(newWant)) {
		t.Fatalf("stat after the change: %v, %v; want size %d", st, err, len(newWant))
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, newWant) {
		t.Fatalf("read after the old handle closed: %d bytes, %v", len(got), err)
	}
	if tierOf(t, p) == "source" {
		t.Error("the new version was not placed")
	}
}
