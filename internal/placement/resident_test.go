package placement

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/epochfs/epochfs/internal/tier"
)

func smallDataset(n, size int) dataset {
	d := dataset{}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("c%d/f%03d", i%3, i)
		d[p] = content(p, size)
	}
	return d
}

// placedEnv is an env whose files are all resident.
func placedEnv(t *testing.T, d dataset, popts Options) *env {
	t.Helper()
	e := newEnv(t, d, []tier.Options{{Name: "t0", Quota: 1 << 30}}, popts)
	e.readAllFiles()
	e.waitResident()
	return e
}

func openRead(t *testing.T, e *env, p string) *Reader {
	t.Helper()
	r, err := e.p.Open(context.Background(), e.entry(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := readCheck(context.Background(), r, e.data[p], readPattern{buf: 1 << 20}); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return r
}

func TestRepeatOpensOfAResidentFileShareOneDescriptor(t *testing.T) {
	e := placedEnv(t, smallDataset(3, 5000), Options{})
	p := e.data.Paths()[0]
	r := openRead(t, e, p)
	first := r.Resident()
	if first == nil {
		t.Fatal("a resident file's reader has no Resident")
	}
	r.Close()
	before := e.p.ResidentStats()
	for i := 0; i < 50; i++ {
		r := openRead(t, e, p)
		if r.Resident() != first {
			t.Fatalf("open %d got another descriptor of the same copy", i+1)
		}
		r.Close()
	}
	after := e.p.ResidentStats()
	if after.Misses != before.Misses || after.Hits-before.Hits != 50 {
		t.Errorf("50 reopens: %d misses and %d hits, want 0 and 50", after.Misses-before.Misses, after.Hits-before.Hits)
	}
}

func TestKeptDescriptorsNeverExceedTheBudgetAndInUseOnesAreNotReleased(t *testing.T) {
	const budget = 3
	e := placedEnv(t, smallDataset(10, 3000), Options{OpenFiles: budget})
	// Nothing is attached here: every kept copy holds its descriptor.
	paths := e.data.Paths()
	for _, p := range paths {
		openRead(t, e, p).Close()
	}
	if st := e.p.ResidentStats(); st.Kept > budget || st.Open > budget || st.OpenBudget != budget {
		t.Fatalf("after opening 10 files one at a time: %+v, budget %d", st, budget)
	}
	// Hold budget files open: none of them may be released, so the next
	// file's descriptor is not kept.
	var held []*Reader
	for _, p := range paths[:budget] {
		held = append(held, openRead(t, e, p))
	}
	extra := openRead(t, e, paths[budget])
	for i, r := range held {
		if again := openRead(t, e, paths[i]); again.Resident() != r.Resident() {
			t.Errorf("%s: its descriptor in use was released", paths[i])
		} else {
			again.Close()
		}
	}
	st := e.p.ResidentStats()
	if st.Open > budget+1 || st.NotKept == 0 {
		t.Errorf("with %d files held: %+v, want at most %d descriptors open and the extra one not kept", budget, st, budget+1)
	}
	extra.Close()
	for _, r := range held {
		r.Close()
	}
	if st := e.p.ResidentStats(); st.Open != st.Kept || st.Kept > budget {
		t.Errorf("every reader closed: %d descriptors open, %d kept, budget %d", st.Open, st.Kept, budget)
	}
	e.p.Close()
	if st := e.p.ResidentStats(); st.Open != 0 || st.Kept != 0 {
		t.Errorf("after Close: %d descriptors open, %d kept", st.Open, st.Kept)
	}
}

// A copy dropped and placed again in the same version (as a verify does
// with a corrupt copy) is read from the new file, not from the old one's
// kept descriptor.
func TestADroppedCopyIsNeverServedFromItsKeptDescriptor(t *testing.T) {
	e := placedEnv(t, smallDataset(2, 70_000), Options{})
	p := e.data.Paths()[0]
	en := e.entry(p)
	openRead(t, e, p).Close() // its descriptor is kept now
	i := en.Tier()
	// Corrupt the copy in place: the kept descriptor sees it too.
	if err := os.WriteFile(e.tiers[i].Path(p), bytes.Repeat([]byte{'x'}, 70_000), 0o600); err != nil {
		t.Fatal(err)
	}
	e.p.op.dropCopy(en, i)
	if !e.p.cp.enqueue(en) {
		t.Fatal("not queued")
	}
	e.waitResident()
	r := openRead(t, e, p) // fails on the corrupt bytes
	r.Close()
}

func TestConcurrentOpensDropsAndEvictionsReadTheRightBytes(t *testing.T) {
	e := placedEnv(t, smallDataset(12, 9000), Options{OpenFiles: 4})
	paths := e.data.Paths()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < 300; i++ {
				p := paths[rng.IntN(len(paths))]
				en := e.entry(p)
				if w == 0 && i%10 == 0 {
					if t := en.Tier(); t >= 0 {
						e.p.op.dropCopy(en, t)
						e.p.cp.enqueue(en)
					}
					continue
				}
				r, err := e.p.Open(ctx, en)
				if err != nil {
					e.t.Errorf("open %s: %v", p, err)
					return
				}
				if err := readCheck(ctx, r, e.data[p], readPattern{buf: 4096}); err != nil {
					e.t.Errorf("%s: %v", p, err)
				}
				r.Close()
			}
		}()
	}
	wg.Wait()
	e.waitResident()
	if st := e.p.ResidentStats(); st.Open != st.Kept || st.Kept > 4 {
		t.Errorf("every reader closed: %+v", st)
	}
	e.p.Close()
	if st := e.p.ResidentStats(); st.Open != 0 {
		t.Errorf("after Close: %d descriptors open", st.Open)
	}
}

