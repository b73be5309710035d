// Package datagen writes realistic image-classification datasets for tests,
// the demo and the benchmarks: an ImageNet-like class tree of JPEG files
// (n00000000/n00000000_000000.JPEG, ...) and, optionally, the same samples as
// WebDataset tar shards.
//
// Samples are crops of real photographs (Debian's mate-backgrounds by
// default), scaled to about the nominal size (each side within ±20%, one in
// six portrait, ~1.5% grayscale) and re-encoded at a quality, and if needed
// with a film-grain-like noise, chosen so file sizes follow a lognormal
// spread (σ = 0.4 in log space) whose mean is MeanBytes, ImageNet's ~110 KB
// by default. Sizes and decode cost are what a storage or input-pipeline
// benchmark feels, so those are matched; the pictures themselves are only
// loosely photographic. Classes are learnable: most samples of a class are
// cropped from that class's own photograph.
//
// Generation is deterministic: the same photographs, Options and Go release
// give a byte-identical tree. Every sample draws from its own RNG, derived
// from Seed and its index, so samples are rendered in parallel on all cores
// in any order. Photos are decoded once and kept at a reduced working size;
// callers that generate many datasets (tests) load them once with LoadPhotos.
//
// Files are written to a temporary name and renamed, so a file with its final
// name is always complete; an interrupted run leaves fewer files than asked
// for. Nothing but class directories is written under Dir (torchvision's
// ImageFolder would take anything else for a class); there is no manifest
// file, Generate returns the Manifest instead. Files are not fsynced: this is
// test data.
package datagen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Defaults applied to zero Options fields.
const (
	DefaultClasses    = 10
	DefaultWidth      = 500
	DefaultHeight     = 375
	DefaultMeanBytes  = 110_000 // ImageNet-1k train: ~140 GB / 1.28 M files
	DefaultShardBytes = 256 << 20
)

// Errors callers can test for with errors.Is. The CLI reports both as usage
// errors (exit 2).
var (
	ErrInvalidOptions = errors.New("datagen: invalid options")
	ErrNotEmpty       = errors.New("datagen: output directory is not empty")
)

// Options describe the dataset to write. Zero fields take the defaults above.
type Options struct {
	Dir       string   // output root (created; must be empty or absent)
	Files     int      // number of JPEG samples, > 0
	Classes   int      // class directories n00000000, n00000001, ...; default 10
	Seed      int64    // same seed + options (+ photos, Go release) => byte-identical tree
	PhotoDirs []string // source photographs, walked for .jpg/.jpeg/.png; default DefaultPhotoDir
	// Photos, when set, is a photo set already loaded with LoadPhotos; it
	// replaces PhotoDirs and saves decoding the photos again.
	Photos *Photos

	Width, Height int // nominal sample size, default 500x375; each side varies ±20%
	MeanBytes     int // target mean file size, default DefaultMeanBytes

	Shards     bool   // also write WebDataset tar shards of the same samples
	ShardBytes int64  // maximum shard size, default 256 MiB (a larger sample gets a shard of its own)
	ShardDir   string // default Dir+"-shards"; must be empty or absent, and not inside Dir

	// Progress, if set, is called after each sample is written, with done
	// increasing from 1 to total; calls never overlap.
	Progress func(done, total int)
}

// Sample is one written file.
type Sample struct {
	Path  string // relative to Dir, e.g. "n00000003/n00000003_000042.JPEG"
	Class int
	Bytes int64
}

// Manifest lists what Generate wrote, samples in index order.
type Manifest struct {
	Samples    []Sample
	TotalBytes int64
	Shards     []string // shard file paths (ShardDir/shard-000000.tar, ...), in order
}

// ClassName is the directory name of class c: "n" and eight digits, in the
// style of ImageNet's WordNet ids.
func ClassName(c int) string { return fmt.Sprintf("n%08d", c) }

// samplePath is sample i's path relative to Dir. Samples are dealt to classes
// round-robin, so classes are balanced and any prefix of the indices covers
// every class.
func samplePath(i, classes int) (path string, class int) {
	class = i % classes
	cn := ClassName(class)
	return cn + "/" + fmt.Sprintf("%s_%06d.JPEG", cn, i/classes), class
}

