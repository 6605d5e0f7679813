package cli

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// serviceFlags maps the fields of a service that Validate names to the
// serve flags that set them; those of the replicas' job (job.FIELD) are
// the submit flags of specFlags.
var serviceFlags = map[string]string{
	"name":                  "--name",
	"replicas":              "--replicas",
	"port_env":              "--port-env",
	"health.kind":           "--health",
	"health.path":           "--health",
	"health.command":        "--health",
	"health.interval":       "--health-interval",
	"health.timeout":        "--health-timeout",
	"health.failures":       "--health-failures",
	"health.grace":          "--health-grace",
	"drain_timeout":         "--drain-timeout",
	"progress_deadline":     "--progress-deadline",
	"unhealthy_timeout":     "--unhealthy-timeout",
	"drain_delay":           "--drain-delay",
	"autoscale":             "--autoscale",
	"autoscale.min":         "--autoscale",
	"autoscale.max":         "--autoscale",
	"autoscale.metric":      "--target",
	"autoscale.target":      "--target",
	"autoscale.tolerance":   "--scale-tolerance",
	"autoscale.up_window":   "--scale-up-window",
	"autoscale.down_window": "--scale-down-window",
	"job.name":              "--name",
}

func serveCommand() *ucli.Command {
	flags := []ucli.Flag{
		&ucli.StringFlag{Name: "name", Usage: "the service's `NAME`: lower-case letters, digits and '-', starting with a letter; clients reach it at /NAME/ on any node's ingress"},
		&ucli.IntFlag{Name: "replicas", Usage: "how many replicas to run", Value: 1},
		&ucli.StringFlag{Name: "port-env", Usage: "the env var that holds the port each replica must listen on", Value: structs.DefaultPortEnv},
		&ucli.StringFlag{Name: "health", Usage: "how a replica's node tells it is healthy: http:/PATH (GET answers 2xx or 3xx), tcp (the port accepts) or exec:CMD (exits 0); " +
			"default: a running replica is healthy"},
		&ucli.StringFlag{Name: "health-interval", Usage: "time between checks (default 5s)"},
		&ucli.StringFlag{Name: "health-timeout", Usage: "time a check may take (default 2s)"},
		&ucli.IntFlag{Name: "health-failures", Usage: "failed checks in a row that make a healthy replica unhealthy (default 3)"},
		&ucli.StringFlag{Name: "health-grace", Usage: "time after a replica starts in which failed checks do not count, like 10m for loading a model"},
		&ucli.StringFlag{Name: "drain-timeout", Usage: "time a replica being stopped keeps serving the requests it has (default 30s)"},
		progressDeadlineFlag(), unhealthyTimeoutFlag(),
		&ucli.StringFlag{Name: "drain-delay", Usage: "time a replica being stopped gets no new request before it is signalled (default 2s)"},
		&ucli.BoolFlag{Name: "public", Usage: "the ingress serves it without a token when the cluster has ACLs"},
		&ucli.StringFlag{Name: "autoscale", Usage: "let the leader scale it between `MIN-MAX` replicas with its load (needs --target; see skein service autoscale)"},
	}
	flags = append(flags, autoscaleFlags()...)
	flags = append(flags, jobSpecFlags("each replica", "skein service")...)
	flags = append(flags,
		&ucli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the service from a YAML `FILE` of kind: service (- for stdin); flags override it"},
		&ucli.BoolFlag{Name: "json", Usage: "print the created service as JSON"},
	)
	return &ucli.Command{
		Name:      "serve",
		Usage:     "run a service: replicas that restart until stopped, reached through any node",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: "Creates the service --name, whose replicas each run CMD with ARGS on one node and listen\n" +
			"on the port in $PORT (--port-env), and prints its name. Clients reach every healthy\n" +
			"replica through the ingress of any node at http://NODE:7480/NAME/. Flags go before\n" +
			"CMD; use -- before CMD when it starts with a dash.",
		Flags:  flags,
		Action: serveAction,
	}
}

