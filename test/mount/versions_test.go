package mount

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
)

// TestANewContentIsANewInode: a handle open (in passthrough or cached mode) on a
// resident file's old content keeps reading that whole content, with its
// size, after the source file is rewritten shorter; the path then leads
// to a new inode, whose opens, reads, mmaps and stat are the new
// content's, while the old handle is still open (an mmap of the path used
// to map the old copy, and the old handle read it cut to the new size).
// The change is found by the open (validate = "open") or by a refresh
// (validate = "never"). In cached mode the old handle's pages are its
// content's too.
func TestANewContentIsANewInode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate placement.Validate
		cached   bool // the old handle in cached mode (no passthrough)
	}{
		{"validate=open", placement.ValidateOpen, false},
		{"validate=never+refresh", placement.ValidateNever, false},
		{"cached/validate=open", placement.ValidateOpen, true},
		{"cached/validate=never+refresh", placement.ValidateNever, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := makeTree(t, 1<<20)
			e := newEnv(t, src, 1<<30)
			e.opts.validate = tc.validate
			e.opts.noPassthrough = tc.cached
			e.mount()
			rel := "class1/img001.jpg"
			p := filepath.Join(e.mnt, rel)
			oldWant, err := os.ReadFile(filepath.Join(src, rel))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
			e.settle()
			e.waitNoHandles()
			old, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			if got, err := readAll(old); err != nil || !bytes.Equal(got, oldWant) {
				t.Fatalf("old handle before the change: %d bytes, %v", len(got), err)
			}
			if !tc.cached {
				requirePassthrough(t, e)
				if n := e.num("handles_passthrough"); n != 1 {
					t.Fatalf("the old handle is not in passthrough mode (%d passthrough handles)", n)
				}
			}
			var oldSt syscall.Stat_t
			if err := syscall.Fstat(int(old.Fd()), &oldSt); err != nil {
				t.Fatal(err)
			}

			newWant := append([]byte("new content "), oldWant[:len(oldWant)/3]...)
			if err := os.WriteFile(filepath.Join(src, rel), newWant, 0o644); err != nil {
				t.Fatal(err)
			}
			readNew := func() {
				t.Helper()
				for i := 0; i < 2; i++ {
					got, err := os.ReadFile(p)
					if err != nil || !bytes.Equal(got, newWant) {
						t.Fatalf("read %d of the new content beside the old handle: %d bytes, %v; want %d", i+1, len(got), err, len(newWant))
					}
				}
			}
			if tc.validate == placement.ValidateNever {
				refresh(t, e.mnt, rel)
			}
			if tc.validate == placement.ValidateOpen {
				// The open finds the change: read first (stat does not
				// look at the source).
				readNew()
			}
			var st syscall.Stat_t
			deadline := time.Now().Add(10 * time.Second)
			for {
				// The kernel is told of a change a refresh found from a
				// goroutine: until then it shows the old entry. (An open
				// finds out at once: ESTALE, and the kernel looks up.)
				if err := syscall.Stat(p, &st); err != nil {
					t.Fatal(err)
				}
				if st.Size == int64(len(newWant)) || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if st.Size != int64(len(newWant)) {
				t.Fatalf("stat of the path shows %d bytes, want the new %d", st.Size, len(newWant))
			}
			if st.Ino == oldSt.Ino {
				t.Errorf("the new content has the old content's inode %d", st.Ino)
			}
			readNew()
			mmapIn := func(what, file string, want []byte, extra *os.File) {
				t.Helper()
				wantFile := filepath.Join(t.TempDir(), "want")
				if err := os.WriteFile(wantFile, want, 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(), "EPOCHFS_MMAP_FILE="+file, "EPOCHFS_MMAP_WANT="+wantFile)
				if extra != nil {
					cmd.ExtraFiles = []*os.File{extra}
				}
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), "mmap ok") {
					t.Fatalf("mmap of %s: %v\n%s", what, err, out)
				}
			}
			mmapIn("the path (the new content) beside the old handle", p, newWant, nil)
			mmapIn("the old handle", "fd", oldWant, old)

			// The old handle: its content, its size.
			var heldSt syscall.Stat_t
			if err := syscall.Fstat(int(old.Fd()), &heldSt); err != nil {
				t.Fatal(err)
			}
			if heldSt.Size != int64(len(oldWant)) || heldSt.Ino != oldSt.Ino {
				t.Errorf("fstat of the old handle: %d bytes, inode %d; want the old %d bytes, inode %d", heldSt.Size, heldSt.Ino, len(oldWant), oldSt.Ino)
			}
			buf := make([]byte, len(oldWant)+4096)
			n, err := old.ReadAt(buf, 0)
			if !bytes.Equal(buf[:n], oldWant) {
				t.Fatalf("the old handle read %d bytes (%v), want its whole old content (%d bytes)", n, err, len(oldWant))
			}
			old.Close()

			e.settle()
			e.waitNoHandles()
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, newWant) {
				t.Fatalf("read after the old handle closed: %d bytes, %v", len(got), err)
			}
			if tierOf(t, p) == "source" {
				t.Error("the new content was not placed")
			}
		})
	}
}
