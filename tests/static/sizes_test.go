package static

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// Functions a reader can hold: no Go function of the lab's code over 60
// lines (from func to its closing brace), as scripts/sizes.py holds its
// Python. Test functions are counted and logged, not held to it.
func TestGoFunctionSizes(t *testing.T) {
	const limit = 60
	root := lab.Root(t)
	fset := token.NewFileSet()
	tests := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "results" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			switch {
			case n <= limit:
			case strings.HasSuffix(path, "_test.go"):
				tests++
			default:
				t.Errorf("%s: %s is %d lines, over %d: split it into named steps", rel, fn.Name.Name, n, limit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d test functions over %d lines (not held to it)", tests, limit)
}
