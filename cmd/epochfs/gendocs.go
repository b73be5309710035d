package main

// `epochfs gen-docs --docs DIR OUT` (hidden; `make man` and `make package`
// run it) writes the manual and the completion scripts from the command
// tree: OUT/man8/epochfs.8 and one page per command, OUT/man8/mount.epochfs.8
// (from DIR/mount.epochfs.md), OUT/man5/epochfs.toml.5 (from
// DIR/config.md), and OUT/completion/{epochfs.bash,_epochfs,epochfs.fish}.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
)

const genDocsName = "gen-docs"

func genDocsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:    genDocsName + " [--docs DIR] OUT",
		Short:  "write the man pages and completion scripts into OUT",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
	}
	docsDir := c.Flags().String("docs", "docs", "the docs directory (config.md, mount.epochfs.md)")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		return genDocs(cmd.Root(), *docsDir, args[0])
	}
	return c
}

// manDate is the date the pages carry: SOURCE_DATE_EPOCH's when set (a
// reproducible build), else today's.
func manDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now().UTC()
}

func genDocs(root *cobra.Command, docsDir, out string) error {
	date := manDate()
	man8, man5, comp := filepath.Join(out, "man8"), filepath.Join(out, "man5"), filepath.Join(out, "completion")
	for _, d := range []string{man8, man5, comp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return runtimeErr("%v", err)
		}
	}
	pages := map[string]string{"epochfs.8": rootManPage(root)}
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			pages["epochfs-"+c.Name()+".8"] = commandManPage(c)
		}
	}
	for file, md := range pages {
		page := md2man.Render([]byte(titleBlock(strings.TrimSuffix(file, ".8"), "8", date) + md))
		if err := os.WriteFile(filepath.Join(man8, file), page, 0o644); err != nil {
			return runtimeErr("%v", err)
		}
	}
	fromDocs := []struct{ src, dst, name, section, what string }{
		{"mount.epochfs.md", filepath.Join(man8, "mount.epochfs.8"), "mount.epochfs", "8", ""},
		{"config.md", filepath.Join(man5, "epochfs.toml.5"), "epochfs.toml", "5", "the configuration file of epochfs mounts"},
	}
	for _, p := range fromDocs {
		md, err := os.ReadFile(filepath.Join(docsDir, p.src))
		if err != nil {
			return runtimeErr("%v", err)
		}
		page := manFromMarkdown(string(md), p.name, p.section, p.what, date)
		if err := os.WriteFile(p.dst, page, 0o644); err != nil {
			return runtimeErr("%v", err)
		}
	}
	for shell, file := range map[string]string{"bash": "epochfs.bash", "zsh": "_epochfs", "fish": "epochfs.fish"} {
		var b bytes.Buffer
		if err := writeCompletion(root, shell, &b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(comp, file), b.Bytes(), 0o644); err != nil {
			return runtimeErr("%v", err)
		}
	}
	return nil
}

// manFromMarkdown renders a page of docs/ as a man page: a title block,
// then the page. A page with what set is a reference (docs/config.md): its
// first heading becomes NAME (name - what) and DESCRIPTION; a page without
// carries its own NAME.
func manFromMarkdown(md, name, section, what string, date time.Time) []byte {
	var b strings.Builder
	b.WriteString(titleBlock(name, section, date))
	if what != "" {
		if _, rest, ok := strings.Cut(md, "\n"); ok && strings.HasPrefix(md, "# ") {
			md = rest
		}
		fmt.Fprintf(&b, "# NAME\n%s - %s\n\n# DESCRIPTION\n", name, what)
	}
	b.WriteString(tablesAsLists(md))
	return md2man.Render([]byte(b.String()))
}

// titleBlock is go-md2man's first lines: the page's name, section, date,
// source and manual.
func titleBlock(name, section string, date time.Time) string {
	manual := "System Administration"
	if section == "5" {
		manual = "File Formats"
	}
	return fmt.Sprintf("%s %s \"%s\" \"epochfs %s\" \"%s\"\n%s\n\n", strings.ToUpper(name), section,
		date.Format("January 2006"), version, manual, strings.Repeat("=", 40))
}

