package mount

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// waitNoHandles waits until the daemon has served the RELEASE of every
// handle of a dataset file (the kernel sends RELEASE in the background
// after close(2) returns). The deadline is a liveness bound.
func (e *env) waitNoHandles() {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := e.status()
		if st["handles_passthrough"] == "0" && st["handles_cached"] == "0" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("handles still open after 30s: %s passthrough, %s cached", st["handles_passthrough"], st["handles_cached"])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readPass reads every file whole through the mount with 8 readers in a
// random order, and checks the bytes.
func readPass(t *testing.T, src, mnt string, paths []string, seed uint64) {
	t.Helper()
	order := append([]string(nil), paths...)
	rand.New(rand.NewPCG(seed, 1)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	work := make(chan string)
	errs := make(chan error, len(order))
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				want, err := os.ReadFile(filepath.Join(src, p))
				if err != nil {
					errs <- err
					continue
				}
				got, err := os.ReadFile(filepath.Join(mnt, p))
				if err != nil {
					errs <- err
				} else if !bytes.Equal(got, want) {
					errs <- &os.PathError{Op: "compare", Path: p, Err: os.ErrInvalid}
				}
			}
		}()
	}
	for _, p := range order {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// With the default configuration (validate = "once") the first epoch opens
// each file on the source once, and that open is its check (no lstat);
// later epochs send the source nothing at all.
func TestDefaultConfigOpensEachFileOnceThenNeverAgain(t *testing.T) {
	src, paths := makeSamples(t, 200, 20<<10)
	e := newEnv(t, src, 1<<30)
	e.mount() // e.opts.validate is the zero value: the default
	if v := e.status()["validate"]; v != "once" {
		t.Fatalf("default validate = %q, want once", v)
	}
	readPass(t, src, e.mnt, paths, 1)
	e.settle()
	if got := e.num("source_stats"); got != 0 {
		t.Errorf("first pass: %d source stats for %d files, want none", got, len(paths))
	}
	if got := e.num("source_opens"); got != int64(len(paths)) {
		t.Errorf("first pass: %d source opens for %d files, want one per file", got, len(paths))
	}
	if r, n := e.num("files_resident"), e.num("files_total"); r != n {
		t.Fatalf("after the first pass %d of %d files resident", r, n)
	}
	for pass := 2; pass <= 3; pass++ {
		before, opens := e.num("source_stats"), e.num("source_opens")
		readPass(t, src, e.mnt, paths, uint64(pass))
		if got := e.num("source_stats") - before; got != 0 {
			t.Errorf("pass %d: %d source stats, want 0", pass, got)
		}
		if got := e.num("source_opens") - opens; got != 0 {
			t.Errorf("pass %d: %d source opens, want 0", pass, got)
		}
	}
}

// A resident file's descriptor and its passthrough registration are kept
// between opens: 100 opens register the backing file once and open the tier
// file once.
func TestHundredOpensOfAResidentFileRegisterItsBackingOnce(t *testing.T) {
	src, _ := makeTree(t, 1<<20)
	e := newEnv(t, src, 1<<30)
	e.mount()
	requirePassthrough(t, e)
	rel := "class1/img001.jpg"
	p := filepath.Join(e.mnt, rel)
	want, _ := os.ReadFile(filepath.Join(src, rel))
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	e.settle()
	e.waitNoHandles()
	if tierOf(t, p) == "source" {
		t.Fatal("file not placed")
	}
	regs, misses := e.num("passthrough_registrations"), e.num("kept_misses")
	for i := 0; i < 100; i++ {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("open %d: %d bytes, %v", i+1, len(got), err)
		}
	}
	if got := e.num("passthrough_registrations") - regs; got != 1 {
		t.Errorf("100 opens registered the backing file %d times, want 1", got)
	}
	if got := e.num("kept_misses") - misses; got != 1 {
		t.Errorf("100 opens opened the tier file %d times, want 1", got)
	}
	if got := e.num("kept_hits"); got < 99 {
		t.Errorf("kept_hits = %d after 100 opens, want at least 99", got)
	}
	if got := e.num("passthrough_backings"); got != 1 {
		t.Errorf("passthrough_backings = %d, want 1 (kept after the last close)", got)
	}
	if got := e.num("tier_fds"); got != 0 {
		t.Errorf("tier_fds = %d with the file closed: the registration holds the file, no descriptor is needed", got)
	}
}

// The budgets of kept copies and of tier descriptors hold, the
// registrations of copies released are dropped with them, and every file
// still reads correctly after its copy was released and opened again: in
// passthrough mode (kept copies hold registrations, not descriptors) and in
// cached mode (they hold descriptors).
func TestKeptCopiesStayWithinTheirBudgets(t *testing.T) {
	for _, mode := range []string{"passthrough", "cached"} {
		t.Run(mode, func(t *testing.T) {
			src, paths := makeSamples(t, 40, 8<<10)
			e := newEnv(t, src, 1<<30)
			e.opts.openFiles, e.opts.keptCopies = 5, 7
			e.opts.noPassthrough = mode == "cached"
			e.mount()
			if mode == "passthrough" {
				requirePassthrough(t, e)
			}
			readPass(t, src, e.mnt, paths, 1)
			e.settle()
			e.waitNoHandles()
			for pass := 2; pass <= 3; pass++ {
				readPass(t, src, e.mnt, paths, uint64(pass))
				e.waitNoHandles()
				if kept := e.num("kept_copies"); kept > 7 {
					t.Errorf("pass %d: %d copies kept with a budget of 7", pass, kept)
				}
				if open := e.num("tier_fds"); open > 5 {
					t.Errorf("pass %d: %d tier descriptors open with no file open and a budget of 5", pass, open)
				}
				if b := e.num("passthrough_backings"); b > 7 {
					t.Errorf("pass %d: %d backing registrations held with a budget of 7 kept copies", pass, b)
				}
			}
			if e.num("kept_released") == 0 {
				t.Error("40 files through budgets of 5 and 7, yet no copy was released")
			}
			if mode == "passthrough" {
				if n := e.num("kept_copies"); n != 7 {
					t.Errorf("passthrough: %d copies kept, want the budget of 7 (registrations need no descriptor)", n)
				}
				if n := e.num("passthrough_backings"); n != e.num("kept_copies") {
					t.Errorf("%d registrations held for %d kept copies", n, e.num("kept_copies"))
				}
			}
		})
	}
}
