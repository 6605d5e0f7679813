package structs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// TimeSignals are the signals a job may ask for before its time limit:
// the ones programs commonly trap to checkpoint or shut down cleanly.
var TimeSignals = []string{"HUP", "INT", "QUIT", "USR1", "USR2", "ALRM", "TERM", "URG", "WINCH", "CONT"}

// DefaultSignalBefore is how long before the limit a signal given without
// @TIME is sent, as in Slurm.
const DefaultSignalBefore = 60 * time.Second

// ParseTimeSignal reads Slurm's --signal form: SIG[@TIME], where SIG is a
// name from TimeSignals (with or without the SIG prefix, any case) and TIME
// a duration ("90s", "5m") or a bare number of seconds; TIME defaults to
// 60s. The name is normalized; Validate checks it against the time limit.
func ParseTimeSignal(s string) (*TimeSignal, error) {
	name, at, hasAt := strings.Cut(s, "@")
	sig := &TimeSignal{Name: strings.TrimPrefix(strings.ToUpper(name), "SIG"), Before: Duration(DefaultSignalBefore)}
	if !slices.Contains(TimeSignals, sig.Name) {
		return nil, fmt.Errorf("invalid signal %q: want one of %s, optionally @TIME like USR1@90s",
			s, strings.Join(TimeSignals, ", "))
	}
	if hasAt {
		if secs, err := strconv.Atoi(at); err == nil {
			sig.Before = Duration(time.Duration(secs) * time.Second)
		} else if d, err := time.ParseDuration(at); err == nil {
			sig.Before = Duration(d)
		} else {
			return nil, fmt.Errorf("invalid signal %q: time %q before the limit: use seconds or a duration like 90s or 5m", s, at)
		}
	}
	return sig, nil
}

// UnmarshalYAML reads a job file's signal in the --signal form.
func (t *TimeSignal) UnmarshalYAML(n *yaml.Node) error {
	sig, err := fromYAML(n, ParseTimeSignal)
	if err == nil {
		*t = *sig
	}
	return err
}

// String is the --signal form, e.g. "USR1@1m0s".
func (t TimeSignal) String() string { return t.Name + "@" + t.Before.String() }

// validateSignal checks the signal against the list and the time limit.
func (s *JobSpec) validateSignal() error {
	sig := s.Signal
	switch {
	case sig == nil:
		return nil
	case !slices.Contains(TimeSignals, sig.Name):
		return fieldErr("signal", "unknown signal %q: want one of %s", sig.Name, strings.Join(TimeSignals, ", "))
	case s.TimeLimit == 0:
		return fieldErr("signal", "is sent before the time limit, but time_limit is not set")
	case sig.Before <= 0:
		return fieldErr("signal", "%s before the limit: must be more than 0", sig.Before)
	case sig.Before >= s.TimeLimit:
		return fieldErr("signal", "%s before the limit: must be less than time_limit %s", sig.Before, s.TimeLimit)
	}
	return nil
}
