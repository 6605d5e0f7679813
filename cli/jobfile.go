package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skein-dev/skein/structs"
)

// maxJobFileBytes bounds a --file job description, like the API's body cap.
const maxJobFileBytes = 1 << 20

// readJobFile reads a job file (`skein submit --file job.yaml`) into a
// spec; "-" reads standard input. The file's keys are the yaml names of
// structs.JobSpec, its values written as the submit flags take them;
// unknown keys are refused.
func readJobFile(path string, stdin io.Reader) (structs.JobSpec, error) {
	var spec structs.JobSpec
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return spec, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxJobFileBytes+1))
	if err != nil {
		return spec, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxJobFileBytes {
		return spec, fmt.Errorf("%s: larger than %d bytes", path, maxJobFileBytes)
	}
	if err := secretEnvShape(b); err != nil {
		return spec, fmt.Errorf("%s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err = dec.Decode(&spec)
	var typeErr *yaml.TypeError
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return spec, nil
	case errors.As(err, &typeErr):
		errs := make([]error, len(typeErr.Errors))
		for i, e := range typeErr.Errors {
			errs[i] = fmt.Errorf("%s: %s", path, e)
		}
		return spec, errors.Join(errs...)
	}
	return spec, fmt.Errorf("%s: %w", path, whereInJobFile(b, err))
}

// secretEnvShape refuses a job file whose secret_env is not a map of
// names to plain values before it is decoded: yaml's own error for that
// quotes the start of the value, and a secret's value is never printed.
func secretEnvShape(b []byte) error {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil // not a mapping: the decoder says what is wrong
	}
	m := doc.Content[0].Content
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
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) == nil && len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0].Content
		for i := 0; i+1 < len(m); i += 2 {
			one := yaml.Node{Kind: yaml.MappingNode, Content: m[i : i+2]}
			var spec structs.JobSpec
			var typeErr *yaml.TypeError
			if e := one.Decode(&spec); e != nil && !errors.As(e, &typeErr) {
				return fmt.Errorf("line %d: %s: %w", m[i].Line, m[i].Value, e)
			}
		}
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}
