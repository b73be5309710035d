package main

// `epochfs list` names every epochfs mount of the node: from the mount
// table (fuse.epochfs) joined with the daemons' runtime records
// (internal/mounts/record.go), so that a mount whose daemon died and a daemon still
// draining a detached mount show too.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/mounts"
)

const listSynopsis = "list [--json]"

func listFlags(f *pflag.FlagSet) runFunc {
	asJSON := f.Bool("json", false, "print a JSON array")
	return func(pos []string, stdout, stderr io.Writer) error {
		if len(pos) > 0 {
			return usageErr("no arguments (usage: epochfs %s)", listSynopsis)
		}
		rows := mounts.List(mounts.Mounts(), mounts.Records())
		if *asJSON {
			if rows == nil {
				rows = []mounts.Listed{}
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
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
