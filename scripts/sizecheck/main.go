// Command sizecheck fails when a Go source file of the repository (tests
// and third_party aside) is over 600 lines, or a function over 100 lines,
// without a reason: a file's reason is a "Long file:" line in a comment
// before its package clause, a function's a "Long:" line in its doc
// comment. Run by scripts/lint.sh.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	maxFileLines = 600
	maxFuncLines = 100
)

func main() {
	fset := token.NewFileSet()
	bad := 0
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (p == "third_party" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if n := fset.Position(f.End()).Line; n > maxFileLines && !reason(f.Doc, "Long file:") && !headerReason(f, fset) {
			fmt.Printf("%s: %d lines (over %d): split it, or say why in a \"Long file:\" comment above the package clause\n", p, n, maxFileLines)
			bad++
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines && !reason(fd.Doc, "Long:") {
				fmt.Printf("%s:%d: func %s is %d lines (over %d): split it, or say why in a \"Long:\" line of its doc comment\n",
					p, fset.Position(fd.Pos()).Line, fd.Name.Name, n, maxFuncLines)
				bad++
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizecheck:", err)
		os.Exit(2)
	}
	if bad > 0 {
		os.Exit(1)
	}
}

// reason reports whether the comment group has a line starting with tag.
func reason(g *ast.CommentGroup, tag string) bool {
	if g == nil {
		return false
	}
	for _, l := range strings.Split(g.Text(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), tag) {
			return true
		}
	}
	return false
}

// headerReason looks for "Long file:" in any comment before the package
// clause (a file's doc comment is only the group right above it).
func headerReason(f *ast.File, fset *token.FileSet) bool {
	for _, g := range f.Comments {
		if g.Pos() < f.Package && reason(g, "Long file:") {
			return true
		}
	}
	return false
}
