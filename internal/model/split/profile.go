package split

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/model/profile"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
)

// profileFiles and profileTimeout bound what the mount measures for the
// model: a handful of the dataset's files, read from the source, a few
// seconds at most.
const (
	profileFiles   = 16
	profileRounds  = 2
	profileReaders = 4
	profileTimeout = 10 * time.Second
)

// profileViews measures what the DSI model needs of the mount's own
// pipeline and cannot be told by the catalog: T_D+A and T_A on the mount's
// workers, and the bytes of a decoded and of an augmented sample. It reads
// up to profileFiles files spread over the dataset from the source (within
// its deadline) and keeps those the pipeline can decode.
func profileViews(ctx context.Context, o Options, obs *model.Observed) {
	vo := o.Views
	fail := func(format string, a ...any) {
		why := &model.Measured{How: fmt.Sprintf(format, a...)}
		obs.DecodeAugment, obs.Augment, obs.DecodedBytes, obs.AugmentedBytes = why, why, why, why
	}
	if vo == nil {
		fail("not measured: the mount serves no views ([preprocess] views = false)")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, profileTimeout)
	defer cancel()
	pl, err := preprocess.New(vo.Pipeline)
	if err != nil {
		fail("not measured: [preprocess]: %v", err)
		return
	}
	defer pl.Close()
	prof := preprocess.NewProfiler(pl)
	n := int(o.Catalog.Files())
	var entries []*catalog.Entry
	for i := 0; i < profileFiles && i < n; i++ {
		e := o.Catalog.ByIndex(int(int64(i) * int64(n) / int64(min(n, profileFiles))))
		if e != nil && e.Kind() == catalog.KindFile {
			entries = append(entries, e)
		}
	}
	// Read them with a few readers: the time is also a rough B_storage.
	datas := make([][]byte, len(entries))
	errs := make([]error, len(entries))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range profileReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(entries); i = int(next.Add(1) - 1) {
				datas[i], errs[i] = readSource(ctx, o.Source, entries[i])
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	var samples [][]byte
	var reasons []error
	var bytes int64
	read := 0
	for i, data := range datas {
		if errs[i] != nil {
			reasons = append(reasons, errs[i])
			continue
		}
		read++
		bytes += int64(len(data))
		if _, err := prof.Decode(data); err != nil {
			reasons = append(reasons, err)
			continue
		}
		samples = append(samples, data)
	}
	if obs.StorageRandom == nil && bytes > 0 && took > 0 {
		obs.StorageRandom = &model.Measured{Value: float64(bytes) / took.Seconds(), OK: true,
			How: fmt.Sprintf("at mount: read %d files (%d bytes) from the source with %d readers in %v (the source's caches not dropped: set b_storage for the cold rate)",
				read, bytes, profileReaders, took.Round(time.Microsecond))}
	}
	if len(samples) == 0 {
		why := "the dataset has no files"
		if len(reasons) > 0 {
			why = fmt.Sprintf("none of %d files could be read and decoded: %v", len(reasons), reasons[0])
		}
		fail("not measured at mount: %s", why)
		return
	}
	workers := vo.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0) // the pool's default
	}
	da, a, err := profile.CPUThroughput(ctx, prof, samples, workers, profileRounds)
	conv := func(x profile.Measurement) *model.Measured {
		return &model.Measured{Value: x.Value, How: "at mount: " + x.How, OK: x.OK}
	}
	obs.DecodeAugment, obs.Augment = conv(da), conv(a)
	if err != nil {
		o.Logger.Warn("model: profiling the pipeline at mount failed: " + err.Error())
	}
	d, au := profile.Sizes(prof, samples)
	obs.DecodedBytes, obs.AugmentedBytes = conv(d), conv(au)
}

// readSource reads e whole from the source.
func readSource(ctx context.Context, src *source.Source, e *catalog.Entry) ([]byte, error) {
	f, err := src.Open(ctx, e.Path())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, e.Attr().Size)
	for off := 0; off < len(buf); {
		k, err := f.ReadAt(ctx, buf[off:], int64(off))
		off += k
		if err == io.EOF && off == len(buf) {
			break
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, fmt.Errorf("%s: the file ended at %d of %d bytes", e.Path(), off, len(buf))
		}
	}
	return buf, nil
}
