package mount

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/views"
)

// npzArray is one member of a batch file.
type npzArray struct {
	descr string
	shape []int
	data  []byte
}

var npyDict = regexp.MustCompile(`'descr': '([^']*)', 'fortran_order': False, 'shape': \(([0-9, ]*)\)`)

// readNPZ parses a batch file: a zip of NumPy 1.0 arrays.
func readNPZ(t *testing.T, b []byte) map[string]npzArray {
	t.Helper()
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("batch is not a zip: %v", err)
	}
	out := map[string]npzArray{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(r)
		r.Close()
		if len(raw) < 10 || string(raw[:8]) != "\x93NUMPY\x01\x00" {
			t.Fatalf("%s is not a .npy", f.Name)
		}
		hl := int(binary.LittleEndian.Uint16(raw[8:10]))
		m := npyDict.FindStringSubmatch(string(raw[10 : 10+hl]))
		if m == nil || (10+hl)%64 != 0 {
			t.Fatalf("%s: header %q", f.Name, raw[10:10+hl])
		}
		var shape []int
		for _, d := range strings.Split(m[2], ",") {
			if d = strings.TrimSpace(d); d != "" {
				n, _ := strconv.Atoi(d)
				shape = append(shape, n)
			}
		}
		out[strings.TrimSuffix(f.Name, ".npy")] = npzArray{descr: m[1], shape: shape, data: raw[10+hl:]}
	}
	return out
}

func (a npzArray) int64s() []int64 {
	v := make([]int64, len(a.data)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(a.data[8*i:]))
	}
	return v
}

