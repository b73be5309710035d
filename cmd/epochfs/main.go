// Command epochfs mounts a dataset on a slow shared file system read-only,
// copies it whole into local tiers in the background, and serves reads from
// the fastest tier that holds each file.
//
// This is the only package that reads config files and builds the logger.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// Exit codes (DESIGN.md, "CLI").
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
	exitTimeout = 3
)

// version, commit and buildDate are set at build time with -ldflags
// "-X main.version=... -X main.commit=... -X main.buildDate=..." (the
// Makefile: git describe, the commit, the build's UTC time or
// SOURCE_DATE_EPOCH). A plain `go build` leaves the commit to the build
// info Go records.
var (
	version   = "0.1.0-dev"
	commit    = ""
	buildDate = ""
)

// exitError carries an exit code with a one-line message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

func runtimeErr(format string, a ...any) error {
	return &exitError{code: exitRuntime, err: fmt.Errorf(format, a...)}
}

// runFunc is a command's work, given its positional arguments once its
// flags are parsed.
type runFunc func(pos []string, stdout, stderr io.Writer) error

// command is one subcommand: its synopsis (the README's command table and
// the man page show it), a one-line summary, the flags it defines and what
// its positional arguments complete to.
type command struct {
	synopsis string
	summary  string
	flags    func(f *pflag.FlagSet) runFunc
	args     argKind
}

func commands() map[string]command {
	return map[string]command{
		"mount":      {mountSynopsis, "mount SOURCE read-only at MOUNTPOINT with local tiers", mountCmdFlags, argSourceMountpoint},
		"unmount":    {unmountSynopsis, "unmount a mount point and wait for its daemon to exit", unmountFlags, argMountpoint},
		"status":     {statusSynopsis, "show what is where (--raw: every key, for scripts)", statusFlags, argMountpoint},
		"stats":      {statsSynopsis, "one line per second of what the mount does", statsFlags, argMountpoint},
		"warmup":     {warmupSynopsis, "copy the dataset (or some paths) into the tiers", warmupFlags, argMountpointPaths},
		"refresh":    {refreshSynopsis, "pick up source changes (changed, added, removed files) without a remount", refreshFlags, argMountpointPaths},
		"verify":     {verifySynopsis, "compare every tier copy with the source; drop bad copies", verifyFlags, argMountpointPaths},
		"drop":       {dropSynopsis, "remove tier copies on purpose (they are read from the source again)", dropFlags, argMountpointPaths},
		"model":      {modelSynopsis, "run the DSI performance model and print the cache split", modelFlags, argNone},
		"preprocess": {preprocessSynopsis, "run the preprocessing pipeline over images into .npy files", preprocessFlags, argFiles},
		"config":     {configSynopsis, "print the source, mount point and state directory a config file names", configFlags, argConfigKey},
		"doctor":     {doctorSynopsis, "check a node's setup (FUSE, config, tiers, source, state, Slurm) without mounting", doctorFlags, argMountpoint},
		"list":       {listSynopsis, "list the node's epochfs mounts with their source, state directory and daemon", listFlags, argNone},
		"version":    {"version", "print the version, commit, Go version and build date", versionFlags, argNone},
		"completion": {completionSynopsis, "print the shell completion script for bash, zsh or fish", completionFlags, argShell},
	}
}

func main() {
	if filepath.Base(os.Args[0]) == helperName {
		os.Exit(runMountHelper(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr, commands())
		return exitUsage
	}
	if args[0] == "--version" || args[0] == "-version" {
		args[0] = "version"
	}
	name, err := execute(args, stdout, stderr)
	if err == nil {
		return exitOK
	}
	if name == "" {
		fmt.Fprintf(stderr, "epochfs: %v\n", err)
	} else {
		fmt.Fprintf(stderr, "epochfs %s: %v\n", name, err)
	}
	return exitCode(err)
}

func printUsage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "usage: epochfs COMMAND [flags] [args]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'epochfs COMMAND -h' for a command's flags, 'man epochfs' for the manual.\n")
}

// printFlags lists a command's flags as users write them (--name ARG),
// leaving out the hidden ones (internal, for the daemon the CLI starts) and
// defaults that only mean "off" or "none".
func printFlags(w io.Writer, fs *pflag.FlagSet, synopsis string) {
	words := strings.Fields(strings.NewReplacer("[", " ", "]", " ", "{", " ", "}", " ").Replace(synopsis))
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		arg, usage := pflag.UnquoteUsage(f)
		if f.Value.Type() == "bool" {
			arg = ""
		}
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-" // -f, as the synopsis writes it
		}
		// The argument's name as the synopsis writes it (--tier
		// NAME=PATH:QUOTA), else the type's.
		for i, wd := range words {
			if arg != "" && wd == dash+f.Name {
				if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && words[i+1] == strings.ToUpper(words[i+1]) {
					arg = words[i+1]
				}
				break
			}
		}
		head := "  " + dash + f.Name
		if arg != "" {
			head += " " + strings.ToUpper(arg)
		}
		line := head + "\n    \t" + usage
		switch f.DefValue {
		case "", "0", "0s", "false", "-1", "[]":
		default:
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

func versionFlags(*pflag.FlagSet) runFunc {
	return func(pos []string, stdout, _ io.Writer) error {
		if len(pos) > 0 {
			return usageErr("no arguments (usage: epochfs version)")
		}
		fmt.Fprintf(stdout, "epochfs %s\ncommit:  %s\ngo:      %s\nbuilt:   %s\n", version, buildCommit(), runtime.Version(), orUnknown(buildDate))
		return nil
	}
}

// buildCommit is the commit the binary was built from: the one the build
// named, else the one Go recorded (a build in a git checkout).
func buildCommit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" && dirty {
			return rev + " (modified)"
		}
		return orUnknown(rev)
	}
	return "unknown"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
