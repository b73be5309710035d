// Package profile measures the inputs of the DSI model on this node: the
// dataset (N_total and S_data, by walking it), the source storage bandwidth
// (B_storage: whole-file reads of sample files in directory order and in
// random order, with the page cache dropped for each file first), the read
// bandwidth of each local tier, cores and memory (gopsutil), and, through a
// [Pipeline] hook, the CPU throughputs T_D+A and T_A of our own
// preprocessing. Every [Measurement] says how it was taken.
//
// Unlike package model, this package does I/O. It never writes to the
// source; it writes one probe file into each tier (or the nearest existing
// directory above it) and removes it.
package profile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/mem"
	"golang.org/x/sys/unix"
)

// Measurement is one measured value and how it was measured. A value that
// was not measured has OK false and says why in How.
type Measurement struct {
	Value float64
	How   string
	OK    bool
}

func measured(v float64, format string, a ...any) Measurement {
	return Measurement{Value: v, How: fmt.Sprintf(format, a...), OK: true}
}

func skipped(why string) Measurement { return Measurement{How: why} }

func notMeasured(format string, a ...any) Measurement {
	return Measurement{How: fmt.Sprintf(format, a...)}
}

// Pipeline is the CPU side of the data pipeline, as the preprocess package
// will provide it. The profiler calls it from several goroutines at once.
type Pipeline interface {
	// DecodeAugment turns one encoded sample into its augmented form:
	// what a sample from the encoded cache or the source costs (T_D+A).
	DecodeAugment(encoded []byte) error
	// Decode turns one encoded sample into its decoded form (decode and
	// static transforms), the input of Augment.
	Decode(encoded []byte) (decoded any, err error)
	// Augment applies the random augmentations and the output step to a
	// decoded sample: what a sample from the decoded cache costs (T_A). It
	// must not modify decoded.
	Augment(decoded any) error
}

// Tier is a local tier to measure.
type Tier struct {
	Name string
	Path string
}

// Options says what to measure.
type Options struct {
	// Source is the dataset directory. Empty: no dataset, storage or CPU
	// measurement.
	Source string
	// WalkLimit stops the dataset walk after this many files (0: walk it
	// all). N_total and S_data are reported only from a full walk.
	WalkLimit int
	// Files is how many sample files (chosen at random) the storage and
	// CPU measurements read; default 256.
	Files int
	// MaxBytes caps the bytes read by each storage measurement; default
	// 256 MiB.
	MaxBytes int64
	// Readers is the number of concurrent readers for the random-order
	// storage measurement; default 8 (a data loader's workers).
	Readers int
	// Tiers are measured with a probe file of ProbeBytes (default 64 MiB).
	Tiers      []Tier
	ProbeBytes int64
	// Pipeline, if not nil, is timed for T_D+A and T_A with Workers
	// goroutines (default: the number of cores).
	Pipeline Pipeline
	Workers  int
	// Seed chooses the sample files.
	Seed uint64
}

// TierReport is one tier's measurement.
type TierReport struct {
	Name, Path string
	// Memory says the tier is on tmpfs or ramfs (a RAM tier).
	Memory bool
	// Read is the sequential read bandwidth in bytes/s.
	Read Measurement
}

// Report is everything the profiler measured.
type Report struct {
	Cores       Measurement // logical CPUs
	MemoryBytes Measurement // physical memory, bytes
	// Dataset.
	Samples      Measurement // N_total: files in the dataset
	SampleBytes  Measurement // S_data: mean file size, bytes
	DatasetBytes Measurement
	// B_storage, bytes/s.
	StorageSequential Measurement
	StorageRandom     Measurement
	Tiers             []TierReport
	// Per node CPU throughput, samples/s.
	DecodeAugment Measurement // T_D+A
	Augment       Measurement // T_A
	// Sizes of a sample's forms, bytes (a Pipeline that is a Sizer).
	DecodedBytes   Measurement
	AugmentedBytes Measurement
}

// Sizer is a Pipeline that tells the memory its forms take: what the
// views rules of the model need for M and M_A.
type Sizer interface {
	// DecodedBytes is the memory of a decoded sample (Decode's result).
	DecodedBytes(decoded any) int64
	// AugmentedBytes is the memory of the sample Augment makes of it.
	AugmentedBytes(decoded any) (int64, error)
}

