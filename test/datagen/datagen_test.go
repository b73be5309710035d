package datagen

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSameSeedGivesIdenticalTreeDifferentSeedDiffers(t *testing.T) {
	o := testOptions(t, 20)
	m1 := mustGenerate(t, o)
	a := readTree(t, o.Dir)

	o2 := o
	o2.Dir = filepath.Join(t.TempDir(), "again")
	m2 := mustGenerate(t, o2)
	b := readTree(t, o2.Dir)
	if len(a) != o.Files || len(b) != o.Files {
		t.Fatalf("trees hold %d and %d files, want %d", len(a), len(b), o.Files)
	}
	for p, data := range a {
		if !bytes.Equal(data, b[p]) {
			t.Errorf("%s differs between two runs with seed %d", p, o.Seed)
		}
	}
	if m1.TotalBytes != m2.TotalBytes {
		t.Errorf("TotalBytes %d vs %d", m1.TotalBytes, m2.TotalBytes)
	}

	o3 := o
	o3.Dir = filepath.Join(t.TempDir(), "other")
	o3.Seed = o.Seed + 1
	mustGenerate(t, o3)
	c := readTree(t, o3.Dir)
	same := 0
	for p, data := range a {
		if bytes.Equal(data, c[p]) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d of %d files identical with seeds %d and %d", same, len(a), o.Seed, o3.Seed)
	}
}

func TestEveryFileDecodesWithDimsInRange(t *testing.T) {
	o := testOptions(t, 60)
	m := mustGenerate(t, o)
	w, h := o.Width, o.Height
	in := func(v, nominal int) bool {
		return float64(v) >= 0.8*float64(nominal)-1 && float64(v) <= 1.2*float64(nominal)+1
	}
	portrait := 0
	for _, s := range m.Samples {
		data, err := os.ReadFile(filepath.Join(o.Dir, s.Path))
		if err != nil {
			t.Fatal(err)
		}
		img, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s does not decode as JPEG: %v", s.Path, err)
		}
		switch img.(type) {
		case *image.YCbCr, *image.Gray:
		default:
			t.Errorf("%s decodes as %T", s.Path, img)
		}
		b := img.Bounds()
		if !(in(b.Dx(), w) && in(b.Dy(), h)) && !(in(b.Dx(), h) && in(b.Dy(), w)) {
			t.Errorf("%s is %dx%d, want each side within ±20%% of %dx%d (either orientation)", s.Path, b.Dx(), b.Dy(), w, h)
		}
		if b.Dy() > b.Dx() {
			portrait++
		}
		if int64(len(data)) != s.Bytes {
			t.Errorf("%s: manifest says %d bytes, file has %d", s.Path, s.Bytes, len(data))
		}
	}
	if portrait == 0 || portrait > len(m.Samples)/2 {
		t.Errorf("%d of %d samples are portrait, want some but a minority", portrait, len(m.Samples))
	}
}

// Over 200 files the mean lands within 5% of MeanBytes (measured: ~1%), and
// sizes spread like a lognormal with σ≈0.4 rather than clustering. Without
// the race detector this runs at the default 500x375 and 110 KB.
func TestMeanSizeWithin5PercentOfMeanBytes(t *testing.T) {
	o := testOptions(t, 200)
	if !raceEnabled {
		o.Width, o.Height, o.MeanBytes = 0, 0, 0
	}
	m := mustGenerate(t, o)
	want := o.MeanBytes
	if want == 0 {
		want = DefaultMeanBytes
	}
	mean := float64(m.TotalBytes) / float64(len(m.Samples))
	if r := mean / float64(want); r < 0.95 || r > 1.05 {
		t.Errorf("mean size %.0f bytes is %.1f%% of MeanBytes %d, want 95%%..105%%", mean, 100*r, want)
	}
	var sum, sum2 float64
	for _, s := range m.Samples {
		l := math.Log(float64(s.Bytes))
		sum += l
		sum2 += l * l
	}
	n := float64(len(m.Samples))
	sd := math.Sqrt(sum2/n - (sum/n)*(sum/n))
	if sd < 0.25 || sd > 0.55 {
		t.Errorf("log-size standard deviation %.2f, want 0.25..0.55 (target σ %.2f)", sd, sizeSigma)
	}
	t.Logf("mean %.0f bytes (target %d), log-size sd %.2f", mean, want, sd)
}

