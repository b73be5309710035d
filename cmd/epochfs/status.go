package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/epochfs/epochfs/internal/config"
)

const statusSynopsis = "status [--raw | --json] MOUNTPOINT"

// runStatus prints a summary for people; --raw the key=value lines of
// .epochfs/status (the stable form scripts parse), --json stats.json.
func runStatus(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("status", statusSynopsis, stderr)
	asJSON := f.Bool("json", false, "print one JSON object")
	raw := f.Bool("raw", false, "print the key=value lines of .epochfs/status (for scripts)")
	pos, err := parseFlags(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("want one MOUNTPOINT (usage: epochfs %s)", statusSynopsis)
	}
	if *asJSON && *raw {
		return usageErr("--raw or --json, not both")
	}
	name := "status"
	if *asJSON {
		name = "stats.json"
	}
	data, err := os.ReadFile(filepath.Join(pos[0], ".epochfs", name))
	if err != nil {
		return runtimeErr("%s is not an epochfs mount or its daemon does not answer: %v", pos[0], err)
	}
	if *asJSON || *raw {
		_, err = stdout.Write(data)
		return err
	}
	// The rates: a second sample half a second later.
	time.Sleep(statusSample)
	later, err := os.ReadFile(filepath.Join(pos[0], ".epochfs", "status"))
	if err != nil {
		return runtimeErr("%s: %v", pos[0], err)
	}
	writeSummary(stdout, parseKV(data), parseKV(later), statusSample)
	return nil
}

// statusSample is the interval of the summary's rates.
const statusSample = 500 * time.Millisecond

// writeSummary renders status for people: what the mount is, how much is
// local, each tier's use, the source's health and traffic (per second
// between the two samples), the copies and the jobs.
func writeSummary(w io.Writer, a, b map[string]string, dt time.Duration) {
	n := func(m map[string]string, k string) int64 { v, _ := strconv.ParseInt(m[k], 10, 64); return v }
	rate := func(k string) float64 { return float64(n(b, k)-n(a, k)) / dt.Seconds() }
	size := func(k string) string { return config.FormatBytes(n(b, k)) }
	fmt.Fprintf(w, "epochfs %s at %s (pid %s, transport %s, passthrough %s)\n", b["version"], b["mountpoint"], b["pid"], b["transport"], b["passthrough"])
	catalog := b["catalog"]
	if catalog == "walking" {
		catalog = fmt.Sprintf("walking (%s entries so far)", b["walk_entries"])
	}
	fmt.Fprintf(w, "  dataset   %s: %s files, %s; catalog %s\n", b["source"], b["files_total"], size("bytes_total"), catalog)
	fmt.Fprintf(w, "  resident  %s%% (%s files, %s)\n", b["resident_pct"], b["files_resident"], size("bytes_resident"))
	var tiers []string
	for k := range b {
		if t, ok := strings.CutSuffix(strings.TrimPrefix(k, "tier."), ".quota"); ok && strings.HasPrefix(k, "tier.") {
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
		if q := n(b, p+"quota"); q > 0 {
			pct = float64(n(b, p+"used")) * 100 / float64(q)
		}
		health := "healthy"
		if b[p+"healthy"] != "yes" {
			health = "UNHEALTHY (" + b[p+"errors"] + " errors)"
		}
		fmt.Fprintf(w, "%s%s %s: %s of %s (%.0f%%), %s files, %s\n", head, t, b[p+"path"], size(p+"used"), size(p+"quota"), pct, b[p+"files"], health)
	}
	src := b["source_state"]
	if src != "available" {
		src = "UNAVAILABLE since " + b["source_unavailable_since"]
	}
	fmt.Fprintf(w, "  source    %s; %s opens, %s read, %s errors, %s timeouts; now %.1f opens/s, %.1f MB/s\n",
		src, b["source_opens"], size("source_bytes"), b["source_errors"], b["source_timeouts"], rate("source_opens"), rate("source_bytes")/1e6)
	fmt.Fprintf(w, "  copies    %s queued, %s done (%s), %s failed, %s fit no tier; now %.1f/s\n",
		b["placements_queued"], b["placements_done"], size("placements_bytes"), b["placements_failed"], b["placements_skipped_nospace"], rate("placements_done"))
	fmt.Fprintf(w, "  jobs      %s\n", b["jobs"])
	fmt.Fprintf(w, "(epochfs status --raw MOUNTPOINT: every key, for scripts)\n")
}

// readStatus reads MOUNT/.epochfs/status into a map.
func readStatus(mnt string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "status"))
	if err != nil {
		return nil, err
	}
	return parseKV(data), nil
}

// parseKV parses key=value lines.
func parseKV(data []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			m[k] = v
		}
	}
	return m
}
