package mount

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/test/faultfs"
)

// The source misbehaves: these tests mount epochfs over a faultfs source
// (test/faultfs: a loopback whose operations can fail or hang) or over a
// real sshfs, and check that resident files keep reading correctly, that no
// read waits past the source timeout, and that nothing wrong is ever read.

// faultEnv mounts epochfs over a faultfs (or sshfs) view of a fresh test
// tree whose big.bin (8 MiB) does not fit the 4 MiB tier, reads everything
// once and waits for the placements. The source's own cleanup runs before
// the mount's (a hung source must not hold the unmount).
func faultEnv(t *testing.T, start func(testing.TB, string) *faultfs.FS, validate placement.Validate, timeout time.Duration) (*env, *faultfs.FS, []string) {
	t.Helper()
	requireFUSE(t)
	src, paths := makeTree(t, 8<<20)
	f := start(t, src)
	e := newEnv(t, f.Mnt(), 4<<20)
	e.opts.validate = validate
	e.opts.sourceTimeout = timeout
	e.mount()
	t.Cleanup(f.Close)
	e.src = src // compare with the real tree behind the fault layer
	checkAll(t, src, e.mnt, paths)
	e.settle()
	var resident []string
	for _, p := range paths {
		if p == "big.bin" {
			if tierOf(t, filepath.Join(e.mnt, p)) != "source" {
				t.Fatal("big.bin was placed in a tier too small for it")
			}
			continue
		}
		if tierOf(t, filepath.Join(e.mnt, p)) == "source" {
			t.Fatalf("%s not placed", p)
		}
		resident = append(resident, p)
	}
	return e, f, resident
}

func TestResidentFilesReadCorrectlyWhileTheSourceIsDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate placement.Validate
		kill     bool // the source's client dies (ENOTCONN) instead of answering EIO
	}{
		{"once/EIO", placement.ValidateOnce, false},
		{"open/EIO", placement.ValidateOpen, false},
		{"open/ENOTCONN", placement.ValidateOpen, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, f, resident := faultEnv(t, faultfs.Start, tc.validate, 3*time.Second)
			if tc.kill {
				f.Kill()
			} else {
				f.Down()
			}
			statsBefore := e.num("source_stats")
			for pass := 0; pass < 2; pass++ {
				checkAll(t, e.src, e.mnt, resident)
			}
			_, err := os.ReadFile(filepath.Join(e.mnt, "big.bin"))
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("read of a non-resident file while the source is down: %v, want EIO (never the source's ENOTCONN)", err)
			}
			st := e.status() // the daemon answers
			stale, _ := strconv.Atoi(st["served_stale_on_error"])
			switch tc.validate {
			case placement.ValidateOpen:
				if stale < 2*len(resident) {
					t.Errorf("served_stale_on_error = %d after %d resident opens", stale, 2*len(resident))
				}
			case placement.ValidateOnce:
				// Every file was checked at its first open: the outage
				// is not even noticed by resident reads (big.bin's
				// check is its source open, no stat).
				if got := e.num("source_stats"); got != statsBefore {
					t.Errorf("source_stats %d → %d: resident reads went to the source", statsBefore, got)
				}
			}
			if n, _ := strconv.Atoi(st["source_errors"]); n == 0 {
				t.Error("source_errors = 0 after failed source operations")
			}
			if st["files_total"] != "10" || st["files_removed"] != "0" {
				t.Errorf("a failing source changed the dataset: %v", st)
			}
			if !tc.kill {
				// Once the source answers and the mount has seen it
				// (its prober, at most a few seconds), it reads again.
				f.Up()
				waitFor(t, func() bool { return e.status()["source_state"] == "available" })
				checkAll(t, e.src, e.mnt, []string{"big.bin"})
			}
		})
	}
}

