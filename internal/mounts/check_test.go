package mounts

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CheckPaths refuses what a mount is given, each as a UsageError naming
// the path and what is wrong with it, and passes a good set.
func TestCheckPathsRefusesBadInputAsUsage(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	src, mnt, state, fast := mk("src"), mk("mnt"), filepath.Join(dir, "state"), mk("fast")
	good := Paths{Source: src, Mountpoint: mnt, StateDir: state, Tiers: []TierPath{{"fast", fast}}, SourceTimeout: 5 * time.Second}
	if sick, err := CheckPaths(good); sick != nil || err != nil {
		t.Fatalf("good paths: sick %v, err %v", sick, err)
	}
	full := mk("full")
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	cases := []struct {
		name string
		edit func(p *Paths)
		want string
	}{
		{"missing source", func(p *Paths) { p.Source = filepath.Join(dir, "nope") }, "source " + filepath.Join(dir, "nope")},
		{"source a file", func(p *Paths) { p.Source = file }, "not a directory"},
		{"mount point not empty", func(p *Paths) { p.Mountpoint = full }, "not empty"},
		{"mount point missing", func(p *Paths) { p.Mountpoint = filepath.Join(dir, "gone") }, "mount point " + filepath.Join(dir, "gone")},
		{"tier in the source", func(p *Paths) { p.Tiers = []TierPath{{"fast", mk("src/cache")}} }, `tier "fast"`},
		{"two tiers one path", func(p *Paths) { p.Tiers = []TierPath{{"a", fast}, {"b", fast + "/"}} }, `share the path`},
		{"state in the source", func(p *Paths) { p.StateDir = filepath.Join(src, "state") }, "state directory"},
	}
	for _, tc := range cases {
		p := good
		tc.edit(&p)
		_, err := CheckPaths(p)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a UsageError naming %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: a message of several lines: %q", tc.name, err)
		}
		os.RemoveAll(filepath.Join(src, "cache"))
	}
	// A source an earlier mount knew is sick, not refused: the mount
	// serves what that mount left.
	p := good
	p.Source, p.Known = filepath.Join(dir, "nope"), true
	if sick, err := CheckPaths(p); err != nil || sick == nil {
		t.Errorf("a known source that fails: sick %v, err %v; want sick and no error", sick, err)
	}
}

// The readiness report carries the daemon's exit code and a message on
// one line; a nil Readiness reports nothing, and a report is made once.
func TestReadinessReportsOnceOnOneLine(t *testing.T) {
	var none *Readiness
	none.Ready()
	none.Fail(2, errors.New("nothing to report to"))
	if OpenReadiness(-1) != nil {
		t.Fatal("OpenReadiness(-1) is not nil")
	}
	for _, tc := range []struct {
		report func(*Readiness)
		want   string
	}{
		{func(r *Readiness) { r.Ready(); r.Fail(1, errors.New("late")) }, "ok\n"},
		{func(r *Readiness) { r.Fail(2, errors.New("bad\nconfig")); r.Ready() }, "err 2 bad config\n"},
	} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		// The report owns its descriptor, as the daemon's does: a copy
		// of the pipe's, so that pw's own is closed once, here.
		fd, err := syscall.Dup(int(pw.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		pw.Close()
		tc.report(OpenReadiness(fd))
		got, _ := bufio.NewReader(pr).ReadString('\n')
		rest := make([]byte, 16)
		n, _ := pr.Read(rest)
		pr.Close()
		if got+string(rest[:n]) != tc.want {
			t.Errorf("report %q, want %q", got+string(rest[:n]), tc.want)
		}
	}
}

// Only an epochfs mount may be unmounted by epochfs; anything else is
// refused as the caller's mistake.
func TestRefuseForeignMounts(t *testing.T) {
	if err := RefuseForeign("/m", MountEntry{FSType: "fuse.epochfs"}); err != nil {
		t.Errorf("an epochfs mount refused: %v", err)
	}
	err := RefuseForeign("/scratch", MountEntry{FSType: "tmpfs", Source: "tmpfs"})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "/scratch is a tmpfs mount") {
		t.Errorf("a tmpfs: %v, want a UsageError naming it", err)
	}
}
