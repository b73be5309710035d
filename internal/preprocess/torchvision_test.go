package preprocess

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/epochfs/epochfs/internal/npytest"
)

type compareRow struct {
	Image    string  `json:"image"`
	RefShape []int   `json:"ref_shape"`
	GotShape []int   `json:"got_shape"`
	DType    string  `json:"dtype"`
	MAD      float64 `json:"mad"`
	Max      int     `json:"max"`
}

// Resize(256) + CenterCrop(224) agrees with PIL + torchvision: identical
// shapes and mean absolute difference <= 2 on the uint8 scale, with and
// without DCT-domain scaling (the larger images decode at 1/2 or 1/4).
func TestResizeCenterCropMatchesTorchvision(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	paths := writeJPEGs(t, dir, 6)
	// Larger photos: DCT scaling to 1/2 applies for resize:256.
	for i, wh := range [][2]int{{800, 600}, {541, 600}, {957, 531}, {1100, 700}, {700, 1000}} {
		p := filepath.Join(dir, fmt.Sprintf("big%d.jpg", i))
		if err := os.WriteFile(p, cropJPEG(t, i+2, wh[0], wh[1], 11), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cases := []struct {
		name   string
		static []string
		cfg    string
		noDCT  bool
	}{
		{"resize256_crop224", []string{"resize:256", "center_crop:224"}, `{"resize": 256, "center_crop": 224}`, false},
		{"resize256_crop224_nodct", []string{"resize:256", "center_crop:224"}, `{"resize": 256, "center_crop": 224}`, true},
		{"resize_only", []string{"resize:160"}, `{"resize": 160}`, false},
		{"crop_pads", []string{"center_crop:420"}, `{"center_crop": 420}`, false},
		{"resize_exact", []string{"resize:200x300"}, `{"resize": [200, 300]}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Options{Static: tc.static, NoDCTScaling: tc.noDCT})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			args := []string{tc.cfg}
			for _, path := range paths {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				out, err := p.Run(data, nil)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				npy := filepath.Join(dir, tc.name+"_"+filepath.Base(path)+".npy")
				if err := os.WriteFile(npy, EncodeNPY(out), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, path, npy)
			}
			rows := parseRows(t, runPython(t, "compare_torchvision.py", args...))
			if len(rows) != len(paths) {
				t.Fatalf("python compared %d images, want %d", len(rows), len(paths))
			}
			for _, r := range rows {
				if fmt.Sprint(r.RefShape) != fmt.Sprint(r.GotShape) {
					t.Errorf("%s: shape %v, torchvision %v", r.Image, r.GotShape, r.RefShape)
					continue
				}
				if r.DType != "uint8" {
					t.Errorf("%s: dtype %s", r.Image, r.DType)
				}
				if r.MAD > 2 {
					t.Errorf("%s: mean absolute difference %.3f > 2 (max %d)", r.Image, r.MAD, r.Max)
				}
				t.Logf("%s: shape %v mad %.4f max %d", filepath.Base(r.Image), r.GotShape, r.MAD, r.Max)
			}
		})
	}
}

func parseRows(t *testing.T, out []byte) []compareRow {
	t.Helper()
	var rows []compareRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r compareRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("python output %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows
}

// Grayscale and CMYK JPEGs become RGB as PIL's convert("RGB") makes them.
func TestGrayAndCMYKJPEGBecomeRGB(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.jpg")
	if err := os.WriteFile(src, cropJPEG(t, 0, 320, 240, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	runPython(t, "make_cmyk.py", src, dir)
	d, err := NewDecoder(DecoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, mode := range []string{"cmyk", "l"} {
		data, err := os.ReadFile(filepath.Join(dir, mode+".jpg"))
		if err != nil {
			t.Fatal(err)
		}
		refb, err := os.ReadFile(filepath.Join(dir, mode+"_ref.npy"))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := npytest.Decode(refb)
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := d.Decode(data, nil)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if fmt.Sprint(ref.Shape) != fmt.Sprint([]int{img.H, img.W, 3}) {
			t.Fatalf("%s: shape %dx%dx3, PIL %v", mode, img.H, img.W, ref.Shape)
		}
		var sum, maxd int
		for i, v := range img.Compact().Pix {
			dd := int(v) - int(ref.U8[i])
			if dd < 0 {
				dd = -dd
			}
			sum += dd
			maxd = max(maxd, dd)
		}
		mad := float64(sum) / float64(len(ref.U8))
		t.Logf("%s: mad %.3f max %d", mode, mad, maxd)
		if mad > 1 {
			t.Errorf("%s: mean absolute difference from PIL %.3f > 1", mode, mad)
		}
	}
}
