package jobs

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A batch file is a NumPy .npz: a zip archive of .npy arrays, stored (not
// compressed: tensors do not compress, and numpy.load reads stored members
// without a copy through zlib).

// npyArray is one member: a C-order little-endian array.
type npyArray struct {
	name  string // without .npy
	descr string // "|u1", "<f4", "<i8", "<U12"
	shape []int
	data  []byte
}

// npyHeader is the NumPy 1.0 header of a, padded to 64 bytes.
func (a *npyArray) npyHeader() []byte {
	dims := make([]string, len(a.shape))
	for i, d := range a.shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(dims) == 1 {
		tuple += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", a.descr, tuple)
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	h := make([]byte, 0, total+pad)
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = binary.LittleEndian.AppendUint16(h, uint16(len(dict)+pad+1))
	h = append(h, dict...)
	for range pad {
		h = append(h, ' ')
	}
	return append(h, '\n')
}

// writeNPZ returns the arrays as one .npz file.
func writeNPZ(arrays []npyArray) ([]byte, error) {
	size := 0
	for _, a := range arrays {
		size += len(a.data) + 256
	}
	var b bytes.Buffer
	b.Grow(size)
	z := zip.NewWriter(&b)
	for _, a := range arrays {
		w, err := z.CreateHeader(&zip.FileHeader{Name: a.name + ".npy", Method: zip.Store})
		if err != nil {
			return nil, fmt.Errorf("jobs: npz: %w", err)
		}
		if _, err := w.Write(a.npyHeader()); err != nil {
			return nil, fmt.Errorf("jobs: npz: %w", err)
		}
		if _, err := w.Write(a.data); err != nil {
			return nil, fmt.Errorf("jobs: npz: %w", err)
		}
	}
	if err := z.Close(); err != nil {
		return nil, fmt.Errorf("jobs: npz: %w", err)
	}
	return b.Bytes(), nil
}

// int64Array is a 1-D int64 array.
func int64Array(name string, v []int64) npyArray {
	data := make([]byte, 0, 8*len(v))
	for _, x := range v {
		data = binary.LittleEndian.AppendUint64(data, uint64(x))
	}
	return npyArray{name: name, descr: "<i8", shape: []int{len(v)}, data: data}
}

// stringArray is a 1-D array of strings (NumPy "<U": UTF-32, fixed
// width); the strings must be valid UTF-8.
func stringArray(name string, v []string) npyArray {
	width := 1
	for _, s := range v {
		width = max(width, utf8.RuneCountInString(s))
	}
	data := make([]byte, 0, 4*width*len(v))
	for _, s := range v {
		n := 0
		for _, r := range s {
			data = binary.LittleEndian.AppendUint32(data, uint32(r))
			n++
		}
		for ; n < width; n++ {
			data = binary.LittleEndian.AppendUint32(data, 0)
		}
	}
	return npyArray{name: name, descr: fmt.Sprintf("<U%d", width), shape: []int{len(v)}, data: data}
}
