package placement

import (
	"bytes"
	"context"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A reader of a resident file whose tier read fails reads the source
// instead, returns the file's bytes, notes the failure once and skips the
// tier in its later reads.
func TestATierReadThatFailsFallsThroughTheChainOnce(t *testing.T) {
	e := placedEnv(t, smallDataset(2, 20000), Options{})
	p := e.data.Paths()[0]
	r := openRead(t, e, p)
	defer r.Close()
	if r.chain[0] != linkTier || r.chain[1] != linkSource {
		t.Fatalf("a resident reader's chain is %v, want tier then source", r.chain)
	}
	// The tier fails: its descriptor now names a directory (EISDIR).
	fd := r.ResidentFD()
	dir, err := os.Open(e.tiers[0].Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := unix.Dup2(int(dir.Fd()), fd); err != nil {
		t.Fatal(err)
	}
	before := e.source.Stats()
	want := e.data[p]
	for i, off := range []int64{0, 5000} {
		buf := make([]byte, 4096)
		n, err := r.ReadAt(context.Background(), buf, off)
		if err != nil || !bytes.Equal(buf[:n], want[off:off+4096]) {
			t.Fatalf("read %d at %d: %d bytes, %v; want the file's bytes", i, off, n, err)
		}
		if !r.tierBad.Load() {
			t.Fatalf("read %d: the tier's failure was not noted", i)
		}
	}
	if after := e.source.Stats(); after.Reads < before.Reads+2 {
		t.Errorf("source reads %d → %d: the reads did not go to the source", before.Reads, after.Reads)
	}
}
