package tgraph

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// skipDirs are never walked: version control, caches and downloads.
var skipDirs = map[string]bool{
	".git":              true,
	".terragrunt-cache": true,
	".terraform":        true,
	"node_modules":      true,
}

// unitFile names the file that makes a directory a unit (or unitJSONFile).
const unitFile = "terragrunt.hcl"

// unitFileIn is the configuration file of the unit at dir, terragrunt.hcl
// before terragrunt.hcl.json as Terragrunt looks, or "".
func (s *scanner) unitFileIn(dir string) string {
	for _, name := range []string{unitFile, unitJSONFile} {
		if f := path.Join(dir, name); s.files[f] {
			return f
		}
	}
	return ""
}

func isUnitFile(name string) bool { return name == unitFile || name == unitJSONFile }

// Scan discovers the units of the checkout at dir. It only reads files.
//
// A unit whose configuration cannot be evaluated does not stop the scan:
// Scan returns the graph, with that unit's Errors set, together with an
// error listing every broken unit's problems (errors.As finds the first
// *Error). Only a checkout that cannot be read or a dependency cycle
// returns no graph.
func Scan(dir string) (*Graph, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("scanning %s: %w", dir, err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("scanning %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("scanning %s: not a directory", dir)
	}
	return ScanFS(os.DirFS(abs), filepath.ToSlash(abs))
}

// ScanFS discovers the units in fsys, a checkout whose absolute path is root
// (what get_repo_root() and get_terragrunt_dir() answer with; tests use a
// made-up one such as "/repo").
func ScanFS(fsys fs.FS, root string) (*Graph, error) {
	s := newScanner(fsys, root)
	units, stacks, err := s.walk()
	if err != nil {
		return nil, fmt.Errorf("walking the checkout: %w", err)
	}
	if s.files[excludesFile] {
		src, err := fs.ReadFile(s.fsys, excludesFile)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", excludesFile, err)
		}
		s.excludes = parseExcludes(src)
		units = slices.DeleteFunc(units, func(j *unitJob) bool {
			if s.excludes.match(j.dir) {
				s.excluded[j.dir] = true
				return true
			}
			return false
		})
	}
	if len(stacks) > 0 {
		units = s.expandStacks(units, stacks)
		slices.SortFunc(units, func(a, b *unitJob) int { return strings.Compare(a.dir, b.dir) })
	}
	results := make([]*unitResult, len(units))
	all := make([]int, len(units))
	for i := range all {
		all[i] = i
	}
	s.evalUnits(units, all, results)
	return s.finish(units, results)
}

func newScanner(fsys fs.FS, root string) *scanner {
	s := &scanner{
		fsys:       fsys,
		root:       path.Clean("/" + strings.TrimPrefix(filepath.ToSlash(root), "/")),
		finds:      map[searchKey]*search{},
		files:      map[string]bool{},
		dirs:       map[string]bool{},
		parsed:     map[string]*parsedConfig{},
		targets:    map[string]*readTarget{},
		excluded:   map[string]bool{},
		jsonLines:  map[string][]int{},
		stackRoots: map[string]string{},
		workers:    runtime.GOMAXPROCS(0),
	}
	s.prefix = strings.TrimSuffix(s.root, "/") + "/"
	return s
}

// finish builds and orders the graph of the evaluated candidates, keeping
// what Update needs to start from it.
func (s *scanner) finish(units []*unitJob, results []*unitResult) (*Graph, error) {
	g, unitErrs := s.build(units, results)
	order, err := g.order()
	if err != nil {
		return nil, err
	}
	g.ordered = order
	g.pos = make(map[string]int, len(order))
	for i, u := range order {
		g.pos[u] = i
	}
	g.state = &scanState{s: s, units: units, results: results}
	return g, joinErrors(unitErrs)
}

