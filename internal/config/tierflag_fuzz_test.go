package config

import (
	"strings"
	"testing"
)

// --tier NAME=PATH:QUOTA comes from command lines and prolog scripts. A
// parse either fails with a message that quotes the flag and shows the
// form, or splits it into parts that put together give the flag back: the
// name has no '=', the quota no ':'; the path keeps everything between.
func FuzzParseTierFlag(f *testing.F) {
	for _, s := range []string{
		"mem=/dev/shm/epochfs:4GiB", "nvme=/local/a:b/c:200GiB", "x=/p:1", "=/p:1", "mem=:1", "mem=/p:",
		"mem/p:1", "a=b=c:1", "mem=/p:4GB?", "", ":", "=", "mem=/p:1:2", "ü=/ñ:1KiB", "mem=/p\n:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tc, err := ParseTierFlag(s)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "--tier ") || !strings.Contains(msg, "NAME=PATH:QUOTA") {
				t.Fatalf("ParseTierFlag(%q) error %q does not quote the flag and show the form", s, msg)
			}
			return
		}
		if tc.Name == "" || strings.Contains(tc.Name, "=") {
			t.Fatalf("ParseTierFlag(%q): name %q", s, tc.Name)
		}
		if tc.Path == "" {
			t.Fatalf("ParseTierFlag(%q): empty path", s)
		}
		if tc.Quota.Raw == "" || strings.Contains(tc.Quota.Raw, ":") {
			t.Fatalf("ParseTierFlag(%q): quota %q", s, tc.Quota.Raw)
		}
		if back := tc.Name + "=" + tc.Path + ":" + tc.Quota.Raw; back != s {
			t.Fatalf("ParseTierFlag(%q) = %q, %q, %q: put together %q", s, tc.Name, tc.Path, tc.Quota.Raw, back)
		}
		// Validation of what parsed never panics, and a tier it accepts
		// has a positive quota.
		c := Default()
		c.Tiers = []Tier{tc}
		if c.Validate() == nil && tc.Quota.Bytes <= 0 {
			t.Fatalf("ParseTierFlag(%q): a tier of quota %d validated", s, tc.Quota.Bytes)
		}
	})
}
