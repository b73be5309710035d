package source

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// secretDir is a root-only directory outside the source with a file whose
// bytes must never come out of the source.
func secretDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "secret.txt"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

func bothResolvers(t *testing.T, fn func(t *testing.T, noOpenat2 bool)) {
	for _, no := range []bool{false, true} {
		name := "openat2"
		if no {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) { fn(t, no) })
	}
}

func TestSourceNeverFollowsADirectorySwappedForASymlink(t *testing.T) {
	bothResolvers(t, func(t *testing.T, noOpenat2 bool) {
		secret := secretDir(t)
		root := writeSource(t, map[string][]byte{"d/secret.txt": []byte("public")})
		src := openTestSource(t, Options{Root: root, noOpenat2: noOpenat2})
		ctx := context.Background()
		if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "d.old")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, filepath.Join(root, "d")); err != nil {
			t.Fatal(err)
		}
		if f, err := src.Open(ctx, "d/secret.txt"); err == nil {
			b, _ := io.ReadAll(io.NewSectionReader(f.f, 0, 100))
			f.Close()
			t.Fatalf("open through a symlinked directory succeeded and read %q", b)
		} else if !errors.Is(err, ErrSymlinkInPath) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open through a symlinked directory: %v, want ErrSymlinkInPath (not exist)", err)
		}
		if _, err := src.Stat(ctx, "d/secret.txt"); !errors.Is(err, ErrSymlinkInPath) {
			t.Fatalf("stat through a symlinked directory: %v", err)
		}
		if _, err := src.ReadDir(ctx, "d"); !errors.Is(err, ErrSymlinkInPath) {
			t.Fatalf("readdir of a symlinked directory: %v", err)
		}
		// The symlink itself is described, not followed.
		fi, err := src.Stat(ctx, "d")
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("stat of the symlink itself: %v, %v", fi, err)
		}
		if target, err := src.Readlink(ctx, "d"); err != nil || target != secret {
			t.Fatalf("readlink d = %q, %v", target, err)
		}
		if _, err := src.Readlink(ctx, "d/secret.txt"); !errors.Is(err, ErrSymlinkInPath) {
			t.Fatalf("readlink through the symlink: %v", err)
		}
	})
}

func TestSourceNeverFollowsAFileSwappedForASymlink(t *testing.T) {
	bothResolvers(t, func(t *testing.T, noOpenat2 bool) {
		secret := secretDir(t)
		root := writeSource(t, map[string][]byte{"a/f.txt": []byte("public")})
		src := openTestSource(t, Options{Root: root, noOpenat2: noOpenat2})
		name := filepath.Join(root, "a/f.txt")
		os.Remove(name)
		for _, target := range []string{filepath.Join(secret, "secret.txt"), "../../" + filepath.Base(secret) + "/secret.txt"} {
			os.Remove(name)
			if err := os.Symlink(target, name); err != nil {
				t.Fatal(err)
			}
			if f, err := src.Open(context.Background(), "a/f.txt"); err == nil {
				f.Close()
				t.Fatalf("open of a file swapped for a symlink to %s succeeded", target)
			} else if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open of a symlink: %v, want a not-exist error", err)
			}
		}
	})
}

func TestSourceRefusesFIFOsDevicesAndSocketsWithoutOpeningThem(t *testing.T) {
	root := writeSource(t, map[string][]byte{"a/ok.bin": []byte("data")})
	// A FIFO with no writer would block open(2) for ever; a socket cannot
	// be opened; a device must never be opened by the daemon.
	if err := syscall.Mkfifo(filepath.Join(root, "a/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(root, "a/null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(root, "a/sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	src := openTestSource(t, Options{Root: root, Timeout: 2 * time.Second})
	for _, name := range []string{"a/fifo", "a/null", "a/sock"} {
		start := time.Now()
		f, err := src.Open(context.Background(), name)
		if err == nil {
			f.Close()
			t.Fatalf("%s opened", name)
		}
		if !errors.Is(err, ErrNotRegular) || errors.Is(err, ErrTimeout) {
			t.Fatalf("open %s: %v, want ErrNotRegular at once", name, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("open %s took %v", name, took)
		}
	}
	if st := src.Stats(); st.Stuck != 0 || st.Timeouts != 0 {
		t.Fatalf("refusals left calls behind: %+v", st)
	}
	f, err := src.Open(context.Background(), "a/ok.bin")
	if err != nil {
		t.Fatal(err)
	}
	if fi := f.Info(); fi.Size() != 4 || !fi.Mode().IsRegular() {
		t.Fatalf("Info of the open file: %v", fi)
	}
	f.Close()
}

func TestSourceRefusesPathsThatAreNotCleanNames(t *testing.T) {
	root := writeSource(t, map[string][]byte{"a/f": []byte("x")})
	src := openTestSource(t, Options{Root: root})
	for _, rel := range []string{"/etc/passwd", "../x", "a/../a/f", "a//f", "a/./f", "a/", "./a"} {
		if f, err := src.Open(context.Background(), rel); err == nil {
			f.Close()
			t.Fatalf("open %q succeeded", rel)
		} else if !errors.Is(err, ErrBadPath) {
			t.Fatalf("open %q: %v, want ErrBadPath", rel, err)
		}
	}
}

func TestSourceRootReplacedIsUnavailableNotEmptyAndComesBack(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "src")
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := openTestSource(t, Options{Root: root, RecheckInterval: time.Nanosecond, IdentityInterval: time.Hour})
	ctx := context.Background()
	if ok, _ := src.Available(ctx); !ok {
		t.Fatal("a new source is unavailable")
	}
	// The client goes away: the path is an empty directory now.
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// The held root still sees the file, but "missing" is not believed
	// from a source whose root changed: the first ENOENT checks.
	_, err := src.Stat(ctx, "a/missing")
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a missing file while the root is replaced: %v, want ErrUnavailable", err)
	}
	if ok, since := src.Available(ctx); ok || since.IsZero() {
		t.Fatalf("Available = %v, %v during the outage", ok, since)
	}
	if _, err := src.Open(ctx, "a/f"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open during the outage: %v", err)
	}
	// Back.
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}
	f, err := src.Open(ctx, "a/f")
	if err != nil {
		t.Fatalf("open after the source came back: %v", err)
	}
	f.Close()
	if ok, _ := src.Available(ctx); !ok {
		t.Fatal("still unavailable after the source came back")
	}
	if _, err := src.Stat(ctx, "a/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file once the source is back: %v", err)
	}
}

