// Command codemetrics measures the density of karpfunc's production code:
// cyclomatic complexity, one-letter locals and parallel assignments, figures
// to compare with Karpenter core's and karpenter-provider-azure's.
//
//	go run ./hack/codemetrics [-top N] [-over C] [dir ...]
//
// With no directory it walks the module from the current directory. Production
// code is every .go file except _test.go files, generated files
// (zz_generated*.go and files marked "Code generated ... DO NOT EDIT."),
// and anything under tools/ (the vendored-by-module tool builds), testdata/,
// vendor/ and hidden directories.
//
// The figures, and how each is counted:
//
//   - functions: every function or method declaration with a body. Function
//     literals are not functions of their own; their branches count towards the
//     declaration that holds them, as gocyclo does.
//   - cyclomatic complexity: gocyclo's rule (github.com/fzipp/gocyclo v0.6.0,
//     the one golangci-lint's gocyclo linter runs): 1, plus 1 for each if, for,
//     range, case clause other than default, select comm clause other than
//     default, && and ||. The share and count above 11 (the anchors' gate),
//     and the counts above 20 and 30, are printed.
//   - one-letter local variables: of all local variable declarations, the share
//     whose name is one letter. A declaration is a name newly bound inside a
//     function body (function literals' bodies included) by := (each
//     non-blank name on the left, including range keys and values bound with
//     := and type-switch bindings), or by a var statement. Receivers, parameters and named
//     results are not locals and are not counted; nor is the blank identifier.
//     A name on the left of := that is already declared in the same scope is
//     reused, not declared, and is not counted.
//   - parallel assignments per 1,000 lines: assignment statements (= or :=)
//     with more than one expression on each side, like a, b := x, y
//     (a multi-value call a, b := f() has one right-hand side and does not
//     count), per 1,000 physical lines of production code.
//
// -top N lists the N most complex functions; -over C lists every function with
// complexity above C (both as file:line package.Func complexity).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// function is one measured function declaration.
type function struct {
	name       string // pkg.Func or pkg.Recv.Method
	position   string // file:line
	complexity int
}

// totals accumulates the figures over every file.
type totals struct {
	files, lines        int
	functions           []function
	locals, oneLetter   int
	parallelAssignments int
}

func main() {
	top := flag.Int("top", 0, "list the `N` most complex functions")
	over := flag.Int("over", 0, "list every function with complexity above `C` (0: none)")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var sum totals
	for _, root := range roots {
		if err := measureTree(root, &sum); err != nil {
			fmt.Fprintln(os.Stderr, "codemetrics:", err)
			os.Exit(1)
		}
	}
	report(os.Stdout, &sum, *top, *over)
}

// measureTree parses every production file under root into sum.
func measureTree(root string, sum *totals) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() {
			if path != root && skipDir(entry.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !isProduction(entry.Name()) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(file) {
			return nil
		}
		sum.files++
		sum.lines += strings.Count(string(src), "\n")
		measureFile(fset, file, sum)
		return nil
	})
}

// skipDir reports whether a directory holds no production code of ours.
func skipDir(name string) bool {
	switch name {
	case "tools", "testdata", "vendor", "node_modules":
		return true
	}
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// isProduction reports whether a file name is a non-test, non-generated Go file.
func isProduction(name string) bool {
	return strings.HasSuffix(name, ".go") &&
		!strings.HasSuffix(name, "_test.go") &&
		!strings.HasPrefix(name, "zz_generated")
}

// measureFile adds one file's functions, locals and parallel assignments.
func measureFile(fset *token.FileSet, file *ast.File, sum *totals) {
	pkg := file.Name.Name
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		sum.functions = append(sum.functions, function{
			name:       pkg + "." + funcName(fn),
			position:   shortPosition(fset.Position(fn.Pos())),
			complexity: complexity(fn),
		})
	}
	ast.Inspect(file, func(node ast.Node) bool {
		switch stmt := node.(type) {
		case *ast.AssignStmt:
			if len(stmt.Lhs) > 1 && len(stmt.Rhs) > 1 {
				sum.parallelAssignments++
			}
		case *ast.FuncDecl:
			if stmt.Body != nil {
				countLocals(stmt.Body, sum)
			}
		}
		return true
	})
}

