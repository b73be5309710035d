package placement

import (
	"context"
	"errors"
	"os"
	"testing"
)

func TestWarmupAllMakesEverythingResident(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	if w := e.p.warmups.progressAll(); w.Files != 0 || w.Pct != 0 {
		t.Errorf("progress before any warmup: %+v; want nothing queued at 0%%", w)
	}
	e.p.warmups.queueAll()
	var last float64
	waitFor(t, "WarmupAll to finish", func() bool {
		w := e.p.warmups.progressAll()
		if w.Pct < last {
			t.Errorf("warmup progress went back from %v to %v", last, w.Pct)
		}
		last = w.Pct
		if w.Done < w.Files && w.Pct >= 100 {
			t.Errorf("100%% reported with %d of %d files done", w.Done, w.Files)
		}
		return w.Done == w.Files
	})
	e.waitResident()
	w := e.p.warmups.progressAll()
	want := WarmupProgress{Files: int64(len(d)), Done: int64(len(d)), BytesDone: d.Bytes(), BytesTotal: d.Bytes(), Pct: 100}
	if w != want {
		t.Errorf("progress %+v, want %+v", w, want)
	}
	if f, b := e.p.residency(); f != int64(len(d)) || b != d.Bytes() {
		t.Errorf("Residency %d %d", f, b)
	}
	e.checkAccounting()
	if st := e.source.Stats(); st.Opens != int64(len(d)) || st.Bytes != d.Bytes() {
		t.Errorf("warmup took %+v from the source, want each file once", st)
	}
	// Warming a warm dataset copies nothing.
	e.p.warmups.queueAll()
	if st := e.p.Stats(); st.Done != int64(len(d)) {
		t.Errorf("second WarmupAll: %+v", st)
	}
}

func TestWarmupOfPathsQueuesOnlyThem(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	if w := e.p.warmups.progressAll(); w.Files != 0 || w.Pct != 0 {
		t.Errorf("progress before any request: %+v; want nothing queued at 0%%", w)
	}
	files, err := e.p.resolvePaths([]string{"train/a", " /val/mib+1 ", "train/a/page"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Fatalf("resolved %d files, want 5 (3 in train/a, val/mib+1, train/a/page again)", len(files))
	}
	e.p.warmups.queue(files)
	e.p.warmups.queue(files) // duplicates are not counted twice
	var total int64
	for _, p := range []string{"train/a/page-1", "train/a/page", "train/a/page+1", "val/mib+1"} {
		total += int64(len(d[p]))
	}
	waitFor(t, "warmup of the listed paths", func() bool { return e.p.warmups.progressAll().Pct == 100 })
	w := e.p.warmups.progressAll()
	if w.Files != 4 || w.Done != 4 || w.BytesTotal != total {
		t.Errorf("progress %+v, want 4 files of %d bytes", w, total)
	}
	waitFor(t, "queue to drain", func() bool { return e.p.Stats().Queued == 0 })
	if n, b := e.p.residency(); n != 4 || b != total {
		t.Errorf("%d files (%d bytes) resident, want only the 4 listed", n, b)
	}
}

func TestResolvePathsWithABadPathQueuesNothing(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	for _, paths := range [][]string{{"train", "no/such/file"}, {"nope"}, {"val/mib/child"}} {
		files, err := e.p.resolvePaths(paths)
		if !errors.Is(err, ErrNoEntry) || files != nil {
			t.Errorf("ResolvePaths(%q) = %d files, %v; want ErrNoEntry", paths, len(files), err)
		}
	}
	if st := e.p.Stats(); st != (Stats{}) {
		t.Errorf("stats after bad ResolvePaths: %+v", st)
	}
	if w := e.p.warmups.progressAll(); w.Files != 0 {
		t.Errorf("warmup set after bad ResolvePaths: %+v", w)
	}
	if st := e.source.Stats(); st.Opens != 0 {
		t.Errorf("source opened %d times", st.Opens)
	}
	// "." and "/" name the whole dataset.
	files, err := e.p.resolvePaths([]string{"/"})
	if err != nil || len(files) != len(d) {
		t.Errorf("ResolvePaths(/) = %d files, %v", len(files), err)
	}
}

func TestPctNeverRoundsUpToFull(t *testing.T) {
	if p := pct(999_999, 1_000_000, 9, 10); p >= 100 {
		t.Errorf("pct = %v with a file missing", p)
	}
	if p := pct(0, 0, 0, 3); p != 0 {
		t.Errorf("pct of three empty files none done = %v", p)
	}
	if p := pct(0, 0, 3, 3); p != 100 {
		t.Errorf("pct of three empty files all done = %v", p)
	}
	if p := pct(10, 10, 2, 3); p >= 100 {
		t.Errorf("pct = %v with an empty file missing", p)
	}
}

func BenchmarkReadResident(b *testing.B) {
	const size = 110_000
	d := dataset{"img.jpg": content("img.jpg", size)}
	e := newEnv(b, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	ctx := context.Background()
	buf := make([]byte, size)
	b.Run("placement.Reader", func(b *testing.B) {
		r, err := e.p.Open(ctx, e.entry("img.jpg"))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		b.SetBytes(size)
		for b.Loop() {
			if n, err := r.ReadAt(ctx, buf, 0); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("os.File", func(b *testing.B) {
		f, err := os.Open(e.tiers[0].Path("img.jpg"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(size)
		for b.Loop() {
			if n, err := f.ReadAt(buf, 0); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
	})
}
