package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/epochfs/epochfs/internal/testenv"
)

// A source's user.* attributes are read beneath the root: the file's own,
// never through a symlink (the last component's or a directory's), and
// only the user namespace.
func TestSourceXattrsAreReadBeneathTheRootAndNeverThroughASymlink(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	f := filepath.Join(root, "f")
	secret := filepath.Join(outside, "secret")
	for _, p := range []string{f, secret} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(p, "user.k", []byte("v of "+filepath.Base(p)), 0); err != nil {
			testenv.Skip(t, "no user xattrs on %s: %v", p, err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	s := newTestSource(t, root, 0)
	ctx := context.Background()

	if v, ok, err := s.Xattr(ctx, "f", "user.k"); err != nil || !ok || string(v) != "v of f" {
		t.Errorf("user.k of f: %q %v %v", v, ok, err)
	}
	if _, ok, err := s.Xattr(ctx, "f", "user.none"); err != nil || ok {
		t.Errorf("an absent attribute: ok=%v err=%v, want absent without error", ok, err)
	}
	if _, ok, _ := s.Xattr(ctx, "f", "trusted.k"); ok {
		t.Error("an attribute outside user.* was read")
	}
	if names, err := s.XattrNames(ctx, "f"); err != nil || !reflect.DeepEqual(names, []string{"user.k"}) {
		t.Errorf("names of f: %v %v", names, err)
	}
	// The symlink is not followed to the file outside.
	if v, ok, err := s.Xattr(ctx, "link", "user.k"); ok || err != nil {
		t.Errorf("user.k through a symlink: %q ok=%v err=%v, want absent", v, ok, err)
	}
	if names, err := s.XattrNames(ctx, "link"); err != nil || len(names) != 0 {
		t.Errorf("names through a symlink: %v %v", names, err)
	}
	if _, ok, err := s.Xattr(ctx, "dirlink/secret", "user.k"); ok || !errors.Is(err, ErrSymlinkInPath) {
		t.Errorf("user.k through a symlinked directory: ok=%v err=%v, want ErrSymlinkInPath", ok, err)
	}
	if _, _, err := s.Xattr(ctx, "../"+filepath.Base(outside)+"/secret", "user.k"); err == nil {
		t.Error("a path with .. was read")
	}
}