// mdEscape escapes what markdown would read as emphasis or links.
var mdEscape = strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "`", "\\`", "<", `\<`)

const exitStatus = `# EXIT STATUS
**0** success; **1** the command failed (a message on standard error says why); **2** bad usage, a bad
configuration or a refusal; **3** a **--timeout** ran out.
`

func rootManPage(root *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# NAME\nepochfs - %s\n\n# SYNOPSIS\n**epochfs** *COMMAND* \\[*flags*\\] \\[*args*\\]\n\n", root.Short)
	fmt.Fprintf(&b, "# DESCRIPTION\n%s\n\n# COMMANDS\n", mdEscape.Replace(strings.ReplaceAll(root.Long, "\n", " ")))
	var see []string
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		fmt.Fprintf(&b, "**epochfs-%s**(8)\n:   %s\n\n", c.Name(), mdEscape.Replace(c.Short))
		see = append(see, fmt.Sprintf("**epochfs-%s**(8)", c.Name()))
	}
	b.WriteString(`# FILES
*/etc/epochfs/NAME.toml*
:   a mount's configuration (**epochfs.toml**(5)); **epochfs@NAME.service** mounts it.

*/var/lib/epochfs/*
:   the default state directories (catalog and log), one per mount point.

*/usr/share/epochfs/slurm/*
:   the Slurm prolog and epilog, and their settings file.

*/usr/share/doc/epochfs/*
:   the documentation: admin.md (install, Slurm, systemd, alerts), config.md, ctl.md.

`)
	b.WriteString(exitStatus)
	fmt.Fprintf(&b, "\n# SEE ALSO\n**mount.epochfs**(8), **epochfs.toml**(5), %s\n", strings.Join(see, ", "))
	return b.String()
}

func commandManPage(c *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# NAME\nepochfs-%s - %s\n\n", c.Name(), mdEscape.Replace(c.Short))
	fmt.Fprintf(&b, "# SYNOPSIS\n**epochfs %s**%s\n\n", c.Name(), mdEscape.Replace(strings.TrimPrefix(c.Use, c.Name())))
	long := upperFirst(c.Long)
	if !strings.HasSuffix(long, ".") {
		long += "."
	}
	fmt.Fprintf(&b, "# DESCRIPTION\n%s\n\n", long)
	var flags strings.Builder
	printFlags(&flags, c.Flags(), c.Use)
	if flags.Len() > 0 {
		b.WriteString("# OPTIONS\nFlags come before, between or after the arguments, as **--name** *VALUE* or **--name**=*VALUE*; a bare **\\-\\-** ends them.\n\n")
		for _, l := range strings.Split(strings.TrimRight(flags.String(), "\n"), "\n") {
			if strings.HasPrefix(l, "  -") {
				fmt.Fprintf(&b, "**%s**\n", mdEscape.Replace(strings.TrimSpace(l)))
			} else {
				fmt.Fprintf(&b, ":   %s\n\n", mdEscape.Replace(strings.TrimSpace(l)))
			}
		}
	}
	b.WriteString(exitStatus)
	b.WriteString("\n# SEE ALSO\n**epochfs**(8)\n")
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// tablesAsLists turns markdown tables into definition lists (the first
// cell the term, the others its text): a man page is read at 80 columns,
// where a wide table does not fit.
func tablesAsLists(md string) string {
	var out []string
	header := false
	for _, l := range strings.Split(md, "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "|") {
			header = false
			out = append(out, l)
			continue
		}
		cells := strings.Split(strings.Trim(t, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !header {
			header = true // the header row; the separator follows
			continue
		}
		if strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			continue
		}
		var rest []string
		for _, c := range cells[1:] {
			if c != "" {
				rest = append(rest, c)
			}
		}
		out = append(out, "", "**"+strings.Trim(cells[0], "`*")+"**", ":   "+strings.Join(rest, "; "))
	}
	return strings.Join(out, "\n")
}
