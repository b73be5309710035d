package placement

import (
	"errors"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// TestAWarmupRequestChecksEachLineAndHoldsWithinTheUsersBound: a user's
// request resolves only what they may open, refuses a line that would take
// their backlog past the bound at the line, charges what it holds, and a
// cancelled hold takes its charge and its progress back; root's "all" is
// not bounded. (The tier is too small for any file: nothing becomes
// resident, so the backlog stays what was asked.)
func TestAWarmupRequestChecksEachLineAndHoldsWithinTheUsersBound(t *testing.T) {
	d := dataset{"a": content("a", 100), "b": content("b", 100), "c": content("c", 100), "hidden/x": content("x", 10)}
	e := newEnv(t, d, oneTier(1), Options{MaxWarmupPerUser: 250})
	e.setAttr("hidden", 0o700, 0, 0)
	user := &catalog.Cred{UID: 1000, GID: 1000}
	w := e.p.Warmups()

	r := w.Request(user)
	if _, err := r.Resolve("hidden/x"); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("a path the user may not open resolves with %v, want ErrNoEntry", err)
	}
	var held []*catalog.Entry
	for _, p := range []string{"a", "b"} {
		files, err := r.Resolve(p)
		if err != nil || len(files) != 1 {
			t.Fatalf("%s resolves to %d files, %v", p, len(files), err)
		}
		if err := r.Check(files); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		held = append(held, files...)
	}
	c, _ := r.Resolve("c")
	if err := r.Check(c); !errors.Is(err, ErrWarmupQuota) {
		t.Fatalf("a third 100-byte line under a 250-byte bound: %v, want ErrWarmupQuota", err)
	}
	h, err := r.Hold(held, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.backlogs()[1000]; got != 200 {
		t.Fatalf("the user's backlog is %d bytes, want 200", got)
	}
	if _, err := w.Request(user).Hold(c, false); !errors.Is(err, ErrWarmupQuota) {
		t.Fatalf("another request past the bound: %v, want ErrWarmupQuota", err)
	}
	if _, err := w.Request(user).Hold(nil, true); !errors.Is(err, ErrWarmupQuota) {
		t.Fatalf("the user's all (the 300 bytes they may open) past the bound: %v, want ErrWarmupQuota", err)
	}
	if got := w.backlogs()[1000]; got != 200 {
		t.Fatalf("refused requests charged the user: %d bytes, want 200", got)
	}
	if p := w.Progress(user); p.Files != 2 {
		t.Fatalf("the user's progress counts %d files, want the 2 held", p.Files)
	}
	h.Cancel()
	if got := w.backlogs()[1000]; got != 0 {
		t.Fatalf("a cancelled hold left %d bytes charged", got)
	}
	if p := w.Progress(user); p.Files != 0 {
		t.Fatalf("a cancelled hold left %d files in the progress", p.Files)
	}

	root, err := w.Request(nil).Hold(nil, true)
	if err != nil {
		t.Fatalf("root's all: %v", err)
	}
	if p := w.Progress(nil); p.Files != int64(len(d)) {
		t.Fatalf("root's all counts %d files, want %d", p.Files, len(d))
	}
	root.Cancel()
}
