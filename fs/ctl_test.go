package fs

import (
	"errors"
	"strings"
	"testing"
)

func TestParseWarmup(t *testing.T) {
	cases := []struct {
		in    string
		all   bool
		paths []string
		bad   string
	}{
		{in: "all\n", all: true},
		{in: "all", all: true},
		{in: "  all  \n\n", all: true},
		{in: "a/b.jpg\nc\n", paths: []string{"a/b.jpg", "c"}},
		{in: "# comment\n a \n", paths: []string{"a"}},
		{in: "", bad: "empty write"},
		{in: "\n \n# only a comment\n", bad: "empty write"},
		{in: "all\nx\n", bad: "cannot be combined"},
		{in: "x\x00y", bad: "NUL"},
	}
	for _, c := range cases {
		all, paths, err := parseWarmup([]byte(c.in))
		if c.bad != "" {
			if err == nil || !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q: err %v, want EINVAL naming %q", c.in, err, c.bad)
			}
			continue
		}
		if err != nil || all != c.all || strings.Join(paths, "|") != strings.Join(c.paths, "|") {
			t.Errorf("%q: got %v %q %v", c.in, all, paths, err)
		}
	}
}

func FuzzParseWarmup(f *testing.F) {
	for _, s := range []string{"all\n", "a\nb\n", "", "all\nx", "#\n", "x\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		all, paths, err := parseWarmup(data)
		if err != nil {
			if !errors.Is(err, errInvalid) {
				t.Fatalf("error %v is not EINVAL", err)
			}
			if all || paths != nil {
				t.Fatal("a rejected write returned a command")
			}
			return
		}
		if all == (len(paths) > 0) {
			t.Fatalf("all=%v with %d paths", all, len(paths))
		}
		for _, p := range paths {
			if p == "" || strings.ContainsAny(p, "\n\x00") || p != strings.TrimSpace(p) {
				t.Fatalf("bad path %q", p)
			}
		}
	})
}
