package main

// `epochfs drop` removes tier copies on purpose (internal/placement/drop.go): the
// .epochfs/drop control file, written as a path document, then waited for
// (the copies go when the document's last descriptor is released).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/ctlpath"
)

const dropSynopsis = "drop [--all] MOUNTPOINT [PATH...]"

func dropFlags(f *pflag.FlagSet) runFunc {
	all := f.Bool("all", false, "drop every copy of the dataset")
	return func(pos []string, stdout, stderr io.Writer) error {
		var err error
		if len(pos) < 1 || (len(pos) == 1) != *all {
			return usageErr("want MOUNTPOINT and PATHs, or --all and MOUNTPOINT (usage: epochfs %s)", dropSynopsis)
		}
		mnt, _ := filepath.Abs(pos[0])
		ctl := filepath.Join(mnt, ".epochfs", "drop")
		before, err := readCounters(ctl)
		if err != nil {
			return runtimeErr("%s is not an epochfs mount or its daemon does not answer: %v", mnt, err)
		}
		docs := []string{"all\n"}
		if !*all {
			var rels []string
			for _, p := range pos[1:] {
				rel, err := datasetPath(mnt, p)
				if err != nil {
					return err
				}
				rels = append(rels, rel)
			}
			docs = ctlpath.Docs(rels, ctlpath.DocMax)
		}
		for _, doc := range docs {
			if err := os.WriteFile(ctl, []byte(doc), 0); err != nil {
				switch {
				case errors.Is(err, syscall.EINVAL):
					return usageErr("%s", lastCtlError(mnt, err))
				case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
					return runtimeErr("%s: only root may drop copies (every user's reads of them go to the source after)", mnt)
				}
				return runtimeErr("drop: %v", err)
			}
		}
		// The copies go when the kernel releases the document's descriptor,
		// just after the close.
		deadline := time.Now().Add(30 * time.Second)
		for {
			after, err := readCounters(ctl)
			if err != nil {
				return runtimeErr("%v", err)
			}
			if after["pending"] == 0 {
				n, b := after["dropped"]-before["dropped"], after["bytes_dropped"]-before["bytes_dropped"]
				fmt.Fprintf(stdout, "dropped %d copies (%s); those files are read from the source until copied again\n", n, config.FormatBytes(b))
				return nil
			}
			if time.Now().After(deadline) {
				return &exitError{code: exitTimeout, err: fmt.Errorf("the drop is still under way after 30s")}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