// walk lists the checkout and finds the candidate units, sorted by path,
// and the stack files. The units' configurations are read and parsed by a
// pool of workers while the walk goes on.
func (s *scanner) walk() ([]*unitJob, []string, error) {
	var units []*unitJob
	var stacks []string
	jobs := make(chan *unitJob, 64)
	var wg sync.WaitGroup
	for range s.workers {
		wg.Go(func() {
			for j := range jobs {
				j.c, j.errs = s.parse(j.file, false)
			}
		})
	}
	err := fs.WalkDir(s.fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			s.dirs[p] = true
			return nil
		}
		s.files[p] = true
		switch d.Name() {
		case unitFile, unitJSONFile:
			// terragrunt.hcl, walked first, wins over terragrunt.hcl.json.
			if d.Name() == unitJSONFile && s.files[path.Join(path.Dir(p), unitFile)] {
				break
			}
			j := &unitJob{dir: path.Dir(p), file: p}
			units = append(units, j)
			jobs <- j
		case stackFile:
			stacks = append(stacks, p)
		}
		return nil
	})
	close(jobs)
	wg.Wait()
	slices.SortFunc(units, func(a, b *unitJob) int { return strings.Compare(a.dir, b.dir) })
	return units, stacks, err
}

// evalUnits evaluates the candidates of units at the indexes which, with a
// pool of workers, once every path of the checkout is known.
func (s *scanner) evalUnits(units []*unitJob, which []int, results []*unitResult) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(s.workers, max(len(which), 1)) {
		wg.Go(func() {
			tab := newFuncTable(s)
			for {
				k := int(next.Add(1)) - 1
				if k >= len(which) {
					return
				}
				i := which[k]
				results[i] = s.evalUnit(units[i], tab)
			}
		})
	}
	wg.Wait()
}

// scanner holds what one scan knows about the checkout. files and dirs are
// written by the walk only and read concurrently afterwards.
type scanner struct {
	fsys    fs.FS
	root    string
	prefix  string // root with a trailing slash
	workers int
	files   map[string]bool // repository-relative paths of every file
	dirs    map[string]bool // and of every directory, "." for the root
	// excluded are the unit directories .terragrunt-excludes leaves out,
	// by its patterns.
	excluded map[string]bool
	excludes excludes
	// jsonLines map the lines of JSON files' translations to theirs.
	jsonLines map[string][]int
	// stackRoots map the directories stacks generate to the source
	// directories they copy; written before evaluation starts.
	stackRoots map[string]string

	mu      sync.Mutex
	parsed  map[string]*parsedConfig
	targets map[string]*readTarget
	finds   map[searchKey]*search
}

type parsedConfig struct {
	once sync.Once
	c    *config
	errs []*Error
}

// config parses the file at rel once per scan.
func (s *scanner) config(rel string) (*config, []*Error) {
	s.mu.Lock()
	p := s.parsed[rel]
	if p == nil {
		p = &parsedConfig{}
		s.parsed[rel] = p
	}
	s.mu.Unlock()
	p.once.Do(func() { p.c, p.errs = s.parse(rel, true) })
	return p.c, p.errs
}

// parse reads and parses the file at rel; withInputs keeps its inputs.
// A .json file is read in HCL's JSON syntax.
func (s *scanner) parse(rel string, withInputs bool) (*config, []*Error) {
	src, err := s.readFile(rel)
	if err != nil {
		return nil, []*Error{{File: rel, Message: err.Error()}}
	}
	if strings.HasSuffix(rel, ".json") {
		t, err := translateJSON(src)
		if err != nil {
			e := err.(*Error)
			return nil, []*Error{{File: rel, Line: e.Line, Message: e.Message}}
		}
		s.mu.Lock()
		s.jsonLines[rel] = t.lines
		s.mu.Unlock()
		return parseConfig(rel, t.src, withInputs) // errors' lines are mapped back in build
	}
	return parseConfig(rel, src, withInputs)
}

// jsonLine maps an error in a JSON file, located in its translation, to
// the file's own line.
func (s *scanner) jsonLine(e *Error) {
	s.mu.Lock()
	lines := s.jsonLines[e.File]
	s.mu.Unlock()
	if e.Line > 0 && e.Line < len(lines) {
		e.Line = lines[e.Line]
	}
}

func (s *scanner) abs(rel string) string {
	if rel == "." {
		return s.root
	}
	return s.prefix + rel
}

// rel maps an absolute path to the repository, reporting whether it is
// inside it.
func (s *scanner) rel(abs string) (string, bool) {
	if abs == s.root {
		return ".", true
	}
	if strings.HasPrefix(abs, s.prefix) {
		return abs[len(s.prefix):], true
	}
	return abs, false
}

func (s *scanner) inside(abs string) bool {
	_, ok := s.rel(abs)
	return ok
}

// resolve makes p absolute against the directory base and cleans it.
func resolve(base, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(base, p)
}

