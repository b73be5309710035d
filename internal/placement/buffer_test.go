package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/tier"
)

// bufferDataset is n files of 100 000 bytes.
func bufferDataset(n int) dataset {
	d := dataset{}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("s/%03d", i)
		d[p] = content(p, 100_000)
	}
	return d
}

// noTier marks every file as fitting no tier, as a full tier would.
func noTier(e *env) []*catalog.Entry {
	var out []*catalog.Entry
	e.cat.Root().Files(func(en *catalog.Entry) bool {
		en.Residency().SetNoSpace(true)
		out = append(out, en)
		return true
	})
	return out
}

func fetchWait(p *Placer, e *catalog.Entry) error {
	ch := make(chan error, 1)
	p.Buffer().Fetch(e, func(err error) { ch <- err })
	return <-ch
}

func readWhole(t *testing.T, p *Placer, e *catalog.Entry) []byte {
	t.Helper()
	r, err := p.Open(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, e.Attr().Size+10)
	n, err := r.ReadAt(context.Background(), buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestBufferOneSourceFetchPerFileUnderConcurrentFetchAndOpen(t *testing.T) {
	data := bufferDataset(20)
	e := newEnv(t, data, []tier.Options{{Name: "mem", Quota: 1}}, Options{BufferBytes: 10 << 20})
	files := noTier(e)
	var hooked sync.Map
	e.p.Buffer().SetDemandHook(&DemandHook{Wanted: func(*catalog.Entry) bool { return true }, Keep: func(en *catalog.Entry) bool { hooked.Store(en, true); return true }})
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := 0; g < 8; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for _, f := range files {
				if err := fetchWait(e.p, f); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := len(files) - 1; i >= 0; i-- {
				f := files[i]
				r, err := e.p.Open(context.Background(), f)
				if err != nil {
					errs <- err
					continue
				}
				buf := make([]byte, f.Attr().Size)
				n, err := r.ReadAt(context.Background(), buf, 0)
				r.Close()
				if err != nil || string(buf[:n]) != string(data[f.Path()]) {
					errs <- fmt.Errorf("%s: %d bytes differ from the source (err %v)", f.Path(), n, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := e.source.Stats()
	if st.Opens != int64(len(files)) || st.Bytes != data.Bytes() {
		t.Fatalf("source opens %d bytes %d, want one whole read per file: %d, %d", st.Opens, st.Bytes, len(files), data.Bytes())
	}
	if bs := e.p.Buffer().Stats(); bs.Fetches != int64(len(files)) || bs.Entries != int64(len(files)) {
		t.Fatalf("buffer stats %+v, want %d fetches and entries", bs, len(files))
	}
}

func TestBufferBudgetIsRespectedAndReleasedEntriesMakeRoom(t *testing.T) {
	data := bufferDataset(6)
	e := newEnv(t, data, []tier.Options{{Name: "mem", Quota: 1}}, Options{BufferBytes: 350_000})
	files := noTier(e)
	for i, f := range files[:3] {
		if err := fetchWait(e.p, f); err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
	}
	if err := fetchWait(e.p, files[3]); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("fourth fetch over the budget: %v, want ErrBufferFull", err)
	}
	if bs := e.p.Buffer().Stats(); bs.Bytes > bs.Budget || bs.Entries != 3 {
		t.Fatalf("buffer %+v: over budget or wrong entries", bs)
	}
	// A released entry keeps serving readers until its room is needed.
	e.p.Buffer().Release(files[0])
	if got := readWhole(t, e.p, files[0]); string(got) != string(data[files[0].Path()]) {
		t.Fatal("released entry read differs")
	}
	if err := fetchWait(e.p, files[3]); err != nil {
		t.Fatalf("fetch after a release: %v", err)
	}
	if e.p.buffer.has(files[0]) || !e.p.buffer.has(files[3]) {
		t.Fatal("the released entry should have made room for the new one")
	}
	if bs := e.p.Buffer().Stats(); bs.Bytes > bs.Budget {
		t.Fatalf("buffer %+v over budget", bs)
	}
	before := e.source.Stats().Bytes
	for _, f := range files[1:4] {
		if got := readWhole(t, e.p, f); string(got) != string(data[f.Path()]) {
			t.Fatalf("%s: buffered read differs", f.Path())
		}
	}
	if d := e.source.Stats().Bytes - before; d != 0 {
		t.Fatalf("reads of buffered files took %d bytes from the source", d)
	}
}

func TestBufferDropFreesMemoryOnlyWhenNoReaderHoldsIt(t *testing.T) {
	data := bufferDataset(2)
	e := newEnv(t, data, []tier.Options{{Name: "mem", Quota: 1}}, Options{BufferBytes: 1 << 20})
	files := noTier(e)
	f := files[0]
	if err := fetchWait(e.p, f); err != nil {
		t.Fatal(err)
	}
	r, err := e.p.Open(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	e.p.Buffer().Drop(f)
	if e.p.buffer.has(f) {
		t.Fatal("dropped entry still listed")
	}
	if bs := e.p.Buffer().Stats(); bs.Bytes != f.Attr().Size {
		t.Fatalf("bytes %d after Drop with a reader, want %d still held", bs.Bytes, f.Attr().Size)
	}
	buf := make([]byte, f.Attr().Size)
	n, err := r.ReadAt(context.Background(), buf, 0)
	if err != nil || string(buf[:n]) != string(data[f.Path()]) {
		t.Fatalf("read after Drop: %d bytes, %v", n, err)
	}
	srcBefore := e.source.Stats().Bytes
	r.Close()
	if bs := e.p.Buffer().Stats(); bs.Bytes != 0 {
		t.Fatalf("bytes %d after the last reader closed, want 0", bs.Bytes)
	}
	if e.source.Stats().Bytes != srcBefore {
		t.Fatal("the held reader went to the source")
	}
}

func TestDemandReadOfAFileThatFitsNoTierAsksTheHook(t *testing.T) {
	data := bufferDataset(5)
	e := newEnv(t, data, []tier.Options{{Name: "mem", Quota: 1}}, Options{BufferBytes: 450_000})
	files := noTier(e)
	var asked atomic.Int32
	e.p.Buffer().SetDemandHook(&DemandHook{Wanted: func(en *catalog.Entry) bool { return en != files[4] }, Keep: func(en *catalog.Entry) bool { asked.Add(1); return en == files[0] }})
	for _, f := range files[:2] {
		if got := readWhole(t, e.p, f); string(got) != string(data[f.Path()]) {
			t.Fatalf("%s differs", f.Path())
		}
	}
	waitFor(t, "the demand fetches to finish", func() bool { return asked.Load() == 2 && e.p.Buffer().Stats().Released == 1 })
	// The file not kept is released: its room goes to the next fetch,
	// the kept one stays.
	for _, f := range files[2:] {
		if err := fetchWait(e.p, f); err != nil {
			t.Fatalf("fetch %s: %v", f.Path(), err)
		}
	}
	if !e.p.buffer.has(files[0]) || e.p.buffer.has(files[1]) {
		t.Fatalf("kept file buffered %v, released file buffered %v; want true, false", e.p.buffer.has(files[0]), e.p.buffer.has(files[1]))
	}
	if bs := e.p.Buffer().Stats(); bs.Bytes > bs.Budget || bs.Entries != 4 {
		t.Fatalf("buffer %+v", bs)
	}
}

func TestDemandReadOfAnUnwantedFileBypassesTheBuffer(t *testing.T) {
	data := bufferDataset(2)
	e := newEnv(t, data, []tier.Options{{Name: "mem", Quota: 1}}, Options{BufferBytes: 450_000})
	files := noTier(e)
	var kept atomic.Int32
	e.p.Buffer().SetDemandHook(&DemandHook{Wanted: func(*catalog.Entry) bool { return false }, Keep: func(*catalog.Entry) bool { kept.Add(1); return true }})
	for i := 0; i < 2; i++ {
		if got := readWhole(t, e.p, files[0]); string(got) != string(data[files[0].Path()]) {
			t.Fatalf("%s differs", files[0].Path())
		}
	}
	if bs := e.p.Buffer().Stats(); bs.Fetches != 0 || bs.Entries != 0 || bs.Hits != 0 || kept.Load() != 0 {
		t.Fatalf("an unwanted demand read used the buffer: %+v, keep asked %d times", bs, kept.Load())
	}
	if got, want := e.source.Stats().Bytes, 2*int64(len(data[files[0].Path()])); got != want {
		t.Fatalf("source bytes %d, want %d (each read from the source)", got, want)
	}
}
