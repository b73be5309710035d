package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/test/faultfs"
)

// sickSource is how the source fails between two mounts: start serves
// the tree src as a source and returns its path, how to make it sick and
// how to make it well (nil: it stays sick).
type sickSource struct {
	name  string
	start func(t *testing.T, src string) (path string, sicken, heal func())
	// states are what status may say of the source while it is sick.
	states []string
}

// faultSource is a faultfs over the tree made sick by fault (the source's
// cleanup undoes it before the mounts' go).
func faultSource(fault, undo func(*faultfs.FS)) func(*testing.T, string) (string, func(), func()) {
	return func(t *testing.T, src string) (string, func(), func()) {
		f := faultfs.Start(t, src)
		var heal func()
		if undo != nil {
			heal = func() { undo(f) }
		}
		return f.Mnt(), func() { fault(f); t.Cleanup(f.Close) }, heal
	}
}

var sickSources = []sickSource{
	{"hung", faultSource((*faultfs.FS).Hang, (*faultfs.FS).Resume), []string{"unresponsive", "unavailable"}},
	{"dead", faultSource((*faultfs.FS).Kill, nil), []string{"unavailable"}},
	{"failing", faultSource((*faultfs.FS).Down, (*faultfs.FS).Up), []string{"unavailable"}},
	// The source's file system is unmounted (its client is gone): its
	// path is an empty directory of another file system, where every
	// file looks deleted.
	{"vanished", func(t *testing.T, src string) (string, func(), func()) {
		dir := filepath.Join(t.TempDir(), "pfs")
		os.Mkdir(dir, 0o755)
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
		if out, err := exec.Command("cp", "-a", src+"/.", dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		return dir, func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Fatal(err)
			}
		}, nil
	}, []string{"unavailable"}},
}

// TestTheNextJobMountsWhileTheSourceIsSick: a mount trains, is unmounted,
// and the source hangs (or its client dies, or it fails every call); the
// next job's mount of the same dataset and state directory, the source
// still sick, is ready long before the source timeout, serves every
// resident file, says the source is unavailable in status, fails a
// non-resident read with EIO within the timeout, and unmounts within its
// --timeout with exit 0 (its daemon gone: nothing of it waits on the
// source). A source made well again is found, and read.
func TestTheNextJobMountsWhileTheSourceIsSick(t *testing.T) {
	for _, sick := range sickSources {
		for _, mode := range []placement.Validate{placement.ValidateOnce, placement.ValidateOpen, placement.ValidateNever} {
			t.Run(sick.name+"/"+mode.String(), func(t *testing.T) {
				remountSick(t, sick, mode)
			})
		}
	}
}

