// Package status is a status document: the mount's (.epochfs/status,
// stats.json, the metrics endpoint, epochfs status) and a job's or a
// rank's (.epochfs/jobs/NAME/status). A Doc is a list of typed fields in
// a stable order; each subsystem fills its own section (the source its
// source_ keys, a tier its tier.NAME. keys, the jobs manager a job's), the
// document renders itself as key=value lines or JSON (Bytes, JSON: render.go) and for
// people (summary.go), and Parse is the one reader of the key=value form:
// the command line, the tests and the benchmarks read status through it,
// and the metrics read the typed fields, never text.
package status

import (
	"strconv"
	"time"
)

// Kind is a field's type.
type Kind uint8

const (
	Text  Kind = iota // free text: a path, a state, a version
	Int               // an integer: a count, bytes, an id
	Float             // a number with a fraction: a percentage
	Flag              // a boolean, written as its words (Words)
	Time              // an instant; the zero instant is a word ("", never, none)
)

// Words are how a Flag is written.
type Words uint8

const (
	OnOff Words = iota
	YesNo
	TrueFalse
)

var words = [...][2]string{OnOff: {"off", "on"}, YesNo: {"no", "yes"}, TrueFalse: {"false", "true"}}

// Field is one line of a document.
type Field struct {
	Key   string
	Kind  Kind
	Value string  // as the key=value form writes it
	Num   float64 // Int, Float; a Flag's 1 or 0; a Time's Unix seconds (0: the zero instant)
}

// Doc is a status document, or a section of one (Under): fields are added
// in the order the document lists them.
type Doc struct {
	prefix string
	fields *[]Field
}

// New returns an empty document.
func New() *Doc { return &Doc{fields: new([]Field)} }

// Under returns the section of d whose keys begin with prefix
// ("tier.ram."): what is added to it is added to d.
func (d *Doc) Under(prefix string) *Doc {
	return &Doc{prefix: d.prefix + prefix, fields: d.fields}
}

func (d *Doc) add(f Field) {
	f.Key = d.prefix + f.Key
	*d.fields = append(*d.fields, f)
}

// Int adds an integer.
func (d *Doc) Int(key string, v int64) {
	d.add(Field{Key: key, Kind: Int, Value: strconv.FormatInt(v, 10), Num: float64(v)})
}

// Float adds a number written with prec digits after the point.
func (d *Doc) Float(key string, v float64, prec int) {
	d.add(Field{Key: key, Kind: Float, Value: strconv.FormatFloat(v, 'f', prec, 64), Num: v})
}

// Text adds free text (one line: the writer of a value keeps it so).
func (d *Doc) Text(key, v string) { d.add(Field{Key: key, Kind: Text, Value: v}) }

// Flag adds a boolean written as w's words.
func (d *Doc) Flag(key string, v bool, w Words) {
	f := Field{Key: key, Kind: Flag, Value: words[w][0]}
	if v {
		f.Value, f.Num = words[w][1], 1
	}
	d.add(f)
}

// Time adds an instant, in UTC in layout (time.RFC3339 or RFC3339Nano);
// the zero instant is written as zero.
func (d *Doc) Time(key string, t time.Time, layout, zero string) {
	f := Field{Key: key, Kind: Time, Value: zero}
	if !t.IsZero() {
		f.Value, f.Num = t.UTC().Format(layout), float64(t.UnixNano())/1e9
	}
	d.add(f)
}

// Fields returns the document's fields, in order (a section's: those
// under its prefix, their keys whole).
func (d *Doc) Fields() []Field {
	if d.prefix == "" {
		return *d.fields
	}
	var out []Field
	for _, f := range *d.fields {
		if len(f.Key) > len(d.prefix) && f.Key[:len(d.prefix)] == d.prefix {
			out = append(out, f)
		}
	}
	return out
}

// Get returns the field of key (a section's key without its prefix).
func (d *Doc) Get(key string) (Field, bool) {
	key = d.prefix + key
	for _, f := range *d.fields {
		if f.Key == key {
			return f, true
		}
	}
	return Field{}, false
}

// Value is the value of key as written, or "" (no such key).
func (d *Doc) Value(key string) string {
	f, _ := d.Get(key)
	return f.Value
}

// Number is the value of key as a number (an Int, Float or Flag field;
// a Time's Unix seconds), or 0.
func (d *Doc) Number(key string) float64 {
	f, _ := d.Get(key)
	return f.Num
}

// IntOf is the value of an Int field, or 0.
func (d *Doc) IntOf(key string) int64 {
	f, _ := d.Get(key)
	if f.Kind != Int {
		return 0
	}
	n, _ := strconv.ParseInt(f.Value, 10, 64)
	return n
}

// Map returns the document as a map of key to value as written.
func (d *Doc) Map() map[string]string {
	m := map[string]string{}
	for _, f := range d.Fields() {
		m[f.Key] = f.Value
	}
	return m
}
