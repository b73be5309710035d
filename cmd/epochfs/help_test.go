package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Every command's --help (and `epochfs help CMD`) starts with the synopsis
// the README's command table shows, lists only flags the synopsis names,
// and hides the internal ones.
func TestHelpMatchesTheReadme(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(string(readme), "\n") {
		if rest, ok := strings.CutPrefix(l, "| `epochfs "); ok {
			if i := strings.Index(rest, "` |"); i >= 0 {
				rows[strings.ReplaceAll(rest[:i], `\|`, "|")] = true
			}
		}
	}
	for name := range commands() {
		for _, args := range [][]string{{name, "--help"}, {"help", name}} {
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != 0 {
				t.Errorf("%v: exit %d", args, code)
			}
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			syn, ok := strings.CutPrefix(lines[0], "usage: epochfs ")
			if !ok {
				t.Errorf("%v: first line %q is not the usage", args, lines[0])
				continue
			}
			if !rows[syn] {
				t.Errorf("the README's command table has no row `epochfs %s`", syn)
			}
			for _, l := range lines[1:] {
				if !strings.HasPrefix(l, "  -") {
					continue
				}
				flagName := strings.Fields(l)[0]
				if !strings.Contains(syn+" ", flagName+" ") && !strings.Contains(syn, flagName+"]") {
					t.Errorf("%s --help lists %s, which its synopsis (and the README) does not name", name, flagName)
				}
			}
			if strings.Contains(errb.String(), "internal") || strings.Contains(errb.String(), "(default -1)") {
				t.Errorf("%v shows internal flags or a meaningless default:\n%s", args, errb.String())
			}
		}
	}
}
