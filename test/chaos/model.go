// Package chaos is a differential fault harness: a seeded random sequence
// of operations over an epochfs mount, its source and its tiers, each
// answer checked against a reference model of what the docs promise
// (docs/admin.md "When the PFS hangs", docs/security.md, docs/ctl.md).
// `make chaos SEED=N DURATION=2m` runs one budget; see chaos_test.go.
package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// version is one content a path had on the source.
type version struct {
	data []byte
	at   int // the step that wrote it
}

// file is the model of one dataset path.
type file struct {
	versions []version // every content the path ever had, oldest first
	present  bool      // on the source now
	// everAbsent: the path was missing from the source at some step
	// since the first mount (removed, renamed away, its directory
	// swapped for a symlink): ENOENT is allowed for it from then on.
	everAbsent bool
	// unlisted: added to the source and no refresh has finished since:
	// the mount may not know it (ENOENT allowed).
	unlisted bool
	// resident: a getxattr saw a tier copy, and nothing since may have
	// removed it (a drop, a tier fault, a source change, a crash).
	resident bool
	// behind: the source changed the path and no refresh has finished
	// since: a copy the mount shows may be of an older content, which it
	// drops when it learns of the change (not counted as resident).
	behind bool
	// opened: a read through the mount opened this very path after its
	// last change on the source, and no crash came since. With validate =
	// "open" the open checked it, so a stat shows the current version
	// from then on; before it (and before a refresh) a stat may still show
	// the size the mount last saw (docs/admin.md "How fresh is the mount").
	opened bool
	// closedToOthers: a mode without read for others was on the source
	// at some step (the mount may still show it: EACCES allowed for a
	// second user from then on).
	closedToOthers bool
}

// model is what the source holds and what the mount may answer.
type model struct {
	files map[string]*file
	dirs  map[string]bool // every directory that ever held a file
	// links are the symlinks swapped in for directories (path → the
	// directory it names): the kernel follows them inside the mount, so
	// a path through one reads what its target holds.
	links    map[string]string
	validate string
	// faultSince is the step the current source fault began (-1: none);
	// calmAt is when the last fault ended: the mount sees the source
	// back within its prober's interval, so for a grace period after it
	// the answers a fault allows are still allowed.
	faultSince int
	fault      string
	calmAt     time.Time
	grace      time.Duration
}

func newModel(validate string, grace time.Duration) *model {
	return &model{files: map[string]*file{}, dirs: map[string]bool{"": true}, links: map[string]string{}, validate: validate, faultSince: -1, grace: grace}
}

// write records content data at p (created or rewritten) at step.
func (m *model) write(p string, data []byte, step int) {
	f := m.files[p]
	if f == nil {
		f = &file{}
		m.files[p] = f
		if step > 0 {
			f.unlisted = true
		}
	}
	if !f.present && step > 0 {
		f.unlisted = true
	}
	f.versions = append(f.versions, version{data: append([]byte(nil), data...), at: step})
	f.present = true
	f.behind = step > 0
	f.opened = false
	m.changed(p)
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		m.dirs[d] = true
	}
}

// moved carries what the model knows of from's modes to to (a rename
// keeps the file's mode).
func (m *model) moved(from, to string) {
	if f, g := m.files[from], m.files[to]; f != nil && g != nil && f.closedToOthers {
		g.closedToOthers = true
	}
}

// otherRead says whether a second user's whole read of p may answer a;
// openNow reports whether the source's mode of p (now) lets others read.
// A second user gets the bytes a fresh open may read, but with validate =
// "open" and the source well never while the source's mode shuts them
// out; EACCES only if a mode since the first mount did.
func (m *model) otherRead(p string, a answer, openNow bool) error {
	f := m.files[p]
	if f == nil {
		return fmt.Errorf("%s: a path the source never had", p)
	}
	if errors.Is(a.err, syscall.EACCES) {
		if !openNow {
			return nil
		}
		for _, q := range m.aliases(p) {
			if g := m.files[q]; g != nil && g.closedToOthers {
				return nil
			}
		}
		return fmt.Errorf("EACCES for a second user, and the file was never closed to others")
	}
	if a.err == nil && !openNow && m.validate == "open" && !m.sick() && f.present && !f.unlisted {
		return fmt.Errorf("a second user read %d bytes of a file the source closed to others (validate = \"open\")", len(a.data))
	}
	return m.check(p, -1, 0, a, true)
}

// mayList says whether a listing of directory dir may show name: a path
// the source had under dir (or under a directory dir reads as), or the
// temporary name an add or a rewrite wrote it under first (NAME.tmp,
// renamed into place: a refresh running meanwhile lists it, and removes it
// at its next pass).
func (m *model) mayList(dir, name string) bool {
	if dir == "" && name == ".epochfs" {
		return true
	}
	for _, d := range m.aliases(strings.TrimPrefix(dir+"/x", "/")) {
		full := strings.TrimPrefix(dirOf(d)+"/"+name, "/")
		if _, link := m.links[full]; link || m.files[full] != nil || m.dirs[full] {
			return true
		}
		if base, ok := strings.CutSuffix(full, ".tmp"); ok && m.files[base] != nil {
			return true
		}
	}
	return false
}

// remove records p gone from the source.
func (m *model) remove(p string) {
	if f := m.files[p]; f != nil {
		f.present, f.everAbsent, f.opened = false, true, false
	}
	m.changed(p)
}

