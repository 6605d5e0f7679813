package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// printedConfig runs `skein agent args... --print-config` and decodes what
// it printed.
func printedConfig(t *testing.T, args ...string) (map[string]any, result) {
	t.Helper()
	r := runCLI(t, append(append([]string{"agent"}, args...), "--print-config")...)
	if r.code != exitOK {
		t.Fatalf("agent %q --print-config: code %d, stderr %q", args, r.code, r.stderr)
	}
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("--print-config printed no YAML mapping: %v\n%s", err, r.stdout)
	}
	return m, r
}

func TestAgentConfig_FileSetsFlagsAndTheCommandLineAndEnvironmentOverrideIt(t *testing.T) {
	file := tempFile(t, "agent.yaml", `
data-dir: /srv/skein
bind: 10.1.2.3
join: [10.1.2.4, 10.1.2.5]
voters: 5
stop-after: 5s
down-after: 8s
label: [rack=r1, partition=gpu]
tls: true
memory: 512G
ingress-port: 8080
`)
	m, _ := printedConfig(t, "--config", file)
	for key, want := range map[string]any{
		"data-dir": "/srv/skein", "bind": "10.1.2.3", "voters": 5, "stop-after": "5s", "down-after": "8s",
		"tls": true, "memory": "512G", "ingress-port": "8080", "http-port": 7470, "log-level": "info",
	} {
		if m[key] != want {
			t.Errorf("%s: %v, want %v", key, m[key], want)
		}
	}
	if got := strings.Join(stringList(t, m, "join"), " "); got != "10.1.2.4 10.1.2.5" {
		t.Errorf("join: %q, want both members in order", got)
	}
	if got := strings.Join(stringList(t, m, "label"), " "); got != "rack=r1 partition=gpu" {
		t.Errorf("label: %q", got)
	}
	// A flag wins over the file, a repeated flag replaces its list, and
	// the environment wins over the file too.
	t.Setenv("SKEIN_DATA_DIR", "/from/env")
	m, _ = printedConfig(t, "--config", file, "--voters", "3", "--join", "10.9.9.9")
	if m["voters"] != 3 || m["data-dir"] != "/from/env" || strings.Join(stringList(t, m, "join"), " ") != "10.9.9.9" {
		t.Errorf("overridden: voters %v, data-dir %v, join %v; want 3, /from/env, [10.9.9.9]", m["voters"], m["data-dir"], m["join"])
	}
}

func stringList(t *testing.T, m map[string]any, key string) []string {
	t.Helper()
	items, ok := m[key].([]any)
	if !ok {
		t.Fatalf("%s: %#v, want a list", key, m[key])
	}
	var out []string
	for _, it := range items {
		out = append(out, it.(string))
	}
	return out
}

// What --print-config prints, --config takes, and it means the same.
func TestAgentConfig_PrintedConfigLoadsBackUnchanged(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults of a dev agent": {"--dev"},
		"a node's settings":       {"--data-dir", "/srv/skein", "--bind", "10.1.2.3", "--join", "10.1.2.4", "--label", "a=b", "--kill-grace", "1m", "--insecure-cluster", "--insecure"},
	} {
		t.Run(name, func(t *testing.T) {
			_, first := printedConfig(t, args...)
			file := tempFile(t, "printed.yaml", first.stdout)
			_, second := printedConfig(t, "--config", file)
			if second.stdout != first.stdout {
				t.Fatalf("loaded back, the config prints differently:\n%s\nwas:\n%s", second.stdout, first.stdout)
			}
		})
	}
}

