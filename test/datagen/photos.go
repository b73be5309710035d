package datagen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// DefaultPhotoDir is where Debian's mate-backgrounds package installs its
// photographs (scripts/install-deps.sh installs it).
const DefaultPhotoDir = "/usr/share/backgrounds"

// workShort is the short side, in pixels, photos are reduced to once they are
// decoded. Samples are ~375 px on their short side, so crops keep 1x–2.7x of
// real detail while a whole photo set fits in a few tens of MB.
const workShort = 1024

// Photos is a decoded, downscaled set of source photographs. Decoding is the
// expensive part of generation (a 5640×3172 JPEG takes most of a second), so
// a caller that runs Generate several times (tests, benchmarks) loads the set
// once with LoadPhotos and passes it in Options.Photos. A Photos is read-only
// and safe for concurrent use.
type Photos struct {
	paths []string
	imgs  []*photo
}

// photo is one decoded photograph: a pyramid of working images, each half
// the size of the one before (down to ~minLevelShort on the short side), so
// small samples are cropped from a level near their own scale, and the
// calibration that starts the size search.
type photo struct {
	levels []*rgb
	bpp    float64 // see calibrate
}

const minLevelShort = 128

// Len is the number of photographs in the set.
func (p *Photos) Len() int { return len(p.imgs) }

// Paths lists the source files, in the sorted order samples index them by.
func (p *Photos) Paths() []string { return append([]string(nil), p.paths...) }

// findPhotos walks dirs recursively and returns every .jpg, .jpeg and .png
// file, sorted, without duplicates.
func findPhotos(dirs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == dir {
					return err
				}
				return nil // an unreadable subdirectory is not fatal
			}
			if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".jpg", ".jpeg", ".png":
				if !seen[path] {
					seen[path] = true
					out = append(out, path)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("datagen: walk %s: %w", dir, err)
		}
	}
	sort.Strings(out)
	return out, nil
}

func noPhotosError(dirs []string) error {
	hint := ""
	for _, d := range dirs {
		if filepath.Clean(d) == DefaultPhotoDir {
			hint = " (install mate-backgrounds)"
		}
	}
	return fmt.Errorf("datagen: no photographs under %s%s", strings.Join(dirs, ", "), hint)
}

// LoadPhotos decodes every .jpg, .jpeg and .png file under dirs (recursively;
// DefaultPhotoDir when dirs is empty) on all cores and reduces each to a
// working size. A file that does not decode is an error: a broken photo in
// the set would silently skew the dataset.
func LoadPhotos(ctx context.Context, dirs []string) (*Photos, error) {
	if len(dirs) == 0 {
		dirs = []string{DefaultPhotoDir}
	}
	paths, err := findPhotos(dirs)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, noPhotosError(dirs)
	}
	p := &Photos{paths: paths, imgs: make([]*photo, len(paths))}
	errs := make([]error, len(paths))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p.imgs[i], errs[i] = loadPhoto(paths[i])
			}
		}()
	}
feed:
	for i := range paths {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("datagen: load photos: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func loadPhoto(path string) (*photo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("datagen: read photo: %w", err)
	}
	var img image.Image
	if bytes.HasPrefix(data, []byte("\x89PNG")) {
		img, err = png.Decode(bytes.NewReader(data))
	} else {
		img, err = jpeg.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("datagen: decode photo %s: %w", path, err)
	}
	b := img.Bounds()
	if b.Dx() < 64 || b.Dy() < 64 {
		return nil, fmt.Errorf("datagen: photo %s is too small (%dx%d, need 64x64)", path, b.Dx(), b.Dy())
	}
	ph := &photo{levels: []*rgb{shrink(toRGB(img), workShort)}}
	for {
		l := ph.levels[len(ph.levels)-1]
		if min(l.w, l.h)/2 < minLevelShort {
			break
		}
		ph.levels = append(ph.levels, shrink(l, min(l.w, l.h)/2))
	}
	if ph.bpp, err = calibrate(ph); err != nil {
		return nil, err
	}
	return ph, nil
}

// shrink scales img down so its short side is at most short pixels.
func shrink(img *rgb, short int) *rgb {
	s := min(img.w, img.h)
	if s <= short {
		return img
	}
	w := int(float64(img.w)*float64(short)/float64(s) + 0.5)
	h := int(float64(img.h)*float64(short)/float64(s) + 0.5)
	return resample(img, 0, 0, float64(img.w), float64(img.h), w, h)
}

// toRGB converts a decoded image to packed RGB, compositing any transparency
// over mid grey (wallpapers with an alpha channel would otherwise turn black).
func toRGB(img image.Image) *rgb {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &rgb{w: w, h: h, pix: make([]uint8, w*h*3)}
	put := func(i int, r, g, bl, a uint32) { // 16-bit premultiplied
		const bg = 0x8080
		r = (r*0xffff + bg*(0xffff-a)) / 0xffff
		g = (g*0xffff + bg*(0xffff-a)) / 0xffff
		bl = (bl*0xffff + bg*(0xffff-a)) / 0xffff
		out.pix[i], out.pix[i+1], out.pix[i+2] = uint8(r>>8), uint8(g>>8), uint8(bl>>8)
	}
	switch m := img.(type) {
	case *image.YCbCr:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				yi, ci := m.YOffset(x, y), m.COffset(x, y)
				out.pix[i], out.pix[i+1], out.pix[i+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				i += 3
			}
		}
	case *image.Gray:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				v := m.Pix[m.PixOffset(x, y)]
				out.pix[i], out.pix[i+1], out.pix[i+2] = v, v, v
				i += 3
			}
		}
	case *image.RGBA:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := 0; x < w; x++ {
				c := s[x*4 : x*4+4]
				if c[3] == 0xff {
					out.pix[i], out.pix[i+1], out.pix[i+2] = c[0], c[1], c[2]
				} else {
					a := uint32(c[3]) * 0x101
					put(i, uint32(c[0])*0x101, uint32(c[1])*0x101, uint32(c[2])*0x101, a)
				}
				i += 3
			}
		}
	case *image.NRGBA:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := 0; x < w; x++ {
				c := s[x*4 : x*4+4]
				if c[3] == 0xff {
					out.pix[i], out.pix[i+1], out.pix[i+2] = c[0], c[1], c[2]
				} else {
					a := uint32(c[3]) * 0x101
					put(i, uint32(c[0])*0x101*a/0xffff, uint32(c[1])*0x101*a/0xffff, uint32(c[2])*0x101*a/0xffff, a)
				}
				i += 3
			}
		}
	default:
		i := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, a := img.At(x, y).RGBA()
				put(i, r, g, bl, a)
				i += 3
			}
		}
	}
	return out
}
