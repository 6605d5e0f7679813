package slurm

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func parse(t *testing.T, script string, opts ...string) (*Batch, error) {
	t.Helper()
	return Parse(Input{Path: "job.sh", Script: []byte(script), Options: opts, SubmitDir: "/work"})
}

func TestParseTime_EverySlurmForm(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90":         90 * time.Minute,
		"5:30":       5*time.Minute + 30*time.Second,
		"01:02:03":   time.Hour + 2*time.Minute + 3*time.Second,
		"2-12":       60 * time.Hour,
		"1-00:30":    24*time.Hour + 30*time.Minute,
		"1-02:03:04": 26*time.Hour + 3*time.Minute + 4*time.Second,
		"0":          0,
		"UNLIMITED":  0,
		"infinite":   0,
	} {
		got, err := ParseTime(in)
		if err != nil || time.Duration(got) != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1:2:3:4", "1-2:3:4:5", "abc", "-5", "1-", "1:-2", "3651-00", "99999999999"} {
		if _, err := ParseTime(bad); !errors.Is(err, ErrBadValue) {
			t.Errorf("ParseTime(%q): %v, want ErrBadValue", bad, err)
		}
	}
}

func TestParseSignal_NamesNumbersAndTargets(t *testing.T) {
	for in, want := range map[string]structs.TimeSignal{
		"USR1":         {Name: "USR1", Before: structs.Duration(time.Minute)},
		"B:USR1@90":    {Name: "USR1", Before: structs.Duration(90 * time.Second)},
		"R:SIGUSR2@30": {Name: "USR2", Before: structs.Duration(30 * time.Second)},
		"10@120":       {Name: "USR1", Before: structs.Duration(2 * time.Minute)},
		"TERM":         {Name: "TERM", Before: structs.Duration(time.Minute)},
	} {
		got, err := ParseSignal(in)
		if err != nil || *got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"X:USR1", "KILL", "USR1@0", "USR1@65536", "USR1@1m", "9"} {
		if _, err := ParseSignal(bad); !errors.Is(err, ErrBadValue) {
			t.Errorf("ParseSignal(%q): %v, want ErrBadValue", bad, err)
		}
	}
}

func TestParse_CommandLineOverridesDirectives(t *testing.T) {
	script := "#!/bin/bash\n#SBATCH -J from-script\n#SBATCH --time=10\n#SBATCH --gres=gpu:a100:4\n#SBATCH -N 2\n#SBATCH --mem=8G\necho\n"
	b, err := parse(t, script, "--job-name=from-cli", "-t", "1:00:00", "--gpus-per-node=2", "--mem-per-cpu=1G", "-c", "3")
	if err != nil {
		t.Fatal(err)
	}
	s := b.Spec
	if s.Name != "from-cli" || s.TimeLimit != structs.Duration(time.Hour) || s.Nodes != 2 {
		t.Errorf("name %q, time %v, nodes %d: want the command line's name and time, the script's nodes", s.Name, s.TimeLimit, s.Nodes)
	}
	// --gpus-per-node replaces the script's --gres whole, type included,
	// and --mem-per-cpu its --mem.
	if s.GPUs != 2 || s.GPUModel != "" || s.MemoryMiB != 3*1024 {
		t.Errorf("gpus %d model %q mem %d: want 2, no model, 3 CPUs of 1G", s.GPUs, s.GPUModel, s.MemoryMiB)
	}
	// Without a command-line value the script's stays.
	b, err = parse(t, script, "-N", "3")
	if err != nil || b.Spec.Nodes != 3 || b.Spec.GPUs != 4 || b.Spec.GPUModel != "a100" || b.Spec.Name != "from-script" {
		t.Fatalf("only -N on the command line: %+v, %v", b, err)
	}
}

