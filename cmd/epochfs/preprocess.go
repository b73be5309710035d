package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/daemon"
	"github.com/epochfs/epochfs/internal/preprocess"
)

const preprocessSynopsis = "preprocess [--config FILE] [--seed N] [--workers N] --out DIR IMAGE..."

// preprocessFlags defines preprocess's flags; the command runs the configured pipeline (static then augment steps)
// over image files and writes DIR/<name>.npy for each. A failing image
// gets a one-line error naming it; the others are still written; the
// exit code is 1 if any failed.
//
// Long: one command's flags, inputs and output loop, in the order a user reads them.
func preprocessFlags(fs *pflag.FlagSet) runFunc {
	cfgPath := fs.String("config", "", "config file (TOML); its [preprocess] section sets the pipeline")
	seed := fs.Uint64("seed", 0, "seed of the random augment steps (each image's draws depend only on the seed and its file name)")
	workers := fs.Int("workers", -1, "preprocessing workers (default: preprocess.workers; 0 = one per core)")
	out := fs.String("out", "", "output directory for the .npy files (created if missing)")
	return func(images []string, stdout, stderr io.Writer) error {
		var err error
		if *out == "" {
			return usageErr("--out DIR is required")
		}
		if len(images) == 0 {
			return usageErr("no IMAGE given")
		}
		cfg := config.Default()
		if *cfgPath != "" {
			if cfg, err = config.Load(*cfgPath); err != nil {
				return usageErr("%v", err)
			}
		}
		pc := cfg.Preprocess
		if err := pc.Validate(); err != nil {
			return usageErr("%v", err)
		}
		if *workers < -1 || *workers > 1024 {
			return usageErr("--workers %d: want 0 (one per core) to 1024", *workers)
		}
		if *workers >= 0 {
			pc.Workers = *workers
		}
		// Output names must be unique: two inputs named a.jpg and a.png
		// would overwrite each other.
		names := map[string]string{}
		for _, img := range images {
			name := strings.TrimSuffix(filepath.Base(img), filepath.Ext(img)) + ".npy"
			if prev, dup := names[name]; dup {
				return usageErr("%s and %s would both write %s", prev, img, name)
			}
			names[name] = img
		}
		p, err := preprocess.New(daemon.PipelineOptions(pc))
		if err != nil {
			return usageErr("%v", err)
		}
		defer p.Close()
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return runtimeErr("%v", err)
		}
		pool, err := preprocess.NewPool(preprocess.PoolOptions{Workers: pc.Workers})
		if err != nil {
			return runtimeErr("%v", err)
		}
		defer pool.Close()

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The worker that computes a sample also reads its file and writes
		// its .npy, so --workers N is N cores of work and the main goroutine
		// only reports. The file is read into, and the tensor made in,
		// buffers the pipeline reuses; the tensor is written from its own
		// memory, in one write, and its buffer goes back for the next sample.
		outPath := func(img string) string {
			return filepath.Join(*out, strings.TrimSuffix(filepath.Base(img), filepath.Ext(img))+".npy")
		}
		read := func(_ context.Context, s *preprocess.State) error { return p.LoadFile(s, s.Key) }
		write := func(_ context.Context, s *preprocess.State) error {
			err := preprocess.WriteNPYFile(outPath(s.Key), s.Out)
			s.Value = outputInfo{s.Out.DType, s.Out.Shape}
			s.Out.Release()
			s.Out = nil
			return err
		}
		steps := append(append([]preprocess.Step{read}, p.EncodedSteps()...), write)
		go func() {
			for i, img := range images {
				st := &preprocess.State{Key: img, RNG: preprocess.SampleRNG(*seed, filepath.Base(img))}
				if err := pool.Submit(ctx, preprocess.Task{Key: strconv.Itoa(i), State: st, Steps: steps}); err != nil {
					return // cancelled: the main loop has returned
				}
			}
		}()
		failed := 0
		for range images {
			r, err := pool.Next(ctx)
			if err != nil {
				return runtimeErr("%v", err)
			}
			img := r.State.Key
			if r.Err != nil {
				failed++
				fmt.Fprintf(stderr, "epochfs preprocess: %s: %v\n", img, r.Err)
				continue
			}
			info := r.State.Value.(outputInfo)
			fmt.Fprintf(stdout, "%s -> %s %s %v\n", img, outPath(img), info.dtype, info.shape)
		}
		if failed > 0 {
			return runtimeErr("%d of %d images failed", failed, len(images))
		}
		return nil
	}
}

// outputInfo is what the report line says about a written tensor.
type outputInfo struct {
	dtype preprocess.DType
	shape []int
}
