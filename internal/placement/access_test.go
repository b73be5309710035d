package placement

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// setAttr gives a catalog entry, and its source file, the owner and mode a
// test needs: a copy records the source's attributes (internal/placement/validate.go),
// so a source that disagreed would undo them while a warmup runs.
func (e *env) setAttr(p string, mode, uid, gid uint32) {
	e.t.Helper()
	src := filepath.Join(e.src, p)
	if err := os.Chown(src, int(uid), int(gid)); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(src, os.FileMode(mode&0o777)); err != nil {
		e.t.Fatal(err)
	}
	setEntryAttr(e.entry(p), mode, uid, gid)
}

// setEntryAttr gives a catalog entry the owner and mode a test needs.
func setEntryAttr(e *catalog.Entry, mode, uid, gid uint32) {
	a := e.Attr()
	a.Mode = a.Mode&^0o7777 | mode
	a.UID, a.GID = uid, gid
	e.SetAttr(a)
}

func pathsOf(files []*catalog.Entry) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path())
	}
	slices.Sort(out)
	return out
}

// TestAPathAUserMayNotOpenIsReportedAsMissing: LookupAs and ResolvePathsAs
// answer a path behind a directory the user may not search, or a file they
// may not read, exactly as a path that does not exist; directories give
// only the files the user could list and read.
func TestAPathAUserMayNotOpenIsReportedAsMissing(t *testing.T) {
	d := dataset{
		"pub/a":           content("a", 10),
		"pub/own":         content("own", 11),
		"pub/grp":         content("grp", 12),
		"secret/x":        content("x", 13),
		"secret/y/z":      content("z", 14),
		"noread/visible":  content("v", 15),
		"pub/hidden/deep": content("deep", 16),
	}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	const uid, gid, other = 1000, 1000, 2000
	e.setAttr("secret", 0o700, 0, 0)
	e.setAttr("pub/own", 0o600, uid, other)
	e.setAttr("pub/grp", 0o640, 0, 77)
	e.setAttr("pub/a", 0o244, uid, gid) // owner bits win: the owner may not read it
	e.setAttr("noread", 0o711, 0, 0)    // searchable, not listable
	e.setAttr("pub/hidden", 0o700, 0, 0)
	user := &catalog.Cred{UID: uid, GID: gid}
	member := &catalog.Cred{UID: 3000, GID: 3000, Groups: []uint32{5, 77}}

	notExist := func(who *catalog.Cred, p string) error {
		_, err := e.p.Catalog().LookupAs(who, p)
		return err
	}
	for _, p := range []string{"secret", "secret/x", "secret/y/z", "secret/nothing", "pub/grp", "pub/a", "noread", "pub/hidden/deep"} {
		if err := notExist(user, p); !errors.Is(err, ErrNoEntry) {
			t.Errorf("user: LookupAs(%q) = %v, want ErrNoEntry", p, err)
		}
		missing := notExist(user, "no/such/"+p)
		err := notExist(user, p)
		if err != nil && missing != nil && strings.TrimSuffix(err.Error(), strconv.Quote(catalog.CleanRel(p))) != strings.TrimSuffix(missing.Error(), strconv.Quote(catalog.CleanRel("no/such/"+p))) {
			t.Errorf("the errors for %q and a missing path differ in more than the path: %v / %v", p, err, missing)
		}
	}
	for _, p := range []string{"pub", "pub/own", "noread/visible", "", "/pub/../pub/own"} {
		if err := notExist(user, p); err != nil {
			t.Errorf("user: LookupAs(%q) = %v, want the entry", p, err)
		}
	}
	if err := notExist(member, "pub/grp"); err != nil {
		t.Errorf("a member of the file's group through a supplementary group: %v", err)
	}
	for _, who := range []*catalog.Cred{nil, {UID: 0, GID: 9}} {
		if err := notExist(who, "secret/y/z"); err != nil {
			t.Errorf("root (%v): %v", who, err)
		}
	}

	files, err := e.p.Catalog().ResolvePathsAs(user, []string{"pub"})
	if got, want := pathsOf(files), []string{"pub/own"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("user: pub resolves to %q, %v; want %q", got, err, want)
	}
	files, err = e.p.Catalog().ResolvePathsAs(user, []string{"pub/own", "secret/x"})
	if !errors.Is(err, ErrNoEntry) || files != nil {
		t.Errorf("a hidden path among good ones: %d files, %v; want ErrNoEntry and nothing", len(files), err)
	}
	if got, want := pathsOf(e.p.Catalog().FilesAs(user)), []string{"pub/own"}; !slices.Equal(got, want) {
		t.Errorf("all as the user: %q, want %q", got, want)
	}
	if got := pathsOf(e.p.Catalog().FilesAs(nil)); len(got) != len(d) {
		t.Errorf("all as root: %d files, want %d", len(got), len(d))
	}

	// Progress as the user counts only what they could open, whoever
	// queued it.
	all, _ := e.p.Catalog().ResolvePathsAs(nil, []string{""})
	e.p.warmups.queue(all)
	w := e.p.Warmups().Progress(user)
	var want int64
	for _, p := range []string{"pub/own", "noread/visible"} {
		want += int64(len(d[p]))
	}
	if w.Files != 2 || w.BytesTotal != want {
		t.Errorf("the user's progress counts %d files of %d bytes, want 2 of %d (pub/own, noread/visible)", w.Files, w.BytesTotal, want)
	}
	if w := e.p.Warmups().Progress(nil); w.Files != int64(len(d)) || w.BytesTotal != d.Bytes() {
		t.Errorf("root's progress: %+v, want every file", w)
	}
}

