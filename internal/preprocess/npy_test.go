package preprocess

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/npytest"
)

func TestNPYHeaderIsVersion1AlignedAndRoundTrips(t *testing.T) {
	for _, tt := range []*Tensor{
		{DType: Uint8, Shape: []int{2, 3, 3}, U8: []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 255}},
		{DType: Float32, Shape: []int{3, 1, 2}, F32: []float32{-1.5, 0, 1, 2.25, float32(math.Pi), -0}},
		{DType: Uint8, Shape: []int{4}, U8: []byte{9, 8, 7, 6}},
	} {
		b := EncodeNPY(tt)
		if string(b[:8]) != "\x93NUMPY\x01\x00" {
			t.Fatalf("magic/version %q", b[:8])
		}
		hl := int(b[8]) | int(b[9])<<8
		if (10+hl)%64 != 0 || b[10+hl-1] != '\n' {
			t.Errorf("data offset %d not 64-aligned or header not newline-terminated", 10+hl)
		}
		if int64(len(b)) != NPYSize(tt) {
			t.Errorf("NPYSize %d, encoded %d", NPYSize(tt), len(b))
		}
		back, err := npytest.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back.Shape) != fmt.Sprint(tt.Shape) || back.DType != string(tt.DType) ||
			fmt.Sprint(back.U8) != fmt.Sprint(tt.U8) || fmt.Sprint(back.F32) != fmt.Sprint(tt.F32) {
			t.Errorf("round trip: %+v, want %+v", back, tt)
		}
	}
}

