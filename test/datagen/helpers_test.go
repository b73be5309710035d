package datagen

import (
	"context"
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/epochfs/epochfs/internal/testenv"
)

// Tests render from the few mate-backgrounds photographs with the fewest
// pixels (fast to decode), loaded once for the whole package.
const testPhotoCount = 4

var testSet struct {
	once   sync.Once
	dir    string // symlinks to the chosen photos
	photos *Photos
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testSet.dir != "" {
		os.RemoveAll(testSet.dir)
	}
	os.Exit(code)
}

// requirePhotos returns the test photo set and the directory holding it. It
// skips the test when mate-backgrounds is not installed, and fails instead
// when EPOCHFS_REQUIRE_FUSE=1 (CI installs every test dependency).
func requirePhotos(t testing.TB) (*Photos, string) {
	t.Helper()
	testSet.once.Do(func() {
		paths, err := findPhotos([]string{DefaultPhotoDir})
		if err != nil || len(paths) == 0 {
			testSet.err = fmt.Errorf("no photographs under %s (install mate-backgrounds): %v", DefaultPhotoDir, err)
			return
		}
		sort.SliceStable(paths, func(i, j int) bool { return pixels(paths[i]) < pixels(paths[j]) })
		paths = paths[:min(testPhotoCount, len(paths))]
		dir, err := os.MkdirTemp("", "datagen-photos-")
		if err != nil {
			testSet.err = err
			return
		}
		testSet.dir = dir
		for i, p := range paths {
			if err := os.Symlink(p, filepath.Join(dir, fmt.Sprintf("%02d%s", i, filepath.Ext(p)))); err != nil {
				testSet.err = err
				return
			}
		}
		testSet.photos, testSet.err = LoadPhotos(context.Background(), []string{dir})
	})
	if testSet.err != nil {
		testenv.Skip(t, "photos: %v", testSet.err)
	}
	return testSet.photos, testSet.dir
}

func pixels(p string) int {
	f, err := os.Open(p)
	if err != nil {
		return 1 << 62
	}
	defer f.Close()
	c, _, err := image.DecodeConfig(f)
	if err != nil {
		return 1 << 62
	}
	return c.Width * c.Height
}

// testOptions are small, fast Options over the test photos: pictures a
// quarter of the default area (a tenth under the race detector, which slows
// image code about tenfold), with MeanBytes scaled to keep bytes per pixel.
func testOptions(t testing.TB, files int) Options {
	ph, _ := requirePhotos(t)
	o := Options{
		Dir:    filepath.Join(t.TempDir(), "ds"),
		Files:  files,
		Seed:   7,
		Photos: ph,
	}
	o.Width, o.Height = 250, 188
	if raceEnabled {
		o.Width, o.Height = 160, 120
	}
	o.MeanBytes = DefaultMeanBytes * o.Width * o.Height / (DefaultWidth * DefaultHeight)
	return o
}

func mustGenerate(t testing.TB, o Options) Manifest {
	t.Helper()
	m, err := Generate(context.Background(), o)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return m
}

// readTree returns every regular file under dir, keyed by slash path.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