// relPath is target relative to base; both are clean absolute paths.
func relPath(base, target string) string {
	if base == target {
		return "."
	}
	split := func(p string) []string {
		if p == "/" {
			return nil
		}
		return strings.Split(p[1:], "/")
	}
	b, t := split(base), split(target)
	i := 0
	for i < len(b) && i < len(t) && b[i] == t[i] {
		i++
	}
	parts := make([]string, 0, len(b)-i+len(t)-i)
	for range b[i:] {
		parts = append(parts, "..")
	}
	return strings.Join(append(parts, t[i:]...), "/")
}

// configTarget resolves a read_terragrunt_config argument: a directory
// means its terragrunt.hcl.
func (s *scanner) configTarget(base, p string) (abs, rel string, ok bool) {
	abs = resolve(base, p)
	rel, in := s.rel(abs)
	if !in {
		return abs, abs, false
	}
	if s.dirs[rel] {
		if f := s.unitFileIn(rel); f != "" {
			rel = f
		} else {
			rel = path.Join(rel, unitFile)
		}
		abs = s.abs(rel)
	}
	return abs, rel, s.files[rel]
}

// shown is how a path from the configuration appears in messages: as
// written when relative, else relative to the repository.
func (s *scanner) shown(p string) string {
	if !path.IsAbs(p) {
		return p
	}
	if rel, ok := s.rel(path.Clean(p)); ok {
		return rel
	}
	return p
}

// collected is what evaluating a configuration and its includes yields.
type collected struct {
	reads    []string // files, and directories with a trailing slash
	probes   []string // optional reads that found nothing
	searches []*search
	included []string
	errs     []*Error
}

type unitResult struct {
	collected
	edges []edge
}

// edge is a dependency of a unit on another, and where it is declared.
type edge struct {
	to   string
	file string
	line int
	dep  string // the dependency block's name; "" for dependencies { paths }
}

// via names what declares the edge, for messages.
func (e edge) via() string {
	if e.dep == "" {
		return "dependencies"
	}
	return fmt.Sprintf("dependency %q", e.dep)
}

// unitJob is a candidate unit and its parsed configuration.
type unitJob struct {
	dir  string
	file string // terragrunt.hcl or terragrunt.hcl.json in dir
	// values and stackFiles are set for a unit a stack generates: its
	// unit block's values and the stack files declaring it.
	values     cty.Value
	stackFiles []string
	c          *config
	errs       []*Error
}

// evalUnit evaluates a parsed unit: its includes, reads, dependencies and
// module source.
func (s *scanner) evalUnit(j *unitJob, tab *funcTable) *unitResult {
	dir, c, rel := j.dir, j.c, j.file
	out := &unitResult{}
	out.reads = append(out.reads, j.stackFiles...)
	if len(j.errs) > 0 {
		out.errs = j.errs
		out.reads = append(out.reads, dirKey(dir))
		return out
	}
	cfg := &cfgCtx{path: s.abs(rel), dir: s.abs(dir), orig: s.abs(dir), funcs: tab, values: j.values}
	fr := s.newFrame(c, cfg, nil)
	s.resolveIncludes(fr, rel, &out.collected)
	s.collectReads(fr, &out.collected)
	s.collectDeps(fr, out)
	s.collectSource(fr, &out.collected)
	out.searches = distinct(append(out.searches, cfg.searches...))
	out.reads = append(out.reads, dirKey(dir))
	if len(s.stackRoots) > 0 {
		// What a generated unit reads are the files it is a copy of.
		for i, r := range out.reads {
			if d, isDir := strings.CutSuffix(r, "/"); isDir {
				out.reads[i] = dirKey(s.realPath(d))
			} else {
				out.reads[i] = s.realPath(r)
			}
		}
		for i, p := range out.probes {
			out.probes[i] = s.realPath(p)
		}
	}
	slices.Sort(out.reads)
	out.reads = slices.Compact(out.reads)
	slices.Sort(out.probes)
	out.probes = slices.Compact(out.probes)
	// Included files are evaluated for each unit; say for which.
	for i, e := range out.errs {
		if slices.Contains(out.included, e.File) {
			out.errs[i] = &Error{File: e.File, Line: e.Line, Message: e.Message + " (evaluating for unit " + dir + ")"}
		}
	}
	return out
}

// distinct drops the repeated searches of a unit (a search is cached per
// scan, so a repeated one is the same pointer); units make a handful.
func distinct(searches []*search) []*search {
	out := searches[:0]
	for _, sr := range searches {
		if !slices.Contains(out, sr) {
			out = append(out, sr)
		}
	}
	return out
}

