package preprocess

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/testenv"
)

// photos are real photographs from Debian's mate-backgrounds
// (scripts/install-deps.sh installs it).
var photos = []string{
	"/usr/share/backgrounds/mate/nature/Blinds.jpg",
	"/usr/share/backgrounds/mate/nature/Dune.jpg",
	"/usr/share/backgrounds/mate/nature/RainDrops.jpg",
	"/usr/share/backgrounds/mate/nature/Storm.jpg",
	"/usr/share/backgrounds/mate/abstract/Elephants.jpg",
	"/usr/share/backgrounds/mate/nature/LadyBird.jpg",
}

// photo returns photo i decoded at half size (about 960×600).
func photo(t testing.TB, i int) *Image { return photoAt(t, i, 2) }

// photoAt returns photo i decoded at 1/denom.
func photoAt(t testing.TB, i, denom int) *Image {
	t.Helper()
	data, err := os.ReadFile(photos[i%len(photos)])
	if err != nil {
		testenv.Skip(t, "mate-backgrounds not installed (run scripts/install-deps.sh): %v", err)
	}
	d, err := NewDecoder(DecoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	img, _, err := d.Decode(data, func(Header) int { return denom })
	if err != nil {
		t.Fatalf("decode %s: %v", photos[i%len(photos)], err)
	}
	return img
}

// goImage converts to an image.RGBA for encoding with image/jpeg.
func goImage(m *Image) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, m.W, m.H))
	for y := 0; y < m.H; y++ {
		row := m.Row(y)
		for x := 0; x < m.W; x++ {
			o := out.PixOffset(x, y)
			out.Pix[o], out.Pix[o+1], out.Pix[o+2], out.Pix[o+3] = row[3*x], row[3*x+1], row[3*x+2], 255
		}
	}
	return out
}

func encodeJPEG(t testing.TB, im image.Image, q int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, im, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// cropJPEG crops a w×h window out of photo i (position from seed) and
// encodes it as a quality-90 JPEG, like an ImageNet sample.
func cropJPEG(t testing.TB, i, w, h int, seed uint64) []byte {
	t.Helper()
	src := photo(t, i)
	if w > src.W || h > src.H {
		src = photoAt(t, i, 1)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	if w > src.W || h > src.H {
		t.Fatalf("crop %dx%d larger than photo %dx%d", w, h, src.W, src.H)
	}
	x, y := rng.IntN(src.W-w+1), rng.IntN(src.H-h+1)
	return encodeJPEG(t, goImage(src.Sub(x, y, w, h)), 90)
}

// writeJPEGs writes n ImageNet-like JPEGs (500×375 and 375×500) to dir.
func writeJPEGs(t testing.TB, dir string, n int) []string {
	t.Helper()
	var paths []string
	for i := 0; i < n; i++ {
		w, h := 500, 375
		if i%3 == 2 {
			w, h = 375, 500
		}
		p := filepath.Join(dir, fmt.Sprintf("img%03d.jpg", i))
		if err := os.WriteFile(p, cropJPEG(t, i, w, h, 7), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

const pythonPath = "/usr/bin/python3"

// needTorch skips (or fails when EPOCHFS_REQUIRE_FUSE=1: testenv) unless
// /usr/bin/python3 imports torch, torchvision, numpy and PIL.
func needTorch(t testing.TB) {
	t.Helper()
	out, err := exec.Command(pythonPath, "-c", "import torch, torchvision, numpy, PIL").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s cannot import torch, torchvision, numpy and PIL (install python3-torch python3-torchvision python3-numpy python3-pil): %v %s",
		pythonPath, err, strings.TrimSpace(string(out)))
	testenv.Skip(t, "%s", msg)
}

// runPython runs a script from testdata with args and returns stdout.
func runPython(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(pythonPath, append([]string{filepath.Join("testdata", script)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", pythonPath, script, err, stderr.String())
	}
	return out
}

func encodePNG(w *bytes.Buffer, im image.Image) error { return png.Encode(w, im) }
