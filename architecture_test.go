package herd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureNamesExist reads ARCHITECTURE.md and fails for every
// package, function, type or method it names in backticks that the tree
// no longer has: the page walks the code by real names, and a rename must
// take the page along. Checked: paths under internal/ and cmd/,
// `pkg.Name` and `pkg.Type.Method` where pkg is one of the module's
// packages, and bare Go names with a capital (declared somewhere); config
// keys, paths, environment variables and state or event words are not
// Go names and are left alone.
func TestArchitectureNamesExist(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	decl := declarations(t)
	names := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_./]*)`").FindAllStringSubmatch(string(doc), -1)
	checked := 0
	for _, m := range names {
		name := strings.TrimSuffix(m[1], "/")
		ok, isGo := decl.has(name)
		if !isGo {
			continue
		}
		checked++
		if !ok {
			t.Errorf("ARCHITECTURE.md names `%s`, which the tree does not have", m[1])
		}
	}
	if checked < 50 {
		t.Errorf("expected the page to name at least 50 packages and functions, checked %d", checked)
	}
}

// declared is what the module's non-test Go files declare.
type declared struct {
	dirs map[string]bool            // package directories, as "internal/x"
	pkgs map[string]map[string]bool // package name -> "Name" and "Type.Method"
	any  map[string]bool            // every declared name and method name
}

// has reports whether name exists, and whether it is a Go name at all.
func (d declared) has(name string) (ok, isGo bool) {
	if strings.HasPrefix(name, "internal/") || strings.HasPrefix(name, "cmd/") {
		return d.dirs[name], true
	}
	if strings.Contains(name, "/") {
		return false, false
	}
	pkg, rest, qualified := strings.Cut(name, ".")
	if qualified {
		names, known := d.pkgs[pkg]
		if !known {
			return false, false // a config key (probe.interval), not a package
		}
		return names[rest], true
	}
	if !goName.MatchString(name) {
		return false, false
	}
	return d.any[name] || d.pkgs[name] != nil, true
}

// goName matches a bare Go name as the page writes them: camel case with
// a capital (RecordDeath, launchLocked), not a word (failed) nor an
// environment variable (HERD_INCARNATION).
var goName = regexp.MustCompile(`^[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*$|^[A-Z][a-z0-9]+$`)

func declarations(t *testing.T) declared {
	t.Helper()
	d := declared{dirs: map[string]bool{}, pkgs: map[string]map[string]bool{}, any: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if strings.HasPrefix(e.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			d.dirs[filepath.ToSlash(path)] = true
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			// Of the tests, only their names: the page names the tests
			// that hold a rule (TestSoleWriter).
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && strings.HasPrefix(fn.Name.Name, "Test") {
					d.any[fn.Name.Name] = true
				}
			}
			return nil
		}
		names := d.pkgs[f.Name.Name]
		if names == nil {
			names = map[string]bool{}
			d.pkgs[f.Name.Name] = names
		}
		add := func(n string) { names[n], d.any[n] = true, true }
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				add(decl.Name.Name)
				if decl.Recv != nil && len(decl.Recv.List) > 0 {
					names[receiver(decl.Recv.List[0].Type)+"."+decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range decl.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						add(s.Name.Name)
						addFields(s, add)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// addFields adds a struct's fields and an interface's methods, which the
// page names too (cgroup.Containment.OOMKilled).
func addFields(s *ast.TypeSpec, add func(string)) {
	var list *ast.FieldList
	switch tt := s.Type.(type) {
	case *ast.StructType:
		list = tt.Fields
	case *ast.InterfaceType:
		list = tt.Methods
	}
	if list == nil {
		return
	}
	for _, f := range list.List {
		for _, n := range f.Names {
			add(n.Name)
			add(s.Name.Name + "." + n.Name) // the page's Type.Field, qualified by the package
		}
	}
}

// receiver is the type name of a method's receiver.
func receiver(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiver(e.X)
	case *ast.IndexExpr:
		return receiver(e.X)
	case *ast.IndexListExpr:
		return receiver(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
