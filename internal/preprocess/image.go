package preprocess

import "fmt"

// Image is an 8-bit RGB image, rows top to bottom, pixels interleaved
// (HWC). Stride is the byte distance between rows (>= 3*W); a cropped
// view shares Pix with its parent.
type Image struct {
	W, H   int
	Stride int
	Pix    []byte
}

// NewImage allocates a w×h RGB image.
func NewImage(w, h int) *Image {
	return &Image{W: w, H: h, Stride: 3 * w, Pix: make([]byte, 3*w*h)}
}

// Row returns row y (3*W bytes).
func (m *Image) Row(y int) []byte {
	o := y * m.Stride
	return m.Pix[o : o+3*m.W]
}

// Sub returns the view of the rectangle (x, y, w, h), which must lie inside m.
func (m *Image) Sub(x, y, w, h int) *Image {
	if x < 0 || y < 0 || w < 0 || h < 0 || x+w > m.W || y+h > m.H {
		panic(fmt.Sprintf("preprocess: Sub(%d,%d,%d,%d) outside %dx%d", x, y, w, h, m.W, m.H))
	}
	if w == 0 || h == 0 {
		return &Image{W: w, H: h, Stride: 3 * w}
	}
	o := y*m.Stride + 3*x
	return &Image{W: w, H: h, Stride: m.Stride, Pix: m.Pix[o : o+(h-1)*m.Stride+3*w]}
}

// Compact returns m with Stride == 3*W (a copy if m is a view).
func (m *Image) Compact() *Image {
	if m.Stride == 3*m.W && len(m.Pix) == 3*m.W*m.H {
		return m
	}
	out := NewImage(m.W, m.H)
	for y := 0; y < m.H; y++ {
		copy(out.Row(y), m.Row(y))
	}
	return out
}

// Bytes is the memory an image holds.
func (m *Image) Bytes() int64 { return int64(len(m.Pix)) }

// DType is a tensor element type.
type DType string

// Tensor element types.
const (
	Uint8   DType = "uint8"
	Float32 DType = "float32"
)

// Tensor is a pipeline output: uint8 HWC (U8 set) or float32 CHW (F32 set),
// C order.
//
// A Pipeline makes its tensors inside their own .npy file: one pooled
// buffer holds the header and then the data, which U8 or F32 views. NPY
// returns that file without a copy, and Release gives the buffer back for
// the next sample. A tensor that is not released is left to the garbage
// collector.
type Tensor struct {
	DType DType
	Shape []int
	U8    []byte
	F32   []float32

	file []byte   // the .npy file whose data U8 or F32 views (nil: none)
	bufs *bufPool // where file goes on Release
}

// NPY returns t as a .npy file (the bytes EncodeNPY returns). For a
// tensor made by a Pipeline this is the memory the tensor lives in: no
// copy is made, and the bytes are valid until Release. Do not modify
// them.
func (t *Tensor) NPY() []byte {
	if t.file != nil {
		return t.file[:len(t.file):len(t.file)] // an append must not write into the pool's spare bytes
	}
	return EncodeNPY(t)
}

// Release gives the memory of a tensor made by a Pipeline back for reuse.
// Call it only on a tensor you hold alone (not one from a Store, whose
// tensors are shared), once you are done with its data and its NPY bytes;
// t's data is nil afterwards. For other tensors it only clears the data.
func (t *Tensor) Release() {
	if t.file != nil {
		t.bufs.put(t.file)
	}
	t.file, t.bufs, t.U8, t.F32 = nil, nil, nil, nil
}

// Bytes is the size of the tensor's data.
func (t *Tensor) Bytes() int64 {
	if t.DType == Float32 {
		return 4 * int64(len(t.F32))
	}
	return int64(len(t.U8))
}
