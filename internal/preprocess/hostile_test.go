package preprocess

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// hugeJPEG returns a valid JPEG whose SOF header is patched to declare
// w×h pixels.
func hugeJPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	data := bytes.Clone(cropJPEG(t, 0, 64, 48, 5))
	// Walk the marker segments after SOI to the SOF0 segment.
	i := 2
	for data[i] != 0xFF || data[i+1] != 0xC0 {
		i += 2 + int(binary.BigEndian.Uint16(data[i+2:]))
		if i+9 > len(data) {
			t.Fatal("no SOF0 marker")
		}
	}
	binary.BigEndian.PutUint16(data[i+5:], uint16(h))
	binary.BigEndian.PutUint16(data[i+7:], uint16(w))
	return data
}

// pngBomb returns a small PNG whose IHDR is patched (with a valid CRC) to
// declare w×h pixels: a decoder that trusts it allocates w*h*4 bytes.
func pngBomb(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	// IHDR: 8-byte signature, length(4), "IHDR", width(4), height(4)...
	binary.BigEndian.PutUint32(data[16:], uint32(w))
	binary.BigEndian.PutUint32(data[20:], uint32(h))
	crc := crc32.ChecksumIEEE(data[12:29])
	binary.BigEndian.PutUint32(data[29:], crc)
	return data
}

func hostileInputs(t testing.TB) map[string]struct {
	data []byte
	want error
} {
	valid := cropJPEG(t, 1, 200, 150, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	jpegNoise := append([]byte{0xFF, 0xD8, 0xFF}, random...)
	return map[string]struct {
		data []byte
		want error
	}{
		"truncated jpeg":          {valid[:len(valid)/2], ErrCorrupt},
		"jpeg header only":        {valid[:200], ErrCorrupt},
		"random bytes":            {random, ErrUnsupported},
		"random bytes after SOI":  {jpegNoise, ErrCorrupt},
		"50000x50000 jpeg header": {hugeJPEG(t, 50000, 50000), ErrTooLarge},
		"zero-byte file":          {nil, ErrCorrupt},
		"png bomb 50000x50000":    {pngBomb(t, 50000, 50000), ErrTooLarge},
		"truncated png":           {pngBomb(t, 8, 8)[:40], ErrCorrupt},
	}
}

// Every hostile input is an error for that sample, of the right kind,
// from both decoders, with allocation bounded far below what the header
// declares.
func TestHostileInputIsAnErrorNotACrash(t *testing.T) {
	for _, stdlib := range []bool{false, true} {
		d, err := NewDecoder(DecoderOptions{ForceStdlib: stdlib})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for name, in := range hostileInputs(t) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			img, _, err := d.Decode(in.data, nil)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Errorf("stdlib=%v %s: decoded to %dx%d, want an error", stdlib, name, img.W, img.H)
				continue
			}
			if !errors.Is(err, in.want) {
				t.Errorf("stdlib=%v %s: %v, want %v", stdlib, name, err, in.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
				t.Errorf("stdlib=%v %s: allocated %d bytes", stdlib, name, got)
			}
		}
	}
}