// funcName is Func, or Recv.Method for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	for {
		switch expr := recv.(type) {
		case *ast.StarExpr:
			recv = expr.X
			continue
		case *ast.IndexExpr:
			recv = expr.X
			continue
		case *ast.IndexListExpr:
			recv = expr.X
			continue
		case *ast.Ident:
			return expr.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

func shortPosition(pos token.Position) string {
	return fmt.Sprintf("%s:%d", filepath.ToSlash(filepath.Clean(pos.Filename)), pos.Line)
}

// complexity is gocyclo's cyclomatic complexity of one declaration.
func complexity(fn *ast.FuncDecl) int {
	count := 1
	ast.Inspect(fn, func(node ast.Node) bool {
		switch typed := node.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			count++
		case *ast.CaseClause:
			if typed.List != nil {
				count++
			}
		case *ast.CommClause:
			if typed.Comm != nil {
				count++
			}
		case *ast.BinaryExpr:
			if typed.Op == token.LAND || typed.Op == token.LOR {
				count++
			}
		}
		return true
	})
	return count
}

// countLocals counts the local variable declarations in a function body (see
// the package comment for what counts). Scopes are tracked so that a name
// reused on the left of := is not counted twice.
func countLocals(body *ast.BlockStmt, sum *totals) {
	declare := func(names ...*ast.Ident) {
		for _, name := range names {
			if name == nil || name.Name == "_" {
				continue
			}
			sum.locals++
			if len([]rune(name.Name)) == 1 {
				sum.oneLetter++
			}
		}
	}
	ast.Inspect(body, func(node ast.Node) bool {
		switch stmt := node.(type) {
		case *ast.AssignStmt:
			declare(definedNames(stmt)...)
		case *ast.RangeStmt:
			if stmt.Tok == token.DEFINE {
				key, _ := stmt.Key.(*ast.Ident)
				value, _ := stmt.Value.(*ast.Ident)
				declare(key, value)
			}
		case *ast.DeclStmt:
			if gen, ok := stmt.Decl.(*ast.GenDecl); ok && gen.Tok == token.VAR {
				for _, spec := range gen.Specs {
					declare(spec.(*ast.ValueSpec).Names...)
				}
			}
		}
		return true
	})
}

// definedNames are the names a := statement newly declares.
func definedNames(stmt *ast.AssignStmt) []*ast.Ident {
	if stmt.Tok != token.DEFINE {
		return nil
	}
	var names []*ast.Ident
	for _, lhs := range stmt.Lhs {
		if ident, ok := lhs.(*ast.Ident); ok && isNewDefinition(ident) {
			names = append(names, ident)
		}
	}
	return names
}

// isNewDefinition reports whether an identifier on the left of := declares a
// new variable rather than reusing one: the parser's object resolution gives a
// new object whose declaration is this very assignment.
func isNewDefinition(ident *ast.Ident) bool {
	if ident.Name == "_" {
		return false
	}
	if ident.Obj == nil {
		return true
	}
	assign, ok := ident.Obj.Decl.(*ast.AssignStmt)
	if !ok {
		return true
	}
	for _, lhs := range assign.Lhs {
		if lhs == ident {
			return true
		}
	}
	return false
}

func report(out *os.File, sum *totals, top, over int) {
	funcs := sum.functions
	var over11, over20, over30 int
	for _, fn := range funcs {
		if fn.complexity > 11 {
			over11++
		}
		if fn.complexity > 20 {
			over20++
		}
		if fn.complexity > 30 {
			over30++
		}
	}
	fmt.Fprintf(out, "files                              %d\n", sum.files)
	fmt.Fprintf(out, "lines                              %d\n", sum.lines)
	fmt.Fprintf(out, "functions                          %d\n", len(funcs))
	fmt.Fprintf(out, "complexity > 11                    %.1f %% (%d)\n", percent(over11, len(funcs)), over11)
	fmt.Fprintf(out, "complexity > 20 / > 30             %d / %d\n", over20, over30)
	fmt.Fprintf(out, "one-letter local variables         %.1f %% (%d of %d)\n", percent(sum.oneLetter, sum.locals), sum.oneLetter, sum.locals)
	fmt.Fprintf(out, "parallel assignments per 1,000 lines %.1f (%d)\n", perThousand(sum.parallelAssignments, sum.lines), sum.parallelAssignments)

	sorted := append([]function(nil), funcs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].complexity > sorted[j].complexity })
	if top > 0 {
		fmt.Fprintf(out, "\nmost complex:\n")
		for i := 0; i < top && i < len(sorted); i++ {
			fmt.Fprintf(out, "%4d  %s  %s\n", sorted[i].complexity, sorted[i].name, sorted[i].position)
		}
	}
	if over > 0 {
		fmt.Fprintf(out, "\ncomplexity > %d:\n", over)
		for _, fn := range sorted {
			if fn.complexity <= over {
				break
			}
			fmt.Fprintf(out, "%4d  %s  %s\n", fn.complexity, fn.name, fn.position)
		}
	}
}

func percent(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

func perThousand(count, lines int) float64 {
	if lines == 0 {
		return 0
	}
	return 1000 * float64(count) / float64(lines)
}
