package main

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// The walk of a first mount runs in the background (the mount serves at
// once). mount --wait-walk waits for it; on a terminal the wait shows a
// progress line, and a mount that does not wait says that the walk goes on.

// walkState is the walk's part of .epochfs/status.
type walkState struct {
	walking       bool
	entries, dirs int64
	files         int64
}

func readWalk(mnt string) (walkState, error) {
	st, err := readStatus(mnt)
	if err != nil {
		return walkState{}, err
	}
	n := func(k string) int64 { v, _ := strconv.ParseInt(st[k], 10, 64); return v }
	return walkState{walking: st["catalog"] == "walking", entries: n("walk_entries"), dirs: n("walk_dirs_pending"),
		files: n("files_total")}, nil
}

// waitWalk waits until the mount's catalog has been walked whole, with a
// progress line on a terminal (one line every 5 s otherwise).
func waitWalk(mnt string, w io.Writer) error {
	tty := isTerminal(w)
	start, last := time.Now(), time.Time{}
	for {
		s, err := readWalk(mnt)
		if err != nil {
			if tty {
				fmt.Fprintln(w)
			}
			return runtimeErr("waiting for the walk of the source: %v", err)
		}
		if !s.walking {
			if tty {
				fmt.Fprint(w, "\r\033[K")
			}
			fmt.Fprintf(w, "epochfs: catalog complete: %d files (waited %s)\n", s.files, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		line := fmt.Sprintf("epochfs: walking the source: %d entries, %d directories to go, %s", s.entries, s.dirs, time.Since(start).Round(time.Second))
		switch {
		case tty:
			fmt.Fprintf(w, "\r\033[K%s", line)
		case time.Since(last) >= 5*time.Second:
			fmt.Fprintln(w, line)
			last = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// noteWalk tells a person at a terminal that the walk goes on after the
// mount returned.
func noteWalk(mnt string, w io.Writer) {
	if !isTerminal(w) {
		return
	}
	if s, err := readWalk(mnt); err == nil && s.walking {
		fmt.Fprintf(w, "epochfs: the source is being walked in the background (%d entries so far); the mount serves meanwhile: 'epochfs status %s' shows the walk, 'epochfs mount --wait-walk' waits for it\n", s.entries, mnt)
	}
}
