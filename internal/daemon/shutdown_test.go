package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestShutdownAbandonsAStuckCloseAndStillClosesTheCatalog(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	var order []string
	steps := []step{
		{what: "catalog", always: true, close: func() error { order = append(order, "catalog"); return nil }},
		{what: "placer", close: func() error { <-stuck; return nil }},
		{what: "jobs", close: func() error { order = append(order, "jobs"); return nil }},
	}
	err := shutdown(zap.NewNop(), steps, 50*time.Millisecond)
	if !errors.Is(err, ErrShutdownStuck) || !strings.Contains(err.Error(), "placer") {
		t.Fatalf("shutdown with a stuck close: %v, want ErrShutdownStuck naming the placer", err)
	}
	if strings.Join(order, ",") != "jobs,catalog" {
		t.Fatalf("closed %v, want jobs then the catalog", order)
	}
}

func TestShutdownSkipsTheRestAfterAStuckCloseButNotTheAlwaysSteps(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	ran := false
	steps := []step{
		{what: "other", close: func() error { ran = true; return nil }},
		{what: "jobs", close: func() error { <-stuck; return nil }},
	}
	if err := shutdown(zap.NewNop(), steps, 20*time.Millisecond); err == nil {
		t.Fatal("no error for a stuck close")
	}
	if ran {
		t.Fatal("a close after the stuck one ran")
	}
}

func TestShutdownReturnsTheClosesErrors(t *testing.T) {
	bad := errors.New("placement: catalog sync: disk gone")
	steps := []step{{what: "catalog", always: true, close: func() error { return bad }}}
	if err := shutdown(zap.NewNop(), steps, time.Minute); !errors.Is(err, bad) {
		t.Fatalf("shutdown: %v, want %v", err, bad)
	}
}
