package slurm

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the corpus's golden files from what Parse returns")

// corpusEnv is the submitter's environment the corpus is parsed with:
// what --export=ALL passes (CONDA_PREFIX, PATH, and WANDB_PROJECT unless
// named with a value), what it leaves out as the submitter's session's
// or account's (HOME, SSH_AUTH_SOCK), skein's (SLURM_JOB_ID) or a
// secret (HF_TOKEN).
var corpusEnv = map[string]string{
	"HF_HOME": "/data/hf", "CONDA_PREFIX": "/opt/conda/envs/llm", "PATH": "/opt/conda/envs/llm/bin:/usr/bin:/bin",
	"WANDB_PROJECT": "scratch", "HOME": "/home/alice", "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1",
	"SLURM_JOB_ID": "41", "HF_TOKEN": "hf_abc",
}

// The corpus's dates (--begin, --deadline) are read in UTC, wherever the
// test runs.
func init() { time.Local = time.UTC }

func corpusInput(t *testing.T, path string) Input {
	t.Helper()
	script, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Input{
		Path: filepath.Base(path), Script: script, Args: []string{"--seed", "1"},
		SubmitDir: "/home/alice/run", SubmitHost: "login1",
		LookupEnv: func(k string) (string, bool) { v, ok := corpusEnv[k]; return v, ok },
		Environ: func() []string {
			var env []string
			for k, v := range corpusEnv {
				env = append(env, k+"="+v)
			}
			return env
		},
	}
}

// golden is what a corpus script's golden file holds: the job (its
// command left out: the wrapper's own tests run it) or the error.
func golden(b *Batch, err error) []byte {
	if err != nil {
		return []byte("error: " + err.Error() + "\n")
	}
	b.Spec.Command = nil
	out, _ := json.MarshalIndent(b, "", "  ")
	return append(out, '\n')
}

// TestParse_Corpus parses every script of testdata/scripts and compares
// the job (or the error) with its .golden file, written by hand and
// checked with -update.
func TestParse_Corpus(t *testing.T) {
	scripts, err := filepath.Glob("testdata/scripts/*.sh")
	if err != nil || len(scripts) < 20 {
		t.Fatalf("corpus: %d scripts (%v), want at least 20", len(scripts), err)
	}
	for _, path := range scripts {
		name := strings.TrimSuffix(filepath.Base(path), ".sh")
		t.Run(name, func(t *testing.T) {
			b, err := Parse(corpusInput(t, path))
			if err == nil && !strings.HasPrefix(b.Spec.Command[len(b.Spec.Command)-2], "--seed") {
				t.Fatalf("the script's arguments are not at the end of the command: %q", b.Spec.Command)
			}
			got := golden(b, err)
			file := strings.TrimSuffix(path, ".sh") + ".golden"
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
			}
		})
	}
}
