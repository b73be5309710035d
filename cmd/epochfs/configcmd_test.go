package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `epochfs config` prints the paths a mount of the file uses, resolved as
// the mount resolves them; scripts take the mount point from it. `unmount
// --config` takes the same mount point and refuses another one given
// beside it.
func TestConfigPrintsTheMountsPaths(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	os.WriteFile(cfg, []byte(`source = "/pfs/imagenet"
mountpoint = "/mnt/imagenet/"
[[tier]]
name = "mem"
path = "/dev/shm/x"
quota = "1GiB"
`), 0o644)
	call := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := call("config", "--config", cfg)
	want := "source=/pfs/imagenet\nmountpoint=/mnt/imagenet\nstate_dir=/var/lib/epochfs/mnt_imagenet\n"
	if code != 0 || out != want {
		t.Errorf("config: exit %d, %q; want %q", code, out, want)
	}
	if code, out, _ := call("config", "--config", cfg, "mountpoint"); code != 0 || out != "/mnt/imagenet\n" {
		t.Errorf("config mountpoint: exit %d, %q", code, out)
	}
	for _, args := range [][]string{
		{"config", "--config", cfg, "tiers"},
		{"config"},
		{"config", "--config", filepath.Join(dir, "missing.toml"), "mountpoint"},
		{"unmount", "--config", cfg, "/mnt/other"},
	} {
		code, out, errs := call(args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr", args, code, out, errs)
		}
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("source = \"/pfs\"\n"), 0o644)
	if code, _, errs := call("config", "--config", bad, "mountpoint"); code != 2 || !strings.Contains(errs, "mountpoint") {
		t.Errorf("a config without a mountpoint: exit %d, %q", code, errs)
	}
}
