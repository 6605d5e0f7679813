package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompletion_PrintsEachShellsScript(t *testing.T) {
	for shell, want := range map[string][]string{
		"bash": {"complete -o default -F _skein skein", "--generate-bash-completion"},
		"zsh":  {"#compdef skein", "compdef _skein skein", "--generate-bash-completion"},
		"fish": {"complete -c skein", "-a 'squeue'", "-a 'sacct'", "-l noheader"},
	} {
		r := runCLI(t, "completion", shell)
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("completion %s: %d %q", shell, r.code, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("completion %s lacks %q:\n%s", shell, w, r.stdout)
			}
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		if r := runCLI(t, args...); r.code != exitUsage || r.stdout != "" {
			t.Errorf("%q: %d %q %q, want a usage error", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, "completion", "tcsh"); !strings.HasPrefix(r.stderr, `Error: shell "tcsh": want bash, zsh or fish`) {
		t.Errorf("completion tcsh: %q", r.stderr)
	}
}

// TestCompletion_BashScriptCompletesCommandsAndFlags runs the bash script
// in bash against this test binary acting as skein.
func TestCompletion_BashScriptCompletesCommandsAndFlags(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the script in")
	}
	script := filepath.Join(t.TempDir(), "skein.bash")
	if err := os.WriteFile(script, []byte(runCLI(t, "completion", "bash").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		args := append([]string{"-c", `source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _skein; printf '%s\n' "${COMPREPLY[@]}"`,
			script, os.Args[0]}, words...)
		cmd := exec.Command(bash, args...)
		cmd.Env = append(os.Environ(), cliEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("sq"); got != "squeue" {
		t.Errorf("skein sq<TAB> = %q, want squeue", got)
	}
	if got := complete("s"); !strings.Contains(got, "sacct") || !strings.Contains(got, "submit") || strings.Contains(got, "nodes") {
		t.Errorf("skein s<TAB> = %q", got)
	}
	if got := complete("squeue", "--nohe"); got != "--noheader" {
		t.Errorf("skein squeue --nohe<TAB> = %q, want --noheader", got)
	}
}
