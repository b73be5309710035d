package fs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// unmapped are the exported errors of the packages fs imports that never
// reach a request (or reach it only through an error the table maps), with
// the reason. An error neither here nor in errnos fails the test: a new
// sentinel must be given its errno, or its reason here.
var unmapped = map[string]string{
	"jobs.ErrAhead":            "a cluster rank's read waits on it inside jobs",
	"catalog.ErrBadRecord":     "catalog load, at mount",
	"placement.ErrBufferFull":  "the shared buffer refuses a fetch; the read goes to the source",
	"catalog.ErrOtherSource":   "the state directory is another source's, at mount",
	"catalog.ErrNoCatalog":     "a mount of a source that does not answer with no earlier catalog fails at mount",
	"placement.ErrPlaced":      "a copy already placed; placement's own",
	"placement.ErrNoRoom":      "the peer server's answer to another node; never a reader's",
	"placement.ErrNotResident": "the peer server's answer to another node; never a reader's",
	"source.ErrBadPath":        "catalog paths are clean relative paths; one that is not is a bug (EIO, logged)",
	"source.ErrNotRegular":     "placement drops an entry whose source is not a file (ErrVanished)",
	"source.ErrNotSymlink":     "a refresh finds a symlink replaced; placement's own",
	"preprocess.ErrBadOptions": "a bad pipeline, refused at mount or at a job's config (as views.ErrInvalid)",
}

// TestEveryExportedErrorIsInTheErrnoTable reads the sources: every
// exported Err* variable of a package of this module that fs imports is
// named in errnos (errno.go) or in unmapped, and unmapped names nothing
// the table maps or that does not exist.
func TestEveryExportedErrorIsInTheErrnoTable(t *testing.T) {
	fset := token.NewFileSet()
	// The table's names: selector expressions inside the errnos literal.
	errnoFile, err := parser.ParseFile(fset, "errno.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	mapped := map[string]bool{}
	ast.Inspect(errnoFile, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "errnos" {
			return true
		}
		ast.Inspect(vs, func(n ast.Node) bool {
			if se, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := se.X.(*ast.Ident); ok && strings.HasPrefix(se.Sel.Name, "Err") {
					mapped[id.Name+"."+se.Sel.Name] = true
				}
			}
			return true
		})
		return false
	})
	if len(mapped) < 10 {
		t.Fatalf("found %d errors in the errnos table: the parse is wrong", len(mapped))
	}
	// The packages of this module fs imports.
	const module = "github.com/epochfs/epochfs/internal/"
	pkgs := map[string]bool{}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) {
				pkgs[strings.TrimPrefix(p, module)] = true
			}
		}
	}
	var exported []string
	for p := range pkgs {
		srcs, _ := filepath.Glob(filepath.Join("..", p, "*.go"))
		for _, f := range srcs {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, spec := range gd.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Err") && ast.IsExported(n.Name) {
							exported = append(exported, filepath.Base(p)+"."+n.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(exported)
	if len(exported) < 20 {
		t.Fatalf("found %d exported errors in %v: the parse is wrong", len(exported), pkgs)
	}
	seen := map[string]bool{}
	for _, name := range exported {
		seen[name] = true
		_, allowed := unmapped[name]
		switch {
		case mapped[name] && allowed:
			t.Errorf("%s is in the errnos table and in unmapped", name)
		case !mapped[name] && !allowed:
			t.Errorf("%s is neither in the errnos table (internal/fs/errno.go) nor in unmapped with a reason", name)
		}
	}
	for name, why := range unmapped {
		if !seen[name] {
			t.Errorf("unmapped names %s, which no package fs imports exports", name)
		}
		if why == "" {
			t.Errorf("unmapped %s has no reason", name)
		}
	}
}
