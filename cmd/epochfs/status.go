package main

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/status"
)

const statusSynopsis = "status [--raw | --json] MOUNTPOINT"

// statusFlags defines status's flags; the command prints a summary for people; --raw the key=value lines of
// .epochfs/status (the stable form scripts parse), --json stats.json.
func statusFlags(f *pflag.FlagSet) runFunc {
	asJSON := f.Bool("json", false, "print one JSON object")
	raw := f.Bool("raw", false, "print the key=value lines of .epochfs/status (for scripts)")
	return func(pos []string, stdout, stderr io.Writer) error {
		var err error
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
		status.Summary(stdout, status.Parse(data), status.Parse(later), statusSample, config.FormatBytes)
		return nil
	}
}

// statusSample is the interval of the summary's rates.
const statusSample = 500 * time.Millisecond

// readStatus reads MOUNT/.epochfs/status into a map.
func readStatus(mnt string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "status"))
	if err != nil {
		return nil, err
	}
	return parseKV(data), nil
}

// parseKV reads key=value lines (a ctl file's) into a map.
func parseKV(data []byte) map[string]string { return status.Parse(data).Map() }
