package web_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryEndpointIsDocumented keeps the API reference in step with the
// routes: every JSON endpoint appears in docs/api.md as "`METHOD /path`"
// (parameters as {name}), the environment pools' allocation routes as the
// seed writes them, without /api/v1.
func TestEveryEndpointIsDocumented(t *testing.T) {
	t.Parallel()
	b := setup(t)
	read := func(path string) string {
		doc, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(doc)
	}
	api := read("../docs/api.md")
	param := regexp.MustCompile(`:([a-z_]+)`)
	checked := 0
	for _, r := range b.server.Routes() {
		path := r.Path
		if !strings.HasPrefix(path, "/api/v1/") && path != "/webhooks/github" || path == "/api/v1/*" {
			continue
		}
		want := path
		if rest, ok := strings.CutPrefix(path, "/api/v1"); ok && (strings.HasPrefix(rest, "/allocations") || rest == "/pools") {
			want = rest // seed 001's routes, served under /api/v1 too
		}
		want = r.Method + " " + param.ReplaceAllString(want, "{$1}")
		require.Contains(t, api, "`"+want, "the endpoint %s is not documented", want)
		checked++
	}
	require.Greater(t, checked, 20)
}

// TestEveryLogEventIsDocumented keeps docs/log.md's table of events in step
// with the code: every event name the code appends to the deployment log is
// written there as "`name`". It reads the source, since many events are
// written only deep inside a flow (a failed cleanup, a timed-out vote):
//
//   - constants named Event… or …Event (infra.EventRunQueued, demo's
//     loadedEvent), except internal/github's, which name GitHub's webhooks;
//   - string literals given as the Event of a models.LogEntry;
//   - string literals passed to a parameter named event (jobAction);
//   - internal/approvals' "<kind>-voted", "-approved", "-rejected", for the
//     name of every approvals.Kind (a type …Kind with a Name method).
func TestEveryLogEventIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/log.md")
	require.NoError(t, err)
	events := loggedEvents(t, "..")
	t.Logf("%d events written by the code: %v", len(events), slices.Sorted(maps.Keys(events)))
	for _, known := range []string{"user-logged-in", "job-retried", "river-ui-action", "execution-voted", "environment-cleanup-failed", "demo-infra-loaded"} {
		require.Contains(t, events, known, "the scan of the source misses %s: fix loggedEvents", known)
	}
	var missing []string
	for _, e := range slices.Sorted(maps.Keys(events)) {
		if !strings.Contains(string(doc), "`"+e+"`") {
			missing = append(missing, e+" (written in "+events[e]+")")
		}
	}
	require.Empty(t, missing, "docs/log.md's table of events lacks these events; add a row for each (target, actor, when)")
}

// loggedEvents maps each event name the code under root writes to the
// deployment log to a file that writes it.
func loggedEvents(t *testing.T, root string) map[string]string {
	t.Helper()
	type pkg struct {
		files []*ast.File
		paths []string
	}
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "e2e", "internal/github", "internal/servertest", "internal/testdb", "client", "node_modules":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_templ.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		p := pkgs[filepath.Dir(rel)]
		if p == nil {
			p = &pkg{}
			pkgs[filepath.Dir(rel)] = p
		}
		p.files, p.paths = append(p.files, f), append(p.paths, rel)
		return nil
	})
	require.NoError(t, err)

	events := map[string]string{}
	kinds := map[string]string{} // approvals kinds' names
	var suffixes []string        // what approvals appends to a kind's name
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	eventName := regexp.MustCompile(`^[a-z]+(-[a-z]+)+$`)
	for dir, p := range pkgs {
		consts := map[string]string{}
		eventParams := map[string]int{} // function name → index of its event parameter
		for _, f := range p.files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						vs, ok := spec.(*ast.ValueSpec)
						if !ok || d.Tok != token.CONST {
							continue
						}
						for i, name := range vs.Names {
							if i < len(vs.Values) {
								if s, ok := str(vs.Values[i]); ok {
									consts[name.Name] = s
								}
							}
						}
					}
				case *ast.FuncDecl:
					i := 0
					for _, field := range d.Type.Params.List {
						for _, name := range field.Names {
							if name.Name == "event" {
								eventParams[d.Name.Name] = i
							}
							i++
						}
						if len(field.Names) == 0 {
							i++
						}
					}
				}
			}
		}
		for name, v := range consts {
			if (strings.HasPrefix(name, "Event") || strings.HasSuffix(name, "Event")) && eventName.MatchString(v) {
				events[v] = dir
			}
		}
		for i, f := range p.files {
			path := p.paths[i]
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					typ := ""
					switch tt := n.Type.(type) {
					case *ast.Ident:
						typ = tt.Name
					case *ast.SelectorExpr:
						typ = tt.Sel.Name
					}
					if typ != "LogEntry" {
						return true
					}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Event" {
								if s, ok := str(kv.Value); ok {
									events[s] = path
								}
							}
						}
					}
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					}
					if i, ok := eventParams[name]; ok && i < len(n.Args) {
						if s, ok := str(n.Args[i]); ok && eventName.MatchString(s) {
							events[s] = path
						}
					}
				case *ast.BinaryExpr:
					if s, ok := str(n.Y); ok && n.Op == token.ADD && dir == filepath.Join("internal", "approvals") && strings.HasPrefix(s, "-") {
						suffixes = append(suffixes, s)
					}
				case *ast.FuncDecl:
					if n.Name.Name != "Name" || n.Recv == nil || len(n.Recv.List) != 1 || n.Body == nil || len(n.Body.List) != 1 {
						return true
					}
					recv := n.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); !ok || !strings.HasSuffix(id.Name, "Kind") {
						return true
					}
					if ret, ok := n.Body.List[0].(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
						if s, ok := str(ret.Results[0]); ok {
							kinds[s] = path
						} else if id, ok := ret.Results[0].(*ast.Ident); ok && consts[id.Name] != "" {
							kinds[consts[id.Name]] = path
						}
					}
				}
				return true
			})
		}
	}
	require.NotEmpty(t, suffixes, "internal/approvals no longer writes <kind>-voted: fix loggedEvents")
	for kind, path := range kinds {
		for _, suffix := range suffixes {
			events[kind+suffix] = path + " (through internal/approvals)"
		}
	}
	return events
}