func TestParse_DependencyOnAnArrayTaskTakesSlurmsSpelling(t *testing.T) {
	b, err := parse(t, "#!/bin/sh\n#SBATCH -d afterok:3f2a_7:9c1d,afterany:77ab-2\n")
	want := []structs.Dependency{{JobID: "3f2a-7", Condition: "ok"}, {JobID: "9c1d", Condition: "ok"}, {JobID: "77ab-2", Condition: "any"}}
	if err != nil || !slices.Equal(b.Spec.After, want) {
		t.Fatalf("after %+v, %v; want %+v", b.Spec.After, err, want)
	}
	if _, err := parse(t, "#!/bin/sh\n#SBATCH -d afterok:3f2a_x\n"); err == nil || !strings.Contains(err.Error(), "an array task is ARRAY_INDEX") {
		t.Fatalf("a bad task index: %v", err)
	}
}

func TestParse_AccountAndQoSGoToTheSpec(t *testing.T) {
	b, err := parse(t, "#!/bin/sh\n#SBATCH -A ml\n#SBATCH --qos=high\n")
	if err != nil || b.Spec.Account != "ml" || b.Spec.QoS != "high" || b.Spec.Env["SLURM_JOB_ACCOUNT"] != "ml" {
		t.Fatalf("-A ml --qos=high: %+v, %v", b, err)
	}
	_, err = parse(t, "#!/bin/sh\n#SBATCH --account=ML!\n")
	if err == nil || !strings.Contains(err.Error(), "account") {
		t.Fatalf("a bad account name: %v", err)
	}
}

func TestParse_DirectivesStopAtTheFirstCommand(t *testing.T) {
	b, err := parse(t, "#!/bin/sh\n\n# setup\n#SBATCH -N 2\n  \t\nexport X=1\n#SBATCH -N 4\n#SBATCH --account=x\n")
	if err != nil || b.Spec.Nodes != 2 {
		t.Fatalf("nodes %v, %v: want 2, the directive after the first command unread", b, err)
	}
	// Indented or doubled #SBATCH lines are comments, as in sbatch.
	b, err = parse(t, "#!/bin/sh\n #SBATCH -N 4\n##SBATCH -N 5\n#SBATCHX -N 6\n#SBATCH\t-N 3\n")
	if err != nil || b.Spec.Nodes != 3 {
		t.Fatalf("nodes %v, %v: want 3", b, err)
	}
}

func TestParse_TasksPerNodeAreSrunsDefault(t *testing.T) {
	for _, tc := range []struct {
		script              string
		nodes, tasksPerNode int
	}{
		{"#SBATCH -N 2\n#SBATCH --ntasks-per-node=8", 2, 8},
		{"#SBATCH -N 2\n#SBATCH -n 8", 2, 4},
		{"#SBATCH -n 16\n#SBATCH --ntasks-per-node=8", 2, 8},
		{"#SBATCH -n 4", 4, 0}, // alone, -n N means N nodes, one task each
		{"#SBATCH -N 3\n#SBATCH --ntasks-per-node=1", 3, 0},
	} {
		b, err := parse(t, "#!/bin/sh\n"+tc.script+"\nsrun true\n")
		if err != nil || b.Spec.Nodes != tc.nodes || b.TasksPerNode != tc.tasksPerNode {
			t.Errorf("%q: %+v, %v; want %d nodes, %d tasks per node", tc.script, b, err, tc.nodes, tc.tasksPerNode)
		}
	}
}

