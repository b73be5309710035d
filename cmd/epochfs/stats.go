package main

// `epochfs stats MOUNTPOINT`: one line per interval of what the mount does,
// as `juicefs stats` and rclone's stats show theirs.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

const statsSynopsis = "stats [--interval DURATION] [--count N] MOUNTPOINT"

func statsFlags(f *pflag.FlagSet) runFunc {
	interval := f.Duration("interval", time.Second, "time between lines")
	count := f.Int("count", 0, "stop after N lines (0: until interrupted)")
	return func(pos []string, stdout, stderr io.Writer) error {
		var err error
		if len(pos) != 1 {
			return usageErr("want one MOUNTPOINT (usage: epochfs %s)", statsSynopsis)
		}
		if *interval < 10*time.Millisecond || *count < 0 {
			return usageErr("--interval %s --count %d: want an interval of 10ms or more and a count of 0 or more", *interval, *count)
		}
		ctl := filepath.Join(pos[0], ".epochfs", "status")
		read := func() (map[string]string, time.Time, error) {
			data, err := os.ReadFile(ctl)
			return parseKV(data), time.Now(), err
		}
		prev, at, err := read()
		if err != nil {
			return runtimeErr("%s is not an epochfs mount or its daemon does not answer: %v", pos[0], err)
		}
		for i := 0; *count == 0 || i < *count; i++ {
			if i%20 == 0 {
				fmt.Fprintln(stdout, "time      resident  src.opens/s  src.MB/s  copies/s  copy.MB/s  queued  src.errors  jobs")
			}
			time.Sleep(*interval)
			cur, now, err := read()
			if err != nil {
				return runtimeErr("%s: %v", pos[0], err)
			}
			dt := now.Sub(at).Seconds()
			d := func(k string) float64 {
				a, _ := strconv.ParseInt(prev[k], 10, 64)
				b, _ := strconv.ParseInt(cur[k], 10, 64)
				return float64(b-a) / dt
			}
			fmt.Fprintf(stdout, "%s  %7s%%  %11.1f  %8.1f  %8.1f  %9.1f  %6s  %10s  %4s\n",
				now.Format("15:04:05"), cur["resident_pct"], d("source_opens"), d("source_bytes")/1e6,
				d("placements_done"), d("placements_bytes")/1e6, cur["placements_queued"], cur["source_errors"], cur["jobs"])
			prev, at = cur, now
		}
		return nil
	}
}