// resolveIncludes evaluates the include blocks of fr, the file at rel.
// Like Terragrunt, it allows one level: an included file with include
// blocks of its own is an error, on the including file.
func (s *scanner) resolveIncludes(fr *frame, rel string, out *collected) {
	for _, blk := range fr.c.includes {
		what := func() string { return fmt.Sprintf("include %q", blk.name) }
		p, err := fr.evalString(blk.path.Expr)
		if err != nil {
			out.errs = append(out.errs, wrap(err, blk.path.SrcRange, what()+": path"))
			continue
		}
		incRel, ok := s.rel(resolve(path.Dir(fr.abs), p))
		switch {
		case !ok:
			out.errs = append(out.errs, errorAt(blk.path.SrcRange, "%s: path %s is outside the repository", what(), p))
			continue
		case !s.files[incRel]:
			out.errs = append(out.errs, errorAt(blk.path.SrcRange, "%s: path %s does not exist", what(), s.shown(p)))
			continue
		case incRel == rel:
			out.errs = append(out.errs, errorAt(blk.path.SrcRange, "%s: %s includes itself", what(), rel))
			continue
		}
		c, errs := s.config(incRel)
		if len(errs) > 0 {
			out.errs = append(out.errs, errs...)
			continue
		}
		inc := &incFrame{blk: blk, fr: s.newFrame(c, fr.cfg, fr), strategy: "shallow"}
		if blk.expose != nil {
			if inc.expose, err = fr.evalBool(blk.expose.Expr); err != nil {
				out.errs = append(out.errs, wrap(err, blk.expose.SrcRange, what()+": expose"))
			}
		}
		if blk.strategy != nil {
			st, err := fr.evalString(blk.strategy.Expr)
			switch {
			case err != nil:
				out.errs = append(out.errs, wrap(err, blk.strategy.SrcRange, what()+": merge_strategy"))
			case st == "no_merge" || st == "shallow" || st == "deep" || st == "deep_map_only":
				inc.strategy = st
			default:
				out.errs = append(out.errs, errorAt(blk.strategy.SrcRange, "%s: unknown merge_strategy %q", what(), st))
			}
		}
		fr.incs = append(fr.incs, inc)
		out.reads = append(out.reads, incRel)
		out.included = append(out.included, incRel)
		if len(c.includes) > 0 {
			second := c.includes[0]
			p2, err := inc.fr.evalString(second.path.Expr)
			if err != nil {
				p2 = inc.fr.text(second.path.Expr.Range())
			} else if r2, ok := s.rel(resolve(path.Dir(inc.fr.abs), p2)); ok {
				p2 = r2
			}
			out.errs = append(out.errs, errorAt(blk.path.SrcRange,
				"%s includes %s, which itself includes %s. Only one level of includes is allowed.", rel, incRel, p2))
		}
	}
}

