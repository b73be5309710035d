package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/testenv"
)

// genDocsTo writes the man pages and completion scripts into a temporary
// directory, as `make man` does.
func genDocsTo(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	var so, se bytes.Buffer
	if code := run([]string{genDocsName, "--docs", "../../docs", out}, &so, &se); code != 0 {
		t.Fatalf("gen-docs: exit %d: %s", code, se.String())
	}
	return out
}

// Every command has its page, every flag its --help shows is in it, and
// groff reads every page without a warning (lintian's check too).
func TestManPagesCoverEveryCommandAndFlag(t *testing.T) {
	out := genDocsTo(t)
	for name := range commands() {
		page, err := os.ReadFile(filepath.Join(out, "man8", "epochfs-"+name+".8"))
		if err != nil {
			t.Errorf("no man page for %s: %v", name, err)
			continue
		}
		var help, so bytes.Buffer
		run([]string{name, "--help"}, &so, &help)
		for _, l := range strings.Split(help.String(), "\n") {
			if strings.HasPrefix(l, "  -") {
				flag := strings.Fields(l)[0]
				if !bytes.Contains(page, []byte(`\fB`+flag)) {
					t.Errorf("epochfs-%s.8 does not show %s", name, flag)
				}
			}
		}
		if !bytes.Contains(page, []byte(".SH SYNOPSIS")) || !bytes.Contains(page, []byte(".SH EXIT STATUS")) {
			t.Errorf("epochfs-%s.8 lacks a SYNOPSIS or an EXIT STATUS", name)
		}
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		testenv.Skip(t, "no groff (apt-get install groff-base)")
	}
	pages, _ := filepath.Glob(filepath.Join(out, "man*", "*"))
	if len(pages) < len(commands())+3 {
		t.Fatalf("%d pages, want one per command, epochfs.8, mount.epochfs.8 and epochfs.toml.5", len(pages))
	}
	for _, p := range pages {
		cmd := exec.Command(groff, "-k", "-man", "-ww", "-z", "-Tutf8", p)
		cmd.Env = append(os.Environ(), "MANWIDTH=80")
		if msg, err := cmd.CombinedOutput(); err != nil || len(msg) > 0 {
			t.Errorf("groff on %s: %v\n%s", filepath.Base(p), err, msg)
		}
	}
}

// mount.epochfs(8) (docs/mount.epochfs.md) names exactly the options the
// helper takes and the generic ones it ignores.
func TestMountHelperPageNamesItsOptions(t *testing.T) {
	md, err := os.ReadFile("../../docs/mount.epochfs.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for o := range valueOptions {
		want = append(want, "**"+o+"=**")
	}
	for o := range flagOptions {
		want = append(want, "**"+o+"**")
	}
	for o := range genericOptions {
		want = append(want, "**"+strings.ReplaceAll(o, "_", `\_`)+"**")
	}
	sort.Strings(want)
	for _, w := range want {
		if !bytes.Contains(md, []byte(w)) {
			t.Errorf("docs/mount.epochfs.md does not name the option %s", w)
		}
	}
}

// The completion scripts are the shells' own (bash, zsh, fish), and the
// answers they ask for name commands, config keys and paths under a
// mount point.
func TestCompletion(t *testing.T) {
	out := genDocsTo(t)
	for file, head := range map[string]string{"epochfs.bash": "# bash completion V2 for epochfs", "_epochfs": "#compdef epochfs", "epochfs.fish": "# fish completion for epochfs"} {
		b, err := os.ReadFile(filepath.Join(out, "completion", file))
		if err != nil || !bytes.HasPrefix(b, []byte(head)) {
			t.Errorf("%s: %v, starts %.40q, want %q", file, err, b, head)
		}
	}
	mnt := t.TempDir()
	os.MkdirAll(filepath.Join(mnt, "train", "cat"), 0o755)
	os.WriteFile(filepath.Join(mnt, "train", "a.jpg"), nil, 0o644)
	os.MkdirAll(filepath.Join(mnt, ".epochfs"), 0o755)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"sta"}, []string{"stats", "status"}},
		{[]string{"config", ""}, []string{"source", "mountpoint", "state_dir"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"warmup", mnt, ""}, []string{"train/"}},
		{[]string{"drop", mnt, "train/"}, []string{"train/a.jpg", "train/cat/"}},
		{[]string{"verify", "--content", mnt, "tr"}, []string{"train/"}},
		{[]string{"warmup", mnt, mnt + "/tr"}, []string{mnt + "/train/"}},
		{[]string{"unmount", "--t"}, []string{"--timeout"}},
	} {
		var so, se bytes.Buffer
		if code := run(append([]string{"__completeNoDesc"}, c.args...), &so, &se); code != 0 {
			t.Errorf("%v: exit %d: %s", c.args, code, se.String())
		}
		got := strings.Split(strings.TrimSpace(so.String()), "\n")
		got = got[:len(got)-1] // the directive, ":4"
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("completing %q: got %q, want %q", c.args, got, c.want)
		}
	}
}
