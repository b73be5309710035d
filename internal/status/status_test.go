package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// fromMap is a parsed document of the key=value lines m gives.
func fromMap(m map[string]string) *Doc {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, m[k])
	}
	return Parse([]byte(b.String()))
}

// sample is a document with a field of every kind, a section and the
// zero instant.
func sample() *Doc {
	d := New()
	d.Text("version", "1.2")
	d.Int("pid", 4242)
	d.Float("resident_pct", 99.99, 2)
	d.Flag("passthrough", true, OnOff)
	d.Flag("drop_last", false, TrueFalse)
	d.Time("since", time.Date(2026, 11, 28, 3, 4, 5, 0, time.UTC), time.RFC3339, "")
	d.Time("last_read", time.Time{}, time.RFC3339Nano, "never")
	t := d.Under("tier.ram.")
	t.Text("path", "/dev/shm/e x=y")
	t.Int("used", -1)
	t.Flag("healthy", true, YesNo)
	return d
}

// TestADocumentRendersAndParsesBack: the key=value form lists the fields
// in order, values as written; Parse gives back every key, value and
// number, and the kind of each typed field (text that reads as a number,
// like a version, parses as one: its value is kept as written).
func TestADocumentRendersAndParsesBack(t *testing.T) {
	d := sample()
	want := "version=1.2\npid=4242\nresident_pct=99.99\npassthrough=on\ndrop_last=false\n" +
		"since=2026-11-28T03:04:05Z\nlast_read=never\ntier.ram.path=/dev/shm/e x=y\ntier.ram.used=-1\ntier.ram.healthy=yes\n"
	if got := string(d.Bytes()); got != want {
		t.Fatalf("rendered\n%s\nwant\n%s", got, want)
	}
	back := Parse(d.Bytes())
	if !bytes.Equal(back.Bytes(), d.Bytes()) {
		t.Fatalf("parsed back renders\n%s", back.Bytes())
	}
	for _, f := range d.Fields() {
		g, ok := back.Get(f.Key)
		if !ok || g.Value != f.Value || (f.Kind != Text && g.Num != f.Num) {
			t.Errorf("%s: parsed %+v, want %+v", f.Key, g, f)
		}
		if f.Kind != Text && f.Value != "never" && g.Kind != f.Kind {
			t.Errorf("%s: parsed kind %d, want %d", f.Key, g.Kind, f.Kind)
		}
	}
	if got := d.Under("tier.ram.").Value("path"); got != "/dev/shm/e x=y" {
		t.Errorf("the section's path is %q", got)
	}
	if n := len(d.Under("tier.ram.").Fields()); n != 3 {
		t.Errorf("the section has %d fields, want 3", n)
	}
	if back.IntOf("pid") != 4242 || back.IntOf("version") != 0 || back.Number("passthrough") != 1 {
		t.Errorf("pid %d, version %d, passthrough %v", back.IntOf("pid"), back.IntOf("version"), back.Number("passthrough"))
	}
}

// TestTheJSONFormHasNumbersAsNumbersAndTheRestAsWritten: stats.json.
func TestTheJSONFormHasNumbersAsNumbersAndTheRestAsWritten(t *testing.T) {
	var got map[string]any
	if err := json.Unmarshal(sample().JSON(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"version": "1.2", "pid": 4242.0, "resident_pct": 99.99, "passthrough": "on", "drop_last": "false",
		"since": "2026-11-28T03:04:05Z", "last_read": "never", "tier.ram.path": "/dev/shm/e x=y", "tier.ram.used": -1.0, "tier.ram.healthy": "yes"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("JSON %v, want %v", got, want)
	}
}

// TestParseSkipsWhatIsNotAField: lines without "=", empty keys and an
// empty document.
func TestParseSkipsWhatIsNotAField(t *testing.T) {
	d := Parse([]byte("no equals\n=v\nk=\n\na=b=c\n"))
	if got := string(d.Bytes()); got != "k=\na=b=c\n" {
		t.Fatalf("parsed %q", got)
	}
	if len(Parse(nil).Fields()) != 0 {
		t.Fatal("an empty document has fields")
	}
}

// FuzzParse: any bytes parse without a panic; what they give renders and
// parses back to itself, with the same kinds and numbers.
func FuzzParse(f *testing.F) {
	f.Add(sample().Bytes())
	f.Add([]byte("a=1\nb=1.5\nc=on\nd=2026-11-28T03:04:05.123Z\ne=x\n"))
	f.Add([]byte("=\n==\nk=-\nk=-.5\nk=1.\nk=.1\nk=NaN\nk=1e5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := Parse(data)
		back := Parse(d.Bytes())
		if !bytes.Equal(back.Bytes(), d.Bytes()) {
			t.Fatalf("%q renders %q, which parses back to %q", data, d.Bytes(), back.Bytes())
		}
		a, b := d.Fields(), back.Fields()
		for i := range a {
			if a[i].Kind != b[i].Kind || (a[i].Num != b[i].Num && a[i].Num == a[i].Num) {
				t.Fatalf("%q: field %d parsed %+v, then %+v", data, i, a[i], b[i])
			}
		}
		var v map[string]any
		if err := json.Unmarshal(d.JSON(), &v); err != nil && len(a) > 0 {
			t.Fatalf("%q: JSON %q: %v", data, d.JSON(), err)
		}
	})
}