// collectReads evaluates the paths of every file-reading call in fr and the
// files it includes.
func (s *scanner) collectReads(fr *frame, out *collected) {
	var loops []*hclsyntax.ForExpr
	for _, rc := range fr.c.reads {
		if rc.loop != nil {
			if !slices.Contains(loops, rc.loop) {
				loops = append(loops, rc.loop)
				s.collectLoopReads(fr, rc.loop, out)
			}
			continue
		}
		if len(rc.call.Args) == 0 {
			out.errs = append(out.errs, errorAt(rc.call.NameRange, "%s needs a path", rc.fn))
			continue
		}
		p, err := fr.evalString(rc.call.Args[0])
		if err != nil {
			if !rc.guarded { // inside try() or can(), Terragrunt takes the fallback
				out.errs = append(out.errs, wrap(err, rc.call.NameRange, rc.fn))
			}
			continue
		}
		if rc.fn != "read_terragrunt_config" {
			s.noteRead(rc.fn, resolve(fr.cfg.dir, p), p, rc.call.NameRange, out)
			continue
		}
		abs, rel, ok := s.configTarget(fr.cfg.dir, p)
		switch {
		case ok && slices.Contains(fr.cfg.stack, abs) || abs == fr.cfg.path:
			out.errs = append(out.errs, errorAt(rc.call.NameRange, "read_terragrunt_config(%q): read cycle through %s", p, rel))
		case ok:
			out.reads = append(out.reads, rel)
			t := s.readTarget(abs, rel, fr.cfg)
			out.reads = append(out.reads, t.reads...)
			out.probes = append(out.probes, t.probes...)
			out.searches = append(out.searches, t.searches...)
			out.errs = append(out.errs, t.errs...)
		case !s.inside(abs):
			out.errs = append(out.errs, errorAt(rc.call.NameRange, "read_terragrunt_config(%q) reads outside the repository", p))
		case rc.guarded || len(rc.call.Args) > 1:
			out.probes = append(out.probes, rel)
		default:
			out.errs = append(out.errs, errorAt(rc.call.NameRange, "read_terragrunt_config(%q): %s does not exist", p, rel))
		}
	}
	for _, a := range fr.c.varFiles {
		files, err := fr.evalStrings(a.Expr)
		if err != nil {
			out.errs = append(out.errs, wrap(err, a.SrcRange, "extra_arguments: "+a.Name))
			continue
		}
		for _, p := range files {
			rel, ok := s.rel(resolve(fr.cfg.dir, p))
			switch {
			case !ok:
				out.errs = append(out.errs, errorAt(a.SrcRange, "extra_arguments: %s: %s is outside the repository", a.Name, p))
			case s.files[rel]:
				out.reads = append(out.reads, rel)
			case a.Name == "optional_var_files":
				out.probes = append(out.probes, rel)
			default:
				out.errs = append(out.errs, errorAt(a.SrcRange, "extra_arguments: %s: %s does not exist", a.Name, s.shown(p)))
			}
		}
	}
	for _, inc := range fr.incs {
		s.collectReads(inc.fr, out)
	}
}

// noteRead records a file-reading call's target abs (p as written).
func (s *scanner) noteRead(fn, abs, p string, rng hcl.Range, out *collected) {
	rel, ok := s.rel(abs)
	switch {
	case !ok:
		out.errs = append(out.errs, errorAt(rng, "%s(%q) reads outside the repository", fn, p))
	case s.files[rel]:
		out.reads = append(out.reads, rel)
	case s.dirs[rel]:
		out.reads = append(out.reads, dirKey(rel))
	default:
		out.probes = append(out.probes, rel)
	}
}

// collectLoopReads evaluates a for expression whose reading calls take
// their paths from its variables, noting the path of every call made.
func (s *scanner) collectLoopReads(fr *frame, loop *hclsyntax.ForExpr, out *collected) {
	tab := fr.cfg.funcs
	prev := tab.record
	tab.record = func(fn, abs string) { s.noteRead(fn, abs, abs, loop.OpenRange, out) }
	_, err := fr.eval(loop)
	tab.record = prev
	if err != nil {
		out.errs = append(out.errs, wrap(err, loop.OpenRange, "for expression reading files"))
	}
}

// readTarget is a read_terragrunt_config target, evaluated once per scan in
// its own context, as Terragrunt does.
type readTarget struct {
	reads    []string
	probes   []string
	searches []*search
	errs     []*Error
	value    cty.Value
}

func (s *scanner) readTarget(abs, rel string, from *cfgCtx) *readTarget {
	c, errs := s.config(rel)
	if len(errs) > 0 {
		return &readTarget{errs: errs, value: failed(errs[0])}
	}
	key, orig := rel, ""
	if c.usesOrig {
		key, orig = rel+"\x00"+from.orig, from.orig
	}
	s.mu.Lock()
	t := s.targets[key]
	s.mu.Unlock()
	if t != nil {
		return t
	}
	if slices.Contains(from.stack, abs) {
		err := &Error{File: rel, Message: "read_terragrunt_config cycle through " + rel}
		return &readTarget{errs: []*Error{err}, value: failed(err)}
	}
	cfg := &cfgCtx{path: abs, dir: path.Dir(abs), orig: orig, stack: append(slices.Clip(from.stack), abs), funcs: from.funcs}
	fr := s.newFrame(c, cfg, nil)
	var out collected
	s.resolveIncludes(fr, rel, &out)
	s.collectReads(fr, &out)
	obj := map[string]cty.Value{"locals": fr.allLocals()}
	if in, ok := fr.mergedInputs(); ok {
		obj["inputs"] = in
	}
	t = &readTarget{reads: out.reads, probes: out.probes, searches: append(out.searches, cfg.searches...), errs: out.errs, value: cty.ObjectVal(obj)}
	s.mu.Lock()
	if prev := s.targets[key]; prev != nil {
		t = prev
	} else {
		s.targets[key] = t
	}
	s.mu.Unlock()
	return t
}

