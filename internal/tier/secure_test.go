package tier

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/epochfs/epochfs/internal/testenv"
)

// otherUID is a uid that is not the test's (the tests run as root in CI).
const otherUID = 54321

func sharedDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "shm")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(d, 0o1777); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSecureDirRefusesWhatAnotherUserCouldHavePrepared(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root to chown")
	}
	shm := sharedDir(t)
	target := t.TempDir() // root's
	os.Chmod(target, 0o700)
	cases := map[string]func(p string){
		"owned by another user": func(p string) {
			os.Mkdir(p, 0o700)
			os.Chown(p, otherUID, otherUID)
		},
		"a symlink to a root directory": func(p string) { os.Symlink(target, p) },
		"writable by others":            func(p string) { os.Mkdir(p, 0o700); syscall.Chmod(p, 0o777) },
		"a file":                        func(p string) { os.WriteFile(p, nil, 0o600) },
		"below another user's directory": func(p string) {
			os.Mkdir(filepath.Dir(p), 0o755)
			os.Chown(filepath.Dir(p), otherUID, otherUID)
		},
		"below another user's symlink": func(p string) {
			os.Symlink(target, filepath.Dir(p))
			os.Lchown(filepath.Dir(p), otherUID, otherUID)
		},
	}
	i := 0
	for name, prepare := range cases {
		i++
		p := filepath.Join(shm, "T"+string(rune('a'+i)), "tier")
		if !strings.HasPrefix(name, "below") {
			p = filepath.Dir(p)
		}
		prepare(p)
		err := SecureDir(p)
		if !errors.Is(err, ErrUnsafeDir) && !(name == "a file" && err != nil) {
			t.Errorf("%s: SecureDir = %v, want ErrUnsafeDir", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: a multi-line error: %q", name, err)
		}
		// Nothing was changed in the target.
		if st, _ := os.Stat(target); st.Mode().Perm() != 0o700 {
			t.Errorf("%s: the target's mode changed to %v", name, st.Mode())
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			t.Errorf("%s: something was created in the target: %v", name, ents)
		}
	}
}

func TestSecureDirCreatesAndAcceptsWhatIsOurs(t *testing.T) {
	shm := sharedDir(t)
	p := filepath.Join(shm, "epochfs", "mem")
	if err := SecureDir(p); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(p)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("created %v, %v", st, err)
	}
	if err := SecureDir(p); err != nil {
		t.Fatalf("a second check of our own directory: %v", err)
	}
	// A root-owned symlink above is an admin's: followed, and its target
	// checked.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(shm, link); err != nil {
		t.Fatal(err)
	}
	if err := SecureDir(filepath.Join(link, "epochfs", "mem")); err != nil {
		t.Fatalf("through a root-owned symlink: %v", err)
	}
	if err := SecureDir("relative/dir"); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("a relative path: %v", err)
	}
}

func TestTierRefusesASymlinkInsideItsRoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tier")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	os.Chmod(elsewhere, 0o700)
	if err := os.Symlink(elsewhere, filepath.Join(dir, dataDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Name: "mem", Dir: dir, Quota: 1 << 20}); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("a tier whose data directory is a symlink: %v", err)
	}
	if st, _ := os.Stat(elsewhere); st.Mode().Perm() != 0o700 {
		t.Fatalf("the symlink's target changed mode to %v", st.Mode())
	}
}
