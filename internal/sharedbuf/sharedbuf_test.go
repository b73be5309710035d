package sharedbuf

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One fetch per key, readers wait for it, a reservation over the budget
// is refused, released entries make room (oldest first), and a dropped
// entry's bytes are freed only when its last reader lets go.
func TestBufferBudgetReleaseAndDrop(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New[string](100, time.Minute, func() time.Time { return now })
	ctx := context.Background()

	a, created, err := b.Reserve("a", 60, "a")
	if err != nil || !created {
		t.Fatalf("Reserve a: %v %v", created, err)
	}
	again, created, err := b.Reserve("a", 60, "a")
	if err != nil || created || again != a {
		t.Fatalf("a second Reserve of a: %v %v, want the first entry", created, err)
	}
	b.Unref(again)
	if _, _, err := b.Reserve("b", 50, "b"); !errors.Is(err, ErrFull) {
		t.Fatalf("Reserve b over the budget: %v, want ErrFull", err)
	}
	if _, _, err := b.Reserve("huge", 101, "huge"); !errors.Is(err, ErrFull) {
		t.Fatalf("Reserve over the whole budget: %v, want ErrFull", err)
	}
	r := b.Acquire("a") // a reader, before the bytes are in
	b.Finish(a, []byte("0123456789"), nil)
	if ok, err := r.Wait(ctx); !ok || err != nil {
		t.Fatalf("Wait: %v %v", ok, err)
	}
	buf := make([]byte, 4)
	if n := r.ReadAt(buf, 6); n != 4 || string(buf) != "6789" {
		t.Fatalf("ReadAt: %d %q", n, buf)
	}
	b.Unref(a) // the fetch's reference

	// Released: b's reservation drops a from the map, but a's reader
	// keeps its bytes until it lets go, so b waits for room.
	b.Release("a")
	if st := b.Stats(); st.Released != 1 || st.Bytes != 60 {
		t.Fatalf("after Release: %+v", st)
	}
	if _, _, err := b.Reserve("b", 50, "b"); !errors.Is(err, ErrFull) {
		t.Fatalf("Reserve b while a's reader holds its bytes: %v, want ErrFull", err)
	}
	if b.Has("a") {
		t.Fatal("a is still in the map after its room was asked for")
	}
	if n := r.ReadAt(buf, 0); n != 4 || string(buf) != "0123" {
		t.Fatalf("a's reader after the drop: %d %q", n, buf)
	}
	b.Unref(r)
	if st := b.Stats(); st.Bytes != 0 || st.Entries != 0 {
		t.Fatalf("after a's last reader: %+v, want nothing held", st)
	}
	bb, created, err := b.Reserve("b", 50, "b")
	if err != nil || !created {
		t.Fatalf("Reserve b once a is freed: %v %v", created, err)
	}

	// A failed fetch leaves the map; its error is kept for the waiters.
	b.Finish(bb, nil, errors.New("source gone"))
	if ok, _ := bb.Wait(ctx); ok || bb.Err() == nil || b.Has("b") {
		t.Fatalf("failed fetch: ok %v err %v in map %v", ok, bb.Err(), b.Has("b"))
	}
	b.Unref(bb)

	// The grace period: a released entry goes at Sweep once it is over.
	c, _, _ := b.Reserve("c", 10, "c")
	b.Finish(c, make([]byte, 10), nil)
	b.Unref(c)
	b.Release("c")
	b.Sweep()
	if !b.Has("c") {
		t.Fatal("c dropped before its grace period ended")
	}
	now = now.Add(time.Minute)
	b.Sweep()
	if st := b.Stats(); b.Has("c") || st.Bytes != 0 || st.Entries != 0 {
		t.Fatalf("after the grace period: in map %v, %+v", b.Has("c"), st)
	}
}