// The pixel limit is configurable: an image within the default limit is
// refused under a smaller one, before decoding.
func TestMaxPixelsIsConfigurable(t *testing.T) {
	data := cropJPEG(t, 2, 200, 150, 3)
	for _, tc := range []struct {
		max  int64
		want error
	}{{200*150 - 1, ErrTooLarge}, {200 * 150, nil}} {
		p, err := New(Options{Static: []string{"center_crop:100"}, MaxPixels: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Run(data, nil)
		p.Close()
		if !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("max_pixels %d: %v, want %v", tc.max, err, tc.want)
		}
	}
	var buf bytes.Buffer
	img := image.NewNRGBA(image.Rect(0, 0, 300, 300))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	d, _ := NewDecoder(DecoderOptions{MaxPixels: 1000})
	if _, _, err := d.Decode(buf.Bytes(), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("300x300 png under a 1000-pixel limit: %v", err)
	}
}

// PNGs (RGBA, gray, paletted) become RGB like PIL's convert("RGB").
func TestPNGBecomesRGB(t *testing.T) {
	d, _ := NewDecoder(DecoderOptions{})
	defer d.Close()
	nrgba := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	nrgba.SetNRGBA(1, 1, color.NRGBA{10, 20, 30, 40})
	gray := image.NewGray(image.Rect(0, 0, 3, 2))
	gray.SetGray(1, 1, color.Gray{77})
	pal := image.NewPaletted(image.Rect(0, 0, 3, 2), color.Palette{color.RGBA{0, 0, 0, 255}, color.RGBA{200, 100, 50, 255}})
	pal.SetColorIndex(1, 1, 1)
	for name, tc := range map[string]struct {
		im   image.Image
		want [3]byte
	}{
		"nrgba":    {nrgba, [3]byte{10, 20, 30}},
		"gray":     {gray, [3]byte{77, 77, 77}},
		"paletted": {pal, [3]byte{200, 100, 50}},
	} {
		var buf bytes.Buffer
		if err := png.Encode(&buf, tc.im); err != nil {
			t.Fatal(err)
		}
		img, _, err := d.Decode(buf.Bytes(), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if img.W != 3 || img.H != 2 {
			t.Fatalf("%s: %dx%d", name, img.W, img.H)
		}
		got := [3]byte(img.Row(1)[3:6])
		if got != tc.want {
			t.Errorf("%s: pixel (1,1) = %v, want %v", name, got, tc.want)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder entry point: it must
// return an image consistent with its header or an error wrapping one of
// the package's sentinels; never panic, crash in C, or allocate past the
// pixel limit.
func FuzzDecode(f *testing.F) {
	valid := cropJPEG(f, 0, 40, 30, 1)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(hugeJPEG(f, 50000, 50000))
	f.Add(pngBomb(f, 8, 8))
	f.Add(pngBomb(f, 50000, 50000))
	var gray bytes.Buffer
	_ = png.Encode(&gray, image.NewGray(image.Rect(0, 0, 5, 5)))
	f.Add(gray.Bytes())
	f.Add([]byte{0xFF, 0xD8, 0xFF, 0xE0})
	d, err := NewDecoder(DecoderOptions{MaxPixels: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, denom := range []int{1, 4} {
			img, got, err := d.Decode(data, func(Header) int { return denom })
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("error wraps no sentinel: %v", err)
				}
				continue
			}
			if img.W <= 0 || img.H <= 0 || len(img.Pix) != 3*img.W*img.H || int64(img.W*img.H) > 1<<20 {
				t.Fatalf("decoded %dx%d with %d bytes (scale 1/%d)", img.W, img.H, len(img.Pix), got)
			}
			h, err := d.DecodeHeader(data)
			if err != nil {
				t.Fatalf("decoded but header fails: %v", err)
			}
			if scaled(h.W, got) != img.W || scaled(h.H, got) != img.H {
				t.Fatalf("header %dx%d at 1/%d, image %dx%d", h.W, h.H, got, img.W, img.H)
			}
		}
		// The region decoder (skip and crop scanlines) on the same bytes.
		for _, denom := range []int{1, 2} {
			var want Rect
			img, _, err := d.DecodeRegion(data, func(h Header) (int, Rect) {
				if !h.Scalable {
					denom = 1
				}
				sw, sh := scaled(h.W, denom), scaled(h.H, denom)
				want = Rect{X: sw / 4, Y: sh / 3, W: max(1, sw/2), H: max(1, sh/2)}
				return denom, want
			})
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("region: error wraps no sentinel: %v", err)
				}
				continue
			}
			if img.W != want.W || img.H != want.H || len(img.Pix) < 3*img.W {
				t.Fatalf("region %+v decoded as %dx%d", want, img.W, img.H)
			}
		}
	})
}

// A libjpeg-turbo handle that failed on one input does not poison the
// next image decoded with the pool (TurboJPEG leaves a handle that
// failed mid-header unusable; the pool destroys such handles).
func TestHandleAfterErrorStillDecodes(t *testing.T) {
	d, err := NewDecoder(DecoderOptions{Handles: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	valid := cropJPEG(t, 3, 64, 48, 1)
	for name, in := range hostileInputs(t) {
		if _, _, err := d.Decode(in.data, nil); err == nil {
			t.Fatalf("%s: no error", name)
		}
		_, _ = d.DecodeHeader(in.data) // may fail too; must not poison the handle
		img, _, err := d.Decode(valid, nil)
		if err != nil || img.W != 64 || img.H != 48 {
			t.Fatalf("valid image after %s: %v", name, err)
		}
	}
}

// TestEveryOrderOfInputsGivesTheSameAnswers: on one handle, whatever came
// before (every hostile input, its header alone, a valid file that only
// warns), each input gets the answer it gets alone: a truncated file is an
// error however the handle was used (libjpeg reports a handle's first
// warning only).
func TestEveryOrderOfInputsGivesTheSameAnswers(t *testing.T) {
	inputs := map[string][]byte{}
	for name, in := range hostileInputs(t) {
		inputs[name] = in.data
	}
	valid := cropJPEG(t, 3, 64, 48, 1)
	inputs["valid"] = valid
	// "Corrupt JPEG data: 2 extraneous bytes before marker 0xd9": a
	// warning of the decode, and an image (as PIL reads it).
	eoi := bytes.LastIndex(valid, []byte{0xFF, 0xD9})
	warns := append(append(bytes.Clone(valid[:eoi]), 0x00, 0x00), valid[eoi:]...)
	inputs["extraneous bytes"] = warns
	alone := map[string]bool{}
	for name, data := range inputs {
		d, err := NewDecoder(DecoderOptions{Handles: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = d.Decode(data, nil)
		alone[name] = err == nil
		d.Close()
	}
	if !alone["valid"] || !alone["extraneous bytes"] || alone["truncated jpeg"] {
		t.Fatalf("alone: %v", alone)
	}
	names := slices.Sorted(maps.Keys(inputs))
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 400 {
		// One handle through a random order of every input, each decoded,
		// its header read, and a valid image decoded after it, as the
		// views' workers use their handles.
		d, err := NewDecoder(DecoderOptions{Handles: 1})
		if err != nil {
			t.Fatal(err)
		}
		order := slices.Clone(names)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for k, name := range order {
			_, _, err := d.Decode(inputs[name], nil)
			if (err == nil) != alone[name] {
				d.Close()
				t.Fatalf("round %d: %s after %v: error %v; alone it decodes: %v", round, name, order[:k], err, alone[name])
			}
			d.DecodeHeader(inputs[name])
			if _, _, err := d.Decode(valid, nil); err != nil {
				d.Close()
				t.Fatalf("round %d: the valid image after %v: %v", round, order[:k+1], err)
			}
		}
		d.Close()
	}
}
