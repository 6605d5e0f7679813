package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/skein-dev/skein"

// allowed lists, for each unit, the skein units it may import (directly or
// not). A unit is a top-level package, or one of the subpackages named
// here; other subpackages belong to their top-level package's unit. It is
// the table of docs/architecture.md, "Packages and who may import whom".
var allowed = map[string][]string{
	"structs":        {},
	"sched":          {"structs"},
	"fsm":            {"structs"},
	"gpu":            {"structs"},
	"cluster":        {},
	"trust":          {},
	"api":            {"structs"},
	"slurm":          {"structs"},
	"agent/runner":   {"structs", "agent/engine", "agent/cgroup"},
	"agent/engine":   {"structs"},
	"agent/cgroup":   {},
	"agent/peer":     {"structs", "fsm", "cluster", "api"},
	"agent/leader":   {"structs", "fsm", "sched", "cluster"},
	"agent/node":     {"structs", "fsm", "sched", "cluster", "gpu", "api", "agent/peer", "agent/runner", "agent/engine", "agent/cgroup"},
	"agent/secure":   {"structs", "fsm", "cluster", "api", "agent/peer", "trust"},
	"agent/server":   {"structs", "fsm", "sched", "cluster", "gpu", "api", "agent/peer", "agent/leader", "agent/secure", "agent/ui", "trust"},
	"agent/ingress":  {"structs", "api"},
	"agent/ui":       {"structs", "fsm", "gpu", "api"},
	"agent/metrics":  {"structs", "fsm", "cluster", "gpu"},
	"agent/overload": {},
	"agent": {"structs", "fsm", "sched", "cluster", "gpu", "api",
		"agent/runner", "agent/engine", "agent/cgroup", "agent/peer", "agent/leader", "agent/node", "agent/server", "agent/secure", "agent/ingress", "agent/ui", "agent/metrics", "agent/overload", "trust"},
	"cli": {"api", "structs", "slurm", "agent", "agent/runner", "agent/cgroup"}, // agent only for the agent and supervise commands, and to read a backup file (snapshot inspect)
	"internal": {"structs", "fsm", "sched", "cluster", "gpu", "api", "slurm", "agent", "cli",
		"agent/runner", "agent/engine", "agent/cgroup", "agent/peer", "agent/leader", "agent/node", "agent/server", "agent/secure", "agent/ingress", "agent/ui", "agent/metrics", "agent/overload", "trust"},
	"chaos": {"structs"}, // the container demo's test reads job states; the workload imports nothing
	"":      {"cli"},     // main.go
}

// testAllowed lists what tests of a top-level package may import besides
// what the package itself may: every test may use internal/testutil and
// internal/fsmtest (a real FSM filled by entries, for endpoint tests), and
// the chaos tests drive the cluster through its API client.
var testAllowed = map[string][]string{
	"*":     {"internal/testutil", "internal/fsmtest"},
	"chaos": {"api"},
}

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// unit returns the unit an import path belongs to, and false for a path
// outside the module.
func unit(importPath string) (string, bool) {
	if importPath == module {
		return "", true
	}
	rest, ok := strings.CutPrefix(importPath, module+"/")
	if !ok {
		return "", false
	}
	top, sub, _ := strings.Cut(rest, "/")
	if sub != "" {
		name, _, _ := strings.Cut(sub, "/")
		if _, own := allowed[top+"/"+name]; own {
			return top + "/" + name, true
		}
	}
	return top, true
}

