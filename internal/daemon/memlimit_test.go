package daemon

import (
	"math"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"
)

func TestMemoryLimitIsTheBudgetsPlusTheOverhead(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	setMemoryLimit(3<<30, zap.NewNop())
	got := debug.SetMemoryLimit(-1)
	if got < 3<<30+memoryMargin || got > 3<<30+memoryMargin+1<<30 {
		t.Errorf("limit %d, want the 3 GiB budget + %d + the heap at mount", got, memoryMargin)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "5GiB")
	setMemoryLimit(3<<30, zap.NewNop())
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT set, yet the limit became %d", got)
	}
}
