package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

func serviceDeleteCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "delete",
		Usage:     "stop every replica of a service; it goes once none runs",
		ArgsUsage: "NAME",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print the service as JSON"},
		},
		Action: serviceDeleteAction,
	}
}

func serviceDeleteAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "NAME")
	if err != nil {
		return err
	}
	d, err := cl.DeleteService(c.Context, args[0])
	if err != nil {
		return err
	}
	if c.Bool("json") {
		hideSecrets(&d.Service.Spec.Job)
		return printJSON(c.App.Writer, d)
	}
	_, err = fmt.Fprintf(c.App.Writer, "service %s: %s\n", d.Service.Name, printable(d.State))
	return err
}
