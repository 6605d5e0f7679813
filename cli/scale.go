package cli

import (
	"fmt"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func scaleCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "scale",
		Usage:     "set how many replicas a service runs",
		ArgsUsage: "NAME REPLICAS",
		Description: "New replicas start, or the newest stop (each keeps serving the requests it\n" +
			"has for the service's drain timeout), until the service runs REPLICAS.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "reason", Usage: "why, in the service's history (default: \"scaled 2→4 by USER\")"},
			&ucli.BoolFlag{Name: "json", Usage: "print the service as JSON"},
		},
		Action: scaleAction,
	}
}

func scaleAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "NAME", "REPLICAS")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > structs.MaxReplicas {
		return usagef(c, "REPLICAS %q: want a number from 0 to %d", args[1], structs.MaxReplicas)
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	d, err := cl.ScaleService(c.Context, args[0], api.ServiceScaleRequest{Replicas: n, Reason: c.String("reason")})
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
