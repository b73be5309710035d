package profile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)

// Run measures what opts asks for. It measures as much as it can: a part
// that fails is reported as not measured, with the reason in How, and the
// first such error is returned beside the report.
//
// Long: the profile's measurements in the order they run, each a few lines.
func Run(ctx context.Context, opts Options) (Report, error) {
	if opts.Files <= 0 {
		opts.Files = 256
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 256 << 20
	}
	if opts.Readers <= 0 {
		opts.Readers = 8
	}
	if opts.ProbeBytes <= 0 {
		opts.ProbeBytes = 64 << 20
	}
	var rep Report
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	rep.Cores, rep.MemoryBytes = Host(ctx)
	if opts.Workers <= 0 {
		opts.Workers = int(rep.Cores.Value)
	}
	for _, t := range opts.Tiers {
		tr, err := TierBandwidth(ctx, t, opts.ProbeBytes)
		keep(err)
		rep.Tiers = append(rep.Tiers, tr)
	}
	none := "no source directory given"
	rep.Samples, rep.SampleBytes, rep.DatasetBytes = skipped(none), skipped(none), skipped(none)
	rep.StorageSequential, rep.StorageRandom = skipped(none), skipped(none)
	rep.DecodeAugment, rep.Augment = skipped(none), skipped(none)
	rep.DecodedBytes, rep.AugmentedBytes = skipped(none), skipped(none)
	if opts.Source == "" {
		return rep, firstErr
	}
	start := time.Now()
	ds, err := WalkDataset(ctx, opts.Source, opts.WalkLimit, opts.Files, opts.Seed)
	if err != nil {
		none = err.Error()
		rep.Samples, rep.SampleBytes, rep.DatasetBytes = skipped(none), skipped(none), skipped(none)
		rep.StorageSequential, rep.StorageRandom = skipped(none), skipped(none)
		rep.DecodeAugment, rep.Augment = skipped(none), skipped(none)
		rep.DecodedBytes, rep.AugmentedBytes = skipped(none), skipped(none)
		keep(err)
		return rep, firstErr
	}
	walk := time.Since(start).Round(100 * time.Microsecond)
	switch {
	case ds.Files == 0:
		err := fmt.Errorf("profile: %s has no sample files", opts.Source)
		keep(err)
		rep.Samples, rep.SampleBytes, rep.DatasetBytes = notMeasured("%v", err), notMeasured("%v", err), notMeasured("%v", err)
	case ds.Complete:
		rep.Samples = measured(float64(ds.Files), "counted the regular files under %s (hidden names skipped) in %v", opts.Source, walk)
		rep.SampleBytes = measured(float64(ds.Bytes)/float64(ds.Files), "mean size of the %d files under %s", ds.Files, opts.Source)
		rep.DatasetBytes = measured(float64(ds.Bytes), "total size of the %d files under %s", ds.Files, opts.Source)
	default:
		why := fmt.Sprintf("walk stopped after %d files (the configured values are used)", ds.Files)
		rep.Samples, rep.DatasetBytes = skipped(why), skipped(why)
		rep.SampleBytes = skipped(why)
	}
	if len(ds.Sample) == 0 {
		return rep, firstErr
	}
	// Sequential: the sample in directory order, one reader.
	n, d, files, err := ReadFiles(ctx, ds.Sample, 1, opts.MaxBytes)
	keep(err)
	if err == nil {
		rep.StorageSequential = measured(rate(n, d), "read %d sample files (%s) whole in directory order, 1 reader, page cache drop requested first (posix_fadvise DONTNEED), in %v",
			files, sizeStr(n), d.Round(time.Millisecond))
	} else {
		rep.StorageSequential = notMeasured("%v", err)
	}
	// Random: the same files shuffled, opts.Readers readers.
	shuffled := append([]string(nil), ds.Sample...)
	rng := rand.New(rand.NewPCG(opts.Seed, 2))
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	n, d, files, err = ReadFiles(ctx, shuffled, opts.Readers, opts.MaxBytes)
	keep(err)
	if err == nil {
		rep.StorageRandom = measured(rate(n, d), "read %d sample files (%s) whole in random order, %d readers, page cache drop requested first (posix_fadvise DONTNEED), in %v",
			files, sizeStr(n), opts.Readers, d.Round(time.Millisecond))
	} else {
		rep.StorageRandom = notMeasured("%v", err)
	}
	if opts.Pipeline == nil {
		msg := "not measured: no preprocessing pipeline given"
		rep.DecodeAugment, rep.Augment = skipped(msg), skipped(msg)
		rep.DecodedBytes, rep.AugmentedBytes = skipped(msg), skipped(msg)
		return rep, firstErr
	}
	var samples [][]byte
	var total int64
	for _, f := range ds.Sample {
		if total >= opts.MaxBytes {
			break
		}
		b, err := os.ReadFile(f)
		if err != nil {
			keep(fmt.Errorf("profile: %w", err))
			break
		}
		samples = append(samples, b)
		total += int64(len(b))
	}
	da, a, err := CPUThroughput(ctx, opts.Pipeline, samples, opts.Workers, 1)
	keep(err)
	rep.DecodeAugment, rep.Augment = da, a
	rep.DecodedBytes, rep.AugmentedBytes = Sizes(opts.Pipeline, samples)
	return rep, firstErr
}
