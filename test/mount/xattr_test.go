package mount

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ls -lR asks each entry for security.selinux and system.posix_acl_access,
// and the kernel caches no GETXATTR answer: the mount answers those names
// EOPNOTSUPP, which ls remembers per file system, so a listing of 200 files
// sends a handful of xattr requests, not two per entry. The tier attribute
// stays readable.
func TestLsLRSendsNoGetxattrPerEntry(t *testing.T) {
	src, paths := makeSamples(t, 200, 1<<10)
	e := newEnv(t, src, 1<<30)
	e.mount()
	before := e.num("xattr_requests")
	out, err := exec.Command("ls", "-lR", e.mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("ls -lR: %v\n%s", err, out)
	}
	got := e.num("xattr_requests") - before
	t.Logf("ls -lR of %d files sent %d xattr requests", len(paths), got)
	// One per name for the first entry of the file system, and none per
	// entry after that (the root and the four class directories included).
	if got > 4 {
		t.Errorf("ls -lR of %d files sent %d xattr requests, want at most 4", len(paths), got)
	}

	f := filepath.Join(e.mnt, paths[0])
	buf := make([]byte, 64)
	n, err := unix.Getxattr(f, "user.epochfs.tier", buf)
	if err != nil || string(buf[:n]) != "source" {
		t.Errorf("user.epochfs.tier = %q, %v; want source", buf[:n], err)
	}
	for name, want := range map[string]error{
		"user.other":              syscall.ENODATA,
		"security.selinux":        syscall.EOPNOTSUPP,
		"system.posix_acl_access": syscall.EOPNOTSUPP,
		"trusted.x":               syscall.EOPNOTSUPP,
	} {
		if _, err := unix.Lgetxattr(f, name, buf); !errors.Is(err, want) {
			t.Errorf("getxattr %s: %v, want %v", name, err, want)
		}
	}
	// Python's os.getxattr reads the tier attribute the same way.
	out, err = exec.Command("/usr/bin/python3", "-c", "import os,sys; print(os.getxattr(sys.argv[1], 'user.epochfs.tier').decode())", f).CombinedOutput()
	if err != nil || string(out) != "source\n" {
		t.Errorf("python os.getxattr: %q, %v", out, err)
	}
}