func TestAgentConfig_SecretsAreNotPrinted(t *testing.T) {
	const key = "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="
	const warning = "a secret on the command line"
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("SKEIN_ENCRYPT", key)
		m, r := printedConfig(t, "--dev")
		if strings.Contains(r.stdout, key) || !strings.Contains(r.stdout, "# encrypt: set, not printed") {
			t.Fatalf("the gossip key is printed or its absence unexplained:\n%s", r.stdout)
		}
		if _, ok := m["encrypt"]; ok {
			t.Fatal("the printed config sets encrypt")
		}
	})
	t.Run("from the file", func(t *testing.T) {
		file := tempFile(t, "agent.yaml", "encrypt: "+key+"\n")
		_, r := printedConfig(t, "--dev", "--config", file)
		if strings.Contains(r.stdout, key) || strings.Contains(r.stderr, warning) {
			t.Fatalf("stdout %q, stderr %q: want the key neither printed nor taken for one on the command line", r.stdout, r.stderr)
		}
	})
	t.Run("of the wrong type", func(t *testing.T) {
		file := tempFile(t, "agent.yaml", "encrypt: true\n")
		r := runCLI(t, "agent", "--dev", "--config", file)
		if r.code != exitUsage || strings.Contains(r.stderr, "true") || !strings.Contains(r.stderr, "encrypt: want a string") {
			t.Fatalf("code %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestAgentConfig_BadFilesAreUsageErrorsNamingFileLineAndKey(t *testing.T) {
	cases := []struct {
		name, file, stderr string
	}{
		{"unknown key", "voters: 3\nvoter-count: 5\n", `line 2: unknown key "voter-count": the keys are skein agent's long flags`},
		{"underscore for a dash", "data_dir: /srv\n", `line 1: unknown key "data_dir": did you mean data-dir?`},
		{"the help flag", "help: true\n", `line 1: unknown key "help"`},
		{"a config in a config", "config: /etc/other.yaml\n", "line 1: config: a configuration file cannot name another"},
		{"print-config", "print-config: true\n", "line 1: print-config: a command-line flag only"},
		{"key given twice", "voters: 3\nvoters: 5\n", "line 2: voters: given twice (first on line 1)"},
		{"integer as text", "voters: three\n", `line 1: voters: want an integer, got "three"`},
		{"boolean as text", "tls: yes\n", `line 1: tls: want true or false, got "yes"`},
		{"duration without a unit", "stop-after: 5\n", `line 1: stop-after: want a duration like 2.5s or 10m, got "5"`},
		{"duration that does not parse", "kill-grace: soon\n", `line 1: kill-grace: want a duration like 2.5s or 10m, got "soon"`},
		{"list as a mapping", "join:\n  a: b\n", "line 2: join: want a list of strings, got a mapping"},
		{"list of lists", "join: [[a]]\n", "line 1: join: want a list of strings, got a list"},
		{"string as a list", "bind: [10.0.0.1]\n", "line 1: bind: want a string, got a list"},
		{"no value", "voters:\n", "line 1: voters: want an integer, got nothing"},
		{"not a mapping", "- voters\n", "line 1: want a mapping of keys (skein agent's long flags) to values"},
		{"not YAML", "voters: [3\n", "yaml: line 1"},
		{"a value the flag refuses", "memory: lots\n", `--memory: invalid size "lots": use a number with an optional unit, like 512M or 80G (memory: `},
		{"a value the agent refuses", "voters: 4\n", "--voters 4: want an odd number from 1 to 7 (voters: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := tempFile(t, "agent.yaml", tc.file)
			r := runCLI(t, "agent", "--dev", "--config", file, "--print-config")
			if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, tc.stderr) || !strings.Contains(r.stderr, file) {
				t.Fatalf("code %d, stdout %q, stderr %q; want %d, nothing printed, and an error naming %s and saying %q",
					r.code, r.stdout, r.stderr, exitUsage, file, tc.stderr)
			}
		})
	}
	if r := runCLI(t, "agent", "--config", filepath.Join(t.TempDir(), "none.yaml")); r.code != exitUsage || !strings.Contains(r.stderr, "--config: open ") {
		t.Errorf("a missing file: code %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "agent", "--print-config"); r.code != exitUsage || !strings.Contains(r.stderr, "--data-dir is required outside dev mode") {
		t.Errorf("a config the agent would refuse: code %d, stderr %q", r.code, r.stderr)
	}
}
