package preprocess

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
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
		back, err := DecodeNPY(b)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back.Shape) != fmt.Sprint(tt.Shape) || back.DType != tt.DType ||
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
