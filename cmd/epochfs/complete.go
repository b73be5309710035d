package main

// Shell completion (`epochfs completion bash|zsh|fish`): the scripts call
// the hidden __complete command, which answers from here: mount points
// from the node's mount table (what `epochfs list` shows), paths under a
// mount for warmup, refresh, verify and drop, config keys, shells.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/mounts"
)

// argKind is what a command's positional arguments are.
type argKind int

const (
	argNone             argKind = iota
	argMountpoint               // one mount point
	argMountpointPaths          // a mount point, then paths under it
	argSourceMountpoint         // two directories
	argFiles                    // files
	argConfigKey                // a key `epochfs config` prints
	argShell                    // a shell's name
)

const completionSynopsis = "completion {bash|zsh|fish}"

func completionFlags(*pflag.FlagSet) runFunc {
	return func(pos []string, stdout, _ io.Writer) error {
		if len(pos) != 1 {
			return usageErr("want one shell: bash, zsh or fish (usage: epochfs %s)", completionSynopsis)
		}
		return writeCompletion(newRoot(io.Discard, io.Discard), pos[0], stdout)
	}
}

func writeCompletion(root *cobra.Command, shell string, w io.Writer) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	}
	return usageErr("%q: want bash, zsh or fish", shell)
}

func completeArgs(kind argKind) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch kind {
		case argMountpoint:
			if len(args) == 0 {
				return mountpoints(), cobra.ShellCompDirectiveNoFileComp
			}
		case argMountpointPaths:
			if len(args) == 0 {
				return mountpoints(), cobra.ShellCompDirectiveNoFileComp
			}
			return pathsUnder(args[0], toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		case argSourceMountpoint:
			if len(args) < 2 {
				return nil, cobra.ShellCompDirectiveFilterDirs
			}
		case argFiles:
			return nil, cobra.ShellCompDirectiveDefault
		case argConfigKey:
			if len(args) == 0 {
				return []string{"source", "mountpoint", "state_dir"}, cobra.ShellCompDirectiveNoFileComp
			}
		case argShell:
			if len(args) == 0 {
				return []string{"bash", "zsh", "fish"}, cobra.ShellCompDirectiveNoFileComp
			}
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFlags says what the flags' values are: config files, directories.
func completeFlags(cmd *cobra.Command) {
	for name, ext := range map[string][]string{"config": {"toml"}, "state": nil, "out": nil, "f": nil} {
		if cmd.Flags().Lookup(name) == nil {
			continue
		}
		var err error
		switch name {
		case "state", "out":
			err = cmd.MarkFlagDirname(name)
		default:
			err = cmd.MarkFlagFilename(name, ext...)
		}
		if err != nil {
			panic(fmt.Sprintf("completion of --%s: %v", name, err)) // a flag looked up just above
		}
	}
}

// mountpoints are the node's epochfs mount points.
func mountpoints() []string {
	var out []string
	for _, r := range mounts.List(mounts.Mounts(), mounts.Records()) {
		out = append(out, r.Mountpoint)
	}
	return out
}

// pathsUnder completes toComplete, a path relative to the mount point mnt
// (or absolute, under it), from the mount's directory listing:
// directories end with "/" so that completion goes on into them.
func pathsUnder(mnt, toComplete string) []string {
	base, _ := filepath.Abs(mnt)
	if filepath.IsAbs(toComplete) {
		base = "/"
	}
	dir, leaf := "", toComplete
	if i := strings.LastIndexByte(toComplete, '/'); i >= 0 {
		dir, leaf = toComplete[:i+1], toComplete[i+1:]
	}
	ents, err := os.ReadDir(filepath.Join(base, dir))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, leaf) || (dir == "" && n == ".epochfs") {
			continue
		}
		if e.IsDir() {
			n += "/"
		}
		out = append(out, dir+n)
	}
	return out
}
