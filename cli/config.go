package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

// The agent's configuration file (skein agent --config FILE) is a YAML
// mapping whose keys are the agent command's long flags and whose values
// are written as those flags take them: true/false, integers, durations
// like 2.5s, strings ("" leaves the default) and lists for the repeatable
// flags. The command line and the environment override it, key by key;
// defaults fill in the rest. --print-config writes the result in the same
// form.

// Flags that are no keys of a configuration file.
const (
	configFlag      = "config"
	printConfigFlag = "print-config"
)

// configKeys are the flags a configuration file may set: all the agent
// command's but --config, --print-config and --help.
func configKeys(flags []ucli.Flag) map[string]ucli.Flag {
	keys := map[string]ucli.Flag{}
	for _, f := range flags {
		if name := f.Names()[0]; name != configFlag && name != printConfigFlag && name != ucli.HelpFlag.Names()[0] {
			keys[name] = f
		}
	}
	return keys
}

// maxConfigFileBytes bounds an agent configuration file.
const maxConfigFileBytes = 1 << 20

// secretFlags hold secrets: --print-config never prints their values,
// and errors never quote them.
var secretFlags = map[string]bool{"encrypt": true}

// configOrigins maps each flag that a configuration file set to where:
// "FILE line N", for errors about its value.
type configOrigins map[string]string

// loadAgentConfigFile sets, from the file --config names, every agent
// flag given neither on the command line nor in the environment. A file
// that cannot be read, is no mapping, names a key that is no agent flag
// or gives a value of the wrong type is a usage error naming the file,
// the line and the key, and the agent does not start.
func loadAgentConfigFile(c *ucli.Context) (configOrigins, error) {
	path := c.String(configFlag)
	if path == "" {
		return nil, nil
	}
	b, err := readConfigFile(path)
	if err != nil {
		return nil, usagef(c, "--config: %v", err)
	}
	values, err := parseAgentConfig(path, b, c.Command.Flags)
	if err != nil {
		return nil, usagef(c, "%v", err)
	}
	origins := configOrigins{}
	for _, v := range values {
		if len(v.values) == 0 || givenInLineage(c, v.name) {
			continue // nothing to set, or the command line or the environment wins
		}
		for _, s := range v.values {
			if err := c.Set(v.name, s); err != nil {
				return nil, usagef(c, "%s: line %d: %s: %v", path, v.line, v.name, err)
			}
		}
		origins[v.name] = fmt.Sprintf("%s line %d", path, v.line)
	}
	return origins, nil
}

// readConfigFile reads a configuration file, at most maxConfigFileBytes.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxConfigFileBytes {
		return nil, fmt.Errorf("%s: larger than %d KiB", path, maxConfigFileBytes>>10)
	}
	return b, nil
}

// configValue is one key of a configuration file: the flag it sets, the
// values to set it to (several for a list) and the line it is on.
type configValue struct {
	name   string
	values []string
	line   int
}

// parseAgentConfig checks a configuration file against the flags it may
// set and returns its values in the file's order.
func parseAgentConfig(path string, b []byte, flags []ucli.Flag) ([]configValue, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file sets nothing
	}
	top := resolved(doc.Content[0])
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: line %d: want a mapping of keys (skein agent's long flags) to values", path, top.Line)
	}
	byName := configKeys(flags)
	seen := map[string]int{}
	var values []configValue
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], resolved(top.Content[i+1])
		name := key.Value
		if first, ok := seen[name]; ok {
			return nil, fmt.Errorf("%s: line %d: %s: given twice (first on line %d)", path, key.Line, name, first)
		}
		seen[name] = key.Line
		f, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("%s: line %d: %w", path, key.Line, unknownConfigKey(name, byName))
		}
		vs, err := configFlagValues(f, val)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %s: %w", path, val.Line, name, err)
		}
		values = append(values, configValue{name: name, values: vs, line: key.Line})
	}
	return values, nil
}

// unknownConfigKey says what is wrong with a key that sets no flag.
func unknownConfigKey(name string, byName map[string]ucli.Flag) error {
	switch name {
	case configFlag:
		return fmt.Errorf("%s: a configuration file cannot name another", name)
	case printConfigFlag:
		return fmt.Errorf("%s: a command-line flag only", name)
	}
	if alt := strings.ReplaceAll(name, "_", "-"); byName[alt] != nil {
		return fmt.Errorf("unknown key %q: did you mean %s?", name, alt)
	}
	return fmt.Errorf("unknown key %q: the keys are skein agent's long flags (skein agent --help)", name)
}

