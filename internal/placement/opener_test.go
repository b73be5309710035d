package placement

import (
	"bytes"
	"context"
	"testing"

	"github.com/puzpuzpuz/xsync/v3"
)

// The opener, over a copier and a validator and no placer, serves a first
// open from the copy it starts and a later one from the tier, the same
// bytes each time, and closes what it opened.
func TestOpenerReadsOnItsOwn(t *testing.T) {
	d := dataset{"a": content("a", 200_000), "b": content("b", 10)}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.Close()
	o := Options{Tiers: e.tiers, Validate: ValidateOnce, MaxDrop: 1}
	cp := newCopier(t, e, o)
	op := &opener{o: &o, cat: e.cat, src: e.source, log: cp.log, ctx: cp.ctx,
		res:     newResidentCache(16, 16),
		readers: xsync.NewMapOf[*Reader, struct{}](),
		cp:      cp, val: cp.val, buffer: cp.buffer}
	t.Cleanup(op.res.close)
	ctx := context.Background()
	read := func(p string) *Reader {
		t.Helper()
		r, err := op.Open(ctx, e.entry(p))
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		buf := make([]byte, r.Size())
		if err := r.ReadFull(ctx, buf); err != nil || !bytes.Equal(buf, d[p]) {
			t.Fatalf("%s: read %d bytes that differ from the source (%v)", p, len(buf), err)
		}
		return r
	}
	for _, p := range d.Paths() {
		if r := read(p); r.Close() != nil {
			t.Errorf("close of %s failed", p)
		}
	}
	waitFor(t, "the first opens' copies", func() bool { return e.entry("a").Tier() == 0 && e.entry("b").Tier() == 0 })
	r := read("a")
	if r.TierIndex() != 0 || r.Resident() == nil {
		t.Errorf("a later open is not served from the tier: tier %d, kept copy %v", r.TierIndex(), r.Resident() != nil)
	}
	r.Close()
	if n := op.readers.Size(); n != 0 {
		t.Errorf("%d readers still open after every close", n)
	}
}
