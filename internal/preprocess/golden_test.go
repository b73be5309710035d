package preprocess

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/config"

	"github.com/epochfs/epochfs/internal/testenv"
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
		testenv.Skip(t, "the saved digests are of libjpeg-turbo's decodes; this build decodes with Go's image/jpeg")
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
