package preprocess

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/config"
)

// The golden set (testdata/golden): small inputs (RGB, grayscale and CMYK
// JPEGs, a PNG with alpha), pipeline configs that cover the decode paths
// (fused crop with and without DCT scaling, DCT-scaled resize, crops of
// the decoded form, padding, no resize) and the sha256 of every .npy the
// code wrote when the set was made (SHA256SUMS, seed 7, each image's
// random draws from SampleRNG(7, its file name), as epochfs preprocess
// draws them). cmd/epochfs checks the files the command writes against
// the same digests. The digests were recorded with libjpeg-turbo 2.1.5
// (Debian 12); another libjpeg-turbo may decode differently.

type goldenCase struct {
	config, image string
	opts          Options
	data          []byte
}

func goldenCases(t *testing.T) ([]goldenCase, map[string]string) {
	t.Helper()
	if !haveTurbo {
		t.Skip("the saved digests are of libjpeg-turbo's decodes; this build decodes with Go's image/jpeg")
	}
	dir := filepath.Join("testdata", "golden")
	b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			sums[f[1]] = f[0]
		}
	}
	configs, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
	images, _ := filepath.Glob(filepath.Join(dir, "*.[jp][pn]g"))
	var cases []goldenCase
	for _, c := range configs {
		cfg, err := config.Load(c)
		if err != nil {
			t.Fatal(err)
		}
		pc := cfg.Preprocess
		opts := Options{Static: pc.Static, Augment: pc.Augment, Normalize: pc.Normalize,
			Output: pc.OutputOrDefault(), MaxPixels: pc.MaxPixels, FastUpsample: pc.FastUpsample}
		for _, img := range images {
			data, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			cases = append(cases, goldenCase{config: strings.TrimSuffix(filepath.Base(c), ".toml"),
				image: filepath.Base(img), opts: opts, data: data})
		}
	}
	if len(cases) != len(sums) || len(cases) < 42 {
		t.Fatalf("%d golden cases, %d digests", len(cases), len(sums))
	}
	return cases, sums
}

func (c goldenCase) key() string {
	return c.config + "/" + strings.TrimSuffix(c.image, filepath.Ext(c.image)) + ".npy"
}

func sha(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// Pipeline.Run then EncodeNPY gives the saved bytes for every golden case.
func TestGoldenOutputsMatchSavedDigests(t *testing.T) {
	cases, sums := goldenCases(t)
	pipes := map[string]*Pipeline{}
	for _, c := range cases {
		p := pipes[c.config]
		if p == nil {
			var err error
			if p, err = New(c.opts); err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			pipes[c.config] = p
		}
		out, err := p.Run(c.data, SampleRNG(7, c.image))
		if err != nil {
			t.Fatalf("%s: %v", c.key(), err)
		}
		if got := sha(EncodeNPY(out)); got != sums[c.key()] {
			t.Errorf("%s: sha256 %s, saved %s", c.key(), got, sums[c.key()])
		}
	}
}

// Through the Pool, each sample read with LoadFile, written from
// Tensor.NPY and released (the path of epochfs preprocess and the
// mount's views, buffers reused from sample to sample), the bytes are the
// saved ones too.
func TestGoldenOutputsThroughThePoolMatchSavedDigests(t *testing.T) {
	cases, sums := goldenCases(t)
	pipes := map[string]*Pipeline{}
	for _, c := range cases {
		if pipes[c.config] == nil {
			p, err := New(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			pipes[c.config] = p
		}
	}
	pool, err := NewPool(PoolOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	// Twice over the cases, so the second round runs on recycled buffers.
	for round := range 2 {
		go func() {
			for i, c := range cases {
				p := pipes[c.config]
				st := &State{Key: filepath.Join("testdata", "golden", c.image), RNG: SampleRNG(7, c.image)}
				load := func(_ context.Context, s *State) error { return p.LoadFile(s, s.Key) }
				steps := append([]Step{load}, p.EncodedSteps()...)
				if err := pool.Submit(ctx, Task{Key: fmt.Sprint(round, "/", i), State: st, Steps: steps}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for range cases {
			r, err := pool.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var i, rr int
			if _, err := fmt.Sscanf(r.Key, "%d/%d", &rr, &i); err != nil || rr != round {
				t.Fatalf("result %q in round %d", r.Key, round)
			}
			c := cases[i]
			if r.Err != nil {
				t.Fatalf("%s: %v", c.key(), r.Err)
			}
			if r.State.Data != nil {
				t.Errorf("%s: the loaded file was not given back after the decode", c.key())
			}
			if got := sha(r.State.Out.NPY()); got != sums[c.key()] {
				t.Errorf("round %d, %s: sha256 %s, saved %s", round, c.key(), got, sums[c.key()])
			}
			r.State.Out.Release()
		}
	}
}

// In a steady state, the pool path (LoadFile, the training pipeline,
// NPY, Release) allocates no tensor-sized buffer per sample: the encoded
// input, the decoded region, the resize buffers and the 600 KB output
// tensor all come back from the buffer pool. (Before the pool took them
// all, a sample allocated about 1.5 MB.)
func TestPoolPathAllocatesNoTensorSizedBufferPerSample(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops a random share of what it is given under the race detector")
	}
	if !haveTurbo {
		t.Skip("Go's image/jpeg (the build without cgo) allocates its own images")
	}
	dir := t.TempDir()
	paths := writeJPEGs(t, dir, 6)
	p, err := New(Options{Augment: []string{"random_resized_crop:224", "hflip:0.5"}, Output: "float32_chw"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool, err := NewPool(PoolOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	load := func(_ context.Context, s *State) error { return p.LoadFile(s, s.Key) }
	steps := append([]Step{load}, p.EncodedSteps()...)
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = fmt.Sprint(i)
	}
	run := func(from, to int) {
		go func() {
			for i := from; i < to; i++ {
				st := &State{Key: paths[i%len(paths)], RNG: SampleRNG(1, keys[i])}
				if err := pool.Submit(ctx, Task{Key: keys[i], State: st, Steps: steps}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for range to - from {
			r, err := pool.Next(ctx)
			if err != nil || r.Err != nil {
				t.Fatal(err, r.Err)
			}
			if err := WriteNPY(io.Discard, r.State.Out); err != nil {
				t.Fatal(err)
			}
			r.State.Out.Release()
		}
	}
	// No collection, so nothing empties the buffer pool under the test.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	run(0, 200) // warm up: every buffer, and most size classes of decoded regions
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 300
	run(200, 200+n)
	runtime.ReadMemStats(&after)
	perSample := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d B and %.1f allocations per sample", perSample, float64(after.Mallocs-before.Mallocs)/n)
	if perSample > 64<<10 {
		t.Errorf("%d bytes allocated per sample, want < 64 KiB (the output tensor alone is 588 KiB)", perSample)
	}
}
