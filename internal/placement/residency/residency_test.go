package residency

import (
	"sync"
	"testing"
	"unsafe"
)

// Each mark is set and cleared on its own, its setter reporting what it
// was, while the others change at the same time.
func TestMarksAreIndependent(t *testing.T) {
	var s State
	if s.NoSpace() || s.Validated() || s.Recheck() || s.CopyGen() != 0 {
		t.Fatal("the zero State knows something")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				s.SetValidated(true)
				s.SetValidated(false)
			}
		}()
	}
	for range 1000 {
		if s.SetNoSpace(true) {
			t.Fatal("SetNoSpace(true) says it was set")
		}
		if !s.NoSpace() || !s.SetNoSpace(false) || s.NoSpace() {
			t.Fatal("no-space mark lost while another mark changed")
		}
		if s.SetRecheck(true) || !s.Recheck() || !s.SetRecheck(false) {
			t.Fatal("recheck mark lost while another mark changed")
		}
	}
	wg.Wait()
	s.SetValidated(true)
	if !s.Validated() || s.NoSpace() || s.Recheck() {
		t.Errorf("marks mixed up: validated %v, nospace %v, recheck %v", s.Validated(), s.NoSpace(), s.Recheck())
	}
	s.BumpCopyGen()
	if s.CopyGen() != 1 {
		t.Errorf("copy generation %d after one bump", s.CopyGen())
	}
	// One State is in every catalog entry.
	if n := unsafe.Sizeof(State{}); n > 24 {
		t.Errorf("State is %d bytes, want at most 24", n)
	}
}
