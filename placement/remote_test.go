package placement

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"
)

// heldRemote holds every file of data; a copy of gated waits for open.
type heldRemote struct {
	data  dataset
	gated string
	open  chan struct{}

	mu     sync.Mutex
	copies map[string]int
}

func (h *heldRemote) Copy(ctx context.Context, k RemoteKey, w io.Writer, progress func(int64), _ SourceCopy) (int64, error) {
	h.mu.Lock()
	h.copies[k.Path]++
	h.mu.Unlock()
	if k.Path == h.gated {
		select {
		case <-h.open:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	n, err := w.Write(h.data[k.Path])
	if progress != nil {
		progress(int64(n))
	}
	return int64(n), err
}

// TestAReadWithEveryCopySlotTakenWaitsForTheRemoteInsteadOfReadingTheSource:
// with a remote, a read that finds every demand-copy slot taken waits for
// one and is served by the remote; the source is never opened (without a
// remote it reads the source at once: the fallback).
func TestAReadWithEveryCopySlotTakenWaitsForTheRemoteInsteadOfReadingTheSource(t *testing.T) {
	d := dataset{"a/slow": bytes.Repeat([]byte("s"), 5000), "a/fast": bytes.Repeat([]byte("f"), 7000)}
	rem := &heldRemote{data: d, gated: "a/slow", open: make(chan struct{}), copies: map[string]int{}}
	e := newEnv(t, d, oneTier(1<<30), Options{Remote: rem, MaxDemandCopies: 1})
	ctx := context.Background()
	slow, err := e.p.Open(ctx, e.entry("a/slow")) // its copy takes the one slot and waits
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	waitFor(t, "the slow copy to start", func() bool {
		rem.mu.Lock()
		defer rem.mu.Unlock()
		return rem.copies["a/slow"] == 1
	})
	time.AfterFunc(200*time.Millisecond, func() { close(rem.open) })
	fast, err := e.p.Open(ctx, e.entry("a/fast"))
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	got := make([]byte, fast.Size())
	if err := fast.ReadFull(ctx, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, d["a/fast"]) {
		t.Fatal("a/fast: wrong bytes")
	}
	if st := e.p.Stats(); st.DemandFallbacks != 0 {
		t.Errorf("%d reads fell back to the source", st.DemandFallbacks)
	}
	if n := e.source.Stats().Opens; n != 0 {
		t.Errorf("the source was opened %d times; the remote holds every file", n)
	}
}
