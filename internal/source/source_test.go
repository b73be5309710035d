package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/tier"
)

func writeSource(t *testing.T, files map[string][]byte) string {
	t.Helper()
	root := t.TempDir()
	for rel, data := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func TestSourceCopyToCountsExactly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size, buf int
		wantReads int64
	}{
		// os.File.ReadAt fills the buffer or returns io.EOF, so a file
		// whose size is a multiple of the buffer takes one more (empty)
		// read to see the end.
		{"partial last chunk", 10, 4, 3},
		{"exact multiple", 8, 4, 3},
		{"one short chunk", 3, 4, 1},
		{"empty", 0, 4, 1},
		{"one byte buffer", 5, 1, 6},
		{"larger file", 100_000, 4096, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := pattern(tc.size)
			src := newTestSource(t, writeSource(t, map[string][]byte{"d/f.bin": data}), 0)
			sf, err := src.Open(context.Background(), "d/f.bin")
			if err != nil {
				t.Fatal(err)
			}
			defer sf.Close()
			var out bytes.Buffer
			var progress []int64
			n, err := sf.CopyTo(context.Background(), &out, make([]byte, tc.buf), func(n int64) { progress = append(progress, n) })
			if err != nil {
				t.Fatalf("CopyTo: %v", err)
			}
			if n != int64(tc.size) || !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("CopyTo copied %d bytes (%d in the writer), want %d identical bytes", n, out.Len(), tc.size)
			}
			want := Stats{Opens: 1, Reads: tc.wantReads, Bytes: int64(tc.size)}
			if got := src.Stats(); got != want {
				t.Errorf("Stats() = %+v, want %+v", got, want)
			}
			// progress reports the running total after every non-empty chunk.
			var chunks []int64
			for off := tc.buf; off < tc.size; off += tc.buf {
				chunks = append(chunks, int64(off))
			}
			if tc.size > 0 {
				chunks = append(chunks, int64(tc.size))
			}
			if len(progress) != len(chunks) {
				t.Fatalf("progress called %d times (%v), want %d (%v)", len(progress), progress, len(chunks), chunks)
			}
			for i := range chunks {
				if progress[i] != chunks[i] {
					t.Errorf("progress[%d] = %d, want %d", i, progress[i], chunks[i])
				}
			}
		})
	}
}

func TestSourceCountersAccumulate(t *testing.T) {
	src := newTestSource(t, writeSource(t, map[string][]byte{"a": pattern(10), "b": pattern(20)}), 0)
	for _, rel := range []string{"a", "b", "a"} {
		sf, err := src.Open(context.Background(), rel)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sf.CopyTo(context.Background(), &bytes.Buffer{}, make([]byte, 8), nil); err != nil {
			t.Fatal(err)
		}
		sf.Close()
	}
	if _, err := src.Stat(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Stat(context.Background(), "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(missing) = %v, want ErrNotExist", err)
	}
	// a: 10 bytes in reads of 8 -> 2 reads; b: 20 bytes -> 3 reads.
	want := Stats{Opens: 3, Reads: 2 + 3 + 2, Bytes: 10 + 20 + 10, Stats: 2}
	if got := src.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestSourceReadAtCounts(t *testing.T) {
	src := newTestSource(t, writeSource(t, map[string][]byte{"f": pattern(100)}), 0)
	sf, err := src.Open(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	buf := make([]byte, 30)
	n, err := sf.ReadAt(context.Background(), buf, 50)
	if err != nil || n != 30 || !bytes.Equal(buf, pattern(100)[50:80]) {
		t.Fatalf("ReadAt(30 @ 50) = %d, %v", n, err)
	}
	n, err = sf.ReadAt(context.Background(), buf, 90)
	if n != 10 || err == nil {
		t.Fatalf("ReadAt(30 @ 90) of a 100-byte file = %d, %v; want 10, io.EOF", n, err)
	}
	if got, want := src.Stats(), (Stats{Opens: 1, Reads: 2, Bytes: 40}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	if st, err := sf.Stat(context.Background()); err != nil || st.Size() != 100 {
		t.Errorf("Stat() = %v, %v", st, err)
	}
	if got := src.Stats().Stats; got != 0 {
		t.Errorf("an open file's Stat counted as a source metadata call: %d", got)
	}
}

func TestSourceOpenMissing(t *testing.T) {
	root := writeSource(t, nil)
	src := newTestSource(t, root, 0)
	if src.Root() != root || src.Path("a/b") != filepath.Join(root, "a", "b") {
		t.Errorf("Root/Path = %q %q", src.Root(), src.Path("a/b"))
	}
	_, err := src.Open(context.Background(), "nope")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(nope) = %v, want ErrNotExist", err)
	}
	if st := src.Stats(); st.Reads != 0 || st.Bytes != 0 {
		t.Errorf("Stats() after a failed open = %+v", st)
	}
}

func TestSourceCopyToCanceled(t *testing.T) {
	src := newTestSource(t, writeSource(t, map[string][]byte{"f": pattern(100)}), 0)
	sf, err := src.Open(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, err := sf.CopyTo(ctx, &bytes.Buffer{}, make([]byte, 8), nil)
	if !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("CopyTo with a canceled context = %d, %v; want 0, context.Canceled", n, err)
	}
	if st := src.Stats(); st.Reads != 0 || st.Bytes != 0 {
		t.Errorf("a canceled copy read from the source: %+v", st)
	}
}

type failWriter struct{ after int }

var errWrite = errors.New("write failed")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errWrite
	}
	w.after--
	return len(p), nil
}

