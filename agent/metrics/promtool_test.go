package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// promtool is Prometheus's own checker, from Debian's prometheus package
// (.ci/run installs it); the tests that run it skip without it.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (apt-get install prometheus): the deploy examples are checked by the Go tests alone")
	}
	return path
}

// runPromtool runs promtool with args and returns its output and whether
// it exited 0.
func runPromtool(t *testing.T, bin string, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run promtool: %v", err)
	}
	return string(out), err == nil
}

// Prometheus takes the example scrape configuration as it is. promtool
// also checks that the files it names exist: they are laid out in a
// directory of the test's in place of /etc/prometheus. A misspelt key
// fails, so the check is Prometheus's own, strict one.
func TestDeploy_PromtoolChecksThePrometheusExample(t *testing.T) {
	bin := promtool(t)
	raw, err := os.ReadFile("../../deploy/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := strings.ReplaceAll(string(raw), "/etc/prometheus/", dir+"/")
	for _, name := range regexp.MustCompile(regexp.QuoteMeta(dir+"/")+`([A-Za-z0-9._-]+)`).FindAllStringSubmatch(conf, -1) {
		if err := os.WriteFile(filepath.Join(dir, name[1]), []byte("placeholder\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name, conf string) (string, bool) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		return runPromtool(t, bin, "check", "config", path)
	}
	if out, ok := check("prometheus.yml", conf); !ok {
		t.Fatalf("promtool check config deploy/prometheus/prometheus.yml:\n%s", out)
	}
	misspelt := strings.Replace(conf, "scrape_interval:", "scrape_intervall:", 1)
	if out, ok := check("misspelt.yml", misspelt); ok || !strings.Contains(out, "scrape_intervall") {
		t.Fatalf("promtool took a configuration with a misspelt key:\n%s", out)
	}
}

// grafanaVar is a Grafana variable in a query: $node, ${node}, $__rate_interval.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// Prometheus's parser takes every query of the dashboard: each is put in
// a rules file as a recording rule, which promtool parses as Prometheus
// would, with the dashboard's variables replaced by what Grafana would
// put there (a multi-value variable's regex, an interval's duration).
func TestDeploy_PromtoolParsesEveryQueryOfTheDashboard(t *testing.T) {
	bin := promtool(t)
	b, err := os.ReadFile("../../deploy/grafana/skein.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []dashPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	var walk func([]dashPanel)
	walk = func(panels []dashPanel) {
		for _, p := range panels {
			walk(p.Panels)
			for _, target := range p.Targets {
				expr := grafanaVar.ReplaceAllStringFunc(target.Expr, func(v string) string {
					if strings.Contains(v, "interval") {
						return "5m"
					}
					return ".*"
				})
				rules = append(rules, rule{Record: fmt.Sprintf("skein_dashboard:panel_%d_%s", p.ID, target.RefID), Expr: expr})
			}
		}
	}
	walk(dash.Panels)
	if len(rules) == 0 {
		t.Fatal("the dashboard has no query")
	}
	file := map[string]any{"groups": []any{map[string]any{"name": "skein-dashboard", "rules": rules}}}
	data, err := json.Marshal(file) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, ok := runPromtool(t, bin, "check", "rules", path)
	if !ok {
		t.Fatalf("promtool check rules (each query of deploy/grafana/skein.json named by its panel's id and refId):\n%s", out)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
		t.Fatalf("promtool check rules: %q, want %q", out, want)
	}
}
