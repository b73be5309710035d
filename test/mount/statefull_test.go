package mount

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The state directory (the badger catalog) on a real tmpfs that is, or
// becomes, full. badger writes through memory maps, where a full file
// system is a SIGBUS; the daemon must keep serving, report
// catalog=degraded, and write the catalog once there is room.

// stateTmpfs mounts a tmpfs of the given size (mount(8) syntax) for the
// state directory; it is unmounted after the daemon.
func stateTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// fillDir writes a file in dir until the file system is full, and returns
// its path.
func fillDir(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if free := st.Bavail * uint64(st.Bsize); free > 1<<20 {
		t.Fatalf("%d bytes still free after filling %s", free, dir)
	}
	return p
}

// withManyFiles adds n small files to the source: enough catalog updates
// after the disk fills to reach pages badger has not yet touched (an old
// daemon died of SIGBUS here).
func withManyFiles(t *testing.T, src string, paths []string, n int) []string {
	t.Helper()
	dir := filepath.Join(src, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		p := "many/f" + strconv.Itoa(i)
		if err := os.WriteFile(filepath.Join(src, p), []byte("sample "+strconv.Itoa(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// lockedBuffer collects a daemon's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// daemon is `epochfs mount --foreground`, so the test sees how it exits.
type daemon struct {
	mnt    string
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	err    error
}

// noFill is a --config flag for a mount that copies only what is read
// (placement.fill_after = 0), for tests that count the copies of the
// files they read.
func noFill(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "nofill.toml")
	if err := os.WriteFile(cfg, []byte("[placement]\nfill_after = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return "--config=" + cfg
}

func startDaemon(t *testing.T, src, mnt, state, tierDir string, extra ...string) *daemon {
	t.Helper()
	d := &daemon{mnt: mnt, out: &lockedBuffer{}, exited: make(chan struct{})}
	args := append([]string{"mount", "--foreground", "--state", state, "--tier=mem=" + tierDir + ":1GiB"}, extra...)
	d.cmd = exec.Command(binPath, append(args, src, mnt)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		if mounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	waitFor(t, func() bool {
		select {
		case <-d.exited:
			t.Fatalf("the daemon exited before mounting: %v\n%s", d.err, d.out)
		default:
		}
		return mounted(mnt)
	})
	waitWalked(t, mnt)
	return d
}

// alive fails the test if the daemon has died.
func (d *daemon) alive(t *testing.T) {
	t.Helper()
	select {
	case <-d.exited:
		t.Fatalf("the daemon died: %v\n%s", d.err, d.out)
	default:
	}
	if _, err := os.Stat(filepath.Join(d.mnt, ".epochfs", "status")); err != nil {
		t.Fatalf("the mount stopped answering: %v\n%s", err, d.out)
	}
}

// unmount unmounts with the CLI and requires the daemon to exit 0: a
// fault in badger would kill it with exit status 2.
func (d *daemon) unmount(t *testing.T) {
	t.Helper()
	if code, out := cli(t, "unmount", d.mnt); code != 0 {
		t.Fatalf("unmount: exit %d: %s", code, out)
	}
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not exit after the unmount\n%s", d.out)
	}
	if d.err != nil {
		t.Fatalf("the daemon exited with %v\n%s", d.err, d.out)
	}
}

func waitCatalog(t *testing.T, mnt, state string) {
	t.Helper()
	waitFor(t, func() bool {
		st := statusOf(t, mnt)
		return st["catalog"] == state && (state != "ok" || st["catalog_pending"] == "0")
	})
}

func waitAllResident(t *testing.T, mnt string, n int) {
	t.Helper()
	waitFor(t, func() bool { return statusOf(t, mnt)["files_resident"] == strconv.Itoa(n) })
}

func TestStateDirFullAtMountKeepsServingAndCatchesUp(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	paths = withManyFiles(t, src, paths, 1500)
	state := stateTmpfs(t, "8m") // far below the catalog's floor
	tierDir := filepath.Join(base, "tier")
	d := startDaemon(t, src, mnt, state, tierDir)
	if st := statusOf(t, mnt); st["catalog"] != "degraded" || st["catalog_pending"] == "0" || st["files_total"] != strconv.Itoa(len(paths)) {
		t.Fatalf("mounted on a full state dir: catalog=%s pending=%s files_total=%s", st["catalog"], st["catalog_pending"], st["files_total"])
	}
	for pass := 0; pass < 2; pass++ {
		checkAll(t, src, mnt, paths)
	}
	waitAllResident(t, mnt, len(paths))
	d.alive(t)
	if st := statusOf(t, mnt); st["catalog"] != "degraded" {
		t.Fatalf("catalog=%s with the state dir still full", st["catalog"])
	}

	if err := syscall.Mount("tmpfs", state, "tmpfs", syscall.MS_REMOUNT, "size=512m"); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, mnt, "ok")
	d.unmount(t)

	d = startDaemon(t, src, mnt, state, tierDir)
	if st := statusOf(t, mnt); st["catalog"] != "ok" || st["files_resident"] != strconv.Itoa(len(paths)) {
		t.Fatalf("after the remount: catalog=%s, %s of %d files resident", st["catalog"], st["files_resident"], len(paths))
	}
	checkAll(t, src, mnt, paths)
	if st := statusOf(t, mnt); st["source_opens"] != "0" {
		t.Fatalf("the remount read %s files from the source; the residency was not kept", st["source_opens"])
	}
	d.unmount(t)
}

func TestStateDirFillingAfterMountKeepsServingAndCatchesUp(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	paths = withManyFiles(t, src, paths, 1500)
	state := stateTmpfs(t, "200m") // above the floor of an empty catalog
	tierDir := filepath.Join(base, "tier")
	d := startDaemon(t, src, mnt, state, tierDir)
	if st := statusOf(t, mnt); st["catalog"] != "ok" {
		t.Fatalf("catalog=%s on an empty state dir", st["catalog"])
	}
	filler := fillDir(t, state)
	for pass := 0; pass < 2; pass++ {
		checkAll(t, src, mnt, paths)
	}
	waitAllResident(t, mnt, len(paths))
	d.alive(t)
	st := statusOf(t, mnt)
	if st["catalog"] != "degraded" || st["catalog_pending"] == "0" {
		t.Fatalf("placements on a full state dir: catalog=%s pending=%s", st["catalog"], st["catalog_pending"])
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, mnt, "ok")
	d.unmount(t)

	d = startDaemon(t, src, mnt, state, tierDir)
	if st := statusOf(t, mnt); st["files_resident"] != strconv.Itoa(len(paths)) {
		t.Fatalf("after the remount %s of %d files resident", st["files_resident"], len(paths))
	}
	checkAll(t, src, mnt, paths)
	if st := statusOf(t, mnt); st["source_opens"] != "0" {
		t.Fatalf("the remount read %s files from the source", st["source_opens"])
	}
	d.unmount(t)
}

// Unmounting while the state dir is full must not flush badger into a
// new table (a fault); what was written before the disk filled survives.
func TestUnmountWithAFullStateDirExitsCleanlyAndKeepsWhatWasWritten(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	paths = withManyFiles(t, src, paths, 1500)
	state := stateTmpfs(t, "200m")
	tierDir := filepath.Join(base, "tier")
	// No fill: the half read must be all that is copied.
	d := startDaemon(t, src, mnt, state, tierDir, noFill(t))
	before, after := paths[:len(paths)/2], paths[len(paths)/2:]
	// In reverse path order: a reader in path order would be read ahead
	// into the other half (internal/placement/sequential.go).
	rev := slices.Clone(before)
	slices.Sort(rev)
	slices.Reverse(rev)
	checkAll(t, src, mnt, rev)
	// Every copy placed and its record written.
	waitFor(t, func() bool {
		st := statusOf(t, mnt)
		return st["placements_done"] == strconv.Itoa(len(before)) && st["catalog_pending"] == "0"
	})
	filler := fillDir(t, state)
	checkAll(t, src, mnt, after)
	waitAllResident(t, mnt, len(paths))
	waitCatalog(t, mnt, "degraded")
	d.unmount(t)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, src, mnt, state, tierDir)
	st := statusOf(t, mnt)
	if st["catalog"] != "ok" || st["files_total"] != strconv.Itoa(len(paths)) {
		t.Fatalf("after an unmount on a full state dir: catalog=%s files_total=%s", st["catalog"], st["files_total"])
	}
	// The residency written before the disk filled was replayed from
	// badger's log; the updates held in memory at the unmount were lost.
	if st["files_resident"] != strconv.Itoa(len(before)) {
		t.Fatalf("%s files resident after the remount, want the %d placed before the disk filled", st["files_resident"], len(before))
	}
	for pass := 0; pass < 2; pass++ {
		checkAll(t, src, mnt, paths)
	}
	waitAllResident(t, mnt, len(paths))
	d.unmount(t)
}
