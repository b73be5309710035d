package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/ctlpath"
)

const (
	refreshSynopsis = "refresh [--allow-drop] [--timeout DURATION] MOUNTPOINT [PATH...]"
	verifySynopsis  = "verify [--content] [--timeout DURATION] MOUNTPOINT [PATH...]"
)

func refreshFlags(f *pflag.FlagSet) runFunc {
	allow := f.Bool("allow-drop", false, "remove whatever the source no longer has, even more than placement.max_drop of the dataset")
	timeout := f.Duration("timeout", 0, "give up waiting after this long (exit 3); 0 = no limit")
	return func(pos []string, stdout, stderr io.Writer) error {
		if len(pos) < 1 {
			return usageErr("want MOUNTPOINT (usage: epochfs %s)", refreshSynopsis)
		}
		opt := ""
		if *allow {
			opt = "--allow-drop\n"
		}
		return scrub(pos[0], pos[1:], "refresh", opt, *timeout, stdout)
	}
}

func verifyFlags(f *pflag.FlagSet) runFunc {
	content := f.Bool("content", false, "also compare every byte of each copy with the source (reads the whole resident data from the source)")
	timeout := f.Duration("timeout", 0, "give up waiting after this long (exit 3); 0 = no limit")
	return func(pos []string, stdout, stderr io.Writer) error {
		if len(pos) < 1 {
			return usageErr("want MOUNTPOINT (usage: epochfs %s)", verifySynopsis)
		}
		opt := ""
		if *content {
			opt = "--content\n"
		}
		return scrub(pos[0], pos[1:], "verify", opt, *timeout, stdout)
	}
}

// scrub writes a request to MNT/.epochfs/NAME, follows its progress until
// the daemon has finished it, and prints what it found. Exit 1 when some
// paths could not be checked (the source failed).
func scrub(mntArg string, paths []string, name, opt string, timeout time.Duration, stdout io.Writer) error {
	mnt, _ := filepath.Abs(mntArg)
	ctl := filepath.Join(mnt, ".epochfs", name)
	before, err := readCounters(ctl)
	if err != nil {
		return runtimeErr("%s is not an epochfs mount or its daemon does not answer: %v", mnt, err)
	}
	var rels []string
	for _, p := range paths {
		rel, err := datasetPath(mnt, p)
		if err != nil {
			return err
		}
		rels = append(rels, rel)
	}
	cmd := opt + "all\n"
	if len(rels) > 0 {
		cmd = opt + ctlpath.Lines(rels)
	}
	if err := os.WriteFile(ctl, []byte(cmd), 0); err != nil {
		switch {
		case errors.Is(err, syscall.EINVAL):
			return usageErr("%s", lastCtlError(mnt, err))
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return runtimeErr("%s: only root may %s (it sends work to the source)", mnt, name)
		}
		return runtimeErr("%s: %v", name, err)
	}
	start := time.Now()
	last := time.Now()
	for {
		s, err := readCounters(ctl)
		if err != nil {
			return runtimeErr("%v", err)
		}
		if s["finished"] > before["finished"] && s["running"] == 0 && s["pending"] == 0 {
			fmt.Fprintf(stdout, "%s: %d checked, %d changed, %d added, %d removed, %d copies dropped, %d errors in %s\n",
				name, s["checked"], s["changed"], s["added"], s["removed"], s["dropped"], s["errors"],
				time.Since(start).Round(time.Millisecond))
			if s["held"] > 0 {
				return runtimeErr("%d files are gone from the source but kept: more than placement.max_drop of the dataset at once; check the source, then run epochfs refresh --allow-drop %s", s["held"], mnt)
			}
			if s["errors"] > 0 {
				msg, _ := readScrubError(ctl)
				return runtimeErr("%d paths could not be checked (last: %s)", s["errors"], msg)
			}
			return nil
		}
		if timeout > 0 && time.Since(start) >= timeout {
			return &exitError{code: exitTimeout, err: fmt.Errorf("timed out after %s (%d checked so far; the %s goes on in the daemon)", timeout, s["checked"], name)}
		}
		if time.Since(last) >= 5*time.Second {
			fmt.Fprintf(stdout, "%s: %d checked, %d changed, %d added, %d removed, elapsed %s\n",
				name, s["checked"], s["changed"], s["added"], s["removed"], time.Since(start).Round(time.Second))
			last = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readCounters reads the numeric keys of a key=value ctl file (refresh,
// verify, drop).
func readCounters(ctl string) (map[string]int64, error) {
	data, err := os.ReadFile(ctl)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for k, v := range parseKV(data) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

func readScrubError(ctl string) (string, error) {
	data, err := os.ReadFile(ctl)
	if err != nil {
		return "", err
	}
	return parseKV(data)["last_error"], nil
}