// startedBeforeHang starts a command that runs only once go is called.
// The command is forked before the source hangs: a fork while it hangs
// could block forever, because the child's exec closes its copies of this
// process's descriptors (the mount's own source files among them), and a
// close on the hung FUSE source waits for an answer that never comes.
func startedBeforeHang(t *testing.T, stdout, stderr io.Writer, name string, args ...string) (cmd *exec.Cmd, run func()) {
	t.Helper()
	cmd = exec.Command("/bin/sh", append([]string{"-c", `read _ && exec "$@"`, "sh", name}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, func() {
		if _, err := io.WriteString(in, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNoReadWaitsPastTheSourceTimeoutWhileTheSourceHangs(t *testing.T) {
	const timeout = 2 * time.Second
	e, f, resident := faultEnv(t, faultfs.Start, placement.ValidateOnce, timeout)
	big := filepath.Join(e.mnt, "big.bin")
	cat, startCat := startedBeforeHang(t, io.Discard, nil, "cat", big)
	f.Hang()
	t.Cleanup(f.Resume)

	// Resident files do not wait on the source.
	checkAll(t, e.src, e.mnt, resident)
	// The status answers during the hang.
	done := make(chan map[string]string, 1)
	go func() { done <- e.status() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("status does not answer while the source hangs")
	}
	// A read of a file that is not resident fails with EIO at the timeout.
	for i := 0; i < 2; i++ {
		start := time.Now()
		_, err := os.ReadFile(big)
		took := time.Since(start)
		t.Logf("non-resident read during the hang: %v after %v (timeout %v)", err, took.Round(time.Millisecond), timeout)
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("read %d of a non-resident file during a hang: %v, want EIO", i, err)
		}
		if took > timeout+3*time.Second {
			t.Fatalf("read %d waited %v, past the %v timeout", i, took, timeout)
		}
	}
	// A reader blocked on the source can be killed.
	startCat()
	time.Sleep(300 * time.Millisecond)
	cat.Process.Kill()
	waited := make(chan error, 1)
	go func() { waited <- cat.Wait() }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("a reader blocked on a hung source did not die of SIGKILL")
	}
	if n := e.num("source_timeouts"); n == 0 {
		t.Error("source_timeouts = 0 after a hang")
	}
	// Once the source answers again, so does the file.
	f.Resume()
	waitFor(t, func() bool { return e.num("source_stuck") == 0 })
	checkAll(t, e.src, e.mnt, []string{"big.bin"})
}

// Over a real sshfs (sshd in its own network namespace): sshd killed, then
// stopped.
func TestSSHFSSourceDownThenHung(t *testing.T) {
	const timeout = 2 * time.Second
	e, f, resident := faultEnv(t, faultfs.StartSSHFS, placement.ValidateOpen, timeout)
	f.Down()
	checkAll(t, e.src, e.mnt, resident)
	if _, err := os.ReadFile(filepath.Join(e.mnt, "big.bin")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("non-resident read with sshd killed: %v, want EIO", err)
	}
	f.Up()
	// Once the mount has seen the source back (its prober, a few seconds
	// at most), it reads again.
	waitFor(t, func() bool { return e.status()["source_state"] == "available" })
	checkAll(t, e.src, e.mnt, []string{"big.bin"})
	f.Hang()
	t.Cleanup(f.Resume)
	checkAll(t, e.src, e.mnt, resident)
	start := time.Now()
	_, err := os.ReadFile(filepath.Join(e.mnt, "big.bin"))
	took := time.Since(start)
	t.Logf("non-resident read over a stopped sshd: %v after %v", err, took.Round(time.Millisecond))
	if !errors.Is(err, syscall.EIO) || took > timeout+3*time.Second {
		t.Fatalf("non-resident read over a stopped sshd: %v after %v", err, took)
	}
	if n := e.num("served_stale_on_error"); n == 0 {
		t.Error("served_stale_on_error = 0 with validate = open over a failing source")
	}
}

// readNoStat reads a file with read(2) in 128 KiB calls until 0, never
// stating it: the kernel uses the size it already has.
func readNoStat(p string) ([]byte, error) {
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var out []byte
	buf := make([]byte, 128<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

// The first read after a source change returns exactly the new bytes: a
// file shrunk or grown on the source, read right away (by a reader that
// stats it first, and by one that does not), 200 rounds each.
func TestFirstReadAfterASourceChangeReturnsExactlyTheNewBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate placement.Validate
		refresh  bool
	}{
		{"validate=open", placement.ValidateOpen, false},
		{"validate=once+refresh", placement.ValidateOnce, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireFUSE(t)
			src := filepath.Join(t.TempDir(), "src")
			os.MkdirAll(filepath.Join(src, "d"), 0o755)
			rng := rand.New(rand.NewPCG(1, 2))
			data := make([]byte, 393_841)
			fill(rng, data)
			rel := "d/f.bin"
			os.WriteFile(filepath.Join(src, rel), data, 0o644)
			e := newEnv(t, src, 1<<30)
			e.opts.validate = tc.validate
			e.mount()
			p := filepath.Join(e.mnt, rel)
			if _, err := os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
			e.settle()
			wrong := 0
			for round := 0; round < 400; round++ {
				size := len(data)
				if round%2 == 0 { // shrink
					size = 1 + rng.IntN(size-1)
				} else { // grow
					size += 1 + rng.IntN(600_000-size)
				}
				data = make([]byte, size)
				fill(rng, data)
				if err := os.WriteFile(filepath.Join(src, rel), data, 0o644); err != nil {
					t.Fatal(err)
				}
				if tc.refresh {
					refresh(t, e.mnt, rel)
				}
				var got []byte
				var err error
				if round%4 < 2 {
					got, err = readNoStat(p)
				} else {
					got, err = os.ReadFile(p)
				}
				if err != nil || !bytes.Equal(got, data) {
					wrong++
					t.Errorf("round %d: read %d bytes (err %v), want the new %d bytes (first difference at %d)",
						round, len(got), err, len(data), firstDiff(got, data))
					if wrong > 5 {
						t.FailNow()
					}
				}
				if round%3 == 0 {
					e.settle() // resident again: the next change drops a copy
				}
			}
		})
	}
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// refresh asks the mount to revalidate rel through .epochfs/refresh and
// waits until it has.
func refresh(t *testing.T, mnt, rel string) {
	t.Helper()
	ctl := filepath.Join(mnt, ".epochfs", "refresh")
	finished := func() int {
		data, err := os.ReadFile(ctl)
		if err != nil {
			t.Fatal(err)
		}
		kv := status.Parse(data).Map()
		if kv["running"] != "0" || kv["pending"] != "0" {
			return -1
		}
		n, _ := strconv.Atoi(kv["finished"])
		return n
	}
	before := finished()
	if err := os.WriteFile(ctl, []byte(rel+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return finished() > before })
}

func TestRefreshCLIPicksUpAddedChangedAndRemovedFiles(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	checkAll(t, src, mnt, paths)
	// Looked up (and cached by the kernel for an hour) before they exist.
	for _, p := range []string{"class3/img9.jpg", "a/new.txt"} {
		if _, err := os.Stat(filepath.Join(mnt, p)); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("stat %s before it exists: %v", p, err)
		}
	}
	os.MkdirAll(filepath.Join(src, "class3"), 0o755)
	os.WriteFile(filepath.Join(src, "class3/img9.jpg"), []byte("a new image"), 0o644)
	os.WriteFile(filepath.Join(src, "a/new.txt"), []byte("new"), 0o644)
	os.WriteFile(filepath.Join(src, "a/small.txt"), []byte("a changed file"), 0o644)
	os.RemoveAll(filepath.Join(src, "class1"))
	// 2 of 10 files removed: more than max_drop (10%) of this small
	// dataset, so the refresh says it may drop them.
	code, out := cli(t, "refresh", "--allow-drop", mnt)
	if code != 0 || !strings.Contains(out, "1 changed, 2 added, 2 removed") {
		t.Fatalf("refresh: exit %d: %s", code, out)
	}
	checkAll(t, src, mnt, []string{"class3/img9.jpg", "a/new.txt", "a/small.txt"})
	if _, err := os.Stat(filepath.Join(mnt, "class1")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("a removed directory after a refresh: %v", err)
	}
	ls, _ := exec.Command("ls", mnt).Output()
	if strings.Contains(string(ls), "class1") || !strings.Contains(string(ls), "class3") {
		t.Fatalf("ls after a refresh:\n%s", ls)
	}
	if st := statusOf(t, mnt); st["files_total"] != fmt.Sprint(len(paths)-2+2) {
		t.Fatalf("files_total = %s", st["files_total"])
	}
	// Verify finds nothing wrong, then a corrupted copy.
	if code, out := cli(t, "verify", "--content", mnt); code != 0 || !strings.Contains(out, "0 copies dropped") {
		t.Fatalf("verify: exit %d: %s", code, out)
	}
	if code, out := cli(t, "verify", mnt, "no/such/path"); code != 2 || !strings.Contains(out, "no/such/path") {
		t.Fatalf("verify of an unknown path: exit %d: %s", code, out)
	}
	// Refresh too (a path neither in the dataset nor on the source), and
	// a shell's write of one to the ctl file fails where bash sees it.
	if code, out := cli(t, "refresh", mnt, "no/such/path"); code != 2 || !strings.Contains(out, "no/such/path") {
		t.Fatalf("refresh of an unknown path: exit %d: %s", code, out)
	}
	if code, out := shell(t, false, `printf 'xx yy\n' > "$1/.epochfs/refresh"`, mnt); code == 0 || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("bash writing an unknown path to refresh: exit %d: %s", code, out)
	}
}

// rawReadPy opens and reads a file with libc's open(2) and read(2), which,
// unlike Python's own calls, do not retry EINTR, after installing a handler
// for SIGUSR1 (a handled signal interrupts a FUSE request but is not fatal).
const rawReadPy = `
import ctypes, os, signal, sys
signal.signal(signal.SIGUSR1, lambda *a: None)
libc = ctypes.CDLL(None, use_errno=True)
print("ready", flush=True)
fd = libc.open(sys.argv[1].encode(), os.O_RDONLY)
if fd < 0:
    sys.exit("open: " + os.strerror(ctypes.get_errno()))
buf = ctypes.create_string_buffer(1 << 20)
total = 0
while True:
    n = libc.read(fd, buf, len(buf))
    if n < 0:
        sys.exit("read: " + os.strerror(ctypes.get_errno()))
    if n == 0:
        break
    total += n
print(total)
`

func TestOnlyAFatalSignalEndsAReadWaitingOnTheSource(t *testing.T) {
	requireDebianPython(t)
	// A timeout far longer than the waits below: only the interrupt rule
	// can end them early.
	const timeout = 30 * time.Second
	e, f, _ := faultEnv(t, faultfs.Start, placement.ValidateOnce, timeout)
	big := filepath.Join(e.mnt, "big.bin")
	want, err := os.Stat(filepath.Join(e.src, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}

	// A handled signal while the source hangs: the read goes on and
	// succeeds once the source answers, instead of failing with EINTR.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var stderr strings.Builder
	py, startPy := startedBeforeHang(t, pw, &stderr, "/usr/bin/python3", "-c", rawReadPy, big)
	pw.Close()
	cat, startCat := startedBeforeHang(t, io.Discard, nil, "cat", big)
	f.Hang()
	t.Cleanup(f.Resume)
	startPy()
	out := bufio.NewReader(pr)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("reader did not start: %q %v: %s", line, err, stderr.String())
	}
	time.Sleep(300 * time.Millisecond) // into the blocked open or read
	for i := 0; i < 3; i++ {
		if err := py.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	f.Resume()
	rest, _ := io.ReadAll(out)
	if err := py.Wait(); err != nil {
		t.Fatalf("a handled signal failed a read waiting on the source: %v: %s", err, stderr.String())
	}
	if got := strings.TrimSpace(string(rest)); got != strconv.FormatInt(want.Size(), 10) {
		t.Fatalf("read %s bytes after the signals, want %d", got, want.Size())
	}

	// SIGKILL still ends such a wait at once, long before the timeout.
	f.Hang()
	startCat()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	cat.Process.Kill()
	waited := make(chan error, 1)
	go func() { waited <- cat.Wait() }()
	select {
	case <-waited:
		t.Logf("killed reader gone after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatalf("a reader blocked on a hung source did not die of SIGKILL within 5 s (source timeout %v)", timeout)
	}
	f.Resume()
	waitFor(t, func() bool { return e.num("source_stuck") == 0 })
	checkAll(t, e.src, e.mnt, []string{"big.bin"})
}