// mergedInputs is the inputs attribute of fr merged over those of the files
// it includes, key by key.
func (fr *frame) mergedInputs() (cty.Value, bool) {
	var parts []cty.Value
	for _, inc := range fr.incs {
		if inc.strategy == "no_merge" {
			continue
		}
		if v, ok := inc.fr.mergedInputs(); ok {
			parts = append(parts, v)
		}
	}
	if fr.c.inputs != nil {
		parts = append(parts, fr.attrValue(fr.c.inputs, "inputs"))
	}
	switch len(parts) {
	case 0:
		return cty.NilVal, false
	case 1:
		return parts[0], true
	}
	merged := map[string]cty.Value{}
	for _, p := range parts {
		if !p.IsWhollyKnown() || !(p.Type().IsObjectType() || p.Type().IsMapType()) || p.IsNull() {
			_, marks := p.UnmarkDeep()
			return cty.DynamicVal.WithMarks(marks), true
		}
		for k, v := range p.AsValueMap() {
			merged[k] = v
		}
	}
	return cty.ObjectVal(merged), true
}

type depRef struct {
	blk *dependencyBlock
	fr  *frame
}

type pathsRef struct {
	attr *hclsyntax.Attribute
	fr   *frame
}

// effectiveDeps merges dependency blocks: the including file wins over what
// it includes, later includes over earlier ones.
func effectiveDeps(fr *frame) []depRef {
	var out []depRef
	set := func(d depRef) {
		for i := range out {
			if out[i].blk.name == d.blk.name {
				out[i] = d
				return
			}
		}
		out = append(out, d)
	}
	for _, inc := range fr.incs {
		if inc.strategy != "no_merge" {
			for _, d := range effectiveDeps(inc.fr) {
				set(d)
			}
		}
	}
	for _, b := range fr.c.deps {
		set(depRef{blk: b, fr: fr})
	}
	return out
}

// effectivePaths merges dependencies { paths }: the including file's list
// replaces an included one, except that merge_strategy = "deep"
// concatenates.
func effectivePaths(fr *frame) []pathsRef {
	var out []pathsRef
	deep := false
	for _, inc := range fr.incs {
		if inc.strategy == "no_merge" {
			continue
		}
		sub := effectivePaths(inc.fr)
		if len(sub) == 0 {
			continue
		}
		if inc.strategy == "deep" {
			deep = true
			out = append(out, sub...)
		} else {
			out = sub
		}
	}
	if fr.c.depPaths == nil {
		return out
	}
	own := pathsRef{attr: fr.c.depPaths, fr: fr}
	if deep {
		return append(out, own)
	}
	return []pathsRef{own}
}

// effectiveSource is the terraform { source } that applies: the including
// file's, else the last included one's.
func effectiveSource(fr *frame) *pathsRef {
	if fr.c.source != nil {
		return &pathsRef{attr: fr.c.source, fr: fr}
	}
	var out *pathsRef
	for _, inc := range fr.incs {
		if inc.strategy == "no_merge" {
			continue
		}
		if src := effectiveSource(inc.fr); src != nil {
			out = src
		}
	}
	return out
}

func (s *scanner) collectDeps(fr *frame, out *unitResult) {
	for _, d := range effectiveDeps(fr) {
		e := edge{dep: d.blk.name}
		if a := d.blk.enabled; a != nil {
			on, err := d.fr.evalBool(a.Expr)
			if err != nil {
				out.errs = append(out.errs, wrap(err, a.SrcRange, e.via()+": enabled"))
				continue
			}
			if !on {
				continue
			}
		}
		a := d.blk.configPath
		p, err := d.fr.evalString(a.Expr)
		if err != nil {
			out.errs = append(out.errs, wrap(err, a.SrcRange, e.via()+": config_path"))
			continue
		}
		to, problem := s.unitDir(fr.cfg.dir, p)
		if problem != "" {
			out.errs = append(out.errs, errorAt(a.SrcRange, "%s: config_path %s %s", e.via(), s.shown(p), problem))
			continue
		}
		e.to, e.file, e.line = to, a.SrcRange.Filename, a.SrcRange.Start.Line
		out.edges = append(out.edges, e)
	}
	for _, pr := range effectivePaths(fr) {
		paths, err := pr.fr.evalStrings(pr.attr.Expr)
		if err != nil {
			out.errs = append(out.errs, wrap(err, pr.attr.SrcRange, "dependencies: paths"))
			continue
		}
		for _, p := range paths {
			to, problem := s.unitDir(fr.cfg.dir, p)
			if problem != "" {
				out.errs = append(out.errs, errorAt(pr.attr.SrcRange, "dependencies: path %s %s", s.shown(p), problem))
				continue
			}
			out.edges = append(out.edges, edge{to: to, file: pr.attr.SrcRange.Filename, line: pr.attr.SrcRange.Start.Line})
		}
	}
}

