package ctlpath

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Lines renders dataset paths as a ctl document: one per line, quoted
// when they are not plain lines (ctlpath) or would read as a keyword
// ("all", "--content", "--allow-drop").
func Lines(rels []string) string {
	var b strings.Builder
	for _, r := range rels {
		switch q := Quote(r); q {
		case "all", "--content", "--allow-drop":
			b.WriteString(`"` + q + `"`)
		default:
			b.WriteString(q)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// DocMax bounds one document of paths written to a ctl file (warmup takes
// 64 MiB); a longer list is written as several, each queued in turn.
const DocMax = 16 << 20

// Docs is Lines split into documents of at most max bytes (a path
// longer than max gets one of its own).
func Docs(rels []string, max int) []string {
	var docs []string
	var b strings.Builder
	for _, r := range rels {
		line := Lines([]string{r})
		if b.Len() > 0 && b.Len()+len(line) > max {
			docs = append(docs, b.String())
			b.Reset()
		}
		b.WriteString(line)
	}
	if b.Len() > 0 {
		docs = append(docs, b.String())
	}
	return docs
}

// ReadList reads the paths of a list file (warmup -f LIST): one per line (or per NUL with
// -z), exactly as written apart from a line's ending ("\r\n" too); empty
// entries are skipped. "-" is stdin.
func ReadList(name string, nul bool, stdin io.Reader) ([]string, error) {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", name, err)
	}
	sep := "\n"
	if nul {
		sep = "\x00"
	}
	var out []string
	for _, p := range strings.Split(string(data), sep) {
		if !nul {
			p = strings.TrimSuffix(p, "\r")
		}
		if p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}
