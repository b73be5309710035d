package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// doctor passes a good setup (exit 0, no FAIL line) and fails each broken
// one with exit 1 and a FAIL line naming what is wrong.
func TestDoctorChecksTheSetup(t *testing.T) {
	t.Setenv("SLURM_CONF", filepath.Join(t.TempDir(), "slurm.conf")) // no Slurm settings unless a case writes them
	setup := func(t *testing.T, tierExtra string) (dir, cfg string) {
		dir = t.TempDir()
		os.MkdirAll(filepath.Join(dir, "src", "a"), 0o755)
		os.WriteFile(filepath.Join(dir, "src", "a", "x.bin"), bytes.Repeat([]byte("x"), 50000), 0o644)
		cfg = filepath.Join(dir, "epochfs.toml")
		os.WriteFile(cfg, []byte(fmt.Sprintf("source = %q\nmountpoint = %q\nstate_dir = %q\n[[tier]]\nname = \"disk\"\npath = %q\nquota = \"1GiB\"\n%s",
			filepath.Join(dir, "src"), filepath.Join(dir, "mnt"), filepath.Join(dir, "state"), filepath.Join(dir, "tier"), tierExtra)), 0o644)
		return dir, cfg
	}
	doctor := func(cfg string) (int, string) {
		var out, errb bytes.Buffer
		code := run([]string{"doctor", "--config", cfg}, &out, &errb)
		return code, out.String() + errb.String()
	}
	_, cfg := setup(t, "")
	if code, out := doctor(cfg); code != 0 || strings.Contains(out, "FAIL") || !strings.Contains(out, "ok    source") {
		t.Fatalf("a good setup: exit %d:\n%s", code, out)
	}
	for _, c := range []struct {
		name, want string
		tierExtra  string
		breakIt    func(dir string)
	}{
		{"source missing", "FAIL  source", "", func(dir string) { os.RemoveAll(filepath.Join(dir, "src")) }},
		{"tier writable by the group", "FAIL  tier disk", "", func(dir string) {
			os.Mkdir(filepath.Join(dir, "tier"), 0o700)
			os.Chmod(filepath.Join(dir, "tier"), 0o770)
		}},
		{"tier of another catalog", "holds the copies of the mount of /pfs/other", "", func(dir string) {
			os.Mkdir(filepath.Join(dir, "tier"), 0o700)
			os.WriteFile(filepath.Join(dir, "tier", "owner.json"), []byte(`{"state_dir":"/other/state","source":"/pfs/other","mountpoint":"/mnt/other"}`), 0o600)
		}},
		{"require_mount with no disk", "FAIL  tier disk", "require_mount = true\n", func(dir string) {}},
		{"a quota without a unit", "FAIL  config", "", func(dir string) {
			cfg := filepath.Join(dir, "epochfs.toml")
			b, _ := os.ReadFile(cfg)
			os.WriteFile(cfg, bytes.Replace(b, []byte(`"1GiB"`), []byte("4"), 1), 0o644)
		}},
		{"state directory a symlink", "FAIL  state", "", func(dir string) {
			os.Mkdir(filepath.Join(dir, "elsewhere"), 0o700)
			os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "state"))
		}},
		{"Slurm settings that name another mount point", "FAIL  slurm", "", func(dir string) {
			os.WriteFile(filepath.Join(filepath.Dir(os.Getenv("SLURM_CONF")), "epochfs.env"),
				[]byte(fmt.Sprintf("EPOCHFS_CONFIG=%s\nEPOCHFS_MOUNT=/mnt/wrong\n", filepath.Join(dir, "epochfs.toml"))), 0o644)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, cfg := setup(t, c.tierExtra)
			if c.tierExtra != "" {
				// require_mount: a tier under a parent that is not there.
				b, _ := os.ReadFile(cfg)
				os.WriteFile(cfg, bytes.Replace(b, []byte(filepath.Join(dir, "tier")), []byte(filepath.Join(dir, "nodisk", "tier")), 1), 0o644)
			}
			c.breakIt(dir)
			code, out := doctor(cfg)
			if code != 1 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d; want 1 and %q in:\n%s", code, c.want, out)
			}
		})
	}
}

// The doctor probes the source as the daemon reads it: beneath its root,
// no symlink followed (a link to a directory outside is not entered, a
// link to a file not opened), and no FIFO opened (it would block).
func TestDoctorReadsTheSourceBeneathItsRootOnly(t *testing.T) {
	t.Setenv("SLURM_CONF", filepath.Join(t.TempDir(), "slurm.conf"))
	dir := t.TempDir()
	src, outside := filepath.Join(dir, "src"), filepath.Join(dir, "outside")
	os.MkdirAll(filepath.Join(src, "z"), 0o755)
	os.MkdirAll(outside, 0o700)
	for i := range 5 {
		os.WriteFile(filepath.Join(outside, fmt.Sprintf("secret%d", i)), []byte("secret"), 0o600)
	}
	os.WriteFile(filepath.Join(src, "z", "x.bin"), bytes.Repeat([]byte("x"), 1000), 0o644)
	os.Symlink(outside, filepath.Join(src, "a-dir-link"))
	os.Symlink(filepath.Join(outside, "secret0"), filepath.Join(src, "a-file-link"))
	if err := syscall.Mkfifo(filepath.Join(src, "a-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "epochfs.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("source = %q\nmountpoint = %q\nstate_dir = %q\n[[tier]]\nname = \"disk\"\npath = %q\nquota = \"1GiB\"\n",
		src, filepath.Join(dir, "mnt"), filepath.Join(dir, "state"), filepath.Join(dir, "tier"))), 0o644)
	var out, errb bytes.Buffer
	code := run([]string{"doctor", "--config", cfg}, &out, &errb)
	text := out.String() + errb.String()
	if code != 0 || !strings.Contains(text, "read 1 files (1000B)") {
		t.Fatalf("exit %d, want the one regular file beneath the root probed:\n%s", code, text)
	}
}