func remountSick(t *testing.T, sick sickSource, mode placement.Validate) {
	const timeout = 10 * time.Second // long: a mount that waits on the source shows
	requireFUSE(t)
	src, paths := makeTree(t, 8<<20)
	source, sicken, heal := sick.start(t, src)
	base := t.TempDir()
	mnt, state := filepath.Join(base, "mnt"), filepath.Join(base, "state")
	os.Mkdir(mnt, 0o755)
	cfg := filepath.Join(base, "c.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[placement]\nvalidate = %q\nsource_timeout = \"%s\"\n", mode, timeout)), 0o644)
	args := []string{"--config", cfg, "--tier=mem=" + filepath.Join(base, "tier") + ":4MiB"}
	binMount(t, source, mnt, state, args...)
	checkAll(t, src, mnt, paths)
	var resident []string
	waitFor(t, func() bool {
		resident = resident[:0]
		for _, p := range paths {
			if p != "big.bin" && tierOf(t, filepath.Join(mnt, p)) != "source" {
				resident = append(resident, p)
			}
		}
		return len(resident) == len(paths)-1
	})
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount with the source well: exit %d: %s", code, out)
	}
	sicken()

	start := time.Now()
	binMountNoWalk(t, source, mnt, state, args...)
	took := time.Since(start)
	t.Logf("mount with a %s source ready after %v", sick.name, took.Round(time.Millisecond))
	if took > timeout/2 {
		t.Fatalf("the mount waited %v on a %s source (source_timeout %v)", took.Round(time.Millisecond), sick.name, timeout)
	}
	checkAll(t, src, mnt, resident)
	st := statusOf(t, mnt)
	waitFor(t, func() bool {
		st = statusOf(t, mnt)
		return slices.Contains(sick.states, st["source_state"])
	})
	if st["source_unavailable_since"] == "" || st["files_total"] != strconv.Itoa(len(paths)) {
		t.Errorf("status of the mount with a %s source: %v", sick.name, st)
	}
	rstart := time.Now()
	_, err := os.ReadFile(filepath.Join(mnt, "big.bin"))
	if rt := time.Since(rstart); !errors.Is(err, syscall.EIO) || rt > timeout+time.Second {
		t.Errorf("non-resident read: %v after %v, want EIO within %v", err, rt.Round(time.Millisecond), timeout+time.Second)
	}
	checkAll(t, src, mnt, resident)
	if heal != nil && mode == placement.ValidateOpen {
		// Well again: the mount finds its source (a root it never
		// opened) and reads the rest.
		heal()
		waitFor(t, func() bool { return statusOf(t, mnt)["source_state"] == "available" })
		checkAll(t, src, mnt, paths)
	}
	pid, _ := strconv.Atoi(st["pid"])
	ustart := time.Now()
	code, out := cli(t, "unmount", "--timeout", "5s", mnt)
	t.Logf("unmount: exit %d after %v: %s", code, time.Since(ustart).Round(time.Millisecond), out)
	if code != 0 || time.Since(ustart) > 8*time.Second {
		t.Fatalf("unmount with a %s source: exit %d after %v: %s", sick.name, code, time.Since(ustart), out)
	}
	if processAlive(pid) {
		t.Fatalf("unmount said %q and the daemon (pid %d) still runs", out, pid)
	}
}

// binMountNoWalk is binMount without waiting for a walk (a sick source
// is not walked).
func binMountNoWalk(t *testing.T, src, mnt, state string, extra ...string) {
	t.Helper()
	args := append([]string{"mount", "--state", state}, extra...)
	code, out := cli(t, append(args, src, mnt)...)
	if code != 0 {
		log, _ := os.ReadFile(filepath.Join(state, "epochfs.log"))
		t.Fatalf("mount: exit %d: %s\nlog:\n%s", code, out, tail(log, 3000))
	}
	t.Cleanup(func() {
		if mounted(mnt) {
			cli(t, "unmount", "--lazy", mnt)
		}
	})
}

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestAFirstMountOfAHungSourceFailsWithinTheTimeout: with no earlier
// mount to serve from, a mount of a hung source fails within
// source_timeout with one line and mounts nothing.
func TestAFirstMountOfAHungSourceFailsWithinTheTimeout(t *testing.T) {
	const timeout = 3 * time.Second
	requireFUSE(t)
	src, _ := makeTree(t, 1<<10)
	f := faultfs.Start(t, src)
	base := t.TempDir()
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	cfg := filepath.Join(base, "c.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[placement]\nsource_timeout = \"%s\"\n", timeout)), 0o644)
	f.Hang()
	t.Cleanup(f.Close)
	start := time.Now()
	code, out := cli(t, "mount", "--state", filepath.Join(base, "state"), "--config", cfg,
		"--tier=mem="+filepath.Join(base, "tier")+":64MiB", f.Mnt(), mnt)
	took := time.Since(start)
	t.Logf("first mount of a hung source: exit %d after %v: %s", code, took.Round(time.Millisecond), out)
	if code == 0 || took > timeout+2*time.Second {
		t.Fatalf("first mount of a hung source: exit %d after %v (source_timeout %v)", code, took, timeout)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(out, "no answer") {
		t.Errorf("want one line saying the source does not answer: %q", out)
	}
	if mounted(mnt) {
		t.Fatal("a failed mount left a mount")
	}
}

