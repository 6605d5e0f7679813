package cli

import (
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// autoscaleFlags are the flags of an autoscale other than its bounds,
// shared by serve and service autoscale.
func autoscaleFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "target", Usage: "the load per replica to scale for: inflight=N (requests in flight or queued at the ingress; waiting=N is the same), " +
			"or gauge:NAME=V (the Prometheus gauge NAME on each replica's /metrics)"},
		&ucli.StringFlag{Name: "scale-up-window", Usage: "how long the load must stay above the target before a scale up (default 0: at once)"},
		&ucli.StringFlag{Name: "scale-down-window", Usage: "how long the load must stay below the target, and since the last scale, before a scale down (default 5m)"},
		&ucli.Float64Flag{Name: "scale-tolerance", Usage: "the fraction of the target within which nothing changes (default 0.1)"},
	}
}

// autoscaleFromFlags builds an autoscale of bounds MIN-MAX from the
// flags; --target is required.
func autoscaleFromFlags(c *ucli.Context, bounds string) (*structs.Autoscale, error) {
	a := &structs.Autoscale{}
	if err := a.ParseRange(bounds); err != nil {
		return nil, usagef(c, "%v", err)
	}
	if !c.IsSet("target") {
		return nil, usagef(c, "missing --target: the load per replica to scale for, like inflight=10")
	}
	if err := a.ParseTarget(c.String("target")); err != nil {
		return nil, usagef(c, "--%v", err)
	}
	a.Tolerance = c.Float64("scale-tolerance")
	for _, err := range []error{
		decodeFlag(c, "scale-up-window", &a.UpWindow, structs.ParseDuration),
		decodeFlag(c, "scale-down-window", &a.DownWindow, structs.ParseDuration),
	} {
		if err != nil {
			return nil, err
		}
	}
	a.Normalize()
	if err := a.Validate(); err != nil {
		return nil, serviceFlagError(err)
	}
	return a, nil
}

// noAutoscaleFlags refuses the autoscale flags where no autoscale is set.
func noAutoscaleFlags(c *ucli.Context, why string) error {
	for _, f := range autoscaleFlags() {
		if name := f.Names()[0]; c.IsSet(name) {
			return usagef(c, "--%s: set, but %s", name, why)
		}
	}
	return nil
}

func serviceAutoscaleCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "autoscale",
		Usage:     "let the leader scale a service with its load, or stop it",
		ArgsUsage: "NAME MIN-MAX|off",
		Description: "With MIN-MAX and --target, the leader keeps the service between MIN and MAX replicas so that\n" +
			"the load per replica stays near the target: desired = ceil(replicas × load/target). It scales up\n" +
			"once the load has been above the target for --scale-up-window, down once it has been below for\n" +
			"--scale-down-window. With off, the replicas stay as they are and skein scale sets them again.",
		Flags:  append(autoscaleFlags(), &ucli.BoolFlag{Name: "json", Usage: "print the service as JSON"}),
		Action: serviceAutoscaleAction,
	}
}

func serviceAutoscaleAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "NAME", "MIN-MAX|off")
	if err != nil {
		return err
	}
	var a *structs.Autoscale
	if args[1] == "off" {
		if err := noAutoscaleFlags(c, "off turns autoscaling off"); err != nil {
			return err
		}
	} else if a, err = autoscaleFromFlags(c, args[1]); err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	d, err := cl.AutoscaleService(c.Context, args[0], a)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		hideSecrets(&d.Service.Spec.Job)
		return printJSON(c.App.Writer, d)
	}
	_, err = fmt.Fprintf(c.App.Writer, "service %s: autoscale %s; %s\n", d.Service.Name, autoscaleSummary(d.Service.Autoscale), printable(d.State))
	return err
}

// autoscaleSummary says how a service scales: "off", or "1-8 replicas,
// inflight=10 per replica, up after 0s, down after 5m, tolerance 0.1".
func autoscaleSummary(a *structs.Autoscale) string {
	if a == nil {
		return "off"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d-%d replicas, %s per replica", a.Min, a.Max, strings.TrimPrefix(a.String(), fmt.Sprintf("%d-%d ", a.Min, a.Max)))
	fmt.Fprintf(&b, ", up after %s, down after %s, tolerance %g",
		shortDuration(time.Duration(a.UpWindow)), shortDuration(time.Duration(a.DownWindow)), a.Tolerance)
	return b.String()
}

// serveAutoscale sets the request's autoscale from --autoscale and its
// flags; without --replicas the service starts at MIN.
func serveAutoscale(c *ucli.Context, req *api.ServiceCreateRequest) error {
	if !c.IsSet("autoscale") {
		return noAutoscaleFlags(c, "the service has no --autoscale MIN-MAX")
	}
	a, err := autoscaleFromFlags(c, c.String("autoscale"))
	if err != nil {
		return err
	}
	req.Autoscale = a
	if !c.IsSet("replicas") {
		req.Replicas = a.Min
	}
	return nil
}