func TestSourceMissingParentIsNotADeletion(t *testing.T) {
	root := writeSource(t, map[string][]byte{"a/b/f": []byte("x"), "top": []byte("y")})
	src := openTestSource(t, Options{Root: root})
	if err := os.RemoveAll(filepath.Join(root, "a/b")); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Stat(context.Background(), "a/b/f"); !errors.Is(err, ErrUnavailable) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a file whose directory vanished: %v, want ErrUnavailable", err)
	}
	// The root is fine: the source as a whole stays available, and a file
	// removed from an existing directory is gone.
	os.Remove(filepath.Join(root, "top"))
	if _, err := src.Stat(context.Background(), "top"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a removed file: %v", err)
	}
	if ok, _ := src.Available(context.Background()); !ok {
		t.Fatal("unavailable after a directory was removed")
	}
}

// FuzzResolverNeverLeavesTheRootNorFollowsASymlink builds a random tree of
// directories, files and symlinks (into the tree, above it, to absolute
// paths, in loops) and resolves random paths in it. Whatever both resolvers
// open must be the inode a walk of lstat(2) reaches through directories
// only, and the two must agree.
func FuzzResolverNeverLeavesTheRootNorFollowsASymlink(f *testing.F) {
	f.Add(int64(1), "a/b/c")
	f.Add(int64(7), "l/x")
	f.Add(int64(42), "d0/l1/f2")
	f.Fuzz(func(t *testing.T, seed int64, rel string) {
		base := t.TempDir()
		outside := filepath.Join(base, "outside")
		root := filepath.Join(base, "root")
		os.MkdirAll(filepath.Join(outside, "d0"), 0o755)
		os.WriteFile(filepath.Join(outside, "f2"), []byte("out"), 0o644)
		os.MkdirAll(root, 0o755)
		rng := rand.New(rand.NewSource(seed))
		var dirs = []string{""}
		names := []string{"a", "b", "c", "d0", "f2", "l", "l1", "x"}
		for i := 0; i < 30; i++ {
			d := dirs[rng.Intn(len(dirs))]
			p := filepath.Join(root, d, names[rng.Intn(len(names))])
			rp := strings.TrimPrefix(filepath.Join(d, filepath.Base(p)), "/")
			switch rng.Intn(4) {
			case 0:
				if os.Mkdir(p, 0o755) == nil {
					dirs = append(dirs, rp)
				}
			case 1:
				os.WriteFile(p, []byte(rp), 0o644)
			case 2:
				targets := []string{outside, "..", "../..", "/", ".", dirs[rng.Intn(len(dirs))], "../outside/f2", filepath.Base(p)}
				os.Symlink(targets[rng.Intn(len(targets))], p)
			case 3:
				targets := []string{"a", "b/c", "../root/a"}
				os.Symlink(targets[rng.Intn(len(targets))], p)
			}
		}
		want, wantOK := lstatWalk(root, rel)
		for _, no := range []bool{false, true} {
			b, _, err := openRoot(root, no)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := b.lstat(rel)
			unix.Close(b.fd)
			if err != nil {
				if wantOK && want.Mode&syscall.S_IFMT != syscall.S_IFLNK {
					t.Fatalf("noOpenat2=%v: %q reachable through directories but refused: %v", no, rel, err)
				}
				continue
			}
			st := fi.Sys().(*syscall.Stat_t)
			if !wantOK {
				t.Fatalf("noOpenat2=%v: %q resolved to inode %d, but a walk of directories does not reach it", no, rel, st.Ino)
			}
			if st.Ino != want.Ino || st.Dev != want.Dev {
				t.Fatalf("noOpenat2=%v: %q resolved to inode %d, the walk to %d", no, rel, st.Ino, want.Ino)
			}
		}
	})
}

// lstatWalk reaches rel from root through real directories only (every
// component but the last must be a directory, not a symlink).
func lstatWalk(root, rel string) (syscall.Stat_t, bool) {
	var st syscall.Stat_t
	if checkRel(rel) != nil {
		return st, false
	}
	if rel == "" {
		return st, syscall.Lstat(root, &st) == nil
	}
	cur := root
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		cur = filepath.Join(cur, c)
		if err := syscall.Lstat(cur, &st); err != nil {
			return st, false
		}
		if i < len(parts)-1 && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return st, false
		}
	}
	return st, true
}