// TestUnmountWhileTheSourceHangs: a live mount whose source hangs while a
// reader waits on it unmounts within its --timeout, exit 0, and its daemon
// is gone: no stuck source call holds the daemon's exit.
func TestUnmountWhileTheSourceHangs(t *testing.T) {
	const timeout = 3 * time.Second
	requireFUSE(t)
	src, paths := makeTree(t, 1<<20)
	f := faultfs.Start(t, src)
	base := t.TempDir()
	mnt, state := filepath.Join(base, "mnt"), filepath.Join(base, "state")
	os.Mkdir(mnt, 0o755)
	cfg := filepath.Join(base, "c.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[placement]\nsource_timeout = \"%s\"\nfill_after = 0\n", timeout)), 0o644)
	binMount(t, f.Mnt(), mnt, state, "--config", cfg, "--tier=mem="+filepath.Join(base, "tier")+":64MiB")
	checkAll(t, src, mnt, paths[:len(paths)/2])
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	f.Hang()
	t.Cleanup(f.Close)
	// Reads of files not read yet get stuck in the source.
	for _, p := range paths[len(paths)/2:] {
		os.ReadFile(filepath.Join(mnt, p))
	}
	start := time.Now()
	code, out := cli(t, "unmount", "--timeout", "10s", mnt)
	took := time.Since(start)
	t.Logf("unmount with the source hung: exit %d after %v: %s", code, took.Round(time.Millisecond), out)
	if code != 0 || took > 12*time.Second {
		t.Fatalf("unmount with the source hung: exit %d after %v: %s", code, took, out)
	}
	if processAlive(pid) {
		t.Fatalf("unmount said %q and the daemon (pid %d) still runs", out, pid)
	}
}

// TestADaemonKilledWhileTheSourceHangsLetsTheNextMountIn: a daemon killed
// while a thread of it waits on a hung source cannot finish dying (the
// kernel cannot end a request a stopped FUSE server has taken, nor the
// close of a file of it on the way out), and keeps its descriptors. Its
// mount is aborted rather than waited on, `unmount --lazy` returns at once
// (exit 0, saying what holds the daemon), and the next mount of the same
// state directory takes the state's lock over and serves what is
// resident, the source still hung. Found by make chaos.
func TestADaemonKilledWhileTheSourceHangsLetsTheNextMountIn(t *testing.T) {
	requireFUSE(t)
	src, paths := makeTree(t, 1<<20)
	f := faultfs.Start(t, src)
	base := t.TempDir()
	mnt, state := filepath.Join(base, "mnt"), filepath.Join(base, "state")
	os.Mkdir(mnt, 0o755)
	args := []string{"--tier=mem=" + filepath.Join(base, "tier") + ":64MiB"}
	binMount(t, f.Mnt(), mnt, state, args...)
	t.Cleanup(f.Close)
	resident := paths[:3]
	checkAll(t, src, mnt, resident)
	waitFor(t, func() bool {
		for _, p := range resident {
			if tierOf(t, filepath.Join(mnt, p)) == "source" {
				return false
			}
		}
		return true
	})
	// Their records written: the kill loses placements the catalog has
	// not written yet (they are copied again), and the source will hang.
	waitFor(t, func() bool { return statusOf(t, mnt)["catalog_pending"] == "0" })
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	f.Hang()
	// A thread of the daemon waits on the source, for a reader that is
	// gone by the time the daemon dies.
	reader := exec.Command("cat", filepath.Join(mnt, paths[len(paths)-1]))
	reader.Start()
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	reader.Process.Kill()
	reader.Wait()
	start := time.Now()
	code, out := cli(t, "unmount", "--lazy", "--timeout", "5s", mnt)
	t.Logf("unmount --lazy of the killed daemon: exit %d after %v: %s", code, time.Since(start).Round(time.Millisecond), out)
	if code != 0 || time.Since(start) > 8*time.Second {
		t.Fatalf("unmount --lazy of a daemon killed while its source hangs: exit %d after %v: %s", code, time.Since(start), out)
	}
	start = time.Now()
	binMountNoWalk(t, f.Mnt(), mnt, state, args...)
	t.Logf("the next mount, the source still hung: ready after %v", time.Since(start).Round(time.Millisecond))
	checkAll(t, src, mnt, resident)
}
