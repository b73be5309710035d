package mount

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/status"
)

// The ctl files' contract as shell scripts and programs drive it: bash
// writes a line per write(2) call, find and Python write blocks that split
// lines, users other than root write too.

// shell runs a bash script (args are $1...), as root or as the
// unprivileged test user, and returns its exit code and output.
func shell(t *testing.T, asUser bool, script string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", script, "bash"}, args...)...)
	cmd.Dir = "/"
	if asUser {
		uid, gid := testUser(t)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("bash: %v", err)
	return 0, ""
}

// kv parses key=value lines.
func kv(data []byte) map[string]string {
	m := status.Parse(data).Map()
	return m
}

// progress reads .epochfs/warmup as root or as the test user.
func (e *env) progress(asUser bool) map[string]string {
	e.t.Helper()
	code, out := shell(e.t, asUser, `cat "$1"`, filepath.Join(e.mnt, ".epochfs", "warmup"))
	if code != 0 {
		e.t.Fatalf("read warmup: %s", out)
	}
	return kv([]byte(out))
}

// errorsFile returns .epochfs/errors.
func (e *env) errorsFile() string {
	b, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "errors"))
	return string(b)
}

// openToOthers lets the test user reach the mount point inside the test's
// private temp directory.
func openToOthers(e *env) {
	for d := filepath.Dir(e.mnt); d != "/" && d != "/tmp"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
}

func TestJobConfigWrittenByBashTakesEffectWhole(t *testing.T) {
	src, paths := makeSamples(t, 40, 500)
	e := newEnv(t, src, 1<<20)
	e.opts.bufferBytes = 1 << 20
	e.mount()
	dir := filepath.Join(e.mnt, ".epochfs", "jobs", "j")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config")
	readConfig := func() string { b, _ := os.ReadFile(config); return string(b) }

	// The example of docs/ctl.md: bash's printf writes a line per call.
	if code, out := shell(t, false, `printf 'batch_size=256\nseed=7\nsampler=random\n' > "$1"`, config); code != 0 {
		t.Fatalf("bash printf: exit %d: %s", code, out)
	}
	if got, want := readConfig(), "batch_size=256\nseed=7\nsampler=random\nsubset=all\n"; got != want {
		t.Fatalf("config after bash's printf:\n%s\nwant:\n%s", got, want)
	}
	if code, out := shell(t, false, `{ echo batch_size=64; echo seed=9; echo subset=class1; } > "$1"`, config); code != 0 {
		t.Fatalf("bash { echo; echo; }: exit %d: %s", code, out)
	}
	good := "batch_size=64\nseed=9\nsampler=ods\nsubset=class1\n"
	if got := readConfig(); got != good {
		t.Fatalf("config after { echo; echo; }:\n%s\nwant:\n%s", got, good)
	}
	// Line by line from Go too: one write(2) per line, the last without
	// its newline (applied at the close).
	f, err := os.OpenFile(config, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"sampler=sequen", "tial\n", "batch_size=", "4\n", "seed=1"} {
		if _, err := f.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := readConfig(), "batch_size=4\nseed=1\nsampler=sequential\nsubset=all\n"; got != want {
		t.Fatalf("config written in pieces:\n%s\nwant:\n%s", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "next")); string(b) != strings.Join(paths[:4], "\n")+"\n" {
		t.Fatalf("first batch of the sequential job: %q", b)
	}
	// A bad line fails the write that ends it, and the config is what it
	// was before the document, though its first line was good.
	if code, _ := shell(t, false, `{ echo batch_size=64; echo seed=9; echo subset=class1; } > "$1"`, config); code != 0 {
		t.Fatal("reset")
	}
	code, out := shell(t, false, `printf 'batch_size=8\ncolour=blue\nseed=3\n' > "$1"`, config)
	if code == 0 || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("a bad config line: exit %d: %q; want a failure with Invalid argument", code, out)
	}
	if got := readConfig(); got != good {
		t.Fatalf("a rejected config left:\n%s\nwant:\n%s", got, good)
	}
	if errs := e.errorsFile(); !strings.Contains(errs, "jobs/j/config: ") || !strings.Contains(errs, "line 2: unknown key \"colour\"") {
		t.Fatalf(".epochfs/errors lacks the bad line:\n%s", errs)
	}
}

