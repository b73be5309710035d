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
	// The copy generation shares the marks' word: its bumps neither lose
	// a mark nor are lost to one.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 1000 {
			s.BumpCopyGen()
		}
	}()
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
	if s.CopyGen() != 1001 {
		t.Errorf("copy generation %d after 1,001 bumps", s.CopyGen())
	}
	if !s.Validated() || s.NoSpace() || s.Recheck() {
		t.Error("a bump of the copy generation changed a mark")
	}
	// One State is in every catalog entry.
	if n := unsafe.Sizeof(State{}); n > 4 {
		t.Errorf("State is %d bytes, want at most 4", n)
	}
}

// The copy generation wraps within its bits and leaves the marks and the
// holder's bits alone.
func TestCopyGenWrapsWithoutTouchingTheMarks(t *testing.T) {
	var s State
	s.SetRecheck(true)
	s.Word().Or(1<<HolderBits - 1)
	s.word.Add(uint32(1<<(32-genShift)-1) << genShift) // the last generation
	if got := s.CopyGen(); got != 1<<(32-genShift)-1 {
		t.Fatalf("copy generation %d, want %d", got, 1<<(32-genShift)-1)
	}
	s.BumpCopyGen()
	if s.CopyGen() != 0 || !s.Recheck() || s.Validated() || s.NoSpace() || s.Word().Load()&(1<<HolderBits-1) != 1<<HolderBits-1 {
		t.Errorf("after the wrap: generation %d, recheck %v, validated %v, nospace %v, word %#x",
			s.CopyGen(), s.Recheck(), s.Validated(), s.NoSpace(), s.Word().Load())
	}
}

// The holder's bits and the State's share the word: a holder changing its
// bits (a compare-and-swap of its low byte, as the catalog sets a tier,
// and an Or) while the marks and the generation change loses nothing of
// either.
func TestTheHoldersBitsAndTheStatesShareTheWord(t *testing.T) {
	var s State
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 2000 {
			s.SetValidated(true)
			s.BumpCopyGen()
			s.SetValidated(false)
		}
	}()
	w := s.Word()
	for i := range 2000 {
		for {
			old := w.Load()
			if w.CompareAndSwap(old, old&^0xff|uint32(i&0xff)) {
				break
			}
		}
		if got := w.Load() & 0xff; got != uint32(i&0xff) {
			t.Fatalf("holder's byte %d, want %d", got, i&0xff)
		}
	}
	w.Or(1 << 8)
	wg.Wait()
	if got := w.Load() & (1<<HolderBits - 1); got != 1<<8|uint32(1999&0xff) {
		t.Errorf("holder's bits %#x, want %#x", got, 1<<8|1999&0xff)
	}
	if s.CopyGen() != 2000 || s.Validated() || s.NoSpace() || s.Recheck() {
		t.Errorf("generation %d (want 2000), marks %v %v %v", s.CopyGen(), s.Validated(), s.NoSpace(), s.Recheck())
	}
}
