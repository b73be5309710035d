package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/npytest"
	"github.com/epochfs/epochfs/internal/preprocess"

	"github.com/epochfs/epochfs/internal/testenv"
)

// writeTestJPEG writes a w×h JPEG with a pattern that makes crops and
// flips visible.
func writeTestJPEG(t *testing.T, path string, w, h int) {
	t.Helper()
	im := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			im.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x * y) % 251), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, im, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readNPY(t *testing.T, path string) *npytest.Array {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tt, err := npytest.Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tt
}

// A failing input gets one error line naming it; the others are written;
// the exit code is 1.
func TestPreprocessWritesGoodImagesAndNamesBadOnes(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jpg"), filepath.Join(dir, "b.jpeg")
	writeTestJPEG(t, a, 300, 200)
	writeTestJPEG(t, b, 200, 300)
	bad := filepath.Join(dir, "bad.jpg")
	if err := os.WriteFile(bad, []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(dir, "trunc.jpg")
	full, _ := os.ReadFile(a)
	if err := os.WriteFile(trunc, full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := run([]string{"preprocess", "--out", out, a, bad, b, trunc}, &stdout, &stderr)
	if code != exitRuntime {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitRuntime, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var named []string
	for _, l := range lines {
		if strings.Contains(l, bad) {
			named = append(named, "bad")
		}
		if strings.Contains(l, trunc) {
			named = append(named, "trunc")
		}
	}
	if len(named) != 2 || len(lines) != 3 {
		t.Errorf("stderr should have one line per failed file and a summary:\n%s", stderr.String())
	}
	for _, name := range []string{"a.npy", "b.npy"} {
		tt := readNPY(t, filepath.Join(out, name))
		if fmt.Sprint(tt.Shape) != "[224 224 3]" || tt.DType != "uint8" {
			t.Errorf("%s: %s %v, want uint8 [224 224 3] (default augment)", name, tt.DType, tt.Shape)
		}
	}
	for _, name := range []string{"bad.npy", "trunc.npy"} {
		if _, err := os.Stat(filepath.Join(out, name)); !os.IsNotExist(err) {
			t.Errorf("%s exists for a failed input", name)
		}
	}
}

// The config's pipeline is used; the same seed gives the same files
// whatever the worker count, another seed other augmentations.
func TestPreprocessConfigSeedAndWorkers(t *testing.T) {
	dir := t.TempDir()
	var imgs []string
	for i := range 4 {
		p := filepath.Join(dir, fmt.Sprintf("img%d.jpg", i))
		writeTestJPEG(t, p, 320+10*i, 240)
		imgs = append(imgs, p)
	}
	cfg := filepath.Join(dir, "epochfs.toml")
	if err := os.WriteFile(cfg, []byte(`
[preprocess]
static = ["resize:160"]
augment = ["random_resized_crop:96", "hflip:0.5"]
normalize = [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]]
output = "float32_chw"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	runOnce := func(seed, workers string) map[string][]float32 {
		out := filepath.Join(dir, "out-"+seed+"-"+workers)
		var stdout, stderr bytes.Buffer
		args := append([]string{"preprocess", "--config", cfg, "--seed", seed, "--workers", workers, "--out", out}, imgs...)
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		res := map[string][]float32{}
		for i := range imgs {
			tt := readNPY(t, filepath.Join(out, fmt.Sprintf("img%d.npy", i)))
			if fmt.Sprint(tt.Shape) != "[3 96 96]" || tt.DType != "float32" {
				t.Fatalf("img%d: %s %v, want float32 [3 96 96]", i, tt.DType, tt.Shape)
			}
			res[fmt.Sprint(i)] = tt.F32
		}
		return res
	}
	a, b, c := runOnce("7", "1"), runOnce("7", "3"), runOnce("8", "2")
	same := func(x, y []float32) bool { return fmt.Sprint(x) == fmt.Sprint(y) }
	differ := 0
	for k := range a {
		if !same(a[k], b[k]) {
			t.Errorf("image %s differs between 1 and 3 workers with the same seed", k)
		}
		if !same(a[k], c[k]) {
			differ++
		}
		// Normalized values leave [0, 1].
		lo := float32(0)
		for _, v := range a[k] {
			lo = min(lo, v)
		}
		if lo >= 0 {
			t.Errorf("image %s: no negative value after Normalize", k)
		}
	}
	if differ == 0 {
		t.Error("seeds 7 and 8 gave identical augmentations for every image")
	}
}

func TestPreprocessUsageErrors(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "a.jpg")
	writeTestJPEG(t, img, 64, 64)
	badCfg := filepath.Join(dir, "bad.toml")
	os.WriteFile(badCfg, []byte("[preprocess]\naugment = [\"flip:0.5\"]\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"preprocess", img}, "--out"},
		{[]string{"preprocess", "--out", dir}, "no IMAGE"},
		{[]string{"preprocess", "--config", badCfg, "--out", dir, img}, "preprocess.augment[0]"},
		{[]string{"preprocess", "--workers", "-3", "--out", dir, img}, "--workers"},
		{[]string{"preprocess", "--out", dir, img, filepath.Join(dir, "sub", "a.png")}, "both write a.npy"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, exitUsage)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q does not mention %q", tc.args, stderr.String(), tc.want)
		}
	}
}

// goldenDir holds the inputs, configs and output digests that pin the
// bytes epochfs preprocess writes (see internal/preprocess/testdata/golden).
const goldenDir = "../../internal/preprocess/testdata/golden"

// loadGoldenSums reads SHA256SUMS: "<sha256>  <config>/<image>.npy".
func loadGoldenSums(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			sums[f[1]] = f[0]
		}
	}
	return sums
}

// The files epochfs preprocess writes are byte for byte the ones recorded
// in SHA256SUMS, for every golden config and input, whatever the worker
// count. (Set EPOCHFS_UPDATE_GOLDEN=1 to rewrite SHA256SUMS: only for a
// deliberate change of output.)
func TestPreprocessOutputMatchesSavedDigests(t *testing.T) {
	configs, _ := filepath.Glob(filepath.Join(goldenDir, "*.toml"))
	images, _ := filepath.Glob(filepath.Join(goldenDir, "*.[jp][pn]g"))
	if len(configs) < 7 || len(images) < 6 {
		t.Fatalf("golden set incomplete: %d configs, %d images", len(configs), len(images))
	}
	if d, err := preprocess.NewDecoder(preprocess.DecoderOptions{}); err != nil || !d.UsesTurbo() {
		testenv.Skip(t, "the saved digests are of libjpeg-turbo's decodes; this build decodes with Go's image/jpeg")
	}
	update := os.Getenv("EPOCHFS_UPDATE_GOLDEN") == "1"
	var want map[string]string
	if !update {
		want = loadGoldenSums(t)
	}
	var lines []string
	for _, cfg := range configs {
		name := strings.TrimSuffix(filepath.Base(cfg), ".toml")
		for _, workers := range []string{"1", "2"} {
			out := filepath.Join(t.TempDir(), name)
			var stdout, stderr bytes.Buffer
			args := append([]string{"preprocess", "--config", cfg, "--seed", "7", "--workers", workers, "--out", out}, images...)
			if code := run(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("%s: exit %d: %s", name, code, stderr.String())
			}
			for _, img := range images {
				file := strings.TrimSuffix(filepath.Base(img), filepath.Ext(img)) + ".npy"
				b, err := os.ReadFile(filepath.Join(out, file))
				if err != nil {
					t.Fatal(err)
				}
				key, got := name+"/"+file, fmt.Sprintf("%x", sha256.Sum256(b))
				if update {
					if workers == "1" {
						lines = append(lines, got+"  "+key)
					}
					continue
				}
				if want[key] == "" {
					t.Errorf("%s: no saved digest", key)
				} else if got != want[key] {
					t.Errorf("%s (--workers %s): sha256 %s, saved %s", key, workers, got, want[key])
				}
			}
		}
	}
	if update {
		if err := os.WriteFile(filepath.Join(goldenDir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d digests", len(lines))
	}
}
