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

// The copy generation wraps within its bits and leaves the marks alone.
func TestCopyGenWrapsWithoutTouchingTheMarks(t *testing.T) {
	var s State
	s.SetRecheck(true)
	s.word.Add(uint32(1<<(32-markBits)-1) << markBits) // the last generation
	if got := s.CopyGen(); got != 1<<(32-markBits)-1 {
		t.Fatalf("copy generation %d, want %d", got, 1<<(32-markBits)-1)
	}
	s.BumpCopyGen()
	if s.CopyGen() != 0 || !s.Recheck() || s.Validated() || s.NoSpace() {
		t.Errorf("after the wrap: generation %d, recheck %v, validated %v, nospace %v",
			s.CopyGen(), s.Recheck(), s.Validated(), s.NoSpace())
	}
}
