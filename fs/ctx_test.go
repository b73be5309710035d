package fs

import (
	"os"
	"os/exec"
	"testing"
)

func TestFatalInStatusSeesSIGKILLInTheThreadsOrTheProcesssPendingSet(t *testing.T) {
	for _, tc := range []struct {
		status string
		fatal  bool
	}{
		{"Name:\tcat\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n", false},
		{"SigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", true},
		{"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n", true},
		// SIGUSR1 (10), SIGCHLD (17) and SIGURG (23): handled, not fatal.
		{"SigPnd:\t0000000000410200\nShdPnd:\t0000000000010000\n", false},
		{"SigPnd:\tnot hex\n", false},
		{"", false},
	} {
		if got := fatalInStatus([]byte(tc.status)); got != tc.fatal {
			t.Errorf("fatalInStatus(%q) = %v, want %v", tc.status, got, tc.fatal)
		}
	}
}

func TestFatalPendingIsFalseForALiveThreadAndTrueForAGoneOne(t *testing.T) {
	if fatalPending(uint32(os.Getpid())) {
		t.Error("this process counts as being killed")
	}
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if !fatalPending(uint32(c.Process.Pid)) {
		t.Errorf("reaped process %d does not count as gone", c.Process.Pid)
	}
}
