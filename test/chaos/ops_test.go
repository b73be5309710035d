package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// op is one step, as data: generated from the seed against the model,
// and replayed as it is (a step that no longer fits the source, when a
// shorter sequence is tried, does nothing).
type op struct {
	Kind string
	Path string
	To   string
	Arg  int64
}

func (o op) String() string {
	s := o.Kind
	if o.Path != "" {
		s += " " + o.Path
	}
	if o.To != "" {
		s += " → " + o.To
	}
	if o.Arg != 0 {
		s += fmt.Sprintf(" %d", o.Arg)
	}
	return s
}

// weights of the kinds: reads dominate, as in training.
var weights = []struct {
	kind string
	w    int
}{
	{"read", 30}, {"pread", 12}, {"mmap", 4}, {"stat", 8}, {"readdir", 5}, {"xattr", 8},
	{"hold", 3}, {"readheld", 4}, {"status", 3}, {"userread", 4},
	{"warmup", 2}, {"refresh", 2}, {"drop", 1}, {"job", 2}, {"endjob", 1}, {"state", 1}, {"resume", 1},
	{"add", 3}, {"remove", 2}, {"rewrite", 3}, {"rename", 1}, {"swapdir", 1}, {"chmod", 1},
	{"hang", 1}, {"down", 1}, {"die", 1}, {"slow", 1}, {"fill", 1}, {"heal", 4}, {"crash", 1},
}

// gen draws the next step.
func (r *runner) gen() op {
	total := 0
	for _, w := range weights {
		total += w.w
	}
	n := r.rng.IntN(total)
	kind := ""
	for _, w := range weights {
		if n < w.w {
			kind = w.kind
			break
		}
		n -= w.w
	}
	known, present := r.m.known(), r.m.present()
	pick := func(l []string) string {
		if len(l) == 0 {
			return ""
		}
		return l[r.rng.IntN(len(l))]
	}
	if len(present) < 24 && (kind == "remove" || kind == "rename" || kind == "swapdir") {
		kind = "add" // keep a dataset to train on
	}
	o := op{Kind: kind}
	switch kind {
	case "read", "mmap", "stat", "xattr", "hold", "userread":
		o.Path = pick(known)
	case "pread":
		o.Path = pick(known)
		o.Arg = r.rng.Int64N(300 << 10)
	case "readdir":
		dirs := make([]string, 0, len(r.m.dirs))
		for d := range r.m.dirs {
			dirs = append(dirs, d)
		}
		o.Path = pick(sortStrings(dirs))
	case "readheld":
		o.Arg = int64(r.rng.IntN(8))
	case "job", "endjob", "state", "resume":
		o.Arg = int64(r.rng.IntN(3))
	case "add":
		o.Path = fmt.Sprintf("%s/n%d.bin", r.realDir(pick(sortStrings(baseDirs))), r.rng.IntN(1<<20))
		o.Arg = fileSize(r.rng)
		o.To = fmt.Sprint(r.rng.Int64())
	case "remove", "chmod":
		o.Path = pick(present)
		o.Arg = int64([]int{0o600, 0o644, 0o400}[r.rng.IntN(3)])
	case "rewrite":
		o.Path = pick(present)
		o.Arg = fileSize(r.rng)
		o.To = fmt.Sprint(r.rng.Int64())
	case "rename":
		o.Path = pick(present)
		o.To = fmt.Sprintf("%s/r%d.bin", pick(sortStrings(baseDirs)), r.rng.IntN(1<<20))
	case "swapdir":
		o.Path = pick(sortStrings(baseDirs))
		o.To = fmt.Sprintf("%s.old%d", o.Path, r.rng.IntN(1<<20))
	case "slow":
		o.Arg = int64(10 + r.rng.IntN(40)) // ms per source read: slow, within the timeout
	case "crash":
		o.Arg = int64(r.rng.IntN(3)) // 0: nothing more; 1: a tier wiped; 2: a copy truncated
	}
	return o
}

// baseDirs are where files are added.
var baseDirs = []string{"d0", "d1", "d1/s", "d2"}