// listPackages lists the module's packages as a build with env (extra
// "KEY=value" settings) sees them.
func listPackages(t *testing.T, env ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

func TestArch_ImportsFollowDesign(t *testing.T) {
	for _, p := range listPackages(t) {
		from, _ := unit(p.ImportPath)
		rules, known := allowed[from]
		if !known {
			t.Errorf("package %s is not in the dependency table; add it to the table of docs/architecture.md and to this test", p.ImportPath)
			continue
		}
		check := func(imports []string, rules []string, what string) {
			for _, imp := range imports {
				to, internal := unit(imp)
				if !internal || to == from || slices.Contains(rules, to) || slices.Contains(rules, rel(imp)) {
					continue
				}
				t.Errorf("%s%s imports %s: %q may import only %v", p.ImportPath, what, imp, from, rules)
			}
		}
		check(p.Imports, rules, "")
		testRules := slices.Concat(rules, testAllowed["*"], testAllowed[from])
		check(p.TestImports, testRules, " (tests)")
		check(p.XTestImports, testRules, " (tests)")
	}
}

// TestArch_OnlyGPUImportsNVML keeps cgo confined to package gpu, so every
// other package builds with CGO_ENABLED=0. It lists the packages as a cgo
// build sees them, where the NVML files are: other packages' cgo tests
// reach go-nvml's mocks through gpu/nvmlmock only.
func TestArch_OnlyGPUImportsNVML(t *testing.T) {
	for _, p := range listPackages(t, "CGO_ENABLED=1") {
		from, _ := unit(p.ImportPath)
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if strings.HasPrefix(imp, "github.com/NVIDIA/go-nvml") && from != "gpu" {
				t.Errorf("%s imports %s: only package gpu may use go-nvml", p.ImportPath, imp)
			}
		}
	}
}

func TestArch_StaticBuildExcludesNVML(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", module)
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps with CGO_ENABLED=0: %v", err)
	}
	if strings.Contains(string(out), "github.com/NVIDIA/go-nvml") {
		t.Error("a CGO_ENABLED=0 build of skein links go-nvml; keep NVML behind the cgo build constraint in package gpu")
	}
}

// rel is an import path inside the module without the module's prefix:
// "internal/testutil".
func rel(importPath string) string {
	return strings.TrimPrefix(importPath, module+"/")
}

// docsTable is where the table of allowed imports is written out for
// readers, and its header row.
const (
	docsTable       = "../../docs/architecture.md"
	docsTableHeader = "| package | may import |"
)

// aside is what a cell of the documented table says besides the units:
// a parenthesis, or everything after a semicolon.
var aside = regexp.MustCompile(`\([^)]*\)|;.*$`)

// documentedTable reads the table of docs/architecture.md: for each unit
// its row names (a row may name several), the units it may import. "all
// of the above" is every unit of the rows before it, "but X" takes X out,
// and "nothing" is none.
func documentedTable(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(docsTable)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var above []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == docsTableHeader:
			in = true
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 2 {
			t.Fatalf("%s: %q is not a row of two cells", docsTable, line)
		}
		may := strings.TrimSpace(aside.ReplaceAllString(cells[1], ""))
		var units []string
		switch {
		case strings.HasPrefix(may, "nothing"):
		case strings.HasPrefix(may, "all of the above"):
			_, but, _ := strings.Cut(may, " but ")
			for _, u := range above {
				if !slices.Contains(strings.Split(but, ", "), u) {
					units = append(units, u)
				}
			}
		default:
			for _, u := range strings.Split(may, ",") {
				units = append(units, strings.TrimSpace(u))
			}
		}
		for _, u := range strings.Split(cells[0], ",") {
			u = strings.TrimSpace(u)
			out[u] = units
			above = append(above, u)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no table under %q", docsTable, docsTableHeader)
	}
	return out
}

// TestArch_TheDocumentedTableIsThisOne: the table readers see in
// docs/architecture.md says, row by row, what allowed says, for every
// unit but those of tests and of main.go (internal, chaos, "").
func TestArch_TheDocumentedTableIsThisOne(t *testing.T) {
	documented := documentedTable(t)
	for unit, may := range allowed {
		if unit == "internal" || unit == "chaos" || unit == "" {
			continue
		}
		doc, ok := documented[unit]
		if !ok {
			t.Errorf("%s: no row for %s, which may import %v", docsTable, unit, may)
			continue
		}
		if !slices.Equal(slices.Sorted(slices.Values(doc)), slices.Sorted(slices.Values(may))) {
			t.Errorf("%s: %s may import %v, this test says %v", docsTable, unit, doc, may)
		}
	}
	for unit := range documented {
		if _, ok := allowed[unit]; !ok {
			t.Errorf("%s has a row for %s, which this test does not know", docsTable, unit)
		}
	}
}
