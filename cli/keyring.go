package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func keyringCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "keyring",
		Usage: "the gossip encryption keyring of a secure cluster",
		Subcommands: []*ucli.Command{
			{
				Name:   "status",
				Usage:  "show the keyring generation and which generation each node has installed",
				Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *ucli.Context) error { return keyringAction(c, (*api.Client).Keyring) },
			},
			{
				Name:   "rotate",
				Usage:  "start using a new gossip key; the old one is dropped once every node has the new one",
				Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *ucli.Context) error { return keyringAction(c, (*api.Client).RotateKeyring) },
			},
		},
	}
}

// keyringAction calls status or rotate, which answer alike, and prints the
// keyring status.
func keyringAction(c *ucli.Context, call func(*api.Client, context.Context) (*api.KeyringStatus, error)) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	k, err := call(cl, c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, k)
	}
	rotating := "no"
	if k.Rotating {
		rotating = "yes"
	}
	err = printFields(c.App.Writer, "", []field{
		{"Generation", strconv.FormatUint(k.Generation, 10)},
		{"Keys", strconv.Itoa(k.Keys)},
		{"Rotating", rotating},
	})
	if err != nil || len(k.Nodes) == 0 {
		return err
	}
	if _, err := fmt.Fprintln(c.App.Writer); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(k.Nodes))
	rows := make([][]string, 0, len(names))
	for _, name := range names {
		gen := strconv.FormatUint(k.Nodes[name], 10)
		if k.Nodes[name] < k.Generation {
			gen += " (behind)"
		}
		rows = append(rows, []string{name, gen})
	}
	return printTable(c.App.Writer, []string{"NODE", "GENERATION"}, rows)
}
