package structs

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Some value types travel in JSON as objects but are written by people as
// text: ArraySpec ("0-99%8") and Dependency ("abc123:any") here,
// TimeSignal ("USR1@90s", timesignal.go), PortRange ("29500-29999",
// ports.go) and Mount ("/data:/data:ro", containers.go). Each has one parse function, used by the flag that sets it
// and, through UnmarshalYAML, by job files. They do not implement
// encoding.TextUnmarshaler: encoding/json would then refuse their object
// form, and an UnmarshalJSON put back to accept it could not honour the
// API decoder's refusal of unknown fields.

// errNotText is what a job file gets for a list or map where a value
// written as text belongs.
var errNotText = errors.New("want one value written as the flag takes it, not a list or map")

// fromYAML decodes a YAML scalar with a value type's parse function.
func fromYAML[T any](n *yaml.Node, parse func(string) (T, error)) (T, error) {
	if n.Kind != yaml.ScalarNode {
		var zero T
		return zero, errNotText
	}
	return parse(n.Value)
}

// ParseArraySpec reads the --array form START-END or START-END%MAX;
// Validate checks the bounds.
func ParseArraySpec(s string) (*ArraySpec, error) {
	rng, maxRun, capped := strings.Cut(s, "%")
	lo, hi, ok := strings.Cut(rng, "-")
	a := &ArraySpec{}
	var err error
	if ok {
		a.Start, err = strconv.Atoi(lo)
		if err == nil {
			a.End, err = strconv.Atoi(hi)
		}
	}
	if err == nil && capped {
		a.MaxRunning, err = strconv.Atoi(maxRun)
	}
	if !ok || err != nil {
		return nil, fmt.Errorf("invalid array %q: want START-END or START-END%%MAX, like 0-99%%8", s)
	}
	return a, nil
}

// UnmarshalYAML reads a job file's array in the --array form.
func (a *ArraySpec) UnmarshalYAML(n *yaml.Node) error {
	v, err := fromYAML(n, ParseArraySpec)
	if err == nil {
		*a = *v
	}
	return err
}

// ParseDependency reads the --after form JOB_ID, JOB_ID:ok, JOB_ID:any or
// JOB_ID:notok; a bare ID means ok.
func ParseDependency(s string) (Dependency, error) {
	id, cond, found := strings.Cut(s, ":")
	if !found {
		cond = AfterOK
	}
	if id == "" || !slices.Contains(DependencyConditions, cond) {
		return Dependency{}, fmt.Errorf("invalid dependency %q: want JOB_ID, JOB_ID:ok, JOB_ID:any or JOB_ID:notok", s)
	}
	return Dependency{JobID: id, Condition: cond}, nil
}

// UnmarshalYAML reads one of a job file's dependencies in the --after form.
func (d *Dependency) UnmarshalYAML(n *yaml.Node) error {
	v, err := fromYAML(n, ParseDependency)
	if err == nil {
		*d = v
	}
	return err
}

// Clip cuts s to at most n bytes, never inside a UTF-8 sequence: a broken
// one comes back from JSON as U+FFFD, and a replica of the state restored
// from a snapshot would then hold other bytes than the others.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