func TestClassTreeIsPureAndBalanced(t *testing.T) {
	o := testOptions(t, 47)
	o.Classes = 5
	m := mustGenerate(t, o)
	ents, err := os.ReadDir(o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != o.Classes {
		t.Fatalf("%d entries in the root, want exactly %d class directories", len(ents), o.Classes)
	}
	for c, e := range ents {
		if !e.IsDir() || e.Name() != ClassName(c) {
			t.Errorf("root entry %d is %q (dir=%v), want directory %s", c, e.Name(), e.IsDir(), ClassName(c))
		}
	}
	tree := readTree(t, o.Dir)
	if len(tree) != o.Files {
		t.Errorf("%d files on disk, want %d", len(tree), o.Files)
	}
	perClass := map[int]int{}
	var total int64
	for i, s := range m.Samples {
		cn := ClassName(s.Class)
		if !strings.HasPrefix(s.Path, cn+"/"+cn+"_") || !strings.HasSuffix(s.Path, ".JPEG") {
			t.Errorf("sample %d path %q does not match class %d", i, s.Path, s.Class)
		}
		if int64(len(tree[s.Path])) != s.Bytes || s.Bytes == 0 {
			t.Errorf("sample %d %s: manifest %d bytes, disk %d", i, s.Path, s.Bytes, len(tree[s.Path]))
		}
		delete(tree, s.Path)
		perClass[s.Class]++
		total += s.Bytes
	}
	for p := range tree {
		t.Errorf("file %s is not in the manifest", p)
	}
	if total != m.TotalBytes {
		t.Errorf("TotalBytes %d, samples sum to %d", m.TotalBytes, total)
	}
	for c := 0; c < o.Classes; c++ {
		if n := perClass[c]; n < o.Files/o.Classes || n > o.Files/o.Classes+1 {
			t.Errorf("class %d has %d samples, want %d or %d", c, n, o.Files/o.Classes, o.Files/o.Classes+1)
		}
	}
	if m.Shards != nil {
		t.Errorf("Shards = %v without Options.Shards", m.Shards)
	}
	if _, err := os.Stat(o.Dir + "-shards"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("shard directory exists without Options.Shards: %v", err)
	}
}

func TestPlansHaveImageNetLikeMix(t *testing.T) {
	o := Options{Files: 20000, Classes: 10, Seed: 3, Width: 500, Height: 375, MeanBytes: 110000}
	home := homePhotos(o.Seed, 7)
	var gray, portrait int
	var targets float64
	for i := 0; i < o.Files; i++ {
		p := makePlan(&o, 7, home, i)
		if p.gray {
			gray++
		}
		if p.h > p.w {
			portrait++
		}
		targets += p.target
	}
	n := float64(o.Files)
	if f := float64(gray) / n; f < 0.005 || f > 0.03 {
		t.Errorf("grayscale fraction %.3f, want ~%.3f", f, grayFrac)
	}
	if f := float64(portrait) / n; f < 0.12 || f > 0.22 {
		t.Errorf("portrait fraction %.3f, want ~1/6", f)
	}
	if r := targets / n / float64(o.MeanBytes); math.Abs(r-1) > 0.005 {
		t.Errorf("mean size target is %.4f of MeanBytes, want 1±0.005", r)
	}
}

func TestResampleKeepsAFlatColourFlat(t *testing.T) {
	src := &rgb{w: 97, h: 61, pix: bytes.Repeat([]byte{10, 128, 250}, 97*61)}
	for _, sz := range [][2]int{{13, 9}, {97, 61}, {150, 100}} {
		dst := resample(src, 3.5, 2.25, 80.3, 50.1, sz[0], sz[1])
		if !bytes.Equal(dst.pix, bytes.Repeat([]byte{10, 128, 250}, sz[0]*sz[1])) {
			t.Errorf("resample to %dx%d changed a flat colour", sz[0], sz[1])
		}
	}
}

func TestErrors(t *testing.T) {
	ph, _ := requirePhotos(t)
	ctx := context.Background()
	tmp := t.TempDir()

	bad := []Options{
		{Dir: filepath.Join(tmp, "a"), Files: 0},
		{Dir: filepath.Join(tmp, "a"), Files: -3},
		{Dir: "", Files: 10},
		{Dir: filepath.Join(tmp, "a"), Files: 5, Classes: 6},
		{Dir: filepath.Join(tmp, "a"), Files: 5, MeanBytes: -1},
		{Dir: filepath.Join(tmp, "a"), Files: 5, Shards: true, ShardDir: filepath.Join(tmp, "a", "shards")},
	}
	for _, o := range bad {
		o.Photos = ph
		_, err := Generate(ctx, o)
		if !errors.Is(err, ErrInvalidOptions) || !strings.HasPrefix(err.Error(), "datagen: ") {
			t.Errorf("Generate(%+v) = %v, want ErrInvalidOptions", o, err)
		}
		if _, err := os.Stat(filepath.Join(tmp, "a")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("invalid options created the output directory")
		}
	}

	full := filepath.Join(tmp, "full")
	if err := os.MkdirAll(filepath.Join(full, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(ctx, Options{Dir: full, Files: 10, Photos: ph}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("non-empty Dir: err = %v, want ErrNotEmpty", err)
	}

	empty := t.TempDir()
	out := filepath.Join(tmp, "nophotos")
	_, err := Generate(ctx, Options{Dir: out, Files: 10, PhotoDirs: []string{empty}})
	if err == nil || !strings.Contains(err.Error(), "datagen: no photographs under "+empty) {
		t.Errorf("no photos: err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed run without photos created %s", out)
	}
	if got := noPhotosError([]string{DefaultPhotoDir}).Error(); got != "datagen: no photographs under /usr/share/backgrounds (install mate-backgrounds)" {
		t.Errorf("default photo dir error = %q", got)
	}
}

func TestCancelLeavesNoTemporaryFiles(t *testing.T) {
	o := testOptions(t, 200)
	ctx, cancel := context.WithCancel(context.Background())
	o.Progress = func(done, total int) {
		if done == 5 {
			cancel()
		}
	}
	_, err := Generate(ctx, o)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("err = %v, want an 'incomplete' context.Canceled error", err)
	}
	n := 0
	for p := range readTree(t, o.Dir) {
		if strings.HasPrefix(filepath.Base(p), ".") {
			t.Errorf("temporary file %s left behind", p)
		}
		n++
	}
	if n >= o.Files {
		t.Errorf("%d files after cancelling at 5 of %d", n, o.Files)
	}
}

func TestProgressCountsEveryFileInOrder(t *testing.T) {
	o := testOptions(t, 12)
	last := 0
	o.Progress = func(done, total int) {
		if done != last+1 || total != o.Files {
			t.Errorf("Progress(%d, %d) after %d", done, total, last)
		}
		last = done
	}
	mustGenerate(t, o)
	if last != o.Files {
		t.Errorf("last Progress done = %d, want %d", last, o.Files)
	}
}
