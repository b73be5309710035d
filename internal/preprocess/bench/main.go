// Command bench measures the preprocess package on a JPEG set, one
// measurement per run, printing one JSON line; run.sh alternates it with
// pil_bench.py (PIL + torchvision doing the same) and summarises.
//
//	go run ./internal/preprocess/bench -mkset DIR -files N      make an ImageNet-like set
//	go run ./internal/preprocess/bench -dir DIR -mode MODE      measure one MODE:
//	  decode    libjpeg-turbo decode to RGB, one core
//	  stdlib    Go image/jpeg decode, one core
//	  pipeline  decode + RandomResizedCrop(224) + hflip + float32 CHW, one core
//	            (each tensor released for reuse, as epochfs preprocess does)
//	  pipeline_fast  the same with fast (non-fancy) chroma upsampling
//	  pool      the same through the fast/slow Pool on all cores
//	  npy       .npy encoding of the 3×224×224 float32 output, one core
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/jpeg"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/epochfs/epochfs/internal/preprocess"
)

func main() {
	mkset := flag.String("mkset", "", "write an ImageNet-like JPEG set here and exit")
	files := flag.Int("files", 200, "files for -mkset")
	dir := flag.String("dir", "", "directory of JPEGs to measure (searched recursively)")
	mode := flag.String("mode", "pipeline", "decode, stdlib, pipeline, pool or npy")
	secs := flag.Float64("seconds", 3, "measure for this long")
	flag.Parse()
	if *mkset != "" {
		if err := makeSet(*mkset, *files); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	set, total, err := loadSet(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	n, elapsed, err := measure(*mode, set, time.Duration(*secs*float64(time.Second)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	cores := 1
	if *mode == "pool" {
		cores = runtime.GOMAXPROCS(0)
	}
	out, _ := json.Marshal(map[string]any{
		"impl": "epochfs", "mode": *mode, "images": n, "seconds": elapsed.Seconds(),
		"per_sec": float64(n) / elapsed.Seconds(), "cores": cores,
		"files": len(set), "mean_bytes": total / int64(len(set)),
	})
	fmt.Println(string(out))
}

func loadSet(dir string) ([][]byte, int64, error) {
	var set [][]byte
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := strings.ToLower(filepath.Ext(p))
		if d.IsDir() || (ext != ".jpg" && ext != ".jpeg") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		set = append(set, b)
		total += int64(len(b))
		return nil
	})
	if err == nil && len(set) == 0 {
		err = fmt.Errorf("no JPEG under %q", dir)
	}
	return set, total, err
}

func measure(mode string, set [][]byte, d time.Duration) (int, time.Duration, error) {
	if mode != "pool" {
		runtime.GOMAXPROCS(1) // per core: the measured loop and the GC share one core
	}
	augment := []string{"random_resized_crop:224", "hflip:0.5"}
	switch mode {
	case "decode", "stdlib":
		dec, err := preprocess.NewDecoder(preprocess.DecoderOptions{ForceStdlib: mode == "stdlib"})
		if err != nil {
			return 0, 0, err
		}
		return loop(d, func(i int) error {
			_, _, err := dec.Decode(set[i%len(set)], nil)
			return err
		})
	case "pipeline", "pipeline_fast":
		p, err := preprocess.New(preprocess.Options{Augment: augment, Output: "float32_chw", FastUpsample: mode == "pipeline_fast"})
		if err != nil {
			return 0, 0, err
		}
		rng := rand.New(rand.NewPCG(1, 2))
		return loop(d, func(i int) error {
			t, err := p.Run(set[i%len(set)], rng)
			if err == nil {
				t.Release()
			}
			return err
		})
	case "npy":
		t := &preprocess.Tensor{DType: preprocess.Float32, Shape: []int{3, 224, 224}, F32: make([]float32, 3*224*224)}
		buf := make([]byte, 0, preprocess.NPYSize(t))
		return loop(d, func(int) error {
			buf = preprocess.AppendNPY(buf[:0], t)
			return nil
		})
	case "pool":
		return measurePool(set, augment, d)
	}
	return 0, 0, fmt.Errorf("unknown mode %q", mode)
}

func loop(d time.Duration, f func(i int) error) (int, time.Duration, error) {
	for i := range 20 { // warm up
		if err := f(i); err != nil {
			return 0, 0, err
		}
	}
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		for range 10 {
			if err := f(n); err != nil {
				return 0, 0, err
			}
			n++
		}
	}
	return n, time.Since(start), nil
}

func measurePool(set [][]byte, augment []string, d time.Duration) (int, time.Duration, error) {
	p, err := preprocess.New(preprocess.Options{Augment: augment, Output: "float32_chw"})
	if err != nil {
		return 0, 0, err
	}
	pool, err := preprocess.NewPool(preprocess.PoolOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	steps := p.EncodedSteps()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 0; ; i++ {
			st := &preprocess.State{Data: set[i%len(set)], RNG: preprocess.SampleRNG(1, strconv.Itoa(i))}
			if pool.Submit(ctx, preprocess.Task{Key: strconv.Itoa(i), State: st, Steps: steps}) != nil {
				return
			}
		}
	}()
	for range 50 { // warm up, and let the timeout estimate settle
		if _, err := pool.Next(ctx); err != nil {
			return 0, 0, err
		}
	}
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		r, err := pool.Next(ctx)
		if err != nil {
			return 0, 0, err
		}
		if r.Err != nil {
			return 0, 0, r.Err
		}
		r.State.Out.Release()
		n++
	}
	elapsed := time.Since(start)
	st := pool.Stats()
	fmt.Fprintf(os.Stderr, "pool: workers %d, timeout %v, fast %d, slow %d (moved %d, detached %d)\n",
		pool.Options().Workers, st.Timeout, st.Fast, st.Slow, st.MovedAtBoundary, st.DetachedInStep)
	return n, elapsed, nil
}