func TestSourceCopyToWriterError(t *testing.T) {
	src := newTestSource(t, writeSource(t, map[string][]byte{"f": pattern(100)}), 0)
	sf, err := src.Open(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	n, err := sf.CopyTo(context.Background(), &failWriter{after: 2}, make([]byte, 10), nil)
	if !errors.Is(err, errWrite) {
		t.Fatalf("CopyTo = %v, want the writer's error", err)
	}
	if n != 20 {
		t.Errorf("CopyTo reported %d bytes copied, want 20 (two chunks written)", n)
	}
	if got := src.Stats().Reads; got != 3 {
		t.Errorf("Reads = %d, want 3 (stop at the first failed write)", got)
	}
}

func TestSourceCopyToWritesIntoTier(t *testing.T) {
	data := pattern(10_000)
	src := newTestSource(t, writeSource(t, map[string][]byte{"x/y.bin": data}), 0)
	tr, err := tier.Open(tier.Options{Name: "test", Dir: filepath.Join(t.TempDir(), "tier"), Quota: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	sf, err := src.Open(context.Background(), "x/y.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	st, err := sf.Stat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Reserve(st.Size())
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tr.Create("x/y.bin", res)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if _, err := sf.CopyTo(context.Background(), tp, make([]byte, 1000), nil); err != nil {
		t.Fatal(err)
	}
	if err := tp.Install(st.Size()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(tr.Path("x/y.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("tier copy: %d bytes, %v", len(got), err)
	}
	if got, want := src.Stats(), (Stats{Opens: 1, Reads: 11, Bytes: 10_000}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestSourceBandwidthCapAppliesToCopies(t *testing.T) {
	// With a negligible rate the burst (1 MiB) and the read that spends
	// its last byte may be read; the copy then waits until its context
	// ends.
	data := pattern(2 << 20)
	src := newTestSource(t, writeSource(t, map[string][]byte{"f": data}), 1e-3)
	sf, err := src.Open(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	// The context ends shortly after the burst has been copied, however
	// long that took: without a cap the rest would be copied at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := func(off int64) {
		if off == 1<<20 {
			time.AfterFunc(20*time.Millisecond, cancel)
		}
	}
	var out bytes.Buffer
	n, err := sf.CopyTo(ctx, &out, make([]byte, 64<<10), progress)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("capped CopyTo = %d, %v; want it to wait past the burst until canceled", n, err)
	}
	if n != 1<<20+64<<10 || !bytes.Equal(out.Bytes(), data[:n]) {
		t.Errorf("capped CopyTo copied %d bytes, want the 1 MiB burst and the one read that spent it", n)
	}
	if got, want := src.Stats(), (Stats{Opens: 1, Reads: 17, Bytes: 1<<20 + 64<<10}); got != want {
		t.Errorf("Stats() = %+v, want %+v (a read that waits is not counted)", got, want)
	}
}

// The cap is charged with the bytes read, not the copy buffer's size: 100
// KB files copied through a 1 MiB buffer at 1 MB/s copy at 1 MB/s (the bug
// this replaces charged 1 MiB per read: one file a second).
func TestSourceBandwidthCapChargesTheBytesReadSoSmallFilesCopyAtTheCap(t *testing.T) {
	const (
		rate  = 1e6
		size  = 100_000
		files = 30 // 3 MB: 3 s at the cap
	)
	m := map[string][]byte{}
	for i := 0; i < files; i++ {
		m[fmt.Sprintf("f%02d", i)] = pattern(size)
	}
	src := newTestSource(t, writeSource(t, m), rate)
	// Spend the burst first: the rate is measured from an empty bucket.
	src.Limiter().Done(1<<20, 0)
	var reads, readBytes atomic.Int64
	src.Limiter().SetObserver(func(n int, took time.Duration) {
		reads.Add(1)
		readBytes.Add(int64(n))
	})
	// A liveness bound: the old charge would take 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	buf := make([]byte, 1<<20)
	start := time.Now()
	var total int64
	for i := 0; i < files; i++ {
		sf, err := src.Open(ctx, fmt.Sprintf("f%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		n, err := sf.CopyTo(ctx, io.Discard, buf, nil)
		sf.Close()
		if err != nil {
			t.Fatalf("copy %d: %v after %v (%d bytes)", i, err, time.Since(start), total)
		}
		total += n
	}
	took := time.Since(start)
	// Pay after reading: the first read is free (the bucket is empty, not
	// in debt), so the copy takes (total - one file) / rate.
	got := float64(total-size) / took.Seconds()
	if got < 0.9*rate || got > 1.1*rate {
		t.Fatalf("copied %d bytes in %v: %.0f B/s, want within 10%% of the %.0f B/s cap", total, took, got, float64(rate))
	}
	if reads.Load() != files || readBytes.Load() != total {
		t.Errorf("observer saw %d reads of %d bytes, want %d reads of %d", reads.Load(), readBytes.Load(), files, total)
	}
}

func TestLimiterZeroRateNeverBlocks(t *testing.T) {
	for _, rate := range []float64{0, -1, math.Inf(-1)} {
		l := NewLimiter(rate)
		// A limiter that waited would see the canceled context and fail.
		for i := 0; i < 3; i++ {
			l.Done(1<<40, 0)
			if err := l.Wait(canceledContext()); err != nil {
				t.Fatalf("NewLimiter(%v).Wait = %v, want nil", rate, err)
			}
		}
	}
}

func TestLimiterWaitsOnlyOnceTheBytesReadExceedTheBurst(t *testing.T) {
	l := NewLimiter(1e-3) // burst is the 1 MiB minimum
	for i := 0; i < 16; i++ {
		if err := l.Wait(canceledContext()); err != nil {
			t.Fatalf("Wait %d within the burst = %v, want nil without waiting", i, err)
		}
		l.Done(64<<10, 0)
	}
	// The burst is spent exactly, not overdrawn: one more read may go.
	if err := l.Wait(canceledContext()); err != nil {
		t.Fatalf("Wait with the burst spent exactly = %v, want nil", err)
	}
	l.Done(1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait in debt = %v, want context.DeadlineExceeded", err)
	}
	// Reads charged nothing (a failed read, EOF at once) cost nothing.
	l2 := NewLimiter(1e-3)
	for i := 0; i < 100; i++ {
		l2.Done(0, 0)
	}
	if err := l2.Wait(canceledContext()); err != nil {
		t.Fatalf("Wait after reads of 0 bytes = %v", err)
	}
}

func TestLimiterBurstIsQuarterSecondOfTraffic(t *testing.T) {
	const rate = 1 << 30 // burst: 256 MiB
	// The bucket never holds more than the burst, however long it idles:
	// reads of the burst and 1% more put it in debt.
	l := NewLimiter(rate)
	time.Sleep(10 * time.Millisecond)
	l.Done(rate/4+rate/100, 0)
	if err := l.Wait(canceledContext()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after reading the burst + 1%% = %v, want it to wait (context.Canceled)", err)
	}
	l = NewLimiter(rate)
	l.Done(rate/4, 0)
	if err := l.Wait(canceledContext()); err != nil {
		t.Fatalf("Wait after reading exactly the burst = %v, want nil", err)
	}
}

func TestLimiterConcurrentReadersShareTheCap(t *testing.T) {
	// Four readers of 100 KB at 1 MB/s for about 1 s: together they read
	// at most the burst, the rate times the time, and one read each that
	// was admitted before the debt showed.
	const rate, size, readers = 1e6, 100_000, 4
	l := NewLimiter(rate)
	l.Done(1<<20, 0) // start from an empty bucket
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.Wait(ctx) == nil {
				total.Add(size)
				l.Done(size, 0)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	if limit := rate*took + readers*size; float64(total.Load()) > limit {
		t.Fatalf("%d readers read %d bytes in %.2fs, over the cap's %.0f", readers, total.Load(), took, limit)
	}
}

// newTestSource opens a source over root with a read cap, closed at the
// end of the test.
func newTestSource(t *testing.T, root string, bytesPerSec float64) *Source {
	t.Helper()
	return openTestSource(t, Options{Root: root, Bandwidth: bytesPerSec})
}

func openTestSource(t *testing.T, o Options) *Source {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hanging is a source whose operations on the paths "hang" and "hang0" to
// "hang9" block until release: a source call that never returns, without
// FUSE.
type hanging struct {
	once    sync.Once
	release chan struct{}
}

func hangingSource(t *testing.T, timeout time.Duration, maxStuck int) (*Source, *hanging) {
	t.Helper()
	root := t.TempDir()
	for _, name := range []string{"hang", "hang0", "hang1", "hang2", "hang3", "hang4", "hang5", "hang6", "hang7", "hang8", "hang9"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := &hanging{release: make(chan struct{})}
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) })
	s := openTestSource(t, Options{Root: root, Timeout: timeout, MaxStuck: maxStuck,
		testHook: func(op, rel string) error {
			if strings.HasPrefix(rel, "hang") {
				<-h.release
			}
			return nil
		}})
	return s, h
}

// releaseFIFO lets every blocked call return.
func releaseFIFO(t *testing.T, h *hanging) {
	t.Helper()
	h.once.Do(func() { close(h.release) })
}

func TestSourceCallThatHangsFailsAtTheTimeoutAndIsCountedStuck(t *testing.T) {
	src, root := hangingSource(t, 200*time.Millisecond, 8)
	start := time.Now()
	_, err := src.Open(context.Background(), "hang")
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrSource) {
		t.Fatalf("open of a hanging file: %v, want ErrTimeout and ErrSource", err)
	}
	if took < 200*time.Millisecond {
		t.Fatalf("gave up after %v, before the 200ms timeout", took)
	}
	if st := src.Stats(); st.Timeouts != 1 || st.Stuck != 1 || st.Errors != 1 || !src.Hung() {
		t.Fatalf("after one timeout: %+v, Hung %v", st, src.Hung())
	}
	releaseFIFO(t, root)
	waitUntil(t, func() bool { return src.Stats().Stuck == 0 })
	if src.Hung() {
		t.Fatal("Hung() after the stuck call returned")
	}
}

func TestSourceFailsFastOnceMaxStuckCallsAreBlocked(t *testing.T) {
	src, root := hangingSource(t, 50*time.Millisecond, 2)
	for i := 0; i < 2; i++ {
		if _, err := src.Open(context.Background(), fmt.Sprintf("hang%d", i)); !errors.Is(err, ErrTimeout) {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	start := time.Now()
	_, err := src.Stat(context.Background(), "hang")
	if !errors.Is(err, ErrStuck) || !errors.Is(err, ErrSource) {
		t.Fatalf("with 2 calls stuck: %v, want ErrStuck", err)
	}
	if time.Since(start) > 40*time.Millisecond {
		t.Errorf("a fail-fast call took %v", time.Since(start))
	}
	releaseFIFO(t, root)
	waitUntil(t, func() bool { return src.Stats().Stuck == 0 })
	if _, err := src.Stat(context.Background(), "hang"); err != nil {
		t.Fatalf("after the stuck calls returned: %v", err)
	}
}

func TestSourceCallGivesUpWhenItsContextEnds(t *testing.T) {
	src, root := hangingSource(t, time.Minute, 8)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := src.Open(ctx, "hang")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrSource) {
		t.Fatalf("open with a canceled context: %v", err)
	}
	if st := src.Stats(); st.Stuck != 1 || st.Timeouts != 0 {
		t.Fatalf("after a cancel: %+v", st)
	}
	releaseFIFO(t, root)
	waitUntil(t, func() bool { return src.Stats().Stuck == 0 })
}

func TestSourceErrorsKeepTheUnderlyingErrorAndCountOnlyRealFailures(t *testing.T) {
	src := newTestSource(t, writeSource(t, map[string][]byte{"f": {1}}), 0)
	_, err := src.Stat(context.Background(), "missing")
	var se *Error
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrSource) || !errors.As(err, &se) || se.Op != "stat" || se.Path != "missing" {
		t.Fatalf("stat of a missing file: %#v", err)
	}
	// A path below a file names nothing: "does not exist", not ENOTDIR.
	_, err = src.Stat(context.Background(), "f/below-a-file")
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrSymlinkInPath) {
		t.Fatalf("stat below a file: %v", err)
	}
	src.o.testHook = func(op, rel string) error {
		if rel == "eio" {
			return syscall.EIO
		}
		return nil
	}
	if _, err = src.Stat(context.Background(), "eio"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("stat failing with EIO: %v", err)
	}
	if st := src.Stats(); st.Errors != 1 || st.Stats != 3 {
		t.Fatalf("counters: %+v (a missing file is not a source failure)", st)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSourceFailingLastsTheBackoffOrUntilACallSucceeds(t *testing.T) {
	root := writeSource(t, map[string][]byte{"f": {1}})
	src := openTestSource(t, Options{Root: root, ErrorBackoff: 200 * time.Millisecond,
		testHook: func(op, rel string) error {
			if rel == "eio" {
				return syscall.EIO
			}
			return nil
		}})
	ctx := context.Background()
	if src.Failing() {
		t.Fatal("a new source is failing")
	}
	src.Stat(ctx, "eio") // EIO: a failure
	if !src.Failing() {
		t.Fatal("not failing right after a failed call")
	}
	time.Sleep(250 * time.Millisecond)
	if src.Failing() {
		t.Fatal("still failing after the back-off")
	}
	src.Stat(ctx, "eio")
	if _, err := src.Stat(ctx, "f"); err != nil || src.Failing() {
		t.Fatalf("a call succeeded (%v) but the source is still failing", err)
	}
	src.Stat(ctx, "missing") // does not exist: an answer, not a failure
	if src.Failing() {
		t.Fatal("ENOENT counted as a failure")
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// One user's reads of a hung corner of the source use at most their share
// of the stuck-call budget: the next of theirs fails fast, and the calls
// of other users and of the daemon itself still go to the source.
func TestOneUserCannotTakeTheWholeStuckBudget(t *testing.T) {
	src, root := hangingSource(t, 50*time.Millisecond, 8) // per user: 2
	bob := WithUser(context.Background(), 1000)
	for i := 0; i < 2; i++ {
		if _, err := src.Open(bob, fmt.Sprintf("hang%d", i)); !errors.Is(err, ErrTimeout) {
			t.Fatalf("bob's open %d: %v, want a timeout", i, err)
		}
	}
	if _, err := src.Open(bob, "hang2"); !errors.Is(err, ErrStuck) {
		t.Fatalf("bob's third open with two of his calls stuck: %v, want ErrStuck", err)
	}
	alice := WithUser(context.Background(), 1001)
	for _, c := range []struct {
		who  string
		ctx  context.Context
		file string
	}{{"alice", alice, "hang3"}, {"root", WithUser(context.Background(), 0), "hang4"}, {"the daemon", context.Background(), "hang5"}} {
		if _, err := src.Open(c.ctx, c.file); !errors.Is(err, ErrTimeout) {
			t.Errorf("%s's open while bob has his share stuck: %v, want it tried (a timeout)", c.who, err)
		}
	}
	if st := src.Stats(); st.Stuck != 5 {
		t.Errorf("stuck %d, want 5 (bob 2, alice 1, root 1, the daemon 1)", st.Stuck)
	}
	releaseFIFO(t, root)
	waitUntil(t, func() bool { return src.Stats().Stuck == 0 })
	if _, err := src.Stat(bob, "hang"); err != nil {
		t.Fatalf("bob after his calls returned: %v", err)
	}
}

// A caller's deadline is its whole budget: an operation started with part
// of it used gets only the rest (a request that needs two operations of
// a hung source fails within one timeout); it counts as a timeout.
func TestACallersDeadlineShortensTheTimeout(t *testing.T) {
	src, root := hangingSource(t, time.Minute, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := src.Open(ctx, "hang")
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrSource) {
		t.Fatalf("open past the caller's deadline: %v, want ErrTimeout", err)
	}
	if took > 30*time.Second {
		t.Fatalf("the open waited %v: the source's own timeout, not the caller's deadline", took)
	}
	if st := src.Stats(); st.Timeouts != 1 || st.Stuck != 1 {
		t.Fatalf("after the deadline: %+v, want one timeout and one stuck call", st)
	}
	releaseFIFO(t, root)
	waitUntil(t, func() bool { return src.Stats().Stuck == 0 })
}

// No operation on a file starts while an earlier one on it is still
// stuck: it fails at once (ErrStuck), other files still go to the
// source, and once the stuck call returns the file is tried again.
func TestNoCallStartsBehindAStuckCallOnItsFile(t *testing.T) {
	src, root := hangingSource(t, 50*time.Millisecond, 8)
	if _, err := src.Open(context.Background(), "hang"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("first open: %v, want a timeout", err)
	}
	for _, op := range []func() error{
		func() error { _, err := src.Open(context.Background(), "hang"); return err },
		func() error { _, err := src.Stat(context.Background(), "hang"); return err },
	} {
		start := time.Now()
		if err := op(); !errors.Is(err, ErrStuck) || !strings.Contains(err.Error(), "earlier operation") {
			t.Fatalf("a call behind a stuck one: %v, want ErrStuck naming the earlier operation", err)
		}
		if time.Since(start) >= 50*time.Millisecond {
			t.Fatalf("a call behind a stuck one waited %v", time.Since(start))
		}
	}
	if _, err := src.Open(context.Background(), "hang1"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("another file: %v, want it tried (a timeout)", err)
	}
	if st := src.Stats(); st.Stuck != 2 {
		t.Fatalf("stuck %d, want 2", st.Stuck)
	}
	releaseFIFO(t, root)
	waitUntil(t, func() bool { return src.Stats().Stuck == 0 })
	if _, err := src.Stat(context.Background(), "hang"); err != nil {
		t.Fatalf("after the stuck call returned: %v", err)
	}
}
