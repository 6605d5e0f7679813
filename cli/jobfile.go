package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skein-dev/skein/structs"
)

// maxJobFileBytes bounds a --file job description, like the API's body cap.
const maxJobFileBytes = 1 << 20

// Kinds of job file: a job (the default) or a service.
const (
	kindJob     = "job"
	kindService = "service"
)

// jobFile is what a job file holds: the spec of a job, or of each replica
// of a service (kind: service) with what the service adds.
type jobFile struct {
	Kind    string          `yaml:"kind"`
	Job     structs.JobSpec `yaml:",inline"`
	Service serviceKeys     `yaml:",inline"`
	// path names the file in errors, and keys are its top-level keys
	// with their lines.
	path string
	keys map[string]int
}

// serviceKeys are the keys a service file adds to a job's, written as
// the serve flags take them.
type serviceKeys struct {
	Replicas       *int             `yaml:"replicas"`
	PortEnv        string           `yaml:"port_env"`
	Health         *healthText      `yaml:"health"`
	HealthInterval structs.Duration `yaml:"health_interval"`
	HealthTimeout  structs.Duration `yaml:"health_timeout"`
	HealthFailures int              `yaml:"health_failures"`
	HealthGrace    structs.Duration `yaml:"health_grace"`
	DrainTimeout   structs.Duration `yaml:"drain_timeout"`
	DrainDelay     structs.Duration `yaml:"drain_delay"`
	// ProgressDeadline and UnhealthyTimeout are
	// --progress-deadline and --unhealthy-timeout.
	ProgressDeadline structs.Duration `yaml:"progress_deadline"`
	UnhealthyTimeout structs.Duration `yaml:"unhealthy_timeout"`
	Public           bool             `yaml:"public"`
	autoscaleKeys    `yaml:",inline"`
}

// healthText is a health check written as --health takes it.
type healthText structs.HealthCheck

// UnmarshalYAML reads a check as parseHealth does, from one value.
func (h *healthText) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want one value written as --health takes it, not a list or map")
	}
	hc, err := parseHealth(n.Value)
	if err != nil {
		return err
	}
	*h = healthText(*hc)
	return nil
}

// jobOnlyKeys are the keys of a job file that a service file does not
// take, and why.
var jobOnlyKeys = map[string]string{
	"nodes":      "a replica runs on one node (run more replicas instead)",
	"restarts":   "a replica restarts for as long as its service wants it",
	"time_limit": "a replica runs until it is stopped",
	"signal":     "a replica runs until it is stopped, with no time limit to signal before",
	"array":      "a service runs replicas, not array tasks",
	"after":      "a replica waits for no job",
	"singleton":  "a replica waits for no job",
}