// unitDir resolves a dependency path to a unit directory, or says what is
// wrong with it.
func (s *scanner) unitDir(base, p string) (string, string) {
	rel, ok := s.rel(resolve(base, p))
	switch {
	case !ok:
		return "", "is outside the repository"
	case isUnitFile(path.Base(rel)) && s.files[rel]:
		return path.Dir(rel), ""
	case s.dirs[rel] && s.unitFileIn(rel) != "":
		return rel, ""
	}
	return "", "is not a directory with " + unitFile
}

// collectSource records the module directory a local terraform { source }
// copies. Remote sources read nothing from the checkout.
func (s *scanner) collectSource(fr *frame, out *collected) {
	src := effectiveSource(fr)
	if src == nil {
		return
	}
	v, err := src.fr.evalString(src.attr.Expr)
	if err != nil {
		if remotePrefix(src.attr.Expr) {
			return
		}
		out.errs = append(out.errs, wrap(err, src.attr.SrcRange, "terraform source"))
		return
	}
	if isRemote(v) {
		return
	}
	local := strings.TrimPrefix(strings.TrimPrefix(v, "file::"), "file://")
	if i := strings.IndexByte(local, '?'); i >= 0 {
		local = local[:i]
	}
	root, sub := local, ""
	if i := strings.Index(local, "//"); i >= 0 {
		root, sub = local[:i], strings.Trim(local[i+2:], "/")
	}
	if root == "" {
		root = "/"
	}
	rel, ok := s.rel(resolve(fr.cfg.dir, root))
	switch {
	case !ok:
		out.errs = append(out.errs, errorAt(src.attr.SrcRange, "terraform source %s is outside the repository", v))
	case !s.dirs[rel]:
		out.errs = append(out.errs, errorAt(src.attr.SrcRange, "terraform source %s: %s is not a directory", v, rel))
	case sub != "" && !s.dirs[path.Join(rel, sub)]:
		out.errs = append(out.errs, errorAt(src.attr.SrcRange, "terraform source %s: %s is not a directory", v, path.Join(rel, sub)))
	default:
		out.reads = append(out.reads, dirKey(rel))
	}
}

// dirKey is how a directory appears among reads: with a trailing slash.
func dirKey(rel string) string { return rel + "/" }

// isRemote reports whether a module source is fetched rather than read
// from the checkout: go-getter forced getters (git::, s3::, ...), URLs,
// the Terraform registry and the hosts go-getter detects.
func isRemote(src string) bool {
	if strings.HasPrefix(src, "file::") || strings.HasPrefix(src, "file://") {
		return false
	}
	if i := strings.Index(src, "::"); i > 0 && !strings.Contains(src[:i], "/") {
		return true
	}
	if i := strings.Index(src, "://"); i > 0 && !strings.ContainsAny(src[:i], "/.") {
		return true
	}
	for _, p := range []string{"tfr:", "git@", "github.com/", "gitlab.com/", "bitbucket.org/"} {
		if strings.HasPrefix(src, p) {
			return true
		}
	}
	return strings.Contains(src, ".amazonaws.com/") || strings.Contains(src, "storage.googleapis.com/")
}

// remotePrefix reports whether a template's literal beginning already
// shows the source is remote, so an unevaluable rest (a version from an
// environment variable, say) does not matter.
func remotePrefix(expr hclsyntax.Expression) bool {
	t, ok := expr.(*hclsyntax.TemplateExpr)
	if !ok || len(t.Parts) == 0 {
		return false
	}
	lit, ok := t.Parts[0].(*hclsyntax.LiteralValueExpr)
	if !ok || lit.Val.Type() != cty.String {
		return false
	}
	return isRemote(lit.Val.AsString())
}