// A copy with a registration attached keeps no descriptor once its
// readers are done (the registration holds the file); a reader that needs
// one opens it again; the detach runs once, when the copy is released.
func TestAttachedCopiesKeepNoDescriptor(t *testing.T) {
	e := placedEnv(t, smallDataset(10, 3000), Options{OpenFiles: 2, KeptCopies: 5})
	var mu sync.Mutex
	attached, detached := 0, 0
	attach := func(fd int) (*Registration, func(), error) {
		mu.Lock()
		attached++
		mu.Unlock()
		return &Registration{ID: int32(fd)}, func() { mu.Lock(); detached++; mu.Unlock() }, nil
	}
	paths := e.data.Paths()
	for _, p := range paths {
		r, err := e.p.Open(context.Background(), e.entry(p))
		if err != nil {
			t.Fatal(err)
		}
		res := r.Resident()
		fd, ok, err := res.Lend()
		if err != nil || !ok {
			t.Fatalf("Lend: %v %v", ok, err)
		}
		reg, detach, _ := attach(fd)
		if kept := res.Keep(reg, detach); kept != reg {
			t.Fatalf("Keep kept %v, want %v", kept, reg)
		}
		if fd, ok, err := res.Lend(); ok || err != nil || fd != -1 {
			t.Fatalf("Lend after Keep: %d %v %v, want none", fd, ok, err)
		}
		r.Close()
	}
	st := e.p.ResidentStats()
	if st.Open != 0 || st.Kept != 5 {
		t.Fatalf("10 attached copies through a budget of 5: %+v, want 5 kept and no descriptor open", st)
	}
	mu.Lock()
	if attached != 10 || detached != 5 {
		t.Errorf("attached %d, detached %d; want 10 and 5 (the copies the budget released)", attached, detached)
	}
	mu.Unlock()
	// A kept copy's reader reads: the descriptor is opened again for it
	// and closed after.
	last := paths[len(paths)-1]
	r := openRead(t, e, last)
	if e.p.ResidentStats().Hits == 0 || e.p.ResidentStats().Reopens != 1 || e.p.ResidentStats().Open != 1 {
		t.Errorf("a read of a kept copy: %+v, want a hit, one reopen and one descriptor", e.p.ResidentStats())
	}
	r.Close()
	if n := e.p.ResidentStats().Open; n != 0 {
		t.Errorf("%d descriptors open after the reader closed", n)
	}
	e.p.Close()
	mu.Lock()
	if detached != 10 {
		t.Errorf("after Close %d of 10 detached", detached)
	}
	mu.Unlock()
}
