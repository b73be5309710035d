// Package testenv is how a test that cannot run on this machine says so:
// it skips, or, when EPOCHFS_REQUIRE_FUSE=1 (make ci sets it), fails. In
// CI every test runs: a missing /dev/fuse, PyTorch, Redis, Slurm tool,
// user, photo set or kernel feature is a failure there, never a silent
// skip. Tests skip only through Skip (scripts/check-skips.sh enforces it).
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Var is the variable that turns every skip into a failure.
const Var = "EPOCHFS_REQUIRE_FUSE"

// Required reports whether every test must run (Var=1).
func Required() bool { return os.Getenv(Var) == "1" }

// Skip skips t with the reason, or fails it when Required.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s, and %s=1: every test must run", msg, Var)
	}
	t.Skip(msg)
}
