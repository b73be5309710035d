package tier

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// With RequireMount a tier must be on a file system of its own: a path on
// the root file system, or whose parent is missing (a disk not mounted), is
// refused and nothing is created; a path on another file system (a tmpfs
// mounted for the test) opens.
func TestRequireMountRefusesTheRootFileSystemAndMissingParents(t *testing.T) {
	base := t.TempDir()
	// The test's own "root file system" is the file system of base.
	old := rootFS
	rootFS = base
	t.Cleanup(func() { rootFS = old })
	open := func(dir string) error {
		_, err := Open(Options{Name: "nvme", Dir: dir, Quota: 1 << 20, RequireMount: true})
		return err
	}
	onRoot := filepath.Join(base, "local", "epochfs")
	os.Mkdir(filepath.Join(base, "local"), 0o755)
	if err := open(onRoot); err == nil || !strings.Contains(err.Error(), "root file system") || !strings.Contains(err.Error(), "tier nvme") {
		t.Errorf("a tier on the root file system: %v; want a refusal", err)
	}
	missing := filepath.Join(base, "scratch", "epochfs", "data")
	if err := open(missing); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a tier whose parent is missing: %v; want a refusal", err)
	}
	for _, p := range []string{onRoot, filepath.Join(base, "scratch")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s created by a refused open: %v", p, err)
		}
	}
	// A disk mounted at base/disk: the tier below it (created) and the
	// mount point itself open.
	disk := filepath.Join(base, "disk")
	os.Mkdir(disk, 0o755)
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=4m,mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs for the test (as root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) })
	if err := open(filepath.Join(disk, "epochfs")); err != nil {
		t.Errorf("a tier on its own file system: %v", err)
	}
	if err := open(disk); err != nil {
		t.Errorf("a tier at the mount point of its file system: %v", err)
	}
	// Without RequireMount the root file system and missing parents are
	// taken as before.
	if _, err := Open(Options{Name: "x", Dir: missing, Quota: 1 << 20}); err != nil {
		t.Errorf("without require_mount: %v", err)
	}
}
