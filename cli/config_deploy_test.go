package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The example configuration loads, and the systemd unit's ExecStart is a
// command line skein takes.
func TestDeploy_SystemdUnitAndExampleConfigWork(t *testing.T) {
	const example = "../deploy/systemd/agent.yaml"
	m, _ := printedConfig(t, "--config", example)
	if m["data-dir"] != "/var/lib/skein" || len(stringList(t, m, "join")) == 0 {
		t.Errorf("the example config's data-dir %v and join %v did not load", m["data-dir"], m["join"])
	}
	unit := readUnit(t, "../deploy/systemd/skein.service")
	for key, want := range map[string]string{"Type": "exec", "KillMode": "process", "Restart": "on-failure", "RestartPreventExitStatus": "2", "StateDirectory": "skein"} {
		if unit[key] != want {
			t.Errorf("%s=%q, want %q", key, unit[key], want)
		}
	}
	if unit["LimitNOFILE"] == "" {
		t.Error("the unit sets no LimitNOFILE")
	}
	argv := strings.Fields(unit["ExecStart"])
	if len(argv) < 2 || argv[0] != "/usr/local/bin/skein" || argv[1] != "agent" {
		t.Fatalf("ExecStart=%q: want /usr/local/bin/skein agent ...", unit["ExecStart"])
	}
	// The unit's own command line, run on the example config: every flag
	// it gives must exist.
	args := argv[1:]
	for i, a := range args {
		if a == "/etc/skein/agent.yaml" {
			args[i] = example
		}
	}
	if r := runCLI(t, append(args, "--print-config")...); r.code != exitOK {
		t.Fatalf("ExecStart's command line with the example config: code %d, stderr %q", r.code, r.stderr)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("no systemd-analyze: the unit was checked by parsing only")
		return
	}
	// systemd's own check, with the binary where ExecStart names it
	// replaced by one that exists.
	copied := filepath.Join(t.TempDir(), "skein.service")
	b, err := os.ReadFile("../deploy/systemd/skein.service")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, copied, strings.ReplaceAll(string(b), "/usr/local/bin/skein", exe))
	if out, err := exec.Command("systemd-analyze", "verify", copied).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// readUnit reads the Key=Value settings of a systemd unit file.
func readUnit(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unit := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			unit[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return unit
}
