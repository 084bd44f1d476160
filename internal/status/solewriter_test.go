package status

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

// rowWrites are the store's writes of session and incarnation rows: only
// the writer (this package) and the store itself make them. Role rows
// (PutRole) are the role code's; deleting a role, which deletes its
// sessions' rows, is the writer's too (RoleDeleted), though a name
// alone cannot tell the store's DeleteRole from the slots verb here.
var rowWrites = map[string]bool{"PutSession": true, "PutIncarnation": true, "DeleteSession": true}

// TestSoleWriter holds status to being the one writer of session state:
// no other package under internal/ (tests aside) writes a session or an
// incarnation row, nor hands a function that changes a session (one
// taking a *herd.Session) to a call, as the generic update closures once
// did. A finding is named by file and line.
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
			switch {
			case rel == "status", rel == "store", strings.HasPrefix(rel, "store"+string(filepath.Separator)):
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
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && rowWrites[sel.Sel.Name] {
				found = append(found, fmt.Sprintf("%s: %s writes a row only status writes", fset.Position(call.Pos()), sel.Sel.Name))
			}
			for _, arg := range call.Args {
				if lit, ok := arg.(*ast.FuncLit); ok && takesSession(lit) {
					found = append(found, fmt.Sprintf("%s: a function that changes a session is handed to %s", fset.Position(lit.Pos()), callee(call)))
				}
			}
			return true
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

// takesSession reports whether a function literal takes a *herd.Session.
func takesSession(lit *ast.FuncLit) bool {
	for _, p := range lit.Type.Params.List {
		star, ok := p.Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Session" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "herd" {
				return true
			}
		}
	}
	return false
}

// callee names the function a call calls, for the message.
func callee(call *ast.CallExpr) string {
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		return fn.Sel.Name
	case *ast.Ident:
		return fn.Name
	}
	return "a call"
}
