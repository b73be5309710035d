package status

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Bytes renders the document as key=value lines, the form of the status
// files.
func (d *Doc) Bytes() []byte {
	var b bytes.Buffer
	for _, f := range d.Fields() {
		b.WriteString(f.Key)
		b.WriteByte('=')
		b.WriteString(f.Value)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// JSON renders the document as one JSON object (stats.json): numbers are
// JSON numbers, flags, instants and text JSON strings as the key=value
// form writes them.
func (d *Doc) JSON() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range d.Fields() {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		if f.Kind == Int || f.Kind == Float {
			b.WriteString(f.Value)
		} else {
			v, _ := json.Marshal(f.Value)
			b.Write(v)
		}
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// Parse reads a document in the key=value form (a status file as read
// from a mount). Each value's kind is told from its text: an integer, a
// decimal number (each as the renderer writes it: no leading zero), a
// flag's word, an RFC 3339 instant, else text. A line
// without "=" or with an empty key is skipped (lines end at "\n" only); a key that comes twice
// keeps both fields (Get finds the first).
func Parse(data []byte) *Doc {
	d := New()
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok || len(k) == 0 {
			continue
		}
		d.add(typed(string(k), string(v)))
	}
	return d
}

// typed is the field key=v, its kind told from its text.
func typed(key, v string) Field {
	f := Field{Key: key, Kind: Text, Value: v}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && strconv.FormatInt(n, 10) == v {
		f.Kind, f.Num = Int, float64(n)
		return f
	}
	if decimal(v) {
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			f.Kind, f.Num = Float, x
			return f
		}
	}
	for _, w := range words {
		for n, word := range w {
			if v == word {
				f.Kind, f.Num = Flag, float64(n)
				return f
			}
		}
	}
	if len(v) >= len("2006-01-02T15:04:05Z") && v[4] == '-' {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			f.Kind, f.Num = Time, float64(t.UnixNano())/1e9
		}
	}
	return f
}

// decimal reports whether v is written as Float writes: digits, one point,
// digits, an optional minus first, and no leading zero (a JSON number).
func decimal(v string) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) > 1 && v[0] == '0' && v[1] != '.' {
		return false
	}
	dot, digits := false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot && digits > 0:
			dot = true
		default:
			return false
		}
	}
	return dot && digits > 0 && v[len(v)-1] != '.'
}