func sortStrings(l []string) []string {
	out := append([]string(nil), l...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// fileSize is small mostly, up to 256 KiB.
func fileSize(rng *rand.Rand) int64 {
	switch rng.IntN(4) {
	case 0:
		return rng.Int64N(64)
	case 1, 2:
		return rng.Int64N(16 << 10)
	}
	return rng.Int64N(256 << 10)
}

// content is the deterministic bytes of a file of size n from seed s.
func content(s string, n int64) []byte {
	var seed uint64
	fmt.Sscan(s, &seed)
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// mutate applies a source change to the real directory and the model.
func (r *runner) mutate(o op) error {
	f := r.m.files[o.Path]
	full := filepath.Join(r.src, o.Path)
	switch o.Kind {
	case "add", "rewrite":
		if o.Kind == "rewrite" && (f == nil || !f.present) || o.Kind == "add" && f != nil && f.present || r.underSymlink(o.Path) {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		data := content(o.To, o.Arg)
		if err := os.WriteFile(full+".tmp", data, 0o644); err != nil {
			return err
		}
		// A new mtime each time (the mount tells versions by size and
		// mtime), renamed into place as a writer would.
		mt := r.epoch.Add(time.Duration(r.step) * time.Second)
		os.Chtimes(full+".tmp", mt, mt)
		if err := os.Rename(full+".tmp", full); err != nil {
			return err
		}
		r.m.write(o.Path, data, r.step)
	case "remove":
		if f == nil || !f.present {
			return nil
		}
		if err := os.Remove(full); err != nil {
			return err
		}
		r.m.remove(o.Path)
	case "chmod":
		if f == nil || !f.present {
			return nil
		}
		if o.Arg&0o004 == 0 {
			f.closedToOthers = true
		}
		return os.Chmod(full, os.FileMode(o.Arg))
	case "rename":
		if f == nil || !f.present || r.m.files[o.To] != nil || r.underSymlink(o.To) {
			return nil
		}
		data := f.versions[len(f.versions)-1].data
		if err := os.MkdirAll(filepath.Dir(filepath.Join(r.src, o.To)), 0o755); err != nil {
			return err
		}
		if err := os.Rename(full, filepath.Join(r.src, o.To)); err != nil {
			return err
		}
		r.m.remove(o.Path)
		r.m.write(o.To, data, r.step)
		r.m.moved(o.Path, o.To)
	case "swapdir":
		return r.swapDir(o)
	}
	return nil
}

// swapDir moves a directory away and puts a symlink to it in its place:
// the files under the old name are gone from the dataset (a symlink is
// never followed), those under the new name are new.
func (r *runner) swapDir(o op) error {
	full := filepath.Join(r.src, o.Path)
	if st, err := os.Lstat(full); err != nil || !st.IsDir() || r.underSymlink(o.Path) || r.underSymlink(o.To) {
		return nil // (through a symlink it would move another directory)
	}
	if err := os.Rename(full, filepath.Join(r.src, o.To)); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Base(o.To), full); err != nil {
		return err
	}
	for _, p := range r.m.known() {
		if f := r.m.files[p]; f.present && strings.HasPrefix(p, o.Path+"/") {
			data := f.versions[len(f.versions)-1].data
			r.m.remove(p)
			r.m.write(o.To+strings.TrimPrefix(p, o.Path), data, r.step)
			r.m.moved(p, o.To+strings.TrimPrefix(p, o.Path))
		}
	}
	// New files under the old name land in the new directory; the name
	// stays a symlink (adds under it fail and are skipped).
	// Directories and symlinks under it moved too (the old names stay
	// known: the catalog may list them until a refresh).
	r.m.dirs[o.To] = true
	for d := range r.m.dirs {
		if strings.HasPrefix(d, o.Path+"/") {
			r.m.dirs[o.To+strings.TrimPrefix(d, o.Path)] = true
		}
	}
	for l, target := range r.m.links {
		if strings.HasPrefix(l, o.Path+"/") {
			r.m.links[o.To+strings.TrimPrefix(l, o.Path)] = o.To + strings.TrimPrefix(target, o.Path)
		}
	}
	r.m.links[o.Path] = o.To
	return nil
}

// realDir is where dir is on the source now: a directory swapped for a
// symlink (swapDir) is followed to the one it moved to, so that adds go on
// growing the dataset after every base directory was swapped.
func (r *runner) realDir(dir string) string {
	real, err := filepath.EvalSymlinks(filepath.Join(r.src, dir))
	if err != nil {
		return dir
	}
	rel, err := filepath.Rel(r.src, real)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return dir
	}
	return rel
}

// underSymlink reports whether a directory on rel's path is a symlink
// on the source now (a swapped directory).
func (r *runner) underSymlink(rel string) bool {
	for d := dirOf(rel); d != ""; d = dirOf(d) {
		if st, err := os.Lstat(filepath.Join(r.src, d)); err == nil && st.Mode()&os.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// errno is the syscall errno in err, if any.
func errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}
