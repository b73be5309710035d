package profile

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/epochfs/epochfs/internal/testenv"
)

// makeDataset writes an ImageFolder-like tree: classes × perClass files of
// sizes 1000, 2000, …, plus hidden entries that must not count.
func makeDataset(t *testing.T, classes, perClass int) (dir string, files int, total int64) {
	t.Helper()
	dir = t.TempDir()
	size := 0
	for c := 0; c < classes; c++ {
		cd := filepath.Join(dir, "class"+string(rune('a'+c)))
		if err := os.MkdirAll(cd, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perClass; i++ {
			size += 1000
			data := bytes.Repeat([]byte{byte(i)}, size)
			if err := os.WriteFile(filepath.Join(cd, "img"+string(rune('0'+i))+".jpg"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			files++
			total += int64(size)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".DS_Store"), make([]byte, 99999), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".epochfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".epochfs", "x"), make([]byte, 5), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, files, total
}

func TestWalkDatasetCountsSampleFiles(t *testing.T) {
	dir, files, total := makeDataset(t, 3, 7)
	ds, err := WalkDataset(context.Background(), dir, 0, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Files != files || ds.Bytes != total || !ds.Complete {
		t.Errorf("walk: %d files, %d bytes, complete %v; want %d, %d, true", ds.Files, ds.Bytes, ds.Complete, files, total)
	}
	if len(ds.Sample) != 5 {
		t.Errorf("sample of %d, want 5", len(ds.Sample))
	}
	seen := map[string]bool{}
	for _, f := range ds.Sample {
		if seen[f] || strings.Contains(f, "/.") {
			t.Errorf("bad sample entry %s", f)
		}
		seen[f] = true
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	// Different seeds pick different samples (eventually).
	differs := false
	for seed := uint64(2); seed < 20 && !differs; seed++ {
		other, err := WalkDataset(context.Background(), dir, 0, 5, seed)
		if err != nil {
			t.Fatal(err)
		}
		differs = strings.Join(other.Sample, ",") != strings.Join(ds.Sample, ",")
	}
	if !differs {
		t.Error("every seed chose the same sample files")
	}
	cut, err := WalkDataset(context.Background(), dir, 4, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if cut.Complete || cut.Files != 4 || len(cut.Sample) != 4 {
		t.Errorf("limited walk: %+v, want 4 files, incomplete", cut)
	}
	if _, err := WalkDataset(context.Background(), filepath.Join(dir, "missing"), 0, 1, 1); err == nil {
		t.Error("walk of a missing directory succeeded")
	}
}

func TestReadFilesReadsEveryByte(t *testing.T) {
	dir, _, total := makeDataset(t, 2, 5)
	ds, err := WalkDataset(context.Background(), dir, 0, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, readers := range []int{1, 4} {
		n, d, count, err := ReadFiles(context.Background(), ds.Sample, readers, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n != total || count != len(ds.Sample) || d <= 0 {
			t.Errorf("%d readers: %d bytes from %d files in %v, want %d from %d", readers, n, count, d, total, len(ds.Sample))
		}
	}
	// maxBytes stops it early.
	n, _, count, err := ReadFiles(context.Background(), ds.Sample, 1, 1)
	if err != nil || count != 1 || n >= total {
		t.Errorf("capped read: %d bytes, %d files, %v; want 1 file", n, count, err)
	}
	_, _, _, err = ReadFiles(context.Background(), []string{filepath.Join(dir, "nope")}, 1, 0)
	if err == nil {
		t.Error("reading a missing file succeeded")
	}
}

func TestTierBandwidthProbesAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	rep, err := TierBandwidth(context.Background(), Tier{Name: "nvme", Path: dir}, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Read.OK || rep.Read.Value <= 0 || !strings.Contains(rep.Read.How, "2.0MiB probe file in "+dir) {
		t.Errorf("tier report %+v", rep)
	}
	// A tier directory that does not exist yet: measured in its parent.
	missing := filepath.Join(dir, "not", "yet")
	rep, err = TierBandwidth(context.Background(), Tier{Name: "nvme", Path: missing}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Read.OK || !strings.Contains(rep.Read.How, "nearest existing directory above "+missing) {
		t.Errorf("missing tier dir: %+v", rep.Read)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("probe files left behind: %v", left)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("profiling created the tier directory: %v", err)
	}
}

func TestIsMemoryFS(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		testenv.Skip(t, "no /dev/shm")
	}
	memFS, dir, err := IsMemoryFS("/dev/shm/epochfs-profile-test/sub")
	if err != nil {
		t.Fatal(err)
	}
	if !memFS || dir != "/dev/shm" {
		t.Errorf("/dev/shm: memory %v (checked %s), want true (/dev/shm)", memFS, dir)
	}
	if memFS, _, err := IsMemoryFS("/proc/self"); err != nil || memFS {
		t.Errorf("/proc: memory %v, %v; want false", memFS, err)
	}
}

// fakePipeline "decodes" by copying and "augments" by summing bytes, and
// counts its calls.
type fakePipeline struct {
	decodeAugment, decode, augment atomic.Int64
	mu                             sync.Mutex
	augmented                      map[int]bool // lengths of decoded inputs seen by Augment
	fail                           bool
}

func (f *fakePipeline) DecodeAugment(b []byte) error {
	f.decodeAugment.Add(1)
	if f.fail {
		return errors.New("corrupt sample")
	}
	d, _ := f.Decode(b)
	f.decode.Add(-1)
	return f.Augment(d)
}

func (f *fakePipeline) Decode(b []byte) (any, error) {
	f.decode.Add(1)
	return append([]byte(nil), b...), nil
}

func (f *fakePipeline) Augment(d any) error {
	f.augment.Add(1)
	b := d.([]byte)
	var s byte
	for _, x := range b {
		s += x
	}
	f.mu.Lock()
	if f.augmented == nil {
		f.augmented = map[int]bool{}
	}
	f.augmented[len(b)] = true
	f.mu.Unlock()
	return nil
}

func TestCPUThroughputRunsEverySampleThroughTheHook(t *testing.T) {
	samples := [][]byte{make([]byte, 10), make([]byte, 20), make([]byte, 30)}
	f := &fakePipeline{}
	da, a, err := CPUThroughput(context.Background(), f, samples, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !da.OK || !a.OK || da.Value <= 0 || a.Value <= 0 {
		t.Fatalf("measurements %+v %+v", da, a)
	}
	// 3 samples × 4 rounds through DecodeAugment, then 3 decodes and 12
	// augments (12 inside DecodeAugment too).
	if got := f.decodeAugment.Load(); got != 12 {
		t.Errorf("DecodeAugment called %d times, want 12", got)
	}
	if got := f.decode.Load(); got != 3 {
		t.Errorf("Decode called %d times outside DecodeAugment, want 3", got)
	}
	if got := f.augment.Load(); got != 24 {
		t.Errorf("Augment called %d times, want 24", got)
	}
	if len(f.augmented) != 3 {
		t.Errorf("Augment saw decoded sizes %v, want the 3 samples", f.augmented)
	}
	if !strings.Contains(da.How, "12 samples") || !strings.Contains(da.How, "2 workers") {
		t.Errorf("T_D+A how: %q", da.How)
	}
	bad := &fakePipeline{fail: true}
	if _, _, err := CPUThroughput(context.Background(), bad, samples, 2, 1); err == nil {
		t.Error("a failing pipeline was measured")
	}
}

func TestRunMeasuresEverythingItCan(t *testing.T) {
	dir, files, total := makeDataset(t, 2, 6)
	tier := t.TempDir()
	f := &fakePipeline{}
	rep, err := Run(context.Background(), Options{
		Source: dir, Files: 8, Readers: 2, Tiers: []Tier{{"nvme", tier}}, ProbeBytes: 1 << 20,
		Pipeline: f, Workers: 2, Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]Measurement{
		"cores": rep.Cores, "memory": rep.MemoryBytes, "N_total": rep.Samples, "S_data": rep.SampleBytes,
		"storage sequential": rep.StorageSequential, "storage random": rep.StorageRandom,
		"T_D+A": rep.DecodeAugment, "T_A": rep.Augment, "tier": rep.Tiers[0].Read,
	} {
		if !m.OK || m.Value <= 0 || m.How == "" {
			t.Errorf("%s: %+v, want a positive measurement that says how", name, m)
		}
	}
	if rep.Samples.Value != float64(files) || rep.SampleBytes.Value != float64(total)/float64(files) {
		t.Errorf("N_total %v, S_data %v; want %d, %v", rep.Samples.Value, rep.SampleBytes.Value, files, float64(total)/float64(files))
	}
	if !strings.Contains(rep.StorageRandom.How, "random order, 2 readers") || !strings.Contains(rep.StorageSequential.How, "directory order") {
		t.Errorf("storage how: %q / %q", rep.StorageSequential.How, rep.StorageRandom.How)
	}
	// Without a pipeline, T_D+A and T_A are reported as not measured, and why.
	rep, err = Run(context.Background(), Options{Source: dir, Files: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.DecodeAugment.OK || !strings.Contains(rep.DecodeAugment.How, "no preprocessing pipeline given") {
		t.Errorf("T_D+A without a pipeline: %+v", rep.DecodeAugment)
	}
	// No source: host only.
	rep, err = Run(context.Background(), Options{})
	if err != nil || rep.Samples.OK || !rep.Cores.OK {
		t.Errorf("no source: %+v, %v", rep, err)
	}
	// An empty source is an error that says so.
	if _, err := Run(context.Background(), Options{Source: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no sample files") {
		t.Errorf("empty source: %v", err)
	}
}

func TestHost(t *testing.T) {
	cores, memory := Host(context.Background())
	if !cores.OK || cores.Value < 1 || !memory.OK || memory.Value < 1<<20 {
		t.Errorf("host: cores %+v, memory %+v", cores, memory)
	}
}

// sizedPipeline is a fakePipeline that reports sizes: a decoded sample is
// twice its input, an augmented one 7 bytes.
type sizedPipeline struct{ fakePipeline }

func (s *sizedPipeline) DecodedBytes(d any) int64 { return 2 * int64(len(d.([]byte))) }
func (s *sizedPipeline) AugmentedBytes(d any) (int64, error) {
	if len(d.([]byte)) == 0 {
		return 0, errors.New("empty")
	}
	return 7, nil
}

func TestSizesAreMeansOverTheSamples(t *testing.T) {
	samples := [][]byte{make([]byte, 10), make([]byte, 30), {}}
	d, a := Sizes(&sizedPipeline{}, samples)
	if !d.OK || d.Value != 40 || !a.OK || a.Value != 7 || !strings.Contains(d.How, "2 samples") {
		t.Errorf("decoded %+v augmented %+v, want 40 and 7 over the 2 samples that augment", d, a)
	}
	if d, a := Sizes(&fakePipeline{}, samples); d.OK || a.OK {
		t.Errorf("a pipeline without sizes measured %+v %+v", d, a)
	}
	if d, _ := Sizes(&sizedPipeline{}, [][]byte{{}}); d.OK {
		t.Errorf("no sample augments, yet %+v", d)
	}
}