func (a npzArray) strings(t *testing.T) []string {
	w, _ := strconv.Atoi(strings.TrimPrefix(a.descr, "<U"))
	var out []string
	for i := 0; i+4*w <= len(a.data); i += 4 * w {
		var b []byte
		for k := 0; k < w; k++ {
			r := rune(binary.LittleEndian.Uint32(a.data[i+4*k:]))
			if r == 0 {
				break
			}
			b = utf8.AppendRune(b, r)
		}
		p, err := ctlpath.Unquote(string(b))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// readBatches reads a job's batch file until the end of an epoch and
// returns the epoch's paths, labels and tensors' digests.
func readBatches(t *testing.T, file string) (paths []string, labels []int64, digests []string) {
	for {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("read %s: %v", file, err)
			return
		}
		if len(b) == 0 {
			return
		}
		a := readNPZ(t, b)
		x, y, ps := a["x"], a["y"], a["paths"].strings(t)
		if len(x.shape) != 4 || x.shape[1] != 32 || x.shape[2] != 32 || x.shape[3] != 3 || x.shape[0] != len(ps) || x.descr != "|u1" {
			t.Errorf("%s: x %s %v for %d paths", file, x.descr, x.shape, len(ps))
			return
		}
		per := 32 * 32 * 3
		for i := range ps {
			d := sha256.Sum256(x.data[i*per : (i+1)*per])
			digests = append(digests, fmt.Sprintf("%x", d[:8]))
		}
		paths = append(paths, ps...)
		labels = append(labels, y.int64s()...)
	}
}

func TestBatchesOfThreeJobsShareOnePreprocessingAndRepeatNoTensor(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	good := makeJPEGs(t, src, 30)
	os.WriteFile(filepath.Join(src, "class0", "corrupt.jpg"), []byte("\xff\xd8\xff broken"), 0o644)
	e := newEnv(t, src, 1<<30)
	budget := int64(1 << 20)
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 9, DecodedBytes: 0, AugmentedBytes: budget}
	e.mount()
	jobsDir := filepath.Join(e.mnt, ".epochfs/jobs")
	names := []string{"a", "b", "c"}
	for _, n := range append(names, "idle") {
		if err := os.Mkdir(filepath.Join(jobsDir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(jobsDir, n, "config"), []byte("batch_size=8\nseed=1\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The idle job reads one batch, then stops: it is a consumer whose
	// entries wait for it.
	idle, _, _ := readOneBatch(t, filepath.Join(jobsDir, "idle", "batch"))
	// The budget holds all along, not only at the end.
	stop := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var max int64
		defer func() { peak <- max }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if v, err := strconv.ParseInt(e.status()["augmented_cache_bytes"], 10, 64); err == nil && v > max {
				max = v
			}
		}
	}()
	seen := make([]map[string]bool, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		seen[i] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for epoch := 1; epoch <= 2; epoch++ {
				paths, labels, digests := readBatches(t, filepath.Join(jobsDir, n, "batch"))
				sorted := append([]string(nil), paths...)
				sort.Strings(sorted)
				want := append([]string(nil), good...)
				sort.Strings(want)
				if strings.Join(sorted, "\n") != strings.Join(want, "\n") {
					t.Errorf("job %s epoch %d: %d paths, not a permutation of the %d good files", n, epoch, len(paths), len(good))
				}
				for k, p := range paths {
					if want := int64(p[len("class")] - '0'); labels[k] != want {
						t.Errorf("job %s: %s labelled %d, want ImageFolder's %d", n, p, labels[k], want)
					}
					if seen[i][digests[k]] {
						t.Errorf("job %s epoch %d: the tensor of %s was seen before", n, epoch, p)
					}
					seen[i][digests[k]] = true
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if p := <-peak; p > budget || p == 0 {
		t.Errorf("augmented cache peaked at %d bytes during the epochs, budget %d", p, budget)
	}
	st := e.status()
	num := func(k string) int64 { v, _ := strconv.ParseInt(st[k], 10, 64); return v }
	t.Logf("augments %d for 3 jobs × 2 epochs × %d files (+%d for the idle job); cache %d entries, %d bytes of %d",
		num("preprocess_augments"), len(good), idle, num("augmented_cache_entries"), num("augmented_cache_bytes"), budget)
	if aug := num("preprocess_augments") - int64(idle); aug > 2*int64(len(good))*11/10 {
		t.Errorf("%d augmentations for 3 jobs over 2 epochs of %d files: not shared (want at most 1.1 × %d)", aug, len(good), 2*len(good))
	}
	if num("augmented_cache_bytes") > budget {
		t.Errorf("augmented cache holds %d bytes over its %d budget", num("augmented_cache_bytes"), budget)
	}
	errs, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs/errors"))
	if !bytes.Contains(errs, []byte("class0/corrupt.jpg")) {
		t.Errorf(".epochfs/errors does not name the corrupt image:\n%s", errs)
	}
	jst, _ := os.ReadFile(filepath.Join(jobsDir, "a", "status"))
	if !bytes.Contains(jst, []byte("corrupt=2")) || !bytes.Contains(jst, []byte("view=augmented")) {
		t.Errorf("job status lacks the corrupt count or the view:\n%s", jst)
	}
	// What waited for the idle job goes with it. (The other jobs end
	// first: the producer may have made their next epoch's first samples.)
	for _, n := range names {
		if err := os.Remove(filepath.Join(jobsDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	if e.num("augmented_cache_entries") == 0 {
		t.Error("no entry waits for the idle job")
	}
	if err := os.Remove(filepath.Join(jobsDir, "idle")); err != nil {
		t.Fatal(err)
	}
	if n := e.num("augmented_cache_entries"); n != 0 {
		t.Errorf("%d augmented entries left after the idle job ended", n)
	}
}

func readOneBatch(t *testing.T, file string) (int, []string, []int64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil || len(b) == 0 {
		t.Fatalf("read %s: %d bytes, %v", file, len(b), err)
	}
	a := readNPZ(t, b)
	return len(a["paths"].strings(t)), a["paths"].strings(t), a["y"].int64s()
}

// A job whose process dies in the middle of a batch (nothing removes the
// job) pins nothing: once its lease ends, what waited for it is dropped.
func TestAKilledJobReleasesItsEntriesWhenItsLeaseEnds(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	good := makeJPEGs(t, src, 24)
	e := newEnv(t, src, 1<<30)
	e.opts.lease = time.Second
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 3, DecodedBytes: 0, AugmentedBytes: 64 << 20}
	e.mount()
	jobsDir := filepath.Join(e.mnt, ".epochfs/jobs")
	for _, n := range []string{"live", "killed"} {
		if err := os.Mkdir(filepath.Join(jobsDir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(jobsDir, n, "config"), []byte("batch_size=4\nseed=1\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The killed job's process reads part of a batch and dies.
	cmd := exec.Command("dd", "if="+filepath.Join(jobsDir, "killed", "batch"), "of=/dev/null", "bs=4096", "count=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dd: %v\n%s", err, out)
	}
	// The live job reads a whole epoch: every augmentation it takes is
	// kept for the killed job, which has not taken it.
	paths, _, _ := readBatches(t, filepath.Join(jobsDir, "live", "batch"))
	if len(paths) != len(good) {
		t.Fatalf("live job: %d samples, want %d", len(paths), len(good))
	}
	if n := e.num("augmented_cache_entries"); n == 0 {
		t.Fatal("nothing waits for the killed job: the test shows nothing")
	}
	// The live job keeps reading (renewing its lease); the killed one's
	// lease ends and its entries go.
	deadline := time.Now().Add(20 * time.Second)
	for e.num("augmented_cache_entries") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d augmented entries still wait for the killed job 20 s after it died (lease 1 s)", e.num("augmented_cache_entries"))
		}
		if _, err := os.ReadFile(filepath.Join(jobsDir, "live", "batch")); err != nil { // a batch, or the epoch's end
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// encodedBatch checks a view=encoded batch against the source files and
// returns its paths.
func encodedBatch(t *testing.T, src string, b []byte) []string {
	t.Helper()
	a := readNPZ(t, b)
	paths, offs, x := a["paths"].strings(t), a["offsets"].int64s(), a["x"].data
	if len(offs) != len(paths)+1 {
		t.Fatalf("%d offsets for %d paths", len(offs), len(paths))
	}
	for i, p := range paths {
		want, err := os.ReadFile(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x[offs[i]:offs[i+1]], want) {
			t.Errorf("%s: the batch's bytes are not the file's", p)
		}
	}
	return paths
}

// encodedJob makes job name on mnt with view=encoded and batches of size,
// and returns its batch file.
func encodedJob(t *testing.T, mnt, name string, size int) string {
	t.Helper()
	job := filepath.Join(mnt, ".epochfs/jobs", name)
	if err := os.Mkdir(job, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(job, "config"), fmt.Appendf(nil, "batch_size=%d\nseed=1\nview=encoded\n", size), 0); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(job, "batch")
}

// Each open of a batch file takes one batch, which its reads return; with
// passthrough the kernel serves it from the batch's memory file. An open
// beside a live one takes the next batch, served by the daemon, and no
// registration outlives the handles.
func TestEachOpenOfABatchFileTakesOneBatch(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	good := makeJPEGs(t, src, 20)
	e := newEnv(t, src, 1<<30)
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 3, AugmentedBytes: 16 << 20}
	e.mount()
	e.settle()
	file := encodedJob(t, e.mnt, "enc", 4)
	pt := e.status()["passthrough"] == "on"
	before := e.num("batches_passthrough")

	// Two opens at once: two batches, each read whole twice from offset 0.
	f1, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	// The size of the open's batch while it is the file's only open, for
	// a reader that maps it whole. (The kernel keeps one size per file.)
	size, err := f1.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f1.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	f2, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, f := range []*os.File{f1, f2} {
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && size != int64(len(b)) {
			t.Errorf("lseek to the end of an open batch gave %d, the batch has %d bytes", size, len(b))
		}
		again := make([]byte, len(b)+1)
		if n, err := f.ReadAt(again, 0); n != len(b) || !bytes.Equal(again[:n], b) {
			t.Errorf("a second read from offset 0 gave %d bytes (%v), not the open's batch of %d", n, err, len(b))
		}
		got = append(got, encodedBatch(t, src, b)...)
	}
	f1.Close()
	f2.Close()
	// Once the kernel has released both (it does so after close returns).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fi, err := os.Stat(file)
		if err == nil && fi.Size() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("stat of batch with no open left: %v, size %d, want 0", err, fi.Size())
			break
		}
	}
	// An open that reads nothing takes a batch too.
	f3, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	f3.Close()
	skipped := 4
	for {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		got = append(got, encodedBatch(t, src, b)...)
	}
	if len(got) != len(good)-skipped {
		t.Errorf("%d files in the epoch's batches read, want %d (%d left in the batch an open took without reading)", len(got), len(good)-skipped, skipped)
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Errorf("%s came twice in one epoch", p)
		}
		seen[p] = true
	}
	if pt {
		// Each open but f2's, unless a release came after the open's wait.
		opens := 3 + (len(got)-8)/4
		n := e.num("batches_passthrough") - before
		if n < 1 || n > int64(opens-1) {
			t.Errorf("%d batch opens served by passthrough, want 1 to %d of the %d", n, opens-1, opens)
		}
		t.Logf("%d of %d batch opens served by passthrough", n, opens)
		deadline := time.Now().Add(10 * time.Second)
		for e.num("passthrough_backings") != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := e.num("passthrough_backings"); n != 0 {
			t.Errorf("%d registrations held after every batch file was closed", n)
		}
	} else {
		t.Log("the mount has no passthrough: batches served by the daemon")
	}
}

// A batch a reader has mapped keeps its bytes while later batches are
// assembled: memory files are never reused (internal/views/memfile.go).
func TestAMappedBatchKeepsItsBytes(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	makeJPEGs(t, src, 20)
	e := newEnv(t, src, 1<<30)
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 3, AugmentedBytes: 16 << 20}
	e.mount()
	e.settle()
	requirePassthrough(t, e) // without it batches are not in memory files
	file := encodedJob(t, e.mnt, "mapped", 2)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil || size == 0 {
		t.Fatalf("lseek: %d, %v", size, err)
	}
	mapped, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // the mapping holds the batch now
	want := append([]byte(nil), mapped...)
	encodedBatch(t, src, want)
	// The rest of this epoch and the next: every batch its files' bytes.
	for epoch := 0; epoch < 2; epoch++ {
		for {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 {
				break
			}
			encodedBatch(t, src, b)
		}
	}
	if !bytes.Equal(mapped, want) {
		t.Error("a mapped batch changed while later batches were assembled")
	}
	if err := syscall.Munmap(mapped); err != nil {
		t.Fatal(err)
	}
}
