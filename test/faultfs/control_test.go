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