// Host reads the number of logical CPUs and the physical memory with
// gopsutil.
func Host(ctx context.Context) (cores, memory Measurement) {
	if n, err := cpu.CountsWithContext(ctx, true); err == nil && n > 0 {
		cores = measured(float64(n), "gopsutil cpu.Counts(logical)")
	} else {
		cores = measured(float64(runtime.NumCPU()), "runtime.NumCPU (gopsutil: %v)", err)
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil && vm.Total > 0 {
		memory = measured(float64(vm.Total), "gopsutil mem.VirtualMemory total")
	} else {
		memory = notMeasured("gopsutil mem.VirtualMemory: %v", err)
	}
	return cores, memory
}

// Dataset is the result of walking the dataset directory.
type Dataset struct {
	Files    int   // regular files seen
	Bytes    int64 // their total size
	Complete bool  // the walk saw every file (no WalkLimit cut)
	// Sample is a uniform random sample of the files seen, at most the
	// size asked for, in directory (walk) order.
	Sample []string
}

// WalkDataset walks dir and counts its regular files (hidden names, those
// starting with '.', are skipped, as data loaders skip them), keeping a
// uniform random sample of up to keep of them.
func WalkDataset(ctx context.Context, dir string, limit, keep int, seed uint64) (Dataset, error) {
	var d Dataset
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	type pick struct {
		order int
		path  string
	}
	var picks []pick
	errLimit := errors.New("limit")
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if strings.HasPrefix(e.Name(), ".") && path != dir {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		if limit > 0 && d.Files >= limit {
			return errLimit
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		d.Files++
		d.Bytes += info.Size()
		// Reservoir sampling (Algorithm R).
		if len(picks) < keep {
			picks = append(picks, pick{d.Files, path})
		} else if j := rng.IntN(d.Files); j < keep {
			picks[j] = pick{d.Files, path}
		}
		return nil
	})
	d.Complete = err == nil
	if err != nil && !errors.Is(err, errLimit) {
		return d, fmt.Errorf("profile: walk %s: %w", dir, err)
	}
	sort.Slice(picks, func(i, j int) bool { return picks[i].order < picks[j].order })
	for _, p := range picks {
		d.Sample = append(d.Sample, p.path)
	}
	return d, nil
}

// ReadFiles reads the files whole with readers concurrent readers and
// returns the bytes read and the wall time. The page cache of each file is
// dropped first (posix_fadvise DONTNEED), so the reads come from the
// storage unless it cannot drop them (tmpfs). It stops at maxBytes.
func ReadFiles(ctx context.Context, files []string, readers int, maxBytes int64) (int64, time.Duration, int, error) {
	if readers < 1 {
		readers = 1
	}
	for _, f := range files {
		dropCache(f)
	}
	var (
		mu       sync.Mutex
		total    int64
		count    int
		firstErr error
		next     int
	)
	take := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(files) || (maxBytes > 0 && total >= maxBytes) || firstErr != nil || ctx.Err() != nil {
			return "", false
		}
		next++
		return files[next-1], true
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < readers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for {
				f, ok := take()
				if !ok {
					return
				}
				n, err := readWhole(f, buf)
				mu.Lock()
				total += n
				count++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return total, elapsed, count, firstErr
}

func readWhole(path string, buf []byte) (n int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("profile: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("profile: %w", cerr)
		}
	}()
	for {
		k, rerr := f.Read(buf)
		n += int64(k)
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return n, nil
			}
			return n, fmt.Errorf("profile: read %s: %w", path, rerr)
		}
	}
}

// dropCache asks the kernel to drop the file's cached pages. It is best
// effort: it fails silently where the file system keeps data in memory.
func dropCache(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	_ = f.Close()
}

// IsMemoryFS reports whether path (or its nearest existing parent) is on
// tmpfs or ramfs, and which directory was checked.
func IsMemoryFS(path string) (bool, string, error) {
	dir, err := existingDir(path)
	if err != nil {
		return false, "", err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, dir, fmt.Errorf("profile: statfs %s: %w", dir, err)
	}
	const tmpfsMagic, ramfsMagic = 0x01021994, 0x858458f6
	return st.Type == tmpfsMagic || st.Type == ramfsMagic, dir, nil
}

// existingDir returns path if it is a directory, else its nearest existing
// parent directory.
func existingDir(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("profile: %w", err)
	}
	for {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", fmt.Errorf("profile: no existing directory above %s", path)
		}
		p = parent
	}
}

