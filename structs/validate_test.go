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
		{"signal before the limit", func(s *JobSpec) {
			s.TimeLimit = Duration(time.Hour)
			s.Signal = &TimeSignal{Name: "USR1", Before: Duration(time.Minute)}
		}, ""},
		{"signal without time limit", func(s *JobSpec) { s.Signal = &TimeSignal{Name: "USR1", Before: Duration(time.Second)} }, "signal"},
		{"signal as long as the limit", func(s *JobSpec) {
			s.TimeLimit = Duration(time.Minute)
			s.Signal = &TimeSignal{Name: "USR1", Before: Duration(time.Minute)}
		}, "signal"},
		{"signal at zero", func(s *JobSpec) {
			s.TimeLimit = Duration(time.Minute)
			s.Signal = &TimeSignal{Name: "USR1"}
		}, "signal"},
		{"unknown signal", func(s *JobSpec) {
			s.TimeLimit = Duration(time.Minute)
			s.Signal = &TimeSignal{Name: "KILL", Before: Duration(time.Second)}
		}, "signal"},
		{"bad env name", func(s *JobSpec) { s.Env = map[string]string{"1X": "y"} }, "env"},
		{"cuda override", func(s *JobSpec) { s.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "0"} }, "env"},
		{"skein override", func(s *JobSpec) { s.Env = map[string]string{"SKEIN_JOB_ID": "x"} }, "env"},
		{"launch variable override", func(s *JobSpec) { s.Env = map[string]string{"MASTER_PORT": "1"} }, "env"},
		{"long name", func(s *JobSpec) { s.Name = strings.Repeat("n", MaxNameLen+1) }, "name"},
		{"empty constraint key", func(s *JobSpec) { s.Constraints = map[string]string{"": "x"} }, "constraints"},
		{"dependency without job", func(s *JobSpec) { s.After = []Dependency{{Condition: AfterOK}} }, "after"},
		{"dependency with odd condition", func(s *JobSpec) { s.After = []Dependency{{JobID: "x", Condition: "maybe"}} }, "after"},
		{"dependency ok", func(s *JobSpec) { s.After = []Dependency{{JobID: "x", Condition: AfterAny}} }, ""},
		{"dependency notok", func(s *JobSpec) { s.After = []Dependency{{JobID: "x", Condition: AfterNotOK}} }, ""},
		{"singleton without a name", func(s *JobSpec) { s.Name = ""; s.Singleton = true }, "singleton"},
		{"singleton with a name", func(s *JobSpec) { s.Name = "nightly"; s.Singleton = true }, ""},
		{"exclusive", func(s *JobSpec) { s.Exclusive = true }, ""},
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

func TestParseTimeSignal_AcceptsSlurmFormsAndNamesWhatIsWrong(t *testing.T) {
	cases := []struct {
		in   string
		want TimeSignal
		err  string // "" = valid
	}{
		{"USR1@60s", TimeSignal{Name: "USR1", Before: Duration(time.Minute)}, ""},
		{"sigusr2@5m", TimeSignal{Name: "USR2", Before: Duration(5 * time.Minute)}, ""},
		{"TERM@90", TimeSignal{Name: "TERM", Before: Duration(90 * time.Second)}, ""},
		{"HUP", TimeSignal{Name: "HUP", Before: Duration(DefaultSignalBefore)}, ""},
		{"KILL@10s", TimeSignal{}, `invalid signal "KILL@10s": want one of HUP, INT, QUIT, USR1, USR2, ALRM, TERM, URG, WINCH, CONT`},
		{"", TimeSignal{}, `invalid signal "": want one of`},
		{"USR1@soon", TimeSignal{}, `invalid signal "USR1@soon": time "soon" before the limit`},
	}
	for _, c := range cases {
		got, err := ParseTimeSignal(c.in)
		switch {
		case c.err == "" && (err != nil || *got != c.want):
			t.Errorf("ParseTimeSignal(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseTimeSignal(%q) error %v, want one saying %q", c.in, err, c.err)
		}
	}
}

func TestJobSpec_NormalizeSpellsTheSignalOneWay(t *testing.T) {
	s := JobSpec{Command: []string{"true"}, TimeLimit: Duration(time.Hour), Signal: &TimeSignal{Name: "sigusr1", Before: Duration(time.Minute)}}
	s.Normalize()
	if s.Signal.Name != "USR1" {
		t.Fatalf("signal name %q after Normalize, want USR1", s.Signal.Name)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}
