package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/doctor"
)

// `epochfs doctor [--config FILE] [MOUNTPOINT]` checks a node's setup
// without mounting anything (internal/doctor); exit 1 when a check failed.

const doctorSynopsis = "doctor [--config FILE] [MOUNTPOINT]"

func doctorFlags(f *pflag.FlagSet) runFunc {
	cfgFile := f.String("config", "", "the mount's config file to check")
	return func(pos []string, stdout, stderr io.Writer) error {
		if len(pos) > 1 || (len(pos) == 0 && *cfgFile == "") {
			return usageErr("want --config FILE, MOUNTPOINT or both (usage: epochfs %s)", doctorSynopsis)
		}
		in := doctor.Input{ConfigFile: *cfgFile}
		if *cfgFile != "" {
			in.Config, in.ConfigErr = loadMountConfig(*cfgFile)
			if in.ConfigErr != nil {
				in.ConfigErr = errors.Unwrap(in.ConfigErr)
			}
		}
		if len(pos) == 1 {
			in.Mountpoint, _ = filepath.Abs(pos[0])
		}
		failed, warned := doctor.Check(stdout, in)
		fmt.Fprintf(stdout, "%d failed, %d warnings\n", failed, warned)
		if failed > 0 {
			return &exitError{code: exitRuntime, err: fmt.Errorf("%d checks failed", failed)}
		}
		return nil
	}
}
