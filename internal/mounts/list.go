package mounts

import "sort"

// Listed is one mount of the node (a line of `epochfs list`).
type Listed struct {
	Mountpoint string `json:"mountpoint"`
	Source     string `json:"source"`
	StateDir   string `json:"state_dir"`
	PID        int    `json:"pid"`
	// State: "serving" (mounted, its daemon runs), "dead" (mounted, no
	// daemon: reads fail; the next mount clears it), "draining" (detached,
	// its daemon serves files still open).
	State string `json:"state"`
}

// List joins the epochfs mounts of the table with the records: a record
// names a mount by its mount point and device number. A mount without a
// running daemon is dead; a record of a running daemon whose mount is not
// in the table is draining (detached, serving files still open).
func List(table []MountEntry, records []Record) []Listed {
	var rows []Listed
	used := map[int]bool{}
	for _, m := range table {
		if !m.Epochfs() {
			continue
		}
		row := Listed{Mountpoint: m.Dir, Source: m.Source, State: "dead"}
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
			rows = append(rows, Listed{Mountpoint: r.Mountpoint, Source: r.Source, StateDir: r.StateDir, PID: r.PID, State: "draining"})
		}
	}
	sort.SliceStable(rows, func(a, b int) bool { return rows[a].Mountpoint < rows[b].Mountpoint })
	return rows
}