// TestAHeldWarmupCountsButQueuesNothingUntilReleased: a held request shows
// in progress at once, queues nothing until released; a cancelled one takes
// back only what no other request wants.
func TestAHeldWarmupCountsButQueuesNothingUntilReleased(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	a, _ := e.p.Catalog().ResolvePathsAs(nil, []string{"train/a"})
	b, _ := e.p.Catalog().ResolvePathsAs(nil, []string{"val"})
	ha := e.p.warmups.hold(a, false)
	hb := e.p.warmups.hold(append(slices.Clone(a[:1]), b...), false)
	if w := e.p.warmups.progressAll(); w.Files != int64(len(a)+len(b)) {
		t.Fatalf("progress counts %d files, want the %d held", w.Files, len(a)+len(b))
	}
	if st := e.p.Stats(); st.Queued != int64(len(a)+len(b)+1) || st.Done != 0 {
		t.Fatalf("stats with held requests: %+v; want them counted as queued (%d), none placed", st, len(a)+len(b)+1)
	}
	if n, _ := e.p.residency(); n != 0 {
		t.Fatalf("a held request placed %d files", n)
	}
	// a's first file is held by both: cancelling b keeps it.
	hb.Cancel()
	if w := e.p.warmups.progressAll(); w.Files != int64(len(a)) {
		t.Fatalf("after cancelling b: %d files, want a's %d", w.Files, len(a))
	}
	if st := e.p.Stats(); st.Queued != int64(len(a)) {
		t.Fatalf("queued %d after cancelling b, want a's %d", st.Queued, len(a))
	}
	hb.Release() // after Cancel: nothing
	ha.Release()
	ha.Cancel() // after Release: nothing
	waitFor(t, "a's files resident", func() bool { return e.p.warmups.progressAll().Done == int64(len(a)) })
	if n, _ := e.p.residency(); n != int64(len(a)) {
		t.Fatalf("%d files resident, want a's %d", n, len(a))
	}
	// A held file that a plain Warmup asks for is queued, and a cancel
	// does not take it back.
	hc := e.p.warmups.hold(b, false)
	e.p.warmups.queue(b[:1])
	hc.Cancel()
	waitFor(t, "b's first file resident", func() bool { return e.p.warmups.progressAll().Done == int64(len(a)+1) })
	if w := e.p.warmups.progressAll(); w.Files != int64(len(a)+1) {
		t.Fatalf("progress counts %d files, want %d", w.Files, len(a)+1)
	}
	// All, held then cancelled: back to the listed files.
	hall := e.p.warmups.hold(nil, true)
	if w := e.p.warmups.progressAll(); w.Files != int64(len(d)) {
		t.Fatalf("a held all counts %d files, want %d", w.Files, len(d))
	}
	hall.Cancel()
	if w := e.p.warmups.progressAll(); w.Files != int64(len(a)+1) {
		t.Fatalf("after cancelling all: %d files", w.Files)
	}
	waitFor(t, "the queue to drain", func() bool { return e.p.Stats().Queued == 0 })
}

