package status

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Summary writes the mount's status for people (epochfs status): what the
// mount is, how much is local, each tier's use, the source's health and
// traffic (per second from a to b, taken dt apart), the copies and the
// jobs. size writes a byte count.
func Summary(w io.Writer, a, b *Doc, dt time.Duration, size func(int64) string) {
	v := b.Value
	n := b.IntOf
	rate := func(k string) float64 { return float64(b.IntOf(k)-a.IntOf(k)) / dt.Seconds() }
	sizeOf := func(k string) string { return size(n(k)) }
	fmt.Fprintf(w, "epochfs %s at %s (pid %s, transport %s, passthrough %s)\n", v("version"), v("mountpoint"), v("pid"), v("transport"), v("passthrough"))
	catalog := v("catalog")
	if catalog == "walking" || catalog == "loading" {
		catalog = fmt.Sprintf("%s (%s entries so far)", catalog, v("walk_entries"))
	}
	fmt.Fprintf(w, "  dataset   %s: %s files, %s; catalog %s\n", v("source"), v("files_total"), sizeOf("bytes_total"), catalog)
	fmt.Fprintf(w, "  resident  %s%% (%s files, %s)\n", v("resident_pct"), v("files_resident"), sizeOf("bytes_resident"))
	var tiers []string
	for _, f := range b.Fields() {
		if t, ok := strings.CutSuffix(strings.TrimPrefix(f.Key, "tier."), ".quota"); ok && strings.HasPrefix(f.Key, "tier.") {
			tiers = append(tiers, t)
		}
	}
	sort.Strings(tiers) // status lists them fastest first; the summary by name is stable enough
	for i, t := range tiers {
		head := "  tiers     "
		if i > 0 {
			head = "            "
		}
		p := "tier." + t + "."
		pct := 0.0
		if q := n(p + "quota"); q > 0 {
			pct = float64(n(p+"used")) * 100 / float64(q)
		}
		health := "healthy"
		if v(p+"healthy") != "yes" {
			health = "UNHEALTHY (" + v(p+"errors") + " errors)"
		}
		fmt.Fprintf(w, "%s%s %s: %s of %s (%.0f%%), %s files, %s\n", head, t, v(p+"path"), sizeOf(p+"used"), sizeOf(p+"quota"), pct, v(p+"files"), health)
	}
	src := v("source_state")
	if src != "available" {
		src = "UNAVAILABLE since " + v("source_unavailable_since")
	}
	fmt.Fprintf(w, "  source    %s; %s opens, %s read, %s errors, %s timeouts; now %.1f opens/s, %.1f MB/s\n",
		src, v("source_opens"), sizeOf("source_bytes"), v("source_errors"), v("source_timeouts"), rate("source_opens"), rate("source_bytes")/1e6)
	fmt.Fprintf(w, "  copies    %s queued, %s done (%s), %s failed, %s fit no tier; now %.1f/s\n",
		v("placements_queued"), v("placements_done"), sizeOf("placements_bytes"), v("placements_failed"), v("placements_skipped_nospace"), rate("placements_done"))
	fmt.Fprintf(w, "  jobs      %s\n", v("jobs"))
	fmt.Fprintf(w, "(epochfs status --raw MOUNTPOINT: every key, for scripts)\n")
}