func serveAction(c *ucli.Context) error {
	req, err := serveRequest(c)
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	d, err := cl.CreateService(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		hideSecrets(&d.Service.Spec.Job)
		return printJSON(c.App.Writer, d)
	}
	if _, err := fmt.Fprintln(c.App.Writer, d.Service.Name); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.ErrWriter, "service %s: %s; %s (skein service %s)\n",
		d.Service.Name, printable(d.State), answersAt(d.Endpoints), d.Service.Name)
	return err
}

// answersAt says where a service answers.
func answersAt(endpoints []string) string {
	switch len(endpoints) {
	case 0:
		return "no node serves an ingress"
	case 1:
		return "it answers at " + endpoints[0]
	case 2:
		return "it answers at " + endpoints[0] + " and on the ingress of 1 other node"
	}
	return fmt.Sprintf("it answers at %s and on the ingress of %d other nodes", endpoints[0], len(endpoints)-1)
}

// serveRequest builds and checks the request from the service file, if
// any, then the flags and arguments, which override it.
func serveRequest(c *ucli.Context) (api.ServiceCreateRequest, error) {
	req := api.ServiceCreateRequest{Replicas: 1}
	if path := c.String("file"); path != "" {
		f, err := readJobFile(path, c.App.Reader)
		if err != nil {
			return req, err
		}
		if err := f.serviceRequest(&req); err != nil {
			return req, err
		}
	}
	spec := &req.Spec
	if err := jobSpecFromFlags(c, &spec.Job); err != nil {
		return req, err
	}
	if c.IsSet("name") {
		req.Name = c.String("name")
	}
	if req.Name == "" {
		return req, usagef(c, "missing --name: a service is reached by its name")
	}
	spec.Job.Name = req.Name
	if c.IsSet("replicas") {
		req.Replicas = c.Int("replicas")
	}
	if c.IsSet("port-env") {
		spec.PortEnv = c.String("port-env")
	}
	if c.IsSet("health") {
		h, err := parseHealth(c.String("health"))
		if err != nil {
			return req, usagef(c, "--health: %v", err)
		}
		if old := spec.Health; old != nil { // the file's timings stay
			h.Interval, h.Timeout, h.Failures, h.Grace = old.Interval, old.Timeout, old.Failures, old.Grace
		}
		spec.Health = h
	}
	if err := healthFlags(c, spec); err != nil {
		return req, err
	}
	if err := decodeFlag(c, "drain-timeout", &spec.DrainTimeout, structs.ParseDuration); err != nil {
		return req, err
	}
	if err := rolloutFlags(c, spec); err != nil {
		return req, err
	}
	if err := decodeFlag(c, "drain-delay", &spec.DrainDelay, structs.ParseDuration); err != nil {
		return req, err
	}
	if c.IsSet("public") {
		spec.Public = c.Bool("public")
	}
	if err := serveAutoscale(c, &req); err != nil {
		return req, err
	}
	spec.Normalize()
	svc := structs.Service{Name: req.Name, Replicas: req.Replicas, Spec: *spec, Autoscale: req.Autoscale}
	if err := svc.Validate(); err != nil {
		return req, serviceFlagError(err)
	}
	return req, nil
}

// healthFlags sets the health check's timings and failures from their
// flags, which need a check.
func healthFlags(c *ucli.Context, spec *structs.ServiceSpec) error {
	names := []string{"health-interval", "health-timeout", "health-failures", "health-grace"}
	if spec.Health == nil {
		for _, name := range names {
			if c.IsSet(name) {
				return usagef(c, "--%s: set, but the service has no health check (--health)", name)
			}
		}
		return nil
	}
	h := spec.Health
	if c.IsSet("health-failures") {
		h.Failures = c.Int("health-failures")
	}
	for _, err := range []error{
		decodeFlag(c, "health-interval", &h.Interval, structs.ParseDuration),
		decodeFlag(c, "health-timeout", &h.Timeout, structs.ParseDuration),
		decodeFlag(c, "health-grace", &h.Grace, structs.ParseDuration),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// progressDeadlineFlag and unhealthyTimeoutFlag set when a rollout to
// the spec rolls back (rolloutFlags reads them).
func progressDeadlineFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "progress-deadline", Usage: fmt.Sprintf(
		"time a rollout may go without progress (a new replica made, started or healthy) before it rolls back, like a new version no node has room for (default %s)",
		structs.DefaultProgressDeadline)}
}

func unhealthyTimeoutFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "unhealthy-timeout", Usage: fmt.Sprintf(
		"time a new replica may stay unhealthy after its health grace before its rollout rolls back (default %s)", structs.DefaultUnhealthyTimeout)}
}

// rolloutFlags sets the spec's progress deadline and unhealthy timeout
// from their flags.
func rolloutFlags(c *ucli.Context, spec *structs.ServiceSpec) error {
	if err := decodeFlag(c, "progress-deadline", &spec.ProgressDeadline, structs.ParseDuration); err != nil {
		return err
	}
	return decodeFlag(c, "unhealthy-timeout", &spec.UnhealthyTimeout, structs.ParseDuration)
}

// serviceRequest sets req from a service file, refusing any other file
// and the keys of a job that a service does not take.
func (f *jobFile) serviceRequest(req *api.ServiceCreateRequest) error {
	if f.Kind != kindService {
		return fmt.Errorf("%s: not a service file: it says kind: service (a job file runs with skein submit -f %s)", f.path, f.path)
	}
	for _, k := range slices.Sorted(maps.Keys(jobOnlyKeys)) {
		if line, ok := f.keys[k]; ok {
			return fmt.Errorf("%s: line %d: %s: not a key of a service file: %s", f.path, line, k, jobOnlyKeys[k])
		}
	}
	sk := f.Service
	req.Name, req.Spec.Job = f.Job.Name, f.Job
	if sk.Replicas != nil {
		req.Replicas = *sk.Replicas
	}
	req.Spec.PortEnv, req.Spec.DrainTimeout, req.Spec.Public = sk.PortEnv, sk.DrainTimeout, sk.Public
	req.Spec.ProgressDeadline, req.Spec.UnhealthyTimeout = sk.ProgressDeadline, sk.UnhealthyTimeout
	req.Spec.DrainDelay = sk.DrainDelay
	if err := f.serviceAutoscale(req); err != nil {
		return err
	}
	if sk.Health == nil {
		for _, k := range []string{"health_interval", "health_timeout", "health_failures", "health_grace"} {
			if line, ok := f.keys[k]; ok {
				return fmt.Errorf("%s: line %d: %s: set, but the service has no health check (health)", f.path, line, k)
			}
		}
		return nil
	}
	h := structs.HealthCheck(*sk.Health)
	h.Interval, h.Timeout, h.Failures, h.Grace = sk.HealthInterval, sk.HealthTimeout, sk.HealthFailures, sk.HealthGrace
	req.Spec.Health = &h
	return nil
}

// parseHealth reads a health check as --health takes it and
// structs.HealthCheck.String writes it: http:/PATH, tcp, or exec:CMD
// [ARGS...] (split at spaces).
func parseHealth(s string) (*structs.HealthCheck, error) {
	kind, rest, hasRest := strings.Cut(s, ":")
	switch {
	case kind == structs.HealthHTTP && hasRest:
		return &structs.HealthCheck{Kind: kind, Path: rest}, nil
	case kind == structs.HealthTCP && !hasRest:
		return &structs.HealthCheck{Kind: kind}, nil
	case kind == structs.HealthExec && hasRest:
		return &structs.HealthCheck{Kind: kind, Command: strings.Fields(rest)}, nil
	}
	return nil, fmt.Errorf("invalid health check %q: want http:/PATH, tcp or exec:CMD", s)
}

// serviceFlagError renames the field of a *structs.FieldError to the
// flag that sets it.
func serviceFlagError(err error) error {
	var fe *structs.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	if name, ok := serviceFlags[fe.Field]; ok {
		return &structs.FieldError{Field: name, Msg: fe.Msg}
	}
	if field, ok := strings.CutPrefix(fe.Field, "job."); ok {
		if name, ok := specFlags[field]; ok {
			return &structs.FieldError{Field: name, Msg: fe.Msg}
		}
	}
	return err
}
