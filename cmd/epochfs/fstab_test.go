package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mount(8)'s call of mount.epochfs becomes `epochfs mount` flags: epochfs's
// options are translated, mount(8)'s and systemd's ignored, unknown ones
// refused unless sloppy, and a source of "none" is the config's.
func TestMountHelperArguments(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	os.WriteFile(cfg, []byte("source = \"/pfs/imagenet\"\n"), 0o644)
	for _, c := range []struct {
		args []string
		want []string
		fake bool
	}{
		{[]string{"/src", "/mnt", "-o", "config=/etc/e.toml,tier=mem=/dev/shm/e:4GiB,tier=nvme=/local/e:1TiB,keep,_netdev,nofail,x-systemd.requires=lustre.mount,defaults,rw"},
			[]string{"--config", "/etc/e.toml", "--tier", "mem=/dev/shm/e:4GiB", "--tier", "nvme=/local/e:1TiB", "--keep", "/src", "/mnt"}, false},
		{[]string{"/src", "/mnt", "-fnv", "-ostate=/s,user-ref=7,wait-walk,no-passthrough,rescan"},
			[]string{"--state", "/s", "--user-ref", "7", "--wait-walk", "--no-passthrough", "--rescan", "/src", "/mnt"}, true},
		{[]string{"none", "/mnt", "-o", "config=" + cfg}, []string{"--config", cfg, "/pfs/imagenet", "/mnt"}, false},
		{[]string{"/src", "/mnt", "-s", "-o", "bogus,keep", "-t", "epochfs"}, []string{"--keep", "/src", "/mnt"}, false},
	} {
		got, fake, err := helperArgs(c.args)
		if err != nil || !slices.Equal(got, c.want) || fake != c.fake {
			t.Errorf("%q: %q fake=%v %v; want %q fake=%v", c.args, got, fake, err, c.want, c.fake)
		}
	}
	for _, bad := range [][]string{
		{"/src", "/mnt", "-o", "bogus"},
		{"/src", "/mnt", "-o", "config"},
		{"/src", "/mnt", "-o", "keep=1"},
		{"/src"},
		{"/src", "/mnt", "-N", "4"},
		{"none", "/mnt", "-o", "keep"},
		{"/src", "/mnt", "-x"},
	} {
		_, _, err := helperArgs(bad)
		ee, ok := err.(*exitError)
		if !ok || ee.code != exitUsage || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want a one-line usage error", bad, err)
		}
	}
}
