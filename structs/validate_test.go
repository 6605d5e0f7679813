package structs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validSpec() JobSpec {
	return JobSpec{Command: []string{"python", "train.py"}, GPUs: 2, Nodes: 1}
}

func TestJobSpec_Validate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*JobSpec)
		field  string // "" = valid
	}{
		{"valid", func(*JobSpec) {}, ""},
		{"zero gpus is fine", func(s *JobSpec) { s.GPUs = 0 }, ""},
		{"empty command", func(s *JobSpec) { s.Command = nil }, "command"},
		{"empty program", func(s *JobSpec) { s.Command = []string{""} }, "command"},
		{"nul in argument", func(s *JobSpec) { s.Command = []string{"a\x00b"} }, "command"},
		{"too many arguments", func(s *JobSpec) { s.Command = make([]string, MaxArgs+1); s.Command[0] = "x" }, "command"},
		{"negative gpus", func(s *JobSpec) { s.GPUs = -1 }, "gpus"},
		{"too many gpus", func(s *JobSpec) { s.GPUs = MaxGPUsPerNode + 1 }, "gpus"},
		{"model without gpus", func(s *JobSpec) { s.GPUs = 0; s.GPUModel = "H100" }, "gpus"},
		{"zero nodes", func(s *JobSpec) { s.Nodes = 0 }, "nodes"},
		{"negative cpus", func(s *JobSpec) { s.CPUs = -2 }, "cpus"},
		{"negative memory", func(s *JobSpec) { s.MemoryMiB = -1 }, "memory_mib"},
		{"priority too high", func(s *JobSpec) { s.Priority = MaxPriority + 1 }, "priority"},
		{"negative restarts", func(s *JobSpec) { s.Restarts = -1 }, "restarts"},
		{"negative time limit", func(s *JobSpec) { s.TimeLimit = -1 }, "time_limit"},
		{"bad env name", func(s *JobSpec) { s.Env = map[string]string{"1X": "y"} }, "env"},
		{"cuda override", func(s *JobSpec) { s.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "0"} }, "env"},
		{"skein override", func(s *JobSpec) { s.Env = map[string]string{"SKEIN_JOB_ID": "x"} }, "env"},
		{"launch variable override", func(s *JobSpec) { s.Env = map[string]string{"MASTER_PORT": "1"} }, "env"},
		{"long name", func(s *JobSpec) { s.Name = strings.Repeat("n", MaxNameLen+1) }, "name"},
		{"empty constraint key", func(s *JobSpec) { s.Constraints = map[string]string{"": "x"} }, "constraints"},
		{"dependency without job", func(s *JobSpec) { s.After = []Dependency{{Condition: AfterOK}} }, "after"},
		{"dependency with odd condition", func(s *JobSpec) { s.After = []Dependency{{JobID: "x", Condition: "maybe"}} }, "after"},
		{"dependency ok", func(s *JobSpec) { s.After = []Dependency{{JobID: "x", Condition: AfterAny}} }, ""},
		{"preemptible with grace", func(s *JobSpec) { s.Preemptible = true; s.PreemptGrace = MaxPreemptGrace }, ""},
		{"preempt grace too long", func(s *JobSpec) { s.Preemptible = true; s.PreemptGrace = MaxPreemptGrace + 1 }, "preempt_grace"},
		{"negative preempt grace", func(s *JobSpec) { s.Preemptible = true; s.PreemptGrace = -1 }, "preempt_grace"},
		{"preempt grace without preemptible", func(s *JobSpec) { s.PreemptGrace = Duration(time.Second) }, "preempt_grace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validSpec()
			c.mutate(&s)
			err := s.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want a *FieldError for %s", err, c.field)
			}
			if fe.Field != c.field {
				t.Fatalf("Validate() named field %q (%v), want %q", fe.Field, err, c.field)
			}
		})
	}
}

func TestJobSpec_NormalizeDefaultsToOneNode(t *testing.T) {
	s := JobSpec{Command: []string{"true"}}
	s.Normalize()
	if s.Nodes != 1 {
		t.Fatalf("Nodes = %d after Normalize, want 1", s.Nodes)
	}
}

func TestJobSpec_NormalizeGivesAPreemptibleJobTheDefaultGrace(t *testing.T) {
	s := JobSpec{Command: []string{"true"}, Preemptible: true}
	s.Normalize()
	if s.PreemptGrace != DefaultPreemptGrace {
		t.Fatalf("PreemptGrace = %s after Normalize, want %s", s.PreemptGrace, DefaultPreemptGrace)
	}
	s = JobSpec{Command: []string{"true"}}
	s.Normalize()
	if s.PreemptGrace != 0 {
		t.Fatalf("PreemptGrace of a job that is not preemptible = %s after Normalize, want 0", s.PreemptGrace)
	}
}
