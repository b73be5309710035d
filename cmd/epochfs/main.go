// Command epochfs mounts a dataset on a slow shared file system read-only,
// copies it whole into local tiers in the background, and serves reads from
// the fastest tier that holds each file.
//
// This is the only package that reads config files and builds the logger.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Exit codes (DESIGN.md, "CLI").
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
	exitTimeout = 3
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

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

// command is one subcommand.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"mount":      {"mount SOURCE read-only at MOUNTPOINT with local tiers", runMount},
		"unmount":    {"unmount a mount point and wait for its daemon to exit", runUnmount},
		"status":     {"show what is where (--raw: every key, for scripts)", runStatus},
		"stats":      {"one line per second of what the mount does", runStats},
		"warmup":     {"copy the dataset (or some paths) into the tiers", runWarmup},
		"refresh":    {"pick up source changes (changed, added, removed files) without a remount", runRefresh},
		"verify":     {"compare every tier copy with the source; drop bad copies", runVerify},
		"drop":       {"remove tier copies on purpose (they are read from the source again)", runDrop},
		"model":      {"run the DSI performance model and print the cache split", runModel},
		"preprocess": {"run the preprocessing pipeline over images into .npy files", runPreprocess},
		"config":     {"print the source, mount point and state directory a config file names", runConfig},
		"doctor":     {"check a node's setup (FUSE, config, tiers, source, state, Slurm) without mounting", runDoctor},
		"list":       {"list the node's epochfs mounts with their source, state directory and daemon", runList},
		"version":    {"print the version", runVersion},
	}
}

func main() {
	if filepath.Base(os.Args[0]) == helperName {
		os.Exit(runMountHelper(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 2 && args[0] == "help" {
		if _, ok := cmds[args[1]]; ok {
			// `epochfs help mount` is `epochfs mount --help`.
			args = []string{args[1], "--help"}
		}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr, cmds)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		args[0] = "version"
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "epochfs: unknown command %q (run 'epochfs help')\n", args[0])
		return exitUsage
	}
	err := c.run(args[1:], stdout, stderr)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(stderr, "epochfs %s: %v\n", args[0], err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitRuntime
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
	fmt.Fprintf(w, "\nRun 'epochfs COMMAND -h' for a command's flags.\n")
}

// parseFlags parses flags that may appear before, between or after the
// positional arguments, and returns the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{code: exitUsage, err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlagSet returns a flag set that reports errors as usage errors and
// prints its usage to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: epochfs %s\n", synopsis)
		printFlags(stderr, fs, synopsis)
	}
	return fs
}

// printFlags lists fs's flags as users write them (--name ARG), leaving out
// the internal ones (their usage starts with "internal:", for the daemon
// the CLI starts) and defaults that only mean "off" or "none".
func printFlags(w io.Writer, fs *flag.FlagSet, synopsis string) {
	words := strings.Fields(strings.NewReplacer("[", " ", "]", " ", "{", " ", "}", " ").Replace(synopsis))
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "internal:") {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		// The argument's name as the synopsis writes it (--tier
		// NAME=PATH:QUOTA), else the flag package's guess.
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-" // -f, as the synopsis writes it
		}
		for i, wd := range words {
			if arg != "" && wd == dash+f.Name { // arg "": a boolean flag
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

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version", stderr)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "epochfs %s\n", version)
	return nil
}
