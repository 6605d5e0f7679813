package cli

import (
	"fmt"
	"math"
	"strconv"
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
			"gpu=PERCENT (the mean utilisation of the replicas' GPUs; needs --gpus), or gauge:NAME=V (the Prometheus gauge NAME on each replica's /metrics)"},
		&ucli.StringFlag{Name: "scale-up-window", Usage: "how long the load must stay above the target before a scale up (default 0: at once)"},
		&ucli.StringFlag{Name: "scale-down-window", Usage: "how long the load must stay below the target, and since the last scale, before a scale down (default 5m)"},
		&ucli.Float64Flag{Name: "scale-tolerance", Usage: "the fraction of the target within which nothing changes (default 0.1)"},
	}
}

// autoscaleFromFlags sets a's bounds from MIN-MAX (none: a's stay) and
// the rest from the flags that are set, then checks it; a target is
// required, from --target or a.
func autoscaleFromFlags(c *ucli.Context, a *structs.Autoscale, bounds string) (*structs.Autoscale, error) {
	if bounds != "" {
		if err := a.ParseRange(bounds); err != nil {
			return nil, usagef(c, "%v", err)
		}
	}
	if c.IsSet("target") {
		if err := a.ParseTarget(c.String("target")); err != nil {
			return nil, usagef(c, "--%v", err)
		}
	} else if a.Metric == "" {
		return nil, usagef(c, "missing --target: the load per replica to scale for, like inflight=10")
	}
	if c.IsSet("scale-tolerance") {
		a.Tolerance = c.Float64("scale-tolerance")
	}
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
	} else if a, err = autoscaleFromFlags(c, &structs.Autoscale{}, args[1]); err != nil {
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
	return fmt.Sprintf("%d-%d replicas, %s per replica, up after %s, down after %s, tolerance %g", a.Min, a.Max, a.TargetText(),
		shortDuration(time.Duration(a.UpWindow)), shortDuration(time.Duration(a.DownWindow)), a.Tolerance)
}

// autoscaleDetail is autoscaleSummary with what the leader last observed:
// "...; observed 3.5 per replica 2s ago".
func autoscaleDetail(d *api.ServiceDetail, now time.Time) string {
	a := d.Service.Autoscale
	if a == nil {
		return "off"
	}
	o := d.Observed
	if o == nil {
		return autoscaleSummary(a) + "; nothing observed yet"
	}
	s := fmt.Sprintf("%s; observed %s per replica %s ago", autoscaleSummary(a), strconv.FormatFloat(math.Round(o.Value*100)/100, 'f', -1, 64), age(now, o.At))
	if o.Paused != "" {
		s += "; " + printable(o.Paused)
	}
	return s
}

// serveAutoscale sets the request's autoscale from the file's, if any,
// and --autoscale and its flags, which override it; without --replicas
// the service starts at MIN.
func serveAutoscale(c *ucli.Context, req *api.ServiceCreateRequest) error {
	if !c.IsSet("autoscale") && req.Autoscale == nil {
		return noAutoscaleFlags(c, "the service has no --autoscale MIN-MAX")
	}
	base := req.Autoscale
	if base == nil {
		base = &structs.Autoscale{}
	}
	a, err := autoscaleFromFlags(c, base, c.String("autoscale"))
	if err != nil {
		return err
	}
	req.Autoscale = a
	if !c.IsSet("replicas") && !c.IsSet("file") {
		req.Replicas = a.Min
	}
	return nil
}

// autoscaleKeys are the keys of a service file that set its autoscale,
// written as the flags take them.
type autoscaleKeys struct {
	Autoscale       string           `yaml:"autoscale"`
	Target          string           `yaml:"target"`
	ScaleUpWindow   structs.Duration `yaml:"scale_up_window"`
	ScaleDownWindow structs.Duration `yaml:"scale_down_window"`
	ScaleTolerance  float64          `yaml:"scale_tolerance"`
}

// serviceAutoscale sets req's autoscale from the file's keys; the flags
// check it once they have had their say.
func (f *jobFile) serviceAutoscale(req *api.ServiceCreateRequest) error {
	k := f.Service.autoscaleKeys
	if k.Autoscale == "" {
		for _, key := range yamlKeys[autoscaleKeys]()[1:] {
			if line, ok := f.keys[key]; ok {
				return fmt.Errorf("%s: line %d: %s: set, but the service has no autoscale (MIN-MAX)", f.path, line, key)
			}
		}
		return nil
	}
	a := &structs.Autoscale{Tolerance: k.ScaleTolerance, UpWindow: k.ScaleUpWindow, DownWindow: k.ScaleDownWindow}
	if err := a.ParseRange(k.Autoscale); err != nil {
		return fmt.Errorf("%s: line %d: %w", f.path, f.keys["autoscale"], err)
	}
	if k.Target != "" {
		if err := a.ParseTarget(k.Target); err != nil {
			return fmt.Errorf("%s: line %d: %w", f.path, f.keys["target"], err)
		}
	}
	req.Autoscale = a
	if f.Service.Replicas == nil {
		req.Replicas = a.Min
	}
	return nil
}
