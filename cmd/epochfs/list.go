package main

// `epochfs list` names every epochfs mount of the node: from the mount
// table (fuse.epochfs) joined with the daemons' runtime records
// (internal/mounts/record.go), so that a mount whose daemon died and a daemon still
// draining a detached mount show too.

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/epochfs/epochfs/internal/mounts"
)

const listSynopsis = "list [--json]"

// listed is one line of `epochfs list`.
type listed struct {
	Mountpoint string `json:"mountpoint"`
	Source     string `json:"source"`
	StateDir   string `json:"state_dir"`
	PID        int    `json:"pid"`
	// State: "serving" (mounted, its daemon runs), "dead" (mounted, no
	// daemon: reads fail; the next mount clears it), "draining" (detached,
	// its daemon serves files still open).
	State string `json:"state"`
}

func runList(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("list", listSynopsis, stderr)
	asJSON := f.Bool("json", false, "print a JSON array")
	pos, err := parseFlags(f, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("no arguments (usage: epochfs %s)", listSynopsis)
	}
	rows := listMounts(mounts.Mounts(), mounts.Records())
	if *asJSON {
		if rows == nil {
			rows = []listed{}
		}
		b, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no epochfs mounts")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MOUNTPOINT\tSOURCE\tSTATE DIR\tPID\tSTATE")
	for _, r := range rows {
		pid := "-"
		if r.PID > 0 {
			pid = strconv.Itoa(r.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Mountpoint, r.Source, orDash(r.StateDir), pid, r.State)
	}
	return tw.Flush()
}

// listMounts joins the epochfs mounts of the table with the records: a
// record names a mount by its mount point and device number.
func listMounts(mounts []mounts.MountEntry, records []mounts.Record) []listed {
	var rows []listed
	used := map[int]bool{}
	for _, m := range mounts {
		if !m.Epochfs() {
			continue
		}
		row := listed{Mountpoint: m.Dir, Source: m.Source, State: "dead"}
		for i, r := range records {
			if r.Mountpoint == m.Dir && r.Dev == m.Dev {
				used[i] = true
				row.StateDir, row.PID = r.StateDir, r.PID
				if r.Running() {
					row.State = "serving"
				}
			}
		}
		rows = append(rows, row)
	}
	for i, r := range records {
		if !used[i] && r.Running() {
			rows = append(rows, listed{Mountpoint: r.Mountpoint, Source: r.Source, StateDir: r.StateDir, PID: r.PID, State: "draining"})
		}
	}
	sort.SliceStable(rows, func(a, b int) bool { return rows[a].Mountpoint < rows[b].Mountpoint })
	return rows
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
