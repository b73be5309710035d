package tier

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tier directory is claimed by the first catalog that opens it; the same
// catalog opens it again (its source or mount point may change), another
// is refused naming the owner, and a record that is not one refuses too.
func TestATierDirectoryBelongsToOneCatalog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tier")
	a := Owner{StateDir: "/state/a", Source: "/pfs/a", Mountpoint: "/mnt/a"}
	open := func(o *Owner) (*Tier, error) {
		return Open(Options{Name: "disk", Dir: dir, Quota: 1 << 20, Owner: o})
	}
	if _, err := open(&a); err != nil {
		t.Fatalf("first use: %v", err)
	}
	moved := a
	moved.Mountpoint = "/mnt/a2"
	if _, err := open(&moved); err != nil {
		t.Fatalf("the same catalog at another mount point: %v", err)
	}
	if got, err := readOwner(filepath.Join(dir, ownerFile)); err != nil || got != moved {
		t.Errorf("record after the move: %+v, %v; want %+v", got, err, moved)
	}
	_, err := open(&Owner{StateDir: "/state/b", Source: "/pfs/b", Mountpoint: "/mnt/b"})
	var oe *OwnedError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOwned) || oe.Owner != moved {
		t.Fatalf("another catalog: %v; want an OwnedError naming %+v", err, moved)
	}
	for _, want := range []string{"/state/a", "/pfs/a", "/mnt/a2", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %s", err, want)
		}
	}
	// Without an owner (tools, tests) nothing is checked or written.
	if _, err := open(nil); err != nil {
		t.Errorf("no owner: %v", err)
	}
	p := filepath.Join(dir, ownerFile)
	for name, bad := range map[string]func() error{
		"garbage": func() error { return os.WriteFile(p, []byte("{not json"), 0o600) },
		"empty":   func() error { return os.WriteFile(p, []byte("{}"), 0o600) },
		"huge":    func() error { return os.WriteFile(p, make([]byte, maxOwnerRecord+2), 0o600) },
		"symlink": func() error { return os.Symlink(filepath.Join(t.TempDir(), "x"), p) },
		"dir":     func() error { return os.Mkdir(p, 0o700) },
	} {
		os.RemoveAll(p)
		if err := bad(); err != nil {
			t.Fatal(err)
		}
		_, err := open(&a)
		if err == nil || errors.Is(err, ErrOwned) || !strings.Contains(err.Error(), ownerFile) {
			t.Errorf("%s owner record: %v; want a refusal naming the record", name, err)
		}
	}
	os.RemoveAll(p)
	if _, err := open(&a); err != nil {
		t.Errorf("after the bad record was removed: %v", err)
	}
}

func FuzzReadOwner(f *testing.F) {
	f.Add([]byte(`{"state_dir":"/s","source":"/p","mountpoint":"/m"}`))
	f.Add([]byte(`{"state_dir":""}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), ownerFile)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := readOwner(p)
		if err == nil && o.StateDir == "" {
			t.Errorf("record %q accepted without a state directory", data)
		}
	})
}