// TestQueuedNeverCountsAFileTwiceOrNotAtAll: while a warmup of the whole
// dataset is fed, queued and copied, Stats().Queued never exceeds the
// files left and never rises, and no file is missing from Queued + Done
// (a file moves from fed to queued to copying without the count changing).
func TestQueuedNeverCountsAFileTwiceOrNotAtAll(t *testing.T) {
	d := dataset{}
	for i := range 400 {
		d[fmt.Sprintf("f/%03d", i)] = []byte(strconv.Itoa(i))
	}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	n := int64(len(d))
	h := e.p.warmups.hold(nil, true)
	stop := make(chan struct{})
	errs := make(chan string, 1)
	go func() {
		defer close(errs)
		last := n
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := e.p.Stats()
			switch {
			case st.Queued > last:
				errs <- fmt.Sprintf("queued rose from %d to %d", last, st.Queued)
				return
			case st.Queued+st.Done < n:
				errs <- fmt.Sprintf("queued %d + done %d < %d files: a file went uncounted", st.Queued, st.Done, n)
				return
			}
			last = st.Queued
		}
	}()
	h.Release()
	e.waitResident()
	deadline := time.Now().Add(10 * time.Second)
	for st := e.p.Stats(); st.Queued != 0 || st.Done != n; st = e.p.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after the warmup: %+v, want 0 queued and %d done", st, n)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	if msg, ok := <-errs; ok {
		t.Fatal(msg)
	}
}

// TestAReaderKeepsReadingAfterAChmodIfItsOpenerMayStill: a file's mode
// changes on the source between a reader's open and its first read of
// the source; the read goes on for an opener the new mode still lets in
// (access is checked at open: root got EACCES), and fails with
// ErrAccessChanged for one it shuts out, or when no opener was told.
func TestAReaderKeepsReadingAfterAChmodIfItsOpenerMayStill(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, nil, Options{Validate: ValidateNever})
	ctx := context.Background()
	for _, tc := range []struct {
		name, path string
		may        func(catalog.Attr) bool
		wantErr    bool
	}{
		{"the opener may still read", "train/b/img-2.jpg", func(catalog.Attr) bool { return true }, false},
		{"the new mode shuts the opener out", "train/b/img-110k.jpg", func(a catalog.Attr) bool { return a.Mode&0o004 != 0 }, true},
		{"no opener told", "train/a/page", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.p.Open(ctx, e.entry(tc.path))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if tc.may != nil {
				r.SetOpener(tc.may)
			}
			if err := os.Chmod(filepath.Join(e.src, tc.path), 0o600); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(d[tc.path]))
			n, err := r.ReadAt(ctx, buf, 0)
			if tc.wantErr {
				if !errors.Is(err, ErrAccessChanged) {
					t.Fatalf("read after the chmod: %d bytes, %v; want ErrAccessChanged", n, err)
				}
				return
			}
			if err != nil || !bytes.Equal(buf[:n], d[tc.path]) {
				t.Fatalf("read after the chmod: %d bytes, %v; want the file's %d", n, err, len(d[tc.path]))
			}
			if m := e.entry(tc.path).Attr().Mode & 0o777; m != 0o600 {
				t.Errorf("the catalog has mode %o, want the source's 0600", m)
			}
		})
	}
}