func TestWarmupDocumentsWrittenByBashTakeEffectWhole(t *testing.T) {
	src, paths := makeSamples(t, 40, 500)
	e := newEnv(t, src, 1<<20)
	e.mount()
	w := filepath.Join(e.mnt, ".epochfs", "warmup")
	// One unknown path rejects the whole document: nothing is queued.
	code, out := shell(t, false, `printf '%s\nno/such/file\n%s\n' "$2" "$3" > "$1"`, w, paths[0], paths[1])
	if code == 0 || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("GOOD BAD GOOD: exit %d: %q; want a failure", code, out)
	}
	if p := e.progress(false); p["queued"] != "0" {
		t.Fatalf("a rejected warmup queued files: %v", p)
	}
	if errs := e.errorsFile(); !strings.Contains(errs, `warmup: line 2 "no/such/file": no such file or directory in the dataset`) {
		t.Fatalf(".epochfs/errors lacks the reason:\n%s", errs)
	}
	// Queued by the time the shell's close returns.
	if code, out := shell(t, false, `{ echo "$2"; echo "$3"; } > "$1" && cat "$1"`, w, paths[0], paths[5]); code != 0 || !strings.Contains(out, "queued=2\n") {
		t.Fatalf("{ echo; echo; } > warmup; cat warmup: exit %d:\n%s", code, out)
	}
	e.settle()
	for i, p := range paths[:6] {
		if want := i == 0 || i == 5; (tierOf(t, filepath.Join(e.mnt, p)) != "source") != want {
			t.Errorf("%s resident=%v, want %v", p, !want, want)
		}
	}
}

func TestWarmupTakesThousandsOfPathsFromFind(t *testing.T) {
	src, paths := makeSamples(t, 3000, 64)
	e := newEnv(t, src, 1<<30)
	e.mount()
	// find writes 4 KiB blocks that split lines; class0 and class2 are
	// half of the files.
	code, out := shell(t, false, `cd "$1" && find class0 class2 -type f -printf '%p\n' > "$2"`, src, filepath.Join(e.mnt, ".epochfs", "warmup"))
	if code != 0 {
		t.Fatalf("find -printf > warmup: exit %d: %s", code, out)
	}
	want := map[string]bool{}
	for _, p := range paths {
		if strings.HasPrefix(p, "class0/") || strings.HasPrefix(p, "class2/") {
			want[p] = true
		}
	}
	p := e.progress(false)
	if p["queued"] != strconv.Itoa(len(want)) || p["bytes_total"] != strconv.Itoa(64*len(want)) {
		t.Fatalf("warmup of %d paths from find: %v", len(want), p)
	}
	e.settle()
	for _, path := range paths {
		if resident := tierOf(t, filepath.Join(e.mnt, path)) != "source"; resident != want[path] {
			t.Fatalf("%s resident=%v, want %v", path, resident, want[path])
		}
	}
	// One bad path among thousands: nothing more is queued.
	code, _ = shell(t, false, `cd "$1" && { find class1 -type f -printf '%p\n'; echo class1/nope; find class3 -type f -printf '%p\n'; } > "$2"`, src, filepath.Join(e.mnt, ".epochfs", "warmup"))
	if code == 0 {
		t.Fatal("a list with an unknown path was taken")
	}
	if p := e.progress(false); p["queued"] != strconv.Itoa(len(want)) {
		t.Fatalf("a rejected list changed the warmup set: %v", p)
	}
}

