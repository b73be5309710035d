package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/config"
)

// The summary names the mount, the resident share, each tier's use of its
// quota and health, the source's state and its rates between the samples.
func TestStatusSummary(t *testing.T) {
	a := fromMap(map[string]string{"source_opens": "100", "source_bytes": "1000000", "placements_done": "10"})
	b := fromMap(map[string]string{
		"version": "v1", "mountpoint": "/mnt/in", "pid": "42", "transport": "io_uring", "passthrough": "on",
		"source": "/pfs/in", "files_total": "1000", "bytes_total": "4294967296", "catalog": "ok",
		"resident_pct": "50.00", "files_resident": "500", "bytes_resident": "2147483648",
		"tier.mem.path": "/dev/shm/e", "tier.mem.quota": "4294967296", "tier.mem.used": "1073741824", "tier.mem.files": "250", "tier.mem.healthy": "yes",
		"tier.nvme.path": "/local/e", "tier.nvme.quota": "10737418240", "tier.nvme.used": "1073741824", "tier.nvme.files": "250", "tier.nvme.healthy": "no", "tier.nvme.errors": "3",
		"source_state": "unavailable", "source_unavailable_since": "2026-11-26T10:00:00Z",
		"source_opens": "150", "source_bytes": "11000000", "source_errors": "2", "source_timeouts": "1",
		"placements_queued": "7", "placements_done": "20", "placements_bytes": "5", "placements_failed": "0", "placements_skipped_nospace": "0",
		"jobs": "2",
	})
	var out bytes.Buffer
	Summary(&out, a, b, 500*time.Millisecond, config.FormatBytes)
	for _, want := range []string{
		"epochfs v1 at /mnt/in (pid 42, transport io_uring, passthrough on)",
		"/pfs/in: 1000 files, 4.0GiB; catalog ok",
		"resident  50.00% (500 files, 2.0GiB)",
		"mem /dev/shm/e: 1.0GiB of 4.0GiB (25%), 250 files, healthy",
		"nvme /local/e: 1.0GiB of 10.0GiB (10%), 250 files, UNHEALTHY (3 errors)",
		"UNAVAILABLE since 2026-11-26T10:00:00Z",
		"now 100.0 opens/s, 20.0 MB/s",
		"7 queued, 20 done",
		"now 20.0/s",
		"jobs      2",
		"--raw",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// A catalog in the making shows how far it got, for a walk and a load.
func TestStatusSummaryShowsAWalkOrLoadInProgress(t *testing.T) {
	for _, state := range []string{"walking", "loading"} {
		b := fromMap(map[string]string{"source": "/pfs/in", "files_total": "10", "bytes_total": "0", "catalog": state, "walk_entries": "1234"})
		var out bytes.Buffer
		Summary(&out, b, b, time.Second, config.FormatBytes)
		if want := "catalog " + state + " (1234 entries so far)"; !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}
