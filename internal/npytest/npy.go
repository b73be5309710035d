// Package npytest reads .npy files in tests: the arrays epochfs writes
// (views, batches, epochfs preprocess) and the references numpy wrote.
package npytest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Array is a decoded .npy array: DType "uint8" (U8) or "float32" (F32).
type Array struct {
	DType string
	Shape []int
	U8    []byte
	F32   []float32
}

// Decode parses a .npy file holding a C-order little-endian uint8 or
// float32 array (what epochfs writes, and what numpy.save writes for those
// types).
func Decode(b []byte) (*Array, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return nil, errors.New("npy: bad magic")
	}
	var hlen, off int
	switch b[6] {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, errors.New("npy: short header")
		}
		hlen, off = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return nil, fmt.Errorf("npy: version %d", b[6])
	}
	if off+hlen > len(b) {
		return nil, errors.New("npy: short header")
	}
	h := string(b[off : off+hlen])
	data := b[off+hlen:]
	field := func(key string) (string, error) {
		i := strings.Index(h, "'"+key+"':")
		if i < 0 {
			return "", fmt.Errorf("npy: no %s", key)
		}
		return strings.TrimSpace(h[i+len(key)+3:]), nil
	}
	descr, err := field("descr")
	if err != nil {
		return nil, err
	}
	fo, err := field("fortran_order")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(fo, "False") {
		return nil, errors.New("npy: fortran order")
	}
	sh, err := field("shape")
	if err != nil {
		return nil, err
	}
	end := strings.IndexByte(sh, ')')
	if !strings.HasPrefix(sh, "(") || end < 0 {
		return nil, errors.New("npy: bad shape")
	}
	t := &Array{}
	n := 1
	for _, f := range strings.Split(sh[1:end], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := strconv.Atoi(f)
		if err != nil || d < 0 || d > 1<<31 {
			return nil, fmt.Errorf("npy: bad shape %q", sh[:end+1])
		}
		t.Shape = append(t.Shape, d)
		n *= d
		if n > len(b) {
			return nil, fmt.Errorf("npy: shape %q larger than the file", sh[:end+1])
		}
	}
	switch {
	case strings.HasPrefix(descr, "'|u1'"):
		if len(data) != n {
			return nil, fmt.Errorf("npy: %d data bytes for %d elements", len(data), n)
		}
		t.DType, t.U8 = "uint8", data
	case strings.HasPrefix(descr, "'<f4'"):
		if len(data) != 4*n {
			return nil, fmt.Errorf("npy: %d data bytes for %d elements", len(data), n)
		}
		t.DType, t.F32 = "float32", make([]float32, n)
		for i := range t.F32 {
			t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	default:
		return nil, fmt.Errorf("npy: dtype %s", descr)
	}
	return t, nil
}