// changed forgets the copies seen of p and of every path that reads as p
// (through a symlink swapped in for a directory: aliases): the source
// changed p, and the mount drops its copy when it learns of it.
func (m *model) changed(p string) {
	for q, f := range m.files {
		if f.resident && (q == p || slices.Contains(m.aliases(q), p)) {
			f.resident = false
		}
	}
}

// mayBeOld reports whether a copy shown at p may be of a content the
// source has since replaced (p, or a path p reads as, is behind).
func (m *model) mayBeOld(p string) bool {
	for _, q := range m.aliases(p) {
		if f := m.files[q]; f != nil && f.behind {
			return true
		}
	}
	return false
}

// sick reports whether a fault is on, or ended less than the grace ago.
func (m *model) sick() bool {
	return m.faultSince >= 0 || time.Since(m.calmAt) < m.grace
}

// present lists the paths on the source now, sorted.
func (m *model) present() []string {
	var out []string
	for p, f := range m.files {
		if f.present {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// known lists every path the model has seen, sorted.
func (m *model) known() []string {
	out := make([]string, 0, len(m.files))
	for p := range m.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// answer is what an operation on the mount returned.
type answer struct {
	data []byte // bytes read (nil when none)
	size int64  // a stat's size (-1: none)
	err  error
}

// aliases are the paths p may read as: itself (the catalog may not have
// seen a directory swapped for a symlink yet) and, through every symlink
// on its path, what the symlink names.
func (m *model) aliases(p string) []string {
	out := []string{p}
	for i := 0; i < len(out) && i < 16; i++ {
		q := out[i]
		for d := dirOf(q); d != ""; d = dirOf(d) {
			if t, ok := m.links[d]; ok {
				if a := t + strings.TrimPrefix(q, d); !slices.Contains(out, a) {
					out = append(out, a)
				}
			}
		}
	}
	return out
}

// check says whether a read of p may answer a: off < 0 is a whole read
// (a.data the file), otherwise a.data the bytes at off of a read of n; a
// stat has a.size >= 0. strict: a fresh open, which with validate =
// "open" and the source well reads the current version only (a handle
// opened earlier may read the version it opened), or a stat, which does
// once an open or a refresh has seen the change (before it, any version). The reason when not;
// nil when p, or a path it reads as, allows it.
func (m *model) check(p string, off int64, n int, a answer, strict bool) error {
	var first error
	for _, q := range m.aliases(p) {
		err := m.checkOne(q, off, n, a, strict)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (m *model) checkOne(p string, off int64, n int, a answer, strict bool) error {
	f := m.files[p]
	if f == nil {
		return fmt.Errorf("%s: a path the source never had", p)
	}
	if a.err != nil {
		return m.allowedErr(f, a.err)
	}
	vs := f.versions
	if a.size >= 0 && f.behind && !f.opened {
		// A stat is not an open: the change is seen at the next open.
		strict = false
	}
	if strict && m.validate == "open" && !m.sick() && f.present && !f.unlisted {
		// Every open checks the source: the current version only.
		vs = vs[len(vs)-1:]
	}
	for _, v := range vs {
		switch {
		case a.size >= 0:
			if int64(len(v.data)) == a.size {
				return nil
			}
		case off < 0:
			if bytes.Equal(a.data, v.data) {
				return nil
			}
		default:
			want := []byte{}
			if off < int64(len(v.data)) {
				want = v.data[off:min(int64(len(v.data)), off+int64(n))]
			}
			if bytes.Equal(a.data, want) {
				return nil
			}
		}
	}
	if a.size >= 0 {
		return fmt.Errorf("size %d is no version's (sizes@steps %s)", a.size, sizes(vs))
	}
	why := ""
	for _, v := range f.versions {
		if len(a.data) > 0 && len(a.data) < len(v.data) && bytes.HasPrefix(v.data, a.data) {
			why = fmt.Sprintf("; they begin the version of step %d (%d bytes)", v.at, len(v.data))
		}
	}
	return fmt.Errorf("%d bytes (%s) at %d are no version's (sizes@steps %s)%s", len(a.data), digest(a.data), off, sizes(vs), why)
}

// allowedErr says whether a read of f may fail with err.
func (m *model) allowedErr(f *file, err error) error {
	if f == nil {
		return fmt.Errorf("a path the source never had: %v", err)
	}
	s := err.Error()
	switch {
	case strings.Contains(s, "no such file"):
		if f.everAbsent || f.unlisted || !f.present {
			return nil
		}
		return fmt.Errorf("ENOENT for a file the source always had: %v", err)
	case strings.Contains(s, "input/output error"):
		// EIO: the source is (or just was) sick, or the file is gone
		// from it (held by max_drop, or its directory vanished), or it
		// changed while read.
		if m.sick() || !f.present || f.everAbsent {
			return nil
		}
		return fmt.Errorf("EIO with the source well: %v", err)
	}
	return fmt.Errorf("an error the docs do not allow: %v", err)
}

func sizes(vs []version) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%d@%d", len(v.data), v.at)
	}
	return b.String()
}

func digest(b []byte) string {
	if len(b) > 8 {
		return fmt.Sprintf("%x…", b[:8])
	}
	return fmt.Sprintf("%x", b)
}

func dirOf(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}
