package placement

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// TestARefreshMayNameWhatTheSourceGainedAndNothingElse: a line of a
// refresh or verify document is checked as it is written. Root's refresh
// may name a path the source gained since the walk, but not one neither
// the catalog nor the source has, nor one below a file; a verify, and a
// user's refresh, name only what the user may open.
func TestARefreshMayNameWhatTheSourceGainedAndNothingElse(t *testing.T) {
	d := dataset{"a/x": content("x", 10), "secret/y": content("y", 10)}
	e := newEnv(t, d, oneTier(1<<20), Options{})
	e.setAttr("secret", 0o700, 0, 0)
	if err := os.MkdirAll(filepath.Join(e.src, "a/new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.src, "a/new/z"), []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := e.p.Scrubber()
	user := &catalog.Cred{UID: 1000, GID: 1000}
	for _, c := range []struct {
		who  *catalog.Cred
		kind ScrubKind
		path string
		ok   bool
	}{
		{nil, ScrubRefresh, "a/x", true},
		{nil, ScrubRefresh, "a/new/z", true}, // on the source only
		{nil, ScrubRefresh, "a/gone", false},
		{nil, ScrubRefresh, "nothing/here", false},
		{nil, ScrubRefresh, "a/x/below", false}, // below a file
		{nil, ScrubVerify, "a/new/z", false},    // verify checks what the catalog has
		{nil, ScrubVerify, "secret/y", true},
		{user, ScrubRefresh, "a/x", true},
		{user, ScrubRefresh, "a/new/z", false}, // only root's refresh looks at the source
		{user, ScrubRefresh, "secret/y", false},
		{user, ScrubVerify, "secret/y", false},
	} {
		err := s.CheckPath(c.who, c.kind, c.path)
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrNoEntry) {
			t.Errorf("%v %v %q: %v, want ok=%v (else ErrNoEntry)", c.who, c.kind, c.path, err, c.ok)
		}
	}
}
