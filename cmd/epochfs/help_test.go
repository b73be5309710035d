package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Every command's --help (and `epochfs help CMD`) starts with the synopsis
// the README's command table shows, lists only flags the synopsis names,
// and hides the internal ones; the table's description is the command's
// long help (its man page's).
func TestHelpMatchesTheReadme(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(readme), "\n") {
		if rest, ok := strings.CutPrefix(l, "| `epochfs "); ok {
			if i := strings.Index(rest, "` |"); i >= 0 {
				desc := strings.TrimSuffix(strings.TrimSpace(rest[i+3:]), " |")
				rows[strings.ReplaceAll(rest[:i], `\|`, "|")] = strings.ReplaceAll(desc, `\|`, "|")
			}
		}
	}
	for name, c := range commands() {
		if desc, ok := rows[c.synopsis]; !ok || desc != longHelp[name] {
			t.Errorf("the README's row for `epochfs %s` says %q; the command's long help (its man page) says %q", c.synopsis, desc, longHelp[name])
		}
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
			if _, ok := rows[syn]; !ok {
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

// Flags are written as before the CLI moved to cobra: -name as well as
// --name, before or after the arguments, "--" ending them; a bad flag or
// command is a usage error (exit 2) naming it.
func TestFlagsAsBefore(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"status", "-raw", "/nonexistent"}, exitRuntime, "epochfs status: /nonexistent is not an epochfs mount"},
		{[]string{"status", "/nonexistent", "--json"}, exitRuntime, "epochfs status: /nonexistent is not an epochfs mount"},
		{[]string{"status", "--", "-raw"}, exitRuntime, "epochfs status: -raw is not an epochfs mount"},
		{[]string{"status", "--bogus", "/x"}, exitUsage, "epochfs status: unknown flag: --bogus"},
		{[]string{"unmount", "-timeout=abc", "/x"}, exitUsage, `epochfs unmount: invalid argument "abc" for "--timeout" flag`},
		{[]string{"frob"}, exitUsage, `epochfs: unknown command "frob" (run 'epochfs help')`},
		{[]string{"help", "frob"}, exitUsage, `epochfs: unknown command "frob" (run 'epochfs help')`},
		{[]string{"help"}, exitOK, "usage: epochfs COMMAND"},
		{[]string{"list", "extra"}, exitUsage, "epochfs list: no arguments"},
		{nil, exitUsage, "usage: epochfs COMMAND"},
		{[]string{"--version"}, exitOK, ""},
	} {
		var so, se bytes.Buffer
		code := run(c.args, &so, &se)
		if code != c.code || !strings.HasPrefix(se.String(), c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, %q", c.args, code, se.String(), c.code, c.msg)
		}
	}
}
