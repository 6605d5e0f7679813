package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

// newClient builds the API client from the global --addr and --token flags.
func newClient(c *ucli.Context) (*api.Client, error) {
	cl, err := api.NewClient(c.String("addr"), c.String("token"))
	if err != nil {
		return nil, &usageError{cmd: c.Command.HelpName, err: err}
	}
	return cl, nil
}

// commandClient is cmdArgs and newClient, what almost every command starts
// with.
func commandClient(c *ucli.Context, want ...string) ([]string, *api.Client, error) {
	args, err := cmdArgs(c, want...)
	if err != nil {
		return nil, nil, err
	}
	cl, err := newClient(c)
	return args, cl, err
}

// cmdArgs returns the positional arguments of the command running in c,
// exactly one per name in want, and applies flags given after them, so that
// `skein job ID --json` works like `skein job --json ID`.
func cmdArgs(c *ucli.Context, want ...string) ([]string, error) {
	rest := c.Args().Slice()
	var pos []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := commandFlag(c.Command, name)
		if f == nil {
			return nil, usagef(c, "flag provided but not defined: %s", a)
		}
		if _, isBool := f.(*ucli.BoolFlag); isBool && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 == len(rest) {
				return nil, usagef(c, "flag needs an argument: %s", a)
			}
			i++
			value = rest[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, usagef(c, "invalid value %q for flag -%s: %v", value, name, err)
		}
	}
	if c.Bool("help") {
		if err := ucli.ShowCommandHelp(c.Lineage()[1], c.Command.Name); err != nil {
			return nil, err
		}
		return nil, exitStatus(exitOK)
	}
	switch {
	case len(pos) < len(want):
		return nil, usagef(c, "missing %s", strings.Join(want[len(pos):], " "))
	case len(pos) > len(want):
		return nil, usagef(c, "unexpected argument %q", pos[len(want)])
	}
	return pos, nil
}

// commandFlag returns the flag of cmd called name, or nil.
func commandFlag(cmd *ucli.Command, name string) ucli.Flag {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}