func TestParse_BadValuesNameTheLineAndTheLimit(t *testing.T) {
	for _, tc := range []struct{ name, script, want string }{
		{"nodes", "#SBATCH -N 2000", "job.sh: line 2: -N 2000: bad value: 2000 is out of range 1..1024"},
		{"node range", "#SBATCH --nodes=2-4", "line 2: --nodes=2-4: bad value: a range of node counts"},
		{"gpus", "#SBATCH --gpus-per-node=65", "--gpus-per-node=65: bad value: 65 is out of range 0..64"},
		{"gres count", "#SBATCH --gres=gpu:a100:x", `bad value: "x" is not a whole number`},
		{"cpus", "#SBATCH -c 0", "-c 0: bad value: 0 is out of range 1..4096"},
		{"mem", "#SBATCH --mem=12Q", `--mem=12Q: bad value: invalid size "12Q"`},
		{"mem limit", "#SBATCH --mem=65T", "larger than the limit of 67108864 MiB"},
		{"array size", "#SBATCH --array=0-10000", "at most 10000 tasks"},
		{"array step", "#SBATCH --array=0-15:2", "lists and steps"},
		{"dependency +time", "#SBATCH -d afterok:abc+5", "without +TIME"},
		{"dependency or", "#SBATCH -d afterok:abc?afterok:def", "? (any of them) is not supported"},
		{"dependency after", "#SBATCH -d after:abc", `dependency type "after": skein supports afterok, afterany, afternotok and singleton`},
		{"singleton with an ID", "#SBATCH -d singleton:abc", "singleton names no job"},
		{"exclusive by user", "#SBATCH --exclusive=user", `--exclusive=user: bad value: "user": skein's --exclusive gives the job its nodes to itself`},
		{"constraint or", "#SBATCH -C a|b", "|, [], * and ! are not supported"},
		{"partitions", "#SBATCH -p a,b", "give one partition"},
		{"open mode", "#SBATCH --open-mode=sideways", "want append or truncate"},
		{"ntasks", "#SBATCH -N 2\n#SBATCH -n 3", "line 3: -n 3 with job.sh: line 2: -N 2: bad value: 3 tasks on 2 nodes, 1 per node: skein runs the same number of tasks on every node"},
		{"ntasks per node", "#SBATCH -N 2\n#SBATCH --ntasks-per-node=4\n#SBATCH -n 6", "6 tasks on 2 nodes, 4 per node"},
		{"too many tasks per node", "#SBATCH --ntasks-per-node=1025", "--ntasks-per-node=1025: bad value: 1025 is out of range 1..1024"},
		{"signal past limit", "#SBATCH -t 1\n#SBATCH --signal=USR1@90", "line 3: --signal=USR1@90 with job.sh: line 2: -t 1: bad value: 1m30s before the limit: must be less than the time limit 1m0s"},
		{"name", "#SBATCH -J " + strings.Repeat("x", 129), "want a name of 1..128 characters"},
		{"value missing", "#SBATCH --time", "--time: bad value: the option needs a value"},
		{"value on a flag", "#SBATCH --requeue=yes", "--requeue=yes: bad value: the option takes no value"},
		{"not an option", "#SBATCH --time=5 extra", `"extra" is not an option`},
		{"quote", `#SBATCH -J "open`, "unclosed quote"},
		{"pattern end", "#SBATCH -o out%", "file name ends in %"},
		{"export name", "#SBATCH --export=1X=2", `"1X": invalid variable name`},
		{"cli only", "#SBATCH --ignore-unknown", "only on skein sbatch's command line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, "#!/bin/bash\n"+tc.script+"\necho\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParse_UnsupportedRefusedOrWarnedWithIgnoreUnknown(t *testing.T) {
	script := "#!/bin/bash\n#SBATCH -L matlab\n#SBATCH --gres=gpu:2\n#SBATCH --bogus\n"
	_, err := parse(t, script, "--tmp=10G")
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("error %v, want ErrUnsupported", err)
	}
	for _, want := range []string{"job.sh: line 2: -L matlab: skein has no licenses", "job.sh: line 4: --bogus: unknown option", "command line: --tmp=10G: skein does not reserve disk"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	b, err := parse(t, script, "--tmp=10G", "--"+ignoreUnknown)
	if err != nil || b.Spec.GPUs != 2 || len(b.Warnings) != 3 || !strings.Contains(b.Warnings[0], "left out: job.sh: line 2: -L matlab") {
		t.Fatalf("with --ignore-unknown: %+v, %v", b, err)
	}
}

func TestParse_OptionsWithNoEffectHereAreAcceptedWithOneWarningEach(t *testing.T) {
	script := "#!/bin/bash\n#SBATCH -A proj --qos=high\n#SBATCH --wckey=w1\n#SBATCH --hint=compute_bound\n#SBATCH --mail-type=END --mail-user=a@b\n#SBATCH --comment='nightly run'\n"
	b, err := parse(t, script)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Spec.MailType, []string{"END"}) || b.Spec.MailUser != "a@b" {
		t.Errorf("mail %q to %q, want END to a@b: skein mails through the agents' --mail-prog", b.Spec.MailType, b.Spec.MailUser)
	}
	if b.Spec.Account != "proj" || b.Spec.QoS != "high" {
		t.Errorf("account %q, QoS %q: want proj and high, which fair share uses", b.Spec.Account, b.Spec.QoS)
	}
	want := []string{
		"job.sh: line 3: --wckey=w1: accepted, no effect: skein has no workload keys",
		"job.sh: line 4: --hint=compute_bound: accepted, no effect: skein does not bind CPUs",
		"job.sh: line 6: --comment=nightly run: accepted, no effect: skein keeps no job comments",
	}
	if len(b.Warnings) != len(want) {
		t.Fatalf("warnings %q, want %d", b.Warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(b.Warnings[i], w) {
			t.Errorf("warning %d: %q, want it to start %q", i, b.Warnings[i], w)
		}
	}
}

func TestSplitArgs_ScriptIsTheFirstWordThatIsNoOptionValue(t *testing.T) {
	opts, script, args, err := SplitArgs([]string{"-N", "2", "--time=5", "-A", "proj", "--exclusive", "train.sh", "-N", "9"})
	if err != nil || script != "train.sh" || strings.Join(opts, " ") != "-N 2 --time=5 -A proj --exclusive" || strings.Join(args, " ") != "-N 9" {
		t.Fatalf("opts %q script %q args %q err %v", opts, script, args, err)
	}
	if _, script, _, err = SplitArgs([]string{"-J", "x", "--", "-odd.sh"}); err != nil || script != "-odd.sh" {
		t.Fatalf("after --: script %q, %v", script, err)
	}
	if _, _, _, err = SplitArgs([]string{"-N", "2"}); !errors.Is(err, ErrUsage) {
		t.Fatalf("no script: %v, want ErrUsage", err)
	}
	if opts, script, _, err = SplitArgs([]string{"--wrap", "echo hi", "-N", "2"}); err != nil || script != "" || len(opts) != 4 {
		t.Fatalf("--wrap: %q %q %v", opts, script, err)
	}
	if _, _, _, err = SplitArgs([]string{"--wrap=echo", "x.sh"}); !errors.Is(err, ErrUsage) {
		t.Fatalf("--wrap with a script: %v, want ErrUsage", err)
	}
}

func TestParse_WrapMakesAShScript(t *testing.T) {
	b, err := Parse(Input{Options: []string{"--wrap", "echo hi", "-t", "5"}, SubmitDir: "/work"})
	if err != nil || b.Spec.Name != "wrap" || b.Interpreter[0] != "/bin/sh" || !strings.Contains(b.Spec.Command[4], "\necho hi\n") {
		t.Fatalf("%+v, %v", b, err)
	}
}

func TestParse_ScriptLargerThanTheLimitIsRefused(t *testing.T) {
	_, err := parse(t, "#!/bin/sh\n"+strings.Repeat("#", MaxScriptBytes))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than the limit of 65536") {
		t.Fatalf("error %v, want ErrTooLarge naming the limit", err)
	}
}

// TestParse_ExportAllPassesTheSubmittersEnvironmentAsSecretEnv: unlike
// Slurm, a job gets none of the submitter's environment unless --export
// says so; an explicit ALL passes it as secret env, less what is the
// account's, the session's or skein's, and what looks like a secret
// (named in a warning); a variable named with a value stays in env.
func TestParse_ExportAllPassesTheSubmittersEnvironmentAsSecretEnv(t *testing.T) {
	environ := []string{
		"CONDA_PREFIX=/opt/conda/envs/llm", "PATH=/opt/conda/envs/llm/bin:/usr/bin", "LD_LIBRARY_PATH=/opt/cuda/lib64",
		"WANDB_PROJECT=scratch", "GIT_AUTHOR_NAME=Alice", "MONKEY=patch",
		"HOME=/home/alice", "USER=alice", "PWD=/home/alice/run", "TMPDIR=/tmp/alice", "SSH_AUTH_SOCK=/tmp/ssh/agent",
		"XDG_RUNTIME_DIR=/run/user/1000", "SLURM_JOB_ID=41", "SKEIN_ADDR=http://login1:4646", "CUDA_VISIBLE_DEVICES=0",
		"HF_TOKEN=hf_x", "AWS_SECRET_ACCESS_KEY=x", "OPENAI_API_KEY=x", "PGPASSWORD=x", "MYSQL_PWD=x",
		"BASH_FUNC_module%%=() {  eval x\n}", "NOEQUALS",
	}
	in := func(script string, opts ...string) Input {
		return Input{Path: "job.sh", Script: []byte(script), Options: opts, SubmitDir: "/work",
			Environ: func() []string { return environ }}
	}
	// What ALL passes, and with WANDB_PROJECT named, the rest of it.
	passed := map[string]string{
		"CONDA_PREFIX": "/opt/conda/envs/llm", "PATH": "/opt/conda/envs/llm/bin:/usr/bin", "LD_LIBRARY_PATH": "/opt/cuda/lib64",
		"WANDB_PROJECT": "scratch", "GIT_AUTHOR_NAME": "Alice", "MONKEY": "patch",
	}
	rest := maps.Clone(passed)
	delete(rest, "WANDB_PROJECT")
	warning := func(secrets string) []string {
		return []string{"--export=ALL: left out what looks like a secret: " + secrets + "; name a variable to pass it (--export=ALL,AWS_SECRET_ACCESS_KEY)"}
	}
	for _, tc := range []struct {
		name     string
		script   string
		opts     []string
		secret   map[string]string
		env      map[string]string // besides SLURM_SUBMIT_DIR
		warnings []string
	}{
		{"no --export: nothing", "#!/bin/sh\n", nil, nil, nil, nil},
		{"NONE: nothing", "#!/bin/sh\n#SBATCH --export=NONE\n", nil, nil, nil, nil},
		{"ALL", "#!/bin/sh\n#SBATCH --export=ALL\n", nil, passed, nil,
			warning("AWS_SECRET_ACCESS_KEY, HF_TOKEN, MYSQL_PWD, OPENAI_API_KEY, PGPASSWORD")},
		{"ALL with variables named", "#!/bin/sh\n#SBATCH --export=ALL,WANDB_PROJECT=llm,HF_TOKEN=hf_y\n", nil,
			rest, map[string]string{"WANDB_PROJECT": "llm", "HF_TOKEN": "hf_y"},
			warning("AWS_SECRET_ACCESS_KEY, MYSQL_PWD, OPENAI_API_KEY, PGPASSWORD")},
		{"the command line's NONE over the script's ALL", "#!/bin/sh\n#SBATCH --export=ALL\n", []string{"--export=NONE"}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Parse(in(tc.script, tc.opts...))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(b.Spec.SecretEnv, tc.secret) {
				t.Errorf("secret env %v, want %v", b.Spec.SecretEnv, tc.secret)
			}
			env := maps.Clone(b.Spec.Env)
			delete(env, "SLURM_SUBMIT_DIR")
			if !maps.Equal(env, tc.env) {
				t.Errorf("env %v, want %v", env, tc.env)
			}
			if !slices.Equal(b.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", b.Warnings, tc.warnings)
			}
			spec := b.Spec
			spec.Command = []string{"job.sh"}
			spec.Normalize()
			if err := spec.Validate(); err != nil {
				t.Errorf("the spec is refused: %v", err)
			}
		})
	}
}

func TestSplitAllocArgs_OptionsThenTheCommand(t *testing.T) {
	args := []string{"-N", "2", "--gres=gpu:1", "--", "sh", "-c", "echo hi"}
	opts, cmd, err := SplitAllocArgs(args)
	if err != nil || strings.Join(opts, " ") != "-N 2 --gres=gpu:1" || strings.Join(cmd, " ") != "sh -c echo hi" {
		t.Fatalf("opts %q command %q err %v", opts, cmd, err)
	}
	_ = append(opts, "--wrap", "x") // an append to opts leaves the command as it was
	if cmd[0] != "sh" {
		t.Fatalf("appending to the options changed the command: %q", cmd)
	}
	if opts, cmd, err = SplitAllocArgs([]string{"-t", "10"}); err != nil || len(opts) != 2 || len(cmd) != 0 {
		t.Fatalf("no command: opts %q command %q err %v", opts, cmd, err)
	}
}