// numpy.load and torch.from_numpy (Debian's, through /usr/bin/python3)
// read our .npy files with the right dtype, shape and values, C order,
// and torch shares numpy's memory instead of copying.
func TestNPYLoadsInNumpyAndTorchWithoutCopy(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	p8, err := New(Options{Static: []string{"resize:64", "center_crop:48x40"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p8.Close()
	pf, err := New(Options{Static: []string{"resize:64", "center_crop:48x40"}, Output: "float32_chw",
		Normalize: [][]float64{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	data := cropJPEG(t, 2, 200, 150, 4)
	var paths []string
	var want []*Tensor
	for i, p := range []*Pipeline{p8, pf} {
		tt, err := p.Run(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("t%d.npy", i))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteNPY(f, tt); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
		want = append(want, tt)
	}
	out := runPython(t, "check_npy.py", paths...)
	sc := bufio.NewScanner(bytes.NewReader(out))
	i := 0
	for ; sc.Scan(); i++ {
		var r struct {
			DType            string
			Shape            []int
			CContiguous      bool `json:"c_contiguous"`
			Aligned          bool
			TorchShares      bool    `json:"torch_shares"`
			MmapTorchShares  bool    `json:"mmap_torch_shares"`
			MmapOffset       int     `json:"mmap_offset"`
			Sum, First, Last float64 // as numpy sees them
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		tt := want[i]
		var sum, first, last float64
		if tt.DType == Uint8 {
			for _, v := range tt.U8 {
				sum += float64(v)
			}
			first, last = float64(tt.U8[0]), float64(tt.U8[len(tt.U8)-1])
		} else {
			for _, v := range tt.F32 {
				sum += float64(v)
			}
			first, last = float64(tt.F32[0]), float64(tt.F32[len(tt.F32)-1])
		}
		if r.DType != string(tt.DType) || fmt.Sprint(r.Shape) != fmt.Sprint(tt.Shape) {
			t.Errorf("%s: numpy sees %s %v, want %s %v", paths[i], r.DType, r.Shape, tt.DType, tt.Shape)
		}
		if !r.CContiguous || !r.Aligned || !r.TorchShares || !r.MmapTorchShares || r.MmapOffset%64 != 0 {
			t.Errorf("%s: %+v: want C-contiguous, aligned, shared with torch (mmap too), 64-aligned data", paths[i], r)
		}
		if math.Abs(r.Sum-sum) > 1e-3*math.Max(1, math.Abs(sum)) || r.First != first || r.Last != last {
			t.Errorf("%s: numpy sum/first/last %v/%v/%v, want %v/%v/%v", paths[i], r.Sum, r.First, r.Last, sum, first, last)
		}
	}
	if i != 2 {
		t.Fatalf("python reported %d files, want 2", i)
	}
}

// encodeNPYReference is the encoder as it was before tensors were laid out
// as their .npy files: the header through fmt, the floats one by one.
func encodeNPYReference(t *Tensor) []byte {
	descr := "|u1"
	if t.DType == Float32 {
		descr = "<f4"
	}
	shape := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(shape, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	b := []byte("\x93NUMPY\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)+pad+1))
	b = append(b, dict...)
	b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	b = append(b, '\n')
	if t.DType != Float32 {
		return append(b, t.U8...)
	}
	for _, v := range t.F32 {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// The encoder gives the previous encoder's bytes for any shape and value,
// NaN payloads and negative zero included.
func TestEncodeNPYMatchesTheReferenceEncoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := [][]int{{}, {5}, {3, 7}, {2, 3, 4}, {3, 224, 224}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1000000000}}
	for _, sh := range shapes {
		n := 1
		for _, d := range sh {
			n *= d
		}
		for _, dt := range []DType{Uint8, Float32} {
			tt := &Tensor{DType: dt, Shape: sh}
			if n > 1<<20 {
				// Only the header: a shape too large to fill.
				if got, want := NPYHeader(tt), encodeNPYReference(tt); !bytes.Equal(got, want) {
					t.Errorf("%v %s header:\n got %q\nwant %q", sh, dt, got, want)
				}
				continue
			}
			if dt == Uint8 {
				tt.U8 = make([]byte, n)
				for i := range tt.U8 {
					tt.U8[i] = byte(rng.IntN(256))
				}
			} else {
				tt.F32 = make([]float32, n)
				for i := range tt.F32 {
					tt.F32[i] = math.Float32frombits(rng.Uint32())
				}
				if n > 2 {
					tt.F32[0], tt.F32[1] = float32(math.Copysign(0, -1)), math.Float32frombits(0x7fc00001)
				}
			}
			want := encodeNPYReference(tt)
			if got := EncodeNPY(tt); !bytes.Equal(got, want) {
				t.Errorf("%v %s: EncodeNPY differs from the reference encoder", sh, dt)
			}
			if got := tt.NPY(); !bytes.Equal(got, want) {
				t.Errorf("%v %s: NPY differs from the reference encoder", sh, dt)
			}
			if NPYSize(tt) != int64(len(want)) {
				t.Errorf("%v %s: NPYSize %d, want %d", sh, dt, NPYSize(tt), len(want))
			}
			var w bytes.Buffer
			if err := WriteNPY(&w, tt); err != nil || !bytes.Equal(w.Bytes(), want) {
				t.Errorf("%v %s: WriteNPY differs from the reference encoder (%v)", sh, dt, err)
			}
		}
	}
}

// countingWriter counts Write calls.
type countingWriter struct {
	bytes.Buffer
	calls int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.calls++
	return w.Buffer.Write(b)
}

// A pipeline's tensor is its own .npy file: NPY gives the reference
// encoder's bytes without copying (the data views the same memory),
// WriteNPY stores it in one Write, and Release clears the tensor.
func TestPipelineTensorIsItsOwnNPYFile(t *testing.T) {
	data := cropJPEG(t, 1, 320, 240, 5)
	for _, opts := range []Options{
		{Augment: []string{"random_resized_crop:64", "hflip:0.5"}},
		{Augment: []string{"random_resized_crop:64", "hflip:0.5"}, Output: "float32_chw",
			Normalize: [][]float64{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}}},
		{Static: []string{"resize:80", "center_crop:64"}, Output: "float32_chw"},
	} {
		p, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		tt, err := p.Run(data, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		plain := &Tensor{DType: tt.DType, Shape: tt.Shape, U8: slices.Clone(tt.U8), F32: slices.Clone(tt.F32)}
		want := encodeNPYReference(plain)
		file := tt.NPY()
		if !bytes.Equal(file, want) {
			t.Fatalf("%+v: NPY differs from the reference encoding of the same tensor", opts)
		}
		// The data is the file's tail, not a copy of it.
		if tt.DType == Float32 {
			tt.F32[0] = 12.5
			if math.Float32frombits(binary.LittleEndian.Uint32(file[len(file)-4*len(tt.F32):])) != 12.5 {
				t.Errorf("%+v: F32 does not view the NPY bytes", opts)
			}
		} else {
			tt.U8[0] ^= 0xff
			if file[len(file)-len(tt.U8)] != tt.U8[0] {
				t.Errorf("%+v: U8 does not view the NPY bytes", opts)
			}
		}
		var w countingWriter
		if err := WriteNPY(&w, tt); err != nil || w.calls != 1 || !bytes.Equal(w.Bytes(), file) {
			t.Errorf("%+v: WriteNPY: %d calls, %v", opts, w.calls, err)
		}
		tt.Release()
		if tt.U8 != nil || tt.F32 != nil || tt.file != nil {
			t.Errorf("%+v: Release left data in the tensor", opts)
		}
		tt.Release() // twice is harmless
	}
}
