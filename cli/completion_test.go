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
	if got := complete("submit", "--", "trai"); got != "" {
		t.Errorf("skein submit -- trai<TAB> = %q, want nothing (bash offers file names)", got)
	}
	if got := complete("s"); !strings.Contains(got, "sacct") || !strings.Contains(got, "submit") || strings.Contains(got, "nodes") {
		t.Errorf("skein s<TAB> = %q", got)
	}
	if got := complete("squeue", "--nohe"); got != "--noheader" {
		t.Errorf("skein squeue --nohe<TAB> = %q, want --noheader", got)
	}
}

// TestCompletion_ZshScriptAsksSkeinForTheNextWords runs the zsh script in
// zsh against this test binary acting as skein, with stand-ins for the
// completion system's _describe and _files that print what they are
// offered.
func TestCompletion_ZshScriptAsksSkeinForTheNextWords(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh to run the script in")
	}
	script := filepath.Join(t.TempDir(), "_skein")
	if err := os.WriteFile(script, []byte(runCLI(t, "completion", "zsh").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		args := append([]string{"-f", "-c", `compdef() {}; source "$1"; shift
_describe() { print -l -- "${(@P)2}" }; _files() { print FILES }
words=("$@"); CURRENT=$#; _skein`, "zsh", script, os.Args[0]}, words...)
		cmd := exec.Command(zsh, args...)
		cmd.Env = append(os.Environ(), cliEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("sq"); !strings.Contains(got, "squeue:list jobs as Slurm's squeue does") {
		t.Errorf("skein sq<TAB> offers %q, want squeue with its description", got)
	}
	if got := complete("squeue", "--nohe"); got != "--noheader" {
		t.Errorf("skein squeue --nohe<TAB> = %q, want --noheader", got)
	}
	if got := complete("agent", "--print"); got != "--print-config" {
		t.Errorf("skein agent --print<TAB> = %q, want --print-config", got)
	}
	if got := complete("submit", "--", "trai"); got != "FILES" {
		t.Errorf("skein submit -- trai<TAB> = %q, want file names", got)
	}
}

// TestCompletion_FishScriptCompletesCommandsAndFlags loads the fish script
// in fish and asks it to complete.
func TestCompletion_FishScriptCompletesCommandsAndFlags(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("no fish to run the script in")
	}
	script := filepath.Join(t.TempDir(), "skein.fish")
	if err := os.WriteFile(script, []byte(runCLI(t, "completion", "fish").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(line string) string {
		t.Helper()
		cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, script, line)
		cmd.Dir = t.TempDir() // no file names to offer besides the words
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("skein sq"); !strings.HasPrefix(got, "squeue\t") || strings.Contains(got, "\n") {
		t.Errorf("skein sq<TAB> = %q, want squeue alone", got)
	}
	if got := complete("skein squeue --nohe"); !strings.HasPrefix(got, "--noheader\t") {
		t.Errorf("skein squeue --nohe<TAB> = %q, want --noheader", got)
	}
	if got := complete("skein agent --print"); !strings.HasPrefix(got, "--print-config\t") {
		t.Errorf("skein agent --print<TAB> = %q, want --print-config", got)
	}
}

// TestCompletion_AfterDoubleDashNothingRuns: a completion request whose
// words hold `--` (the job's own command follows it) must not run the
// command: urfave reads --generate-bash-completion after `--` as an
// argument, and TAB in `skein submit -- trai` submitted a job. Nothing
// reaches the agent, nothing is printed (the shell offers file names),
// and the exit is clean; the scripts do not ask skein there at all.
func TestCompletion_AfterDoubleDashNothingRuns(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	for _, words := range [][]string{
		{"submit", "--", "trai"},
		{"submit", "--gpus", "2", "--", "python3", "train.py"},
		{"sbatch", "--", "job.sh"},
	} {
		args := append([]string{"--addr", f.URL}, words...)
		r := runCLI(t, append(args, "--generate-bash-completion")...)
		if r.code != exitOK || r.stdout != "" || len(f.requests()) != 0 {
			t.Fatalf("completing %q: exit %d, printed %q, %d requests: want nothing run", words, r.code, r.stdout, len(f.requests()))
		}
	}
	for shell, check := range map[string]string{"bash": `[[ $w == "--" ]] && return`, "zsh": `(( ${before[(Ie)--]} ))`} {
		if script := runCLI(t, "completion", shell).stdout; !strings.Contains(script, check) {
			t.Errorf("the %s script asks skein after -- (it lacks %q)", shell, check)
		}
	}
}
