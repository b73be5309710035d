package main

// `epochfs config --config FILE [KEY]` prints the paths a mount of FILE
// uses, resolved as the mount resolves them (absolute, the default state
// directory filled in), so that scripts (the Slurm prolog and epilog) take
// the mount point from the config instead of repeating it.

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/config"
)

const configSynopsis = "config --config FILE [source|mountpoint|state_dir]"

func configFlags(f *pflag.FlagSet) runFunc {
	cfgFile := f.String("config", "", "TOML config file (required)")
	return func(pos []string, stdout, stderr io.Writer) error {
		var err error
		if *cfgFile == "" {
			return usageErr("--config FILE is required (usage: epochfs %s)", configSynopsis)
		}
		if len(pos) > 1 {
			return usageErr("want at most one KEY (usage: epochfs %s)", configSynopsis)
		}
		cfg, err := loadMountConfig(*cfgFile)
		if err != nil {
			return err
		}
		vals := []struct{ key, val string }{
			{"source", cfg.Source}, {"mountpoint", cfg.Mountpoint}, {"state_dir", cfg.StateDir},
		}
		for _, v := range vals {
			if len(pos) == 0 {
				fmt.Fprintf(stdout, "%s=%s\n", v.key, v.val)
			} else if v.key == pos[0] {
				fmt.Fprintln(stdout, v.val)
				return nil
			}
		}
		if len(pos) == 1 {
			return usageErr("unknown key %q: want source, mountpoint or state_dir", pos[0])
		}
		return nil
	}
}

// loadMountConfig loads and checks a config file that names a whole mount
// (source, mountpoint, tiers), with its paths resolved.
func loadMountConfig(file string) (config.Config, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return cfg, usageErr("%v", err)
	}
	if err := cfg.ValidateMount(); err != nil {
		return cfg, usageErr("%s: %v", file, err)
	}
	resolvePaths(&cfg)
	return cfg, nil
}
