package placement

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
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

// rangedRemote is a heldRemote that also serves parts of the files it
// holds; with fail set its reads fail.
type rangedRemote struct {
	*heldRemote
	fail  atomic.Bool
	reads atomic.Int64
}

func (h *rangedRemote) Stored(ctx context.Context, k RemoteKey) (RemoteFile, bool) {
	b, ok := h.data[k.Path]
	if !ok || int64(len(b)) != k.Size {
		return nil, false
	}
	return heldFile{h, b}, true
}

type heldFile struct {
	h *rangedRemote
	b []byte
}

func (f heldFile) ReadAt(ctx context.Context, buf []byte, off int64) (int, error) {
	if f.h.fail.Load() {
		return 0, errors.New("remote down")
	}
	f.h.reads.Add(1)
	if off >= int64(len(f.b)) {
		return 0, nil
	}
	return copy(buf, f.b[off:]), nil
}

// readInParts reads r whole with reads of 10,000 bytes, as the kernel does.
func readInParts(t *testing.T, r *Reader) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, 10000)
	for off := int64(0); ; {
		n, err := r.ReadAt(context.Background(), buf, off)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return got
		}
		got = append(got, buf[:n]...)
		off += int64(n)
	}
}

// TestAFileThatFitsNoTierIsReadFromTheRemotesStoredCopy: with a remote
// that serves parts of its files, a file too big for every tier is read
// from the remote's copy, not the source; a file it does not hold, or a
// remote whose reads fail, is read from the source, with the same bytes.
func TestAFileThatFitsNoTierIsReadFromTheRemotesStoredCopy(t *testing.T) {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	d := dataset{"a/big": big, "a/other": bytes.Repeat([]byte("o"), 30000)}
	rem := &rangedRemote{heldRemote: &heldRemote{data: dataset{"a/big": big}, copies: map[string]int{}}}
	e := newEnv(t, d, oneTier(8<<10), Options{Remote: rem})
	ctx := context.Background()
	read := func(path string) []byte {
		r, err := e.p.Open(ctx, e.entry(path))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return readInParts(t, r)
	}
	if got := read("a/big"); !bytes.Equal(got, big) {
		t.Fatalf("a/big from the remote: %d bytes, not the file's", len(got))
	}
	if n := e.source.Stats().Opens; n != 0 {
		t.Errorf("the source was opened %d times; the remote holds a/big", n)
	}
	if st := e.p.Stats(); st.RemoteReads != 7 || rem.reads.Load() != 7 {
		t.Errorf("remote reads: placer %d, remote %d; want 7 each (64 KiB in reads of 10,000)", st.RemoteReads, rem.reads.Load())
	}
	if got := read("a/other"); !bytes.Equal(got, d["a/other"]) {
		t.Fatal("a/other (not held by the remote): wrong bytes")
	}
	rem.fail.Store(true)
	opens := e.source.Stats().Opens
	if got := read("a/big"); !bytes.Equal(got, big) {
		t.Fatal("a/big with the remote failing: wrong bytes")
	}
	if e.source.Stats().Opens == opens {
		t.Error("with the remote failing, a/big was not read from the source")
	}
}
