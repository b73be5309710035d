package preprocess

import (
	"context"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchSet returns n ImageNet-like JPEGs (500×375, quality 90, cropped from
// real photographs).
func benchSet(b *testing.B, n int) [][]byte {
	b.Helper()
	var out [][]byte
	for i := 0; i < n; i++ {
		w, h := 500, 375
		if i%3 == 2 {
			w, h = 375, 500
		}
		out = append(out, cropJPEG(b, i, w, h, uint64(100+i)))
	}
	return out
}

func reportPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "img/s")
}

// BenchmarkDecode: libjpeg-turbo decode only, one goroutine (per core).
func BenchmarkDecode(b *testing.B) {
	set := benchSet(b, 16)
	d, _ := NewDecoder(DecoderOptions{})
	defer d.Close()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, _, err := d.Decode(set[i%len(set)], nil); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSec(b)
}

// BenchmarkDecodeStdlib: Go's image/jpeg, for comparison.
func BenchmarkDecodeStdlib(b *testing.B) {
	set := benchSet(b, 16)
	d, _ := NewDecoder(DecoderOptions{ForceStdlib: true})
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, _, err := d.Decode(set[i%len(set)], nil); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSec(b)
}

func trainPipeline(b *testing.B) *Pipeline {
	p, err := New(Options{Augment: []string{"random_resized_crop:224", "hflip:0.5"}, Output: "float32_chw"})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkTrainPipeline: decode + RandomResizedCrop(224) + flip +
// ToTensor (float32 CHW), one goroutine.
func BenchmarkTrainPipeline(b *testing.B) {
	set := benchSet(b, 16)
	p := trainPipeline(b)
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t, err := p.Run(set[i%len(set)], rng)
		if err != nil {
			b.Fatal(err)
		}
		t.Release()
	}
	reportPerSec(b)
}

// BenchmarkEvalPipeline: decode + Resize(256) + CenterCrop(224) + ToTensor.
func BenchmarkEvalPipeline(b *testing.B) {
	set := benchSet(b, 16)
	p, err := New(Options{Static: []string{"resize:256", "center_crop:224"}, Output: "float32_chw"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := p.Run(set[i%len(set)], nil); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSec(b)
}

// BenchmarkNPYEncode: encoding a 3×224×224 float32 tensor as .npy.
func BenchmarkNPYEncode(b *testing.B) {
	t := &Tensor{DType: Float32, Shape: []int{3, 224, 224}, F32: make([]float32, 3*224*224)}
	buf := make([]byte, 0, NPYSize(t))
	b.SetBytes(NPYSize(t))
	b.ResetTimer()
	for b.Loop() {
		buf = AppendNPY(buf[:0], t)
	}
	reportPerSec(b)
}

// BenchmarkAugmentFromDecoded: RandomResizedCrop(224) + flip + float32
// CHW on an already decoded 500×375 image (the pipeline minus decode).
func BenchmarkAugmentFromDecoded(b *testing.B) {
	set := benchSet(b, 1)
	p := trainPipeline(b)
	defer p.Close()
	img, _, err := p.Decoder().Decode(set[0], nil)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.Augment(img, rng); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSec(b)
}

// BenchmarkDecodeRRCRegion: decoding only RandomResizedCrop's crop (what
// the training pipeline does), to compare with BenchmarkDecode.
func BenchmarkDecodeRRCRegion(b *testing.B) {
	benchRegion(b, false)
}

// BenchmarkDecodeRRCRegionFastUpsample: the same without fancy
// upsampling.
func BenchmarkDecodeRRCRegionFastUpsample(b *testing.B) {
	benchRegion(b, true)
}

func benchRegion(b *testing.B, fast bool) {
	set := benchSet(b, 16)
	d, _ := NewDecoder(DecoderOptions{FastUpsample: fast})
	defer d.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_, _, err := d.DecodeRegion(set[i%len(set)], func(h Header) (int, Rect) {
			c := RandomResizedCropParams(rng, h.W, h.H, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3})
			return 1, Rect{X: c.Left, Y: c.Top, W: c.W, H: c.H}
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reportPerSec(b)
}

// BenchmarkPoolTrainPipeline: the training pipeline through the Pool, each
// result written as .npy (to io.Discard) by the consumer and released, as
// epochfs preprocess and the mount's views use it. Run with -benchmem: allocs/op
// and B/op are the pool path's allocations per sample.
func BenchmarkPoolTrainPipeline(b *testing.B) {
	set := benchSet(b, 16)
	p := trainPipeline(b)
	defer p.Close()
	pool, err := NewPool(PoolOptions{Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	steps := p.EncodedSteps()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 0; ; i++ {
			k := strconv.Itoa(i)
			st := &State{Key: k, Data: set[i%len(set)], RNG: SampleRNG(1, k)}
			if pool.Submit(ctx, Task{Key: k, State: st, Steps: steps}) != nil {
				return
			}
		}
	}()
	consume := func() {
		r, err := pool.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		if err := WriteNPY(io.Discard, r.State.Out); err != nil {
			b.Fatal(err)
		}
		r.State.Out.Release()
	}
	for range 64 { // warm up: buffers, the timeout estimate
		consume()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		consume()
	}
	reportPerSec(b)
}
