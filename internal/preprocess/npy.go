package preprocess

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"
)

// NPY encoding: NumPy format version 1.0, C order, little-endian. The
// header is padded so the data starts at a multiple of 64 bytes, so
// numpy.load (and numpy.load(mmap_mode="r")) gets an aligned array that
// torch.from_numpy wraps without copying.
//
// A Pipeline lays each output tensor out as its .npy file (the header,
// then the data, in one pooled buffer), so Tensor.NPY hands out the file
// without encoding or copying it, and one write stores it.

// NPYHeader returns the header for t.
func NPYHeader(t *Tensor) []byte { return appendNPYHeader(nil, t.DType, t.Shape) }

// appendNPYHeader appends the header of a dtype × shape array to b.
func appendNPYHeader(b []byte, dtype DType, shape []int) []byte {
	descr := "|u1"
	if dtype == Float32 {
		descr = "<f4"
	}
	return AppendNPYHeaderOf(b, descr, shape)
}

// AppendNPYHeaderOf appends the NumPy 1.0 header of a C-order array of
// NumPy type descr ("|u1", "<f4", "<i8", "<U12") and shape to b, padded
// to 64 bytes. The one writer of .npy headers: the views' tensors and
// the batch archives (internal/views/npz.go) both use it.
func AppendNPYHeaderOf(b []byte, descr string, shape []int) []byte {
	// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 224, 224), }
	var dict [128]byte
	d := append(dict[:0], "{'descr': '"...)
	d = append(d, descr...)
	d = append(d, "', 'fortran_order': False, 'shape': ("...)
	for i, n := range shape {
		if i > 0 {
			d = append(d, ", "...)
		}
		d = strconv.AppendInt(d, int64(n), 10)
	}
	if len(shape) == 1 {
		d = append(d, ',')
	}
	d = append(d, "), }"...)
	// magic(6) + version(2) + len(2) + dict + padding + '\n' ≡ 0 mod 64
	total := 10 + len(d) + 1
	pad := (64 - total%64) % 64
	b = append(b, "\x93NUMPY\x01\x00"...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(d)+pad+1))
	b = append(b, d...)
	for range pad {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

// npyHeaderLen is len(appendNPYHeader(nil, dtype, shape)), without
// allocating.
func npyHeaderLen(dtype DType, shape []int) int {
	var buf [256]byte
	return len(appendNPYHeader(buf[:0], dtype, shape))
}

// NPYSize is the encoded size of t in bytes.
func NPYSize(t *Tensor) int64 {
	if t.file != nil {
		return int64(len(t.file))
	}
	return int64(npyHeaderLen(t.DType, t.Shape)) + t.Bytes()
}

// littleEndian: float32 data in memory is already '<f4' on this machine
// (a constant fact, like the CPU features).
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// AppendNPY appends t encoded as .npy to b.
func AppendNPY(b []byte, t *Tensor) []byte {
	if t.file != nil {
		return append(b, t.file...)
	}
	b = appendNPYHeader(b, t.DType, t.Shape)
	if t.DType != Float32 {
		return append(b, t.U8...)
	}
	if littleEndian {
		return append(b, f32Bytes(t.F32)...)
	}
	off := len(b)
	b = append(b, make([]byte, 4*len(t.F32))...)
	out := b[off:]
	for i, v := range t.F32 {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return b
}

// f32Bytes is the memory of f as bytes.
func f32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// EncodeNPY returns t as a .npy file, in a new buffer.
func EncodeNPY(t *Tensor) []byte {
	return AppendNPY(make([]byte, 0, NPYSize(t)), t)
}

// WriteNPY writes t as a .npy file to w, in one Write call (for a tensor
// made by a Pipeline, straight from the tensor's memory).
func WriteNPY(w io.Writer, t *Tensor) error {
	if _, err := w.Write(t.NPY()); err != nil {
		return fmt.Errorf("preprocess: write npy: %w", err)
	}
	return nil
}

// WriteNPYFile writes t to path atomically (temp file in the same directory,
// then rename), so a reader never sees a partial file. The file is one
// write of the tensor's memory (Tensor.NPY).
func WriteNPYFile(path string, t *Tensor) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*.npy")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := WriteNPY(f, t); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
