package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// helperPath is where mount(8) looks for the helper of `-t epochfs`.
const helperPath = "/sbin/mount.epochfs"

// installHelper links /sbin/mount.epochfs to the binary under test for the
// test's duration. A helper already installed is left alone (the test
// fails): only a dangling link, left by an earlier run, is replaced.
func installHelper(t *testing.T) {
	t.Helper()
	if _, err := os.Lstat(helperPath); err == nil {
		if _, err := os.Stat(helperPath); err == nil {
			t.Fatalf("%s is installed already: the test will not replace it", helperPath)
		}
		os.Remove(helperPath)
	}
	if err := os.Symlink(binPath, helperPath); err != nil {
		t.Fatalf("install %s: %v", helperPath, err)
	}
	t.Cleanup(func() { os.Remove(helperPath) })
}

// An /etc/fstab line of type epochfs mounts through mount(8) and the
// mount.epochfs helper, with epochfs's options among mount(8)'s and
// systemd's; an unknown option fails with mount(8) reporting it.
func TestMountFromAnFstabLine(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	installHelper(t)
	cfg := filepath.Join(base, "epochfs.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("state_dir = %q\n[[tier]]\nname = \"mem\"\npath = %q\nquota = \"1GiB\"\n",
		filepath.Join(base, "state"), filepath.Join(base, "tier"))), 0o644)
	fstab := filepath.Join(base, "fstab")
	line := fmt.Sprintf("%s %s epochfs config=%s,keep,_netdev,nofail,x-systemd.requires=local-fs.target 0 0\n", src, mnt, cfg)
	os.WriteFile(fstab, []byte("# test fstab\n"+line), 0o644)
	out, err := exec.Command("mount", "-T", fstab, mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("mount -T %s %s: %v\n%s", fstab, mnt, err, out)
	}
	t.Cleanup(func() {
		if mounted(mnt) {
			cli(t, "unmount", "--lazy", mnt)
		}
	})
	if !mounted(mnt) {
		t.Fatalf("mount from fstab: nothing mounted at %s: %s", mnt, out)
	}
	checkAll(t, src, mnt, paths)
	if st := statusOf(t, mnt); st["source"] != src {
		t.Errorf("status source=%s, want %s", st["source"], src)
	}
	// umount(8), not epochfs unmount: the kept mount's users and keep go
	// with it, and the next job's mount there is the job's.
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil || mounted(mnt) {
		t.Fatalf("umount %s: %v: %s", mnt, err, out)
	}
	mountWhenDrained(t, "--config", cfg, "--user-ref", "job9", src, mnt)
	if code, out := cli(t, "unmount", "--user-ref", "job9", mnt); code != 0 || mounted(mnt) {
		t.Fatalf("the job's epilog after an fstab mount was umounted: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	// `mount -t epochfs` with an option epochfs does not know.
	out, err = exec.Command("mount", "-t", "epochfs", "-o", "config="+cfg+",frobnicate", src, mnt).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), `unknown option "frobnicate"`) || mounted(mnt) {
		t.Fatalf("mount -t epochfs -o frobnicate: %v: %s; want a refusal naming the option", err, out)
	}
}
