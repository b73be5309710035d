package mount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/fs"
)

// The transport follows fuse.io_uring and the kernel: "auto" takes io_uring
// exactly when the kernel offers it, "off" never does, and "on" without it
// refuses to mount, in one line that says why, and leaves nothing mounted.
func TestTheTransportFollowsTheConfigAndTheKernel(t *testing.T) {
	// scripts/with-transport.sh sets the kernel's side for each run.
	offered, _ := fs.IoUringAvailable()
	for _, tc := range []struct {
		mode string
		want string // transport; "" = the mount fails
	}{
		{"auto", map[bool]string{true: "io_uring", false: "dev"}[offered]},
		{"off", "dev"},
		{"on", map[bool]string{true: "io_uring", false: ""}[offered]},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			src, paths, base, mnt := binDirs(t, 1<<10)
			conf := filepath.Join(base, "c.toml")
			if err := os.WriteFile(conf, []byte("[fuse]\nio_uring = \""+tc.mode+"\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"mount", "--config", conf, "--state", filepath.Join(base, "state"),
				"--tier=disk=" + filepath.Join(base, "tier") + ":1GiB", src, mnt}
			if tc.want == "" {
				code, out := cli(t, args...)
				if code != 1 || strings.Count(strings.TrimSpace(out), "\n") != 0 ||
					!strings.Contains(out, "fuse.io_uring") || !strings.Contains(out, "enable_uring") {
					t.Errorf("io_uring = on without it in the kernel: exit %d, %q; want exit 1 and one line naming fuse.io_uring and enable_uring", code, out)
				}
				if mounted(mnt) {
					cli(t, "unmount", "--lazy", mnt)
					t.Fatal("the refused mount is mounted")
				}
				return
			}
			code, out := cli(t, args...)
			if code != 0 {
				t.Fatalf("mount: exit %d: %s", code, out)
			}
			t.Cleanup(func() {
				if mounted(mnt) {
					cli(t, "unmount", mnt)
				}
			})
			st := statusOf(t, mnt)
			if st["transport"] != tc.want {
				t.Fatalf("io_uring = %q, kernel offers it: %v: transport=%s, want %s", tc.mode, offered, st["transport"], tc.want)
			}
			checkAll(t, src, mnt, paths)
			st = statusOf(t, mnt)
			if tc.want == "io_uring" && (st["io_uring_requests"] == "0" || st["io_uring_queues"] == "0") {
				t.Errorf("over io_uring: io_uring_queues=%s io_uring_requests=%s", st["io_uring_queues"], st["io_uring_requests"])
			}
			if tc.want == "dev" && st["io_uring_requests"] != "0" {
				t.Errorf("over /dev/fuse: io_uring_requests=%s", st["io_uring_requests"])
			}
		})
	}
}