// configFlagValues turns a YAML value into the command-line values of
// flag f, refusing one of the wrong type.
func configFlagValues(f ucli.Flag, n *yaml.Node) ([]string, error) {
	name := f.Names()[0]
	switch f.(type) {
	case *ucli.BoolFlag:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return nil, wantType("true or false", name, n)
		}
		return []string{n.Value}, nil
	case *ucli.IntFlag:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return nil, wantType("an integer", name, n)
		}
		return []string{n.Value}, nil
	case *ucli.DurationFlag:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return nil, wantType("a duration like 2.5s or 10m", name, n)
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			return nil, wantType("a duration like 2.5s or 10m", name, n)
		}
		return []string{n.Value}, nil
	case *ucli.StringSliceFlag:
		items := []*yaml.Node{n}
		if n.Kind == yaml.SequenceNode {
			items = n.Content
		}
		var vs []string
		for _, item := range items {
			if item = resolved(item); !plainScalar(item) {
				return nil, wantType("a list of strings", name, n)
			}
			vs = append(vs, item.Value)
		}
		return vs, nil
	default: // *ucli.StringFlag
		if !plainScalar(n) {
			return nil, wantType("a string", name, n)
		}
		if n.Value == "" {
			return nil, nil // "" leaves the default, as an unset flag does
		}
		return []string{n.Value}, nil
	}
}

// plainScalar reports whether n is a string or a number: a value a
// string flag takes as written (an ingress port of 7480, a memory of 512G).
func plainScalar(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Tag == "!!str" || n.Tag == "!!int" || n.Tag == "!!float")
}

// wantType is the error of a value of the wrong type; a secret's value
// is never quoted.
func wantType(want, name string, n *yaml.Node) error {
	got := "a list"
	switch {
	case n.Kind == yaml.MappingNode:
		got = "a mapping"
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		got = "nothing"
	case n.Kind == yaml.ScalarNode && secretFlags[name]:
		got = "a value of another type"
	case n.Kind == yaml.ScalarNode:
		got = strconv.Quote(n.Value)
	}
	return fmt.Errorf("want %s, got %s", want, got)
}

// givenInLineage reports whether flag name was given on the command line
// or in the environment, to this command or one above it.
func givenInLineage(c *ucli.Context, name string) bool {
	for _, ctx := range c.Lineage() {
		if ctx.IsSet(name) {
			return true
		}
	}
	return false
}

// flagInError finds the flag an error names first ("--voters 4: ...").
var flagInError = regexp.MustCompile(`--([a-z][a-z-]*)`)

// withOrigin adds to a usage error about a flag's value, when that value
// came from a configuration file, where it was set.
func (o configOrigins) withOrigin(c *ucli.Context, err error) error {
	if err == nil {
		return nil
	}
	m := flagInError.FindStringSubmatch(err.Error())
	if m == nil || o[m[1]] == "" {
		return err
	}
	if _, usage := errors.AsType[*usageError](err); usage {
		return usagef(c, "%v (%s: %s)", err, m[1], o[m[1]])
	}
	return fmt.Errorf("%w (%s: %s)", err, m[1], o[m[1]])
}

// printAgentConfig writes the agent's effective configuration, every key
// of a configuration file with the value the agent would use, as a file
// --config takes. Secrets are left out, and said to be.
func printAgentConfig(c *ucli.Context) error {
	root := &yaml.Node{Kind: yaml.MappingNode, HeadComment: "skein agent configuration: the command line, the environment, --config and the defaults, merged"}
	keys := configKeys(c.Command.Flags)
	var left []string // the secrets left out, said before the next key
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if keys[name] == nil {
			continue
		}
		if secretFlags[name] && givenInLineage(c, name) {
			left = append(left, name+": set, not printed")
			continue
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name, HeadComment: strings.Join(left, "\n")}
		left = nil
		root.Content = append(root.Content, key, configNode(c, f))
	}
	root.FootComment = strings.Join(left, "\n")
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := c.App.Writer.Write(b.Bytes())
	return err
}

// configNode is flag f's value in c as a YAML node of its type.
func configNode(c *ucli.Context, f ucli.Flag) *yaml.Node {
	name := f.Names()[0]
	scalar := func(tag, v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v} }
	switch f.(type) {
	case *ucli.BoolFlag:
		return scalar("!!bool", strconv.FormatBool(c.Bool(name)))
	case *ucli.IntFlag:
		return scalar("!!int", strconv.Itoa(c.Int(name)))
	case *ucli.DurationFlag:
		return scalar("!!str", c.Duration(name).String())
	case *ucli.StringSliceFlag:
		list := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, v := range c.StringSlice(name) {
			list.Content = append(list.Content, scalar("!!str", v))
		}
		return list
	default:
		return scalar("!!str", c.String(name))
	}
}