// TierBandwidth writes a probe file of size bytes into the tier's directory
// (or the nearest existing directory above it), syncs it, drops it from the
// page cache, reads it back in 1 MiB reads and removes it. It returns the
// read bandwidth in bytes/s.
func TierBandwidth(ctx context.Context, t Tier, size int64) (TierReport, error) {
	rep := TierReport{Name: t.Name, Path: t.Path}
	memFS, dir, err := IsMemoryFS(t.Path)
	if err != nil {
		rep.Read = notMeasured("%v", err)
		return rep, err
	}
	rep.Memory = memFS
	f, err := os.CreateTemp(dir, ".epochfs-profile-*")
	if err != nil {
		rep.Read = notMeasured("cannot write a probe file in %s: %v", dir, err)
		return rep, fmt.Errorf("profile: tier %s: %w", t.Name, err)
	}
	name := f.Name()
	defer os.Remove(name)
	buf := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var written int64
	for written < size {
		if err := ctx.Err(); err != nil {
			f.Close()
			return rep, err
		}
		k := min(int64(len(buf)), size-written)
		if _, err := f.Write(buf[:k]); err != nil {
			f.Close()
			rep.Read = notMeasured("probe write in %s: %v", dir, err)
			return rep, fmt.Errorf("profile: tier %s: %w", t.Name, err)
		}
		written += k
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return rep, fmt.Errorf("profile: tier %s: %w", t.Name, err)
	}
	if err := f.Close(); err != nil {
		return rep, fmt.Errorf("profile: tier %s: %w", t.Name, err)
	}
	n, elapsed, _, err := ReadFiles(ctx, []string{name}, 1, 0)
	if err != nil {
		return rep, fmt.Errorf("profile: tier %s: %w", t.Name, err)
	}
	where := dir
	if dir != filepath.Clean(t.Path) {
		where = dir + " (nearest existing directory above " + t.Path + ")"
	}
	kind := "page cache drop requested first (posix_fadvise DONTNEED)"
	if memFS {
		kind = "tmpfs: memory speed"
	}
	rep.Read = measured(rate(n, elapsed), "wrote, synced and read back a %s probe file in %s, 1 MiB reads, %s", sizeStr(n), where, kind)
	return rep, nil
}

// CPUThroughput times the pipeline over the samples with workers
// goroutines, each sample once per round, for rounds rounds. It returns
// T_D+A and T_A in samples/s.
func CPUThroughput(ctx context.Context, p Pipeline, samples [][]byte, workers, rounds int) (decodeAugment, augment Measurement, err error) {
	if len(samples) == 0 {
		return notMeasured("no samples"), notMeasured("no samples"), nil
	}
	workers = max(1, workers)
	rounds = max(1, rounds)
	n := len(samples) * rounds
	run := func(f func(i int) error) (time.Duration, error) {
		var (
			mu       sync.Mutex
			next     int
			firstErr error
			wg       sync.WaitGroup
		)
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					if next >= n || firstErr != nil || ctx.Err() != nil {
						mu.Unlock()
						return
					}
					i := next
					next++
					mu.Unlock()
					if err := f(i % len(samples)); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		return time.Since(start), firstErr
	}
	elapsed, err := run(func(i int) error { return p.DecodeAugment(samples[i]) })
	if err != nil {
		return notMeasured("decode+augment failed: %v", err), notMeasured("not measured"), fmt.Errorf("profile: decode+augment: %w", err)
	}
	decodeAugment = measured(float64(n)/elapsed.Seconds(), "our pipeline decoded and augmented %d samples (%d files × %d rounds, in memory) with %d workers in %v", n, len(samples), rounds, workers, elapsed.Round(time.Millisecond))
	decoded := make([]any, len(samples))
	for i, s := range samples {
		if decoded[i], err = p.Decode(s); err != nil {
			return decodeAugment, notMeasured("decode failed: %v", err), fmt.Errorf("profile: decode: %w", err)
		}
	}
	elapsed, err = run(func(i int) error { return p.Augment(decoded[i]) })
	if err != nil {
		return decodeAugment, notMeasured("augment failed: %v", err), fmt.Errorf("profile: augment: %w", err)
	}
	augment = measured(float64(n)/elapsed.Seconds(), "our pipeline augmented %d decoded samples (%d files × %d rounds) with %d workers in %v", n, len(samples), rounds, workers, elapsed.Round(time.Millisecond))
	return decodeAugment, augment, nil
}

// Sizes measures the mean bytes of a decoded sample and of an augmented
// one over the samples, when p is a Sizer.
func Sizes(p Pipeline, samples [][]byte) (decoded, augmented Measurement) {
	sz, ok := p.(Sizer)
	if !ok {
		return skipped("the pipeline does not report sizes"), skipped("the pipeline does not report sizes")
	}
	var dsum, asum int64
	n := 0
	for _, s := range samples {
		d, err := p.Decode(s)
		if err != nil {
			continue
		}
		a, err := sz.AugmentedBytes(d)
		if err != nil {
			continue
		}
		dsum += sz.DecodedBytes(d)
		asum += a
		n++
	}
	if n == 0 {
		return notMeasured("no sample decoded"), notMeasured("no sample decoded")
	}
	return measured(float64(dsum)/float64(n), "mean of %d samples decoded with the pipeline's static steps", n),
		measured(float64(asum)/float64(n), "mean of %d samples through the pipeline", n)
}

func rate(n int64, d time.Duration) float64 {
	s := d.Seconds()
	if s <= 0 {
		s = 1e-9
	}
	return float64(n) / s
}

func sizeStr(n int64) string {
	v := float64(n)
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
