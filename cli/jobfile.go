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

// jobFile is a job described in YAML (`skein submit --file job.yaml`). Its
// fields are the submit flags, spelled with underscores; unknown fields are
// refused.
type jobFile struct {
	Name        string            `yaml:"name"`
	Command     []string          `yaml:"command"`
	Workdir     string            `yaml:"workdir"`
	Nodes       int               `yaml:"nodes"`
	GPUs        int               `yaml:"gpus"`
	GPUModel    string            `yaml:"gpu_model"`
	GPUMem      string            `yaml:"gpu_mem"`
	CPUs        int               `yaml:"cpus"`
	Mem         string            `yaml:"mem"`
	Priority    int               `yaml:"priority"`
	Restarts    int               `yaml:"restarts"`
	TimeLimit   string            `yaml:"time_limit"`
	Signal      string            `yaml:"signal"`
	Env         map[string]string `yaml:"env"`
	Constraints map[string]string `yaml:"constraints"`
	After       []string          `yaml:"after"`
	Array       string            `yaml:"array"`
	Spread      bool              `yaml:"spread"`

	Preemptible  bool   `yaml:"preemptible"`
	PreemptGrace string `yaml:"preempt_grace"`
}

// readJobFile parses a job file into a spec; "-" reads standard input.
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
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var jf jobFile
	if err := dec.Decode(&jf); err != nil && !errors.Is(err, io.EOF) {
		return spec, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	spec = structs.JobSpec{
		Name: jf.Name, Command: jf.Command, Workdir: jf.Workdir, Nodes: jf.Nodes, GPUs: jf.GPUs,
		GPUModel: jf.GPUModel, CPUs: jf.CPUs, Priority: jf.Priority, Restarts: jf.Restarts,
		Env: jf.Env, Constraints: jf.Constraints, Spread: jf.Spread, Preemptible: jf.Preemptible,
	}
	if jf.GPUMem != "" {
		if spec.GPUMemoryMinMiB, err = structs.ParseSizeMiB(jf.GPUMem); err != nil {
			return spec, fmt.Errorf("%s: gpu_mem: %w", path, err)
		}
	}
	if jf.Mem != "" {
		if spec.MemoryMiB, err = structs.ParseSizeMiB(jf.Mem); err != nil {
			return spec, fmt.Errorf("%s: mem: %w", path, err)
		}
	}
	if spec.TimeLimit, err = structs.ParseDuration(jf.TimeLimit); err != nil {
		return spec, fmt.Errorf("%s: time_limit: %w", path, err)
	}
	if spec.PreemptGrace, err = structs.ParseDuration(jf.PreemptGrace); err != nil {
		return spec, fmt.Errorf("%s: preempt_grace: %w", path, err)
	}
	if jf.Signal != "" {
		if spec.Signal, err = structs.ParseTimeSignal(jf.Signal); err != nil {
			return spec, fmt.Errorf("%s: signal: %w", path, err)
		}
	}
	if jf.Array != "" {
		if spec.Array, err = structs.ParseArraySpec(jf.Array); err != nil {
			return spec, fmt.Errorf("%s: array: %w", path, err)
		}
	}
	for _, a := range jf.After {
		d, err := structs.ParseDependency(a)
		if err != nil {
			return spec, fmt.Errorf("%s: after: %w", path, err)
		}
		spec.After = append(spec.After, d)
	}
	return spec, nil
}