func TestCtlDocumentsWrittenByPythonTakeEffectWhole(t *testing.T) {
	requireDebianPython(t)
	src, paths := makeSamples(t, 1200, 32)
	e := newEnv(t, src, 1<<30)
	e.opts.bufferBytes = 1 << 20
	e.mount()
	// Python's buffered writes: 8 KiB blocks, cut anywhere.
	run := func(script string, args ...string) string {
		out, err := exec.Command("/usr/bin/python3", append([]string{"-c", script, e.mnt}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("python: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	var odd []string
	for i, p := range paths {
		if i%2 == 1 {
			odd = append(odd, p)
		}
	}
	out := run(`
import sys
mnt, paths = sys.argv[1], sys.argv[2:]
with open(mnt + "/.epochfs/warmup", "w") as f:
    for p in paths:
        f.write(p + "\n")
try:
    with open(mnt + "/.epochfs/warmup", "w") as f:
        f.write(paths[0] + "\nno/such\n")
    print("the bad document was taken")
except OSError as e:
    print("errno", e.errno)
`, odd...)
	if out != fmt.Sprintf("errno %d", syscall.EINVAL) {
		t.Fatalf("python's bad warmup: %s", out)
	}
	if p := e.progress(false); p["queued"] != strconv.Itoa(len(odd)) || p["bytes_total"] != strconv.Itoa(32*len(odd)) {
		t.Fatalf("warmup of %d paths written by Python: %v", len(odd), p)
	}
	e.settle()
	for i, p := range paths {
		if resident := tierOf(t, filepath.Join(e.mnt, p)) != "source"; resident != (i%2 == 1) {
			t.Fatalf("%s resident=%v", p, resident)
		}
	}

	if err := os.Mkdir(filepath.Join(e.mnt, ".epochfs", "jobs", "py"), 0o755); err != nil {
		t.Fatal(err)
	}
	run(`
import sys
with open(sys.argv[1] + "/.epochfs/jobs/py/config", "w") as f:
    for line in ["batch_size=16\n", "seed=11\n", "sampler=random\n", "subset=class1\n", "subset=class2"]:
        f.write(line)
`)
	cfg, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "jobs", "py", "config"))
	if string(cfg) != "batch_size=16\nseed=11\nsampler=random\nsubset=class1\nsubset=class2\n" {
		t.Fatalf("config written by Python:\n%s", cfg)
	}
}

// TestWarmupTellsAUserNothingOfWhatTheyMayNotOpen: an unprivileged user
// who names a path inside a 0700 directory, or a 0600 file, gets exactly
// the answer of a path that does not exist, and their warmup progress never
// counts such files, whoever queued them. Their jobs never name them.
func TestWarmupTellsAUserNothingOfWhatTheyMayNotOpen(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	write := func(p string, n int, mode os.FileMode) {
		full := filepath.Join(src, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		b := make([]byte, n)
		rand.Read(b)
		if err := os.WriteFile(full, b, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("pub/ok.bin", 1000, 0o644)
	write("pub/rootonly.bin", 777, 0o600)
	write("secret/file.bin", 12345, 0o644)
	os.Chmod(filepath.Join(src, "secret"), 0o700)
	e := newEnv(t, src, 1<<30)
	e.opts.bufferBytes = 1 << 20
	openToOthers(e)
	e.mount()
	w := filepath.Join(e.mnt, ".epochfs", "warmup")
	empty := e.progress(true)
	if empty["queued"] != "0" || empty["bytes_total"] != "0" {
		t.Fatalf("the user's progress before any warmup: %v", empty)
	}
	var answers, reasons []string
	for _, p := range []string{"secret/file.bin", "secret/none.bin", "pub/rootonly.bin", "no/such.bin", "secret"} {
		code, out := shell(t, true, `printf '%s\n' "$2" > "$1"`, w, p)
		if code == 0 {
			t.Fatalf("the user queued %s", p)
		}
		answers = append(answers, fmt.Sprintf("%d %s", code, out))
		lines := strings.Split(strings.TrimSpace(e.errorsFile()), "\n")
		last := lines[len(lines)-1]
		_, reason, _ := strings.Cut(last, " ") // drop the time
		reasons = append(reasons, strings.Replace(reason, strconv.Quote(p), "PATH", 1))
		if got := e.progress(true); !maps(got, empty) {
			t.Fatalf("probing %s changed the user's progress: %v", p, got)
		}
	}
	for i := range answers {
		if answers[i] != answers[0] || reasons[i] != reasons[0] {
			t.Fatalf("a hidden path and a missing one answer differently:\n%q\n%q", answers, reasons)
		}
	}
	// Root queues the hidden files: the user's view does not change.
	if err := os.WriteFile(w, []byte("secret/file.bin\npub/rootonly.bin\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := e.progress(true); !maps(got, empty) {
		t.Fatalf("root's warmup of hidden files shows in the user's progress: %v", got)
	}
	if got := e.progress(false); got["queued"] != "2" || got["bytes_total"] != strconv.Itoa(12345+777) {
		t.Fatalf("root's progress: %v", got)
	}
	// The user's own requests: "pub" and "all" give the one file they may read.
	for _, doc := range []string{"pub", "all"} {
		if code, out := shell(t, true, `echo "$2" > "$1"`, w, doc); code != 0 {
			t.Fatalf("the user's warmup of %s: %s", doc, out)
		}
		if got := e.progress(true); got["queued"] != "1" || got["bytes_total"] != "1000" {
			t.Fatalf("the user's progress after %s: %v", doc, got)
		}
	}
	// A user's job: its config does not confirm a hidden path, its next
	// never names one.
	jobDir := filepath.Join(e.mnt, ".epochfs", "jobs", "u")
	if code, out := shell(t, true, `mkdir "$1" && echo sampler=random > "$1/config"`, jobDir); code != 0 {
		t.Fatalf("the user's job: %s", out)
	}
	var cfgAnswers []string
	for _, sub := range []string{"secret", "nothing"} {
		code, out := shell(t, true, `echo "subset=$2" > "$1/config"`, jobDir, sub)
		cfgAnswers = append(cfgAnswers, fmt.Sprintf("%d %s", code, out))
	}
	if cfgAnswers[0] != cfgAnswers[1] || !strings.Contains(cfgAnswers[0], "Invalid argument") {
		t.Fatalf("subset=secret and subset=nothing answer %q", cfgAnswers)
	}
	code, out := shell(t, true, `cat "$1/next" "$1/next"`, jobDir)
	if code != 0 || out != "pub/ok.bin\n" {
		t.Fatalf("the user's job's epoch: exit %d: %q; want only pub/ok.bin", code, out)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNamesThatAreNotLinesWorkThroughEveryCtlFile: a dataset whose names
// hold a newline, a tab, a leading '#', leading or trailing spaces, a quote
// or a backslash: every epoch of a job is a permutation of the dataset
// whose every line opens once unquoted (in Go and with the example
// Sampler's decoder), and warmup takes the quoted names.
func TestNamesThatAreNotLinesWorkThroughEveryCtlFile(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	names := []string{"new\nline.bin", "#hash.bin", " lead.bin", "trail.bin ", "dir /x.bin", " both ", `"quote.bin`,
		`back\slash.bin`, "tab\tname.bin", "ünïcødé.bin", "plain/a.bin", "plain/#not-first.bin", "all"}
	want := map[string][]byte{}
	for i, n := range names {
		full := filepath.Join(src, n)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 100+i)
		rand.Read(b)
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want[n] = b
	}
	e := newEnv(t, src, 1<<30)
	e.opts.bufferBytes = 1 << 20
	e.mount()
	dir := filepath.Join(e.mnt, ".epochfs", "jobs", "odd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("batch_size=3\nsampler=random\nseed=5\n"), 0); err != nil {
		t.Fatal(err)
	}
	for epoch := 1; epoch <= 2; epoch++ {
		var got []string
		for {
			b, err := os.ReadFile(filepath.Join(dir, "next"))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 {
				break
			}
			for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				p, err := ctlpath.Unquote(line)
				if err != nil {
					t.Fatalf("epoch %d: line %q: %v", epoch, line, err)
				}
				data, err := os.ReadFile(filepath.Join(e.mnt, p))
				if err != nil || !bytes.Equal(data, want[p]) {
					t.Fatalf("epoch %d: %q (line %q) does not open to its bytes: %v", epoch, p, line, err)
				}
				got = append(got, p)
			}
			if len(got) > 10*len(names) {
				t.Fatal("epoch does not end")
			}
		}
		slices.Sort(got)
		all := slices.Sorted(func(yield func(string) bool) {
			for n := range want {
				if !yield(n) {
					return
				}
			}
		})
		if !slices.Equal(got, all) {
			t.Fatalf("epoch %d is not a permutation of the dataset:\n%q\n%q", epoch, got, all)
		}
	}

	// The epochfs package's decoder (through the example, which re-exports
	// it) reads the same epoch, and quotes as Go.
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		script := `
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("epochfs_sampler", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
mnt, job = sys.argv[2], sys.argv[3]
seen = []
while batch := open(os.path.join(mnt, ".epochfs/jobs", job, "next"), encoding="utf-8", newline="").read():
    for line in batch.split("\n")[:-1]:
        p = m.unquote(line)
        with open(os.path.join(mnt, p), "rb") as f:
            f.read()
        assert m.quote(p) == line, (p, line, m.quote(p))
        seen.append(p)
print(len(seen), len(set(seen)))
`
		example, _ := filepath.Abs("../../docs/examples/epochfs_sampler.py")
		pkg, _ := filepath.Abs("../../python")
		cmd := exec.Command("/usr/bin/python3", "-c", script, example, e.mnt, "odd")
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pkg)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("%d %d", len(names), len(names)) {
			t.Fatalf("the example's decoder over an epoch: %v:\n%s", err, out)
		}
	}

	// Warmup by quoted names, through bash: each name is one line.
	var lines []string
	for _, n := range names {
		if n != "all" {
			lines = append(lines, ctlpath.Quote(n))
		}
	}
	lines = append(lines, `"all"`) // the file named all, not the keyword
	code, out := shell(t, false, `printf '%s\n' "${@:2}" > "$1"`, append([]string{filepath.Join(e.mnt, ".epochfs", "warmup")}, lines...)...)
	if code != 0 {
		t.Fatalf("warmup of quoted names: exit %d: %s", code, out)
	}
	if p := e.progress(false); p["queued"] != strconv.Itoa(len(names)) {
		t.Fatalf("warmup of %d quoted names: %v", len(names), p)
	}
	e.settle()
	for _, n := range names {
		if tierOf(t, filepath.Join(e.mnt, n)) == "source" {
			t.Errorf("%q was not placed", n)
		}
	}
	// Unquoted, a name with a leading space is trimmed, and is not found.
	if code, _ := shell(t, false, `printf ' lead.bin\n' > "$1"`, filepath.Join(e.mnt, ".epochfs", "warmup")); code == 0 {
		t.Error("an unquoted name with a leading space was taken")
	}
	// The CLI quotes what it writes: every name works as an argument.
	for _, n := range names {
		if code, out := cli(t, "refresh", e.mnt, n); code != 0 || !strings.Contains(out, "0 removed") {
			t.Errorf("epochfs refresh %q: exit %d: %s", n, code, out)
		}
	}
	if code, out := cli(t, append([]string{"warmup", e.mnt}, names...)...); code != 0 {
		t.Errorf("epochfs warmup of every odd name: exit %d: %s", code, out)
	}
}

// TestRefusedCtlWritesThatReachTheDaemonAreRecorded: root's writes to
// read-only ctl files, creates in .epochfs/ and jobs/, and the writes that
// follow a rejected line, are in .epochfs/errors. (A user's write that the
// file's mode forbids is refused by the kernel and never reaches the
// daemon.)
func TestRefusedCtlWritesThatReachTheDaemonAreRecorded(t *testing.T) {
	src, paths := makeSamples(t, 8, 100)
	e := newEnv(t, src, 1<<20)
	e.opts.bufferBytes = 1 << 20
	openToOthers(e)
	e.mount()
	ctl := filepath.Join(e.mnt, ".epochfs")
	os.Mkdir(filepath.Join(ctl, "jobs", "r"), 0o755)
	for _, c := range []struct {
		script, record string
	}{
		{`echo x > "$1/status"`, "status: read-only control file: permission denied"},
		{`echo x > "$1/errors"`, "errors: read-only control file: permission denied"},
		{`echo x > "$1/stats.json"`, "stats.json: read-only control file: permission denied"},
		{`echo x > "$1/jobs/r/status"`, "jobs/r/status: read-only control file: permission denied"},
		{`truncate -s 0 "$1/status"`, "status: read-only control file"},
		{`echo all > "$1/warmpu"`, "warmpu: no such control file"},
		{`echo x > "$1/jobs/r/confg"`, "jobs/r/confg: no such job file"},
	} {
		code, out := shell(t, false, c.script, ctl)
		if code == 0 {
			t.Errorf("%s: succeeded", c.script)
		}
		if !strings.Contains(e.errorsFile(), c.record) {
			t.Errorf("%s (%s): .epochfs/errors lacks %q:\n%s", c.script, strings.TrimSpace(out), c.record, e.errorsFile())
		}
	}
	// A user's file in jobs/ reaches the daemon (the directory is 1777).
	if code, _ := shell(t, true, `echo x > "$1/jobs/stray"`, ctl); code == 0 || !strings.Contains(e.errorsFile(), "jobs/stray: files cannot be created") {
		t.Errorf("a user's file in jobs/: exit %d; errors:\n%s", code, e.errorsFile())
	}
	// A user's write to status is refused by the kernel.
	if code, out := shell(t, true, `echo x > "$1/status"`, ctl); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("a user's write to status: exit %d: %s", code, out)
	}
	// bash goes on after a rejected line: its later writes are refused
	// and counted.
	code, _ := shell(t, false, `printf '%s\nno/such\n%s\n%s\n' "$2" "$3" "$4" > "$1/warmup"`, ctl, paths[0], paths[1], paths[2])
	if code == 0 || !strings.Contains(e.errorsFile(), "warmup: 2 later writes of the rejected document refused") {
		t.Errorf("exit %d; .epochfs/errors lacks the later writes:\n%s", code, e.errorsFile())
	}
}

// A ctl file's size is what a read of it returns now: `[ -s status ]`
// works in bash, find -printf %s and Python's st_size agree with the
// bytes read, and a user's .epochfs/errors is sized for that user.
func TestCtlFilesReportTheSizeOfWhatAReadReturns(t *testing.T) {
	src, _ := makeSamples(t, 10, 500)
	e := newEnv(t, src, 1<<30)
	e.mount()
	openToOthers(e)
	ctl := filepath.Join(e.mnt, ".epochfs")
	if code, out := shell(t, false, `cd "$1" && for f in status stats.json warmup refresh verify drop; do [ -s "$f" ] || echo "[ -s $f ] is false"; done`, ctl); code != 0 || out != "" {
		t.Errorf("bash [ -s ] over the ctl files: exit %d: %s", code, out)
	}
	// Files whose content does not change on an idle mount: the size find
	// and Python report is the length of the read.
	code, out := shell(t, false, `find "$1" -maxdepth 1 -type f \( -name warmup -o -name refresh -o -name verify -o -name drop \) -printf '%s %f\n'`, ctl)
	if code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("find -printf: exit %d: %q", code, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		size, name, _ := strings.Cut(l, " ")
		data, err := os.ReadFile(filepath.Join(ctl, name))
		if err != nil {
			t.Fatal(err)
		}
		if size != strconv.Itoa(len(data)) || len(data) == 0 {
			t.Errorf("find -printf %%s of %s: %s, a read returns %d bytes", name, size, len(data))
		}
	}
	py := `import os, sys
p = os.path.join(sys.argv[1], "warmup")
with open(p, "rb") as f:
    data = f.read()
print(os.stat(p).st_size, len(data))`
	cmd := exec.Command("/usr/bin/python3", "-c", py, ctl)
	if b, err := cmd.CombinedOutput(); err != nil || len(strings.Fields(string(b))) != 2 || strings.Fields(string(b))[0] != strings.Fields(string(b))[1] || strings.Fields(string(b))[0] == "0" {
		t.Errorf("Python st_size and read of warmup: %q (%v), want the same non-zero number twice", b, err)
	}
	// errors is per user: empty for a user with no refused write, sized
	// for that user's lines after one.
	errs := filepath.Join(ctl, "errors")
	if code, out := shell(t, true, `[ -s "$1" ] && echo non-empty; stat -c %s "$1"`, errs); code != 0 || strings.TrimSpace(out) != "0" {
		t.Errorf("the test user's errors before any refusal: exit %d: %q, want size 0", code, out)
	}
	if code, _ := shell(t, true, `printf 'no/such/file\n' > "$1"`, filepath.Join(ctl, "warmup")); code == 0 {
		t.Fatal("a warmup of a path not in the dataset was taken")
	}
	if code, out := shell(t, true, `[ -s "$1" ] || echo empty; n=$(stat -c %s "$1"); c=$(wc -c < "$1"); [ "$n" = "$c" ] || echo "stat $n, read $c"`, errs); code != 0 || out != "" {
		t.Errorf("the test user's errors after a refused write: exit %d: %q", code, out)
	}
}
