package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The binary's two control paths besides the harness's stdin commands:
// signals, for a person driving it from a shell, and the end of stdin,
// which unmounts when the controlling test process has gone away.

func TestSignalsSwitchModesWithAnAcknowledgement(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := Start(t, dir)
	p := f.src.(*loopSource)
	if err := syscall.Kill(f.PID(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := p.expect("down"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(f.Mnt(), "f")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after SIGUSR1: %v, want EIO", err)
	}
	if err := syscall.Kill(f.PID(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	if err := p.expect("up"); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(f.Mnt(), "f")); err != nil || string(got) != "data" {
		t.Fatalf("read after SIGUSR2: %q, %v", got, err)
	}
}

func TestEndOfControlInputUnmounts(t *testing.T) {
	f := Start(t, t.TempDir())
	p := f.src.(*loopSource)
	p.ctl.Close()
	if err := waitClosed(p.exited, time.Minute, "faultfs to exit at the end of its stdin"); err != nil {
		t.Fatal(err)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d, want 0 (clean unmount)", code)
	}
	if isMounted(f.Mnt()) {
		t.Fatalf("%s still mounted after faultfs exited", f.Mnt())
	}
}

// Counts counts each request the source serves by operation, and Delay
// holds the requests of one operation back until it is lifted.
func TestCountsAndDelays(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := Start(t, dir)
	before := src.Counts()
	for i := 0; i < 3; i++ {
		if _, err := os.ReadFile(filepath.Join(src.Mnt(), "f")); err != nil {
			t.Fatal(err)
		}
	}
	after := src.Counts()
	if got := after["open"] - before["open"]; got != 3 {
		t.Errorf("3 reads of a file counted %d opens (before %v, after %v)", got, before, after)
	}
	if after["read"] <= before["read"] {
		t.Errorf("reads not counted: before %v, after %v", before, after)
	}
	const d = 300 * time.Millisecond
	src.Delay("readdir", d)
	start := time.Now()
	if _, err := os.ReadDir(filepath.Join(src.Mnt(), "d")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Errorf("a listing took %v with readdir delayed %v", took, d)
	}
	src.Delay("readdir", 0)
	if c := src.Counts(); c["readdir"] <= after["readdir"] {
		t.Errorf("readdir not counted: %v", c)
	}
}
