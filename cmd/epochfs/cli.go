package main

// The command tree is cobra's (github.com/spf13/cobra): one description,
// commands(), gives the flag parsing (pflag: --name VALUE, --name=VALUE,
// flags before, between or after the arguments, -- ends them), the help,
// the shell completion and the man pages.

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newRoot builds the command tree; the commands write to stdout and
// stderr, help and usage go to stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	cmds := commands()
	root := &cobra.Command{
		Use:               "epochfs",
		Short:             "a read-only FUSE cache of training datasets on shared file systems",
		Long:              rootLong,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout) // the completion answers; help goes to stderr (the help funcs)
	root.SetErr(stderr)
	root.SetHelpFunc(func(*cobra.Command, []string) { printUsage(stderr, cmds) })
	root.SetUsageFunc(func(*cobra.Command) error { printUsage(stderr, cmds); return nil })
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	for _, name := range sortedNames(cmds) {
		c := cmds[name]
		cc := &cobra.Command{
			Use:                   c.synopsis,
			Short:                 c.summary,
			Long:                  longHelp[name],
			DisableFlagsInUseLine: true,
			Args:                  cobra.ArbitraryArgs,
			ValidArgsFunction:     completeArgs(c.args),
		}
		run := c.flags(cc.Flags())
		cc.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.HasPrefix(f.Usage, "internal:") {
				f.Hidden = true
			}
		})
		completeFlags(cc)
		cc.RunE = func(_ *cobra.Command, pos []string) error { return run(pos, stdout, stderr) }
		syn := c.synopsis
		cc.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(stderr, "usage: epochfs %s\n", syn)
			printFlags(stderr, cmd.Flags(), syn)
		})
		root.AddCommand(cc)
	}
	root.AddCommand(genDocsCmd())
	return root
}

const rootLong = `epochfs mounts a dataset that lives on a slow shared file system (Lustre,
GPFS, NFS) read-only, copies its files whole into local tiers (RAM, NVMe) in
the background and serves every read from the fastest tier that holds the
file. Training scripts read the mount unchanged; the .epochfs directory of a
mount holds its control files (docs/ctl.md).`

func sortedNames(cmds map[string]command) []string {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// builtin are the commands cobra adds: help, and the hidden ones the
// completion scripts call.
var builtin = map[string]bool{"help": true, cobra.ShellCompRequestCmd: true, cobra.ShellCompNoDescRequestCmd: true, genDocsName: true}

// execute runs args (a command and its arguments) and returns the
// command's name with its error.
func execute(args []string, stdout, stderr io.Writer) (string, error) {
	name := args[0]
	if name == "-h" || name == "--help" {
		args[0], name = "help", "help"
	}
	if _, ok := commands()[name]; !ok && !builtin[name] {
		return "", &exitError{code: exitUsage, err: fmt.Errorf("unknown command %q (run 'epochfs help')", name)}
	}
	if name == "help" && len(args) > 1 {
		if _, ok := commands()[args[1]]; !ok {
			return "", &exitError{code: exitUsage, err: fmt.Errorf("unknown command %q (run 'epochfs help')", args[1])}
		}
	}
	root := newRoot(stdout, stderr)
	if sub, _, err := root.Find(args[:1]); err == nil && sub != root {
		args = longFlags(sub.Flags(), args)
	}
	root.SetArgs(args)
	_, err := root.ExecuteC()
	return name, err
}

// longFlags rewrites -name to --name for the long flags of fs (the
// standard library's flag package, which the CLI used before, took both),
// up to a "--".
func longFlags(fs *pflag.FlagSet, args []string) []string {
	out := append([]string(nil), args...)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		n, _, _ := strings.Cut(a[1:], "=")
		if len(n) > 1 && fs.Lookup(n) != nil {
			out[i] = "-" + a
		}
	}
	return out
}

// exitCode is the exit status for err: the code it carries, else 1.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitRuntime
}
