package tasks

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// taskWrites are the store's writes of task rows.
var taskWrites = map[string]bool{"AddTask": true, "PutTask": true}

// TestSoleWriter holds this package to being the one writer of tasks:
// no other package under internal/ (tests and the store aside) adds or
// writes a task row, and here every write goes through Manager.write or
// Add. A finding is named by file and line.
func TestSoleWriter(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "store" || strings.HasPrefix(rel, "store"+string(filepath.Separator)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok {
				return true
			}
			writer := rel == "tasks" || strings.HasPrefix(rel, "tasks"+string(filepath.Separator))
			allowed := writer && (fn.Name.Name == "write" || fn.Name.Name == "Add")
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && taskWrites[sel.Sel.Name] && !allowed {
					found = append(found, fmt.Sprintf("%s: %s in %s writes a task outside the tasks component's write", fset.Position(call.Pos()), sel.Sel.Name, fn.Name.Name))
				}
				return true
			})
			return false
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}