// makeSet writes files ImageNet-like JPEGs: windows of about 500×375
// (±20 %, a quarter portrait) cropped from the detailed mate-backgrounds
// photographs at full resolution, re-encoded at quality 90 to 97 so the
// mean size is near ImageNet's 110 KB.
func makeSet(dir string, files int) error {
	all, _ := filepath.Glob("/usr/share/backgrounds/mate/*/*.jpg")
	if len(all) == 0 {
		return fmt.Errorf("no photographs in /usr/share/backgrounds/mate (install mate-backgrounds)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dec, err := preprocess.NewDecoder(preprocess.DecoderOptions{})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(2026, 4))
	var decoded []*preprocess.Image
	for _, p := range all {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h, err := dec.DecodeHeader(b)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		// Only detailed photographs (>= 0.25 compressed bytes per pixel):
		// smooth wallpapers make 30 KB files, ImageNet's average is 110 KB.
		if float64(len(b))/float64(h.W*h.H) < 0.25 || h.W > 4000 {
			continue
		}
		img, _, err := dec.Decode(b, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		decoded = append(decoded, img)
	}
	if len(decoded) == 0 {
		return fmt.Errorf("no detailed photograph in /usr/share/backgrounds/mate")
	}
	for i := range files {
		src := decoded[i%len(decoded)]
		w := 400 + rng.IntN(201)
		h := w * 3 / 4
		if rng.IntN(4) == 0 {
			w, h = h, w
		}
		w, h = min(w, src.W), min(h, src.H)
		x, y := rng.IntN(src.W-w+1), rng.IntN(src.H-h+1)
		im := image.NewRGBA(image.Rect(0, 0, w, h))
		for yy := 0; yy < h; yy++ {
			row := src.Sub(x, y+yy, w, 1).Row(0)
			for xx := 0; xx < w; xx++ {
				o := im.PixOffset(xx, yy)
				im.Pix[o], im.Pix[o+1], im.Pix[o+2], im.Pix[o+3] = row[3*xx], row[3*xx+1], row[3*xx+2], 255
			}
		}
		// ImageNet averages about 110 KB for 500×375: raise the quality
		// until the file reaches that density (photographs downscaled for
		// wallpapers are smoother than camera images).
		target := 110000 * w * h / (500 * 375)
		var buf bytes.Buffer
		for _, q := range []int{90, 93, 95, 97} {
			buf.Reset()
			if err := jpeg.Encode(&buf, im, &jpeg.Options{Quality: q}); err != nil {
				return err
			}
			if buf.Len() >= target*9/10 {
				break
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("img%05d.jpg", i)), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
