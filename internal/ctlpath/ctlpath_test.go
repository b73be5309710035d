package ctlpath

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestQuoteOnlyWhatIsNotAPlainLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"train/n01440764/x.JPEG", "train/n01440764/x.JPEG"},
		{"ünïcødé ñame.dat", "ünïcødé ñame.dat"},
		{`back\slash`, `back\slash`},
		{"in # middle", "in # middle"},
		{"a\nb", `"a\nb"`},
		{"#hash", `"#hash"`},
		{" lead", `" lead"`},
		{"trail ", `"trail "`},
		{`"quoted"`, `"\"quoted\""`},
		{"tab\there", `"tab\there"`},
		{"bell\x07\x01\x7f", `"bell\a\001\177"`},
		{"bad\xffutf8", `"bad\377utf8"`},
		{"sep\u2028x", `"sep\342\200\250x"`},
		{"dir/#not-first", "dir/#not-first"},
		{`x\ "y`, `x\ "y`},
		{" a\\b\n", `" a\\b\n"`},
	}
	for _, c := range cases {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
		if got, err := Unquote(Quote(c.in)); err != nil || got != c.in {
			t.Errorf("Unquote(Quote(%q)) = %q, %v", c.in, got, err)
		}
	}
}

func TestUnquoteRejectsWhatDoesNotDecode(t *testing.T) {
	for _, bad := range []string{`"`, `"abc`, `""`, `"a\"`, `"a\q"`, `"a\08"`, `"a\4"`, `"a"b"`, `"\000"`, `"a\`} {
		if p, err := Unquote(bad); !errors.Is(err, ErrBadQuote) {
			t.Errorf("Unquote(%s) = %q, %v; want ErrBadQuote", bad, p, err)
		}
	}
	// A line that does not start with a quote is the path itself.
	for _, plain := range []string{`a\nb`, `x"`, `a "b"`} {
		if p, err := Unquote(plain); err != nil || p != plain {
			t.Errorf("Unquote(%s) = %q, %v", plain, p, err)
		}
	}
}

// FuzzQuoteRoundTrip: every name a file system can hold comes back from
// its quoted line, and that line is one plain line a reader can trim.
func FuzzQuoteRoundTrip(f *testing.F) {
	for _, s := range []string{"a", "a\nb", " #x ", "\"", "\\", "\xff\xfe", "\u2029", "\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if p == "" || strings.IndexByte(p, 0) >= 0 {
			return
		}
		q := Quote(p)
		if strings.ContainsAny(q, "\n\r") || !utf8.ValidString(q) || strings.TrimSpace(q) != q || strings.HasPrefix(q, "#") {
			t.Fatalf("Quote(%q) = %q is not a plain line", p, q)
		}
		for _, r := range q {
			if unicode.IsControl(r) || r == 0x2028 || r == 0x2029 {
				t.Fatalf("Quote(%q) = %q holds %U", p, q, r)
			}
		}
		got, err := Unquote(q)
		if err != nil || got != p {
			t.Fatalf("Unquote(Quote(%q)) = %q, %v", p, got, err)
		}
	})
}

// FuzzUnquote: any line either decodes to a usable path or fails with
// ErrBadQuote; what decodes quotes back to a line that decodes the same.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a\nb"`, `"\377"`, `"\"`, `plain`, `"a\x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, err := Unquote(line)
		if err != nil {
			if !errors.Is(err, ErrBadQuote) {
				t.Fatalf("error %v is not ErrBadQuote", err)
			}
			return
		}
		if line != "" && line[0] == '"' && (p == "" || strings.IndexByte(p, 0) >= 0) {
			t.Fatalf("Unquote(%q) = %q", line, p)
		}
		if p == "" || strings.IndexByte(p, 0) >= 0 {
			return
		}
		if again, err := Unquote(Quote(p)); err != nil || again != p {
			t.Fatalf("re-quote of %q: %q, %v", p, again, err)
		}
	})
}
