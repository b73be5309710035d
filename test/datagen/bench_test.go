package datagen

import (
	"bytes"
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRenderSample renders default-size samples in memory on all cores
// (no disk): the generator's CPU cost. Reports files/s and encodes per file.
func BenchmarkRenderSample(b *testing.B) {
	ph, _ := requirePhotos(b)
	o := Options{Files: 1 << 30, Classes: DefaultClasses, Width: DefaultWidth, Height: DefaultHeight, MeanBytes: DefaultMeanBytes}
	home := homePhotos(o.Seed, ph.Len())
	var next, encodes atomic.Int64
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var buf, scratch bytes.Buffer
		for pb.Next() {
			i := int(next.Add(1))
			p := makePlan(&o, ph.Len(), home, i)
			p.placeCrop(ph.imgs[p.photo])
			n, err := p.encodeToTarget(ph.imgs[p.photo], &buf, &scratch)
			if err != nil {
				b.Error(err)
				return
			}
			encodes.Add(int64(n))
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "files/s")
	b.ReportMetric(float64(encodes.Load())/float64(b.N), "encodes/file")
}

// BenchmarkGenerate writes 100-file default-size datasets, shards included.
func BenchmarkGenerate(b *testing.B) {
	ph, _ := requirePhotos(b)
	const files = 100
	var el time.Duration
	for n := 0; n < b.N; n++ {
		dir := b.TempDir()
		start := time.Now()
		if _, err := Generate(context.Background(), Options{Dir: filepath.Join(dir, "ds"), Files: files, Seed: int64(n), Photos: ph, Shards: true}); err != nil {
			b.Fatal(err)
		}
		el += time.Since(start)
	}
	b.ReportMetric(float64(files*b.N)/el.Seconds(), "files/s")
}