// readJobFile reads a job file (`skein submit --file job.yaml`, `skein
// serve -f service.yaml`); "-" reads standard input. The file's keys are
// the yaml names of structs.JobSpec and, in a service file, of
// serviceKeys, its values written as the flags take them; unknown keys
// are refused.
func readJobFile(path string, stdin io.Reader) (*jobFile, error) {
	f := &jobFile{path: path}
	r := stdin
	if path != "-" {
		file, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		r = file
	}
	b, err := io.ReadAll(io.LimitReader(r, maxJobFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxJobFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxJobFileBytes)
	}
	if err := secretEnvShape(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err = dec.Decode(f)
	var typeErr *yaml.TypeError
	switch {
	case err == nil || errors.Is(err, io.EOF):
	case errors.As(err, &typeErr):
		// yaml.v3 decodes what it can and lists the rest: a command
		// written as one string, and unknown keys, are said here.
		var errs []error
		for _, e := range typeErr.Errors {
			if cmd, ok := commandString(b, e); ok {
				if f.Job.Command, err = commandWords(cmd); err != nil {
					errs = append(errs, fmt.Errorf("%s: %s: command: %w", path, strings.SplitN(e, ":", 2)[0], err))
				}
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %s", path, unknownKey(e)))
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
	default:
		return nil, fmt.Errorf("%s: %w", path, whereInJobFile(b, err))
	}
	f.keys = map[string]int{}
	m := topLevel(b)
	for i := 0; i+1 < len(m); i += 2 {
		f.keys[m[i].Value] = m[i].Line
	}
	switch f.Kind {
	case "", kindJob, kindService:
		return f, nil
	}
	return nil, fmt.Errorf("%s: line %d: kind: %q: want %s (the default) or %s", path, f.keys["kind"], f.Kind, kindJob, kindService)
}

// jobSpec is the file's job, refusing a service file.
func (f *jobFile) jobSpec() (structs.JobSpec, error) {
	if f.Kind == kindService {
		return f.Job, fmt.Errorf("%s: kind: service: a service file runs with skein serve -f %s", f.path, f.path)
	}
	for _, k := range yamlKeys[serviceKeys]() {
		if line, ok := f.keys[k]; ok {
			return f.Job, fmt.Errorf("%s: line %d: %s: only a file of kind: service takes it (skein serve -f)", f.path, line, k)
		}
	}
	return f.Job, nil
}

// yamlKeys are the yaml keys of the fields of T.
func yamlKeys[T any]() []string {
	var keys []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[T]()) {
		if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// topLevel is the key and value nodes of a YAML document that is a
// mapping, in turn, or nil for any other document.
func topLevel(b []byte) []*yaml.Node {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	return doc.Content[0].Content
}

// secretEnvShape refuses a job file whose secret_env is not a map of
// names to plain values before it is decoded: yaml's own error for that
// quotes the start of the value, and a secret's value is never printed.
func secretEnvShape(b []byte) error {
	m := topLevel(b) // none when not a mapping: the decoder says what is wrong
	for i := 0; i+1 < len(m); i += 2 {
		v := resolved(m[i+1])
		if m[i].Value != "secret_env" || v.Tag == "!!null" {
			continue
		}
		if v.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: secret_env: want a map of NAME: VALUE", m[i].Line)
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			if resolved(v.Content[j+1]).Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: secret_env: %s: want a plain value, not a list or map", v.Content[j].Line, v.Content[j].Value)
			}
		}
	}
	return nil
}

// resolved is the node an alias stands for, or n.
func resolved(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// whereInJobFile puts the line and key in front of err, an error a value's
// own decoder returned for the job file b: yaml.v3 stops at such an error
// without saying where it was. Each top-level key is decoded alone until
// one fails that way. Errors of the YAML syntax already say their line.
func whereInJobFile(b []byte, err error) error {
	m := topLevel(b)
	for i := 0; i+1 < len(m); i += 2 {
		one := yaml.Node{Kind: yaml.MappingNode, Content: m[i : i+2]}
		var f jobFile
		var typeErr *yaml.TypeError
		if e := one.Decode(&f); e != nil && !errors.As(e, &typeErr) {
			return fmt.Errorf("line %d: %s: %w", m[i].Line, m[i].Value, e)
		}
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// commandString returns the top-level command of the job file b when it is
// one string and e is the decoder's error about it (it wants a list).
func commandString(b []byte, e string) (string, bool) {
	m := topLevel(b)
	for i := 0; i+1 < len(m); i += 2 {
		v := resolved(m[i+1])
		if m[i].Value != "command" || v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			continue
		}
		if strings.HasPrefix(e, fmt.Sprintf("line %d: cannot unmarshal !!str", v.Line)) {
			return v.Value, true
		}
	}
	return "", false
}

// shellSyntax are the characters that make a command written as one
// string need a shell: expansions, pipes, redirections, lists, globs.
const shellSyntax = "$`|&;<>()*?[]{}~#\n"

// commandWords is the command a job file writes as one string: its words,
// split at white space with single and double quotes (and a backslash)
// keeping white space in a word, as a shell splits them but with nothing
// expanded; a string that needs the shell itself (shellSyntax outside
// single quotes) runs under sh -c, as a Dockerfile's shell form does.
func commandWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		word  bool
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"' && c == '"':
			quote = 0
		case c == '\\' && i+1 < len(s) && (quote == 0 || strings.IndexByte("\\\"", s[i+1]) >= 0):
			i++
			cur.WriteByte(s[i])
			word = true
		case quote == '"' && (c == '$' || c == '`'):
			return []string{"sh", "-c", s}, nil
		case quote == '"':
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, word = c, true
		case c == ' ' || c == '\t':
			if word {
				words = append(words, cur.String())
				cur.Reset()
				word = false
			}
		case strings.IndexByte(shellSyntax, c) >= 0:
			return []string{"sh", "-c", s}, nil
		default:
			cur.WriteByte(c)
			word = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: a quote (%c) is not closed", s, quote)
	}
	if word {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty: want the program and its arguments")
	}
	return words, nil
}

// unknownKey rewrites the decoder's word for a key no job file takes
// ("line 2: field gpu not found in type cli.jobFile") as the file's
// writer would put it, with the key it most likely meant: "line 2: gpu:
// no such key (did you mean gpus?)". Any other error is left as it is.
func unknownKey(e string) string {
	line, rest, ok := strings.Cut(e, ": field ")
	if !ok {
		return e
	}
	key, typ, ok := strings.Cut(rest, " not found in type ")
	if !ok {
		return e
	}
	msg := fmt.Sprintf("%s: %s: no such key", line, key)
	if typ == "cli.jobFile" {
		keys := append(append(yamlKeys[structs.JobSpec](), yamlKeys[serviceKeys]()...), "kind")
		if near := closest(key, keys); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
	}
	return msg
}

// closest is the word of words nearest to w, when one is near enough to
// be what w meant (an edit or two away, or w with a part missing or
// added); "" otherwise.
func closest(w string, words []string) string {
	best, bestD := "", 3
	for _, c := range words {
		d := editDistance(w, c)
		if len(w) >= 3 && (strings.HasPrefix(c, w) || strings.HasPrefix(w, c)) {
			d = min(d, 1)
		}
		if d < bestD && d < max(len(w), 2) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