func (o *Options) setDefaults() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...)
	}
	if o.Dir == "" {
		return bad("Dir is empty")
	}
	if o.Files <= 0 {
		return bad("Files must be > 0 (got %d)", o.Files)
	}
	if o.Classes == 0 {
		o.Classes = DefaultClasses
	}
	if o.Classes < 0 {
		return bad("Classes must be > 0 (got %d)", o.Classes)
	}
	if o.Classes > o.Files {
		return bad("Classes (%d) > Files (%d): a class directory would be empty", o.Classes, o.Files)
	}
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Height == 0 {
		o.Height = DefaultHeight
	}
	if o.Width < 16 || o.Height < 16 || o.Width > 8192 || o.Height > 8192 {
		return bad("Width x Height must be within 16..8192 (got %dx%d)", o.Width, o.Height)
	}
	if o.MeanBytes == 0 {
		o.MeanBytes = DefaultMeanBytes
	}
	if o.MeanBytes < 0 {
		return bad("MeanBytes must be > 0 (got %d)", o.MeanBytes)
	}
	if o.ShardBytes == 0 {
		o.ShardBytes = DefaultShardBytes
	}
	if o.ShardBytes < 0 {
		return bad("ShardBytes must be > 0 (got %d)", o.ShardBytes)
	}
	o.Dir = filepath.Clean(o.Dir)
	if o.ShardDir == "" {
		o.ShardDir = o.Dir + "-shards"
	}
	o.ShardDir = filepath.Clean(o.ShardDir)
	if o.Shards {
		ad, err1 := filepath.Abs(o.Dir)
		as, err2 := filepath.Abs(o.ShardDir)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("datagen: %w", err)
		}
		if as == ad || strings.HasPrefix(as, ad+string(filepath.Separator)) {
			return bad("ShardDir %s is inside Dir %s", o.ShardDir, o.Dir)
		}
	}
	return nil
}

// prepareDir creates dir or checks that it is an empty directory.
func prepareDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("datagen: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("datagen: output directory: %w", err)
	case len(ents) > 0:
		return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	return nil
}

// Generate writes the dataset described by o and returns its manifest.
func Generate(ctx context.Context, o Options) (Manifest, error) {
	if err := o.setDefaults(); err != nil {
		return Manifest{}, err
	}
	photos := o.Photos
	if photos == nil {
		dirs := o.PhotoDirs
		if len(dirs) == 0 {
			dirs = []string{DefaultPhotoDir}
		}
		// Find the photos before touching the output, so a missing package
		// leaves nothing behind.
		paths, err := findPhotos(dirs)
		if err != nil {
			return Manifest{}, err
		}
		if len(paths) == 0 {
			return Manifest{}, noPhotosError(dirs)
		}
	}
	if err := prepareDir(o.Dir); err != nil {
		return Manifest{}, err
	}
	if o.Shards {
		if err := prepareDir(o.ShardDir); err != nil {
			return Manifest{}, err
		}
	}
	if photos == nil {
		var err error
		if photos, err = LoadPhotos(ctx, o.PhotoDirs); err != nil {
			return Manifest{}, err
		}
	}
	for c := 0; c < o.Classes; c++ {
		if err := os.Mkdir(filepath.Join(o.Dir, ClassName(c)), 0o755); err != nil {
			return Manifest{}, fmt.Errorf("datagen: %w", err)
		}
	}
	m := Manifest{Samples: make([]Sample, o.Files)}
	if err := writeSamples(ctx, &o, photos, m.Samples); err != nil {
		return Manifest{}, err
	}
	for _, s := range m.Samples {
		m.TotalBytes += s.Bytes
	}
	if o.Shards {
		shards, err := writeShards(ctx, &o, m.Samples)
		if err != nil {
			return Manifest{}, err
		}
		m.Shards = shards
	}
	return m, nil
}

// homePhotos assigns each class a photograph (a seeded permutation, reused
// when there are more classes than photos).
func homePhotos(seed int64, n int) []int {
	return rand.New(rand.NewPCG(splitmix64(uint64(seed)), 2)).Perm(n)
}

// writeSamples renders and writes every sample on GOMAXPROCS workers and
// fills samples[i]. The first error stops all workers.
func writeSamples(ctx context.Context, o *Options, photos *Photos, samples []Sample) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	home := homePhotos(o.Seed, photos.Len())
	var (
		mu   sync.Mutex // serializes Progress and done
		done int
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(samples)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w worker
			for i := range next {
				s, err := w.sample(o, photos, home, i)
				if err != nil {
					cancel(err)
					return
				}
				samples[i] = s
				if o.Progress != nil {
					mu.Lock()
					done++
					o.Progress(done, len(samples))
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for i := range samples {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("datagen: interrupted, %s is incomplete: %w", o.Dir, err)
		}
		return err
	}
	return nil
}

// worker holds one goroutine's reusable encode buffers.
type worker struct {
	buf, scratch bytes.Buffer
}

func (w *worker) sample(o *Options, photos *Photos, home []int, i int) (Sample, error) {
	rel, class := samplePath(i, o.Classes)
	p := makePlan(o, photos.Len(), home, i)
	ph := photos.imgs[p.photo]
	p.placeCrop(ph)
	if _, err := p.encodeToTarget(ph, &w.buf, &w.scratch); err != nil {
		return Sample{}, err
	}
	if err := writeFileAtomic(filepath.Join(o.Dir, filepath.FromSlash(rel)), w.buf.Bytes()); err != nil {
		return Sample{}, err
	}
	return Sample{Path: rel, Class: class, Bytes: int64(w.buf.Len())}, nil
}

// writeFileAtomic writes data to a hidden temporary file beside path and
// renames it into place; the temporary is removed on failure.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("datagen: write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("datagen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("datagen: write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	return nil
}
