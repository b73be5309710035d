package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipFailsWhenEveryTestMustRun runs a skipping test in a child, with
// and without the variable: it skips without, fails with.
func TestSkipFailsWhenEveryTestMustRun(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Skip(t, "no %s here", "widget")
		return
	}
	for _, tc := range []struct {
		require string
		fail    bool
	}{{"0", false}, {"1", true}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipFailsWhenEveryTestMustRun$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", Var+"="+tc.require)
		out, err := cmd.CombinedOutput()
		failed := err != nil
		if failed != tc.fail || !strings.Contains(string(out), "no widget here") {
			t.Errorf("%s=%s: failed=%v, want %v: %s", Var, tc.require, failed, tc.fail, out)
		}
		if !tc.fail && !strings.Contains(string(out), "SKIP") {
			t.Errorf("%s=%s: not skipped: %s", Var, tc.require, out)
		}
	}
}
