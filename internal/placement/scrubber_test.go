package placement

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// The scrubber, over a copier, a validator and an opener and no placer,
// refreshes the dataset from the source: a new file is added, a removed
// one leaves, a changed one is a new version whose copy is dropped, and
// a Drop removes a copy on purpose.
func TestScrubberRefreshesOnItsOwn(t *testing.T) {
	d := dataset{"keep": content("keep", 1000), "gone": content("gone", 10), "dir/change": content("change", 3000)}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.Close()
	o := Options{Tiers: e.tiers, Validate: ValidateOnce, MaxDrop: 1, RefreshRate: 1e6}
	cp := newCopier(t, e, o)
	op := &opener{o: &o, cat: e.cat, src: e.source, log: cp.log, ctx: cp.ctx, res: newResidentCache(16, 16),
		cp: cp, val: cp.val, buffer: cp.buffer}
	t.Cleanup(op.res.close)
	cp.val.forgetResident = op.forgetResident
	s := &Scrubber{o: &o, cat: e.cat, src: e.source, log: cp.log, ctx: cp.ctx, wg: cp.wg, notify: cp.notify,
		cp: cp, val: cp.val, op: op, warmups: &Warmups{cat: e.cat, queued: &cp.queued, feed: cp.feedCounted}}
	cp.val.scrub = s
	for _, p := range []string{"keep", "dir/change"} {
		cp.enqueue(e.entry(p))
	}
	waitFor(t, "the copies", func() bool { return e.entry("keep").Tier() == 0 && e.entry("dir/change").Tier() == 0 })

	os.Remove(filepath.Join(e.src, "gone"))
	os.WriteFile(filepath.Join(e.src, "dir", "new"), content("new", 5), 0o644)
	os.WriteFile(filepath.Join(e.src, "dir", "change"), content("change2", 3001), 0o644)
	change := e.entry("dir/change")
	if err := s.Request(ScrubRequest{Kind: ScrubRefresh}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refresh", func() bool { st := s.Status(); return st.Finished == 1 && !st.Running })
	st := s.Status()
	if st.Added != 1 || st.Removed != 1 || st.Changed != 1 || st.Errors != 0 {
		t.Errorf("refresh: added %d removed %d changed %d errors %d (%s); want 1 1 1 0", st.Added, st.Removed, st.Changed, st.Errors, st.LastErr)
	}
	if e.cat.Find("gone") != nil || e.cat.Find("dir/new") == nil {
		t.Error("the catalog does not match the source after the refresh")
	}
	if change.Tier() >= 0 || change.Version() != 1 || change.Attr().Size != 3001 {
		t.Errorf("changed file: tier %d, version %d, size %d; want no copy, version 1, 3001 bytes", change.Tier(), change.Version(), change.Attr().Size)
	}
	if n, b := s.Drop([]*catalog.Entry{e.entry("keep")}); n != 1 || b != 1000 || e.entry("keep").Tier() >= 0 {
		t.Errorf("Drop: %d copies, %d bytes; the copy's tier now %d", n, b, e.entry("keep").Tier())
	}
}
