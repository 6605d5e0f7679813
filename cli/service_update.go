package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func serviceUpdateCommand() *ucli.Command {
	flags := []ucli.Flag{
		&ucli.IntFlag{Name: "max-surge", Usage: "replicas of the new version that may run beyond those the service wants", Value: structs.DefaultMaxSurge},
		&ucli.IntFlag{Name: "max-unavailable", Usage: "how many fewer replicas than wanted may be available while they are replaced", Value: structs.DefaultMaxUnavailable},
		&ucli.StringFlag{Name: "port-env", Usage: "the env var that holds the port each replica must listen on"},
		&ucli.StringFlag{Name: "health", Usage: "the new health check: http:/PATH, tcp or exec:CMD"},
		&ucli.StringFlag{Name: "health-interval", Usage: "time between checks"},
		&ucli.StringFlag{Name: "health-timeout", Usage: "time a check may take"},
		&ucli.IntFlag{Name: "health-failures", Usage: "failed checks in a row that make a healthy replica unhealthy"},
		&ucli.StringFlag{Name: "health-grace", Usage: "time after a replica starts in which failed checks do not count"},
		&ucli.StringFlag{Name: "drain-timeout", Usage: "time a replica being stopped keeps serving the requests it has"},
		progressDeadlineFlag(), unhealthyTimeoutFlag(),
		&ucli.StringFlag{Name: "drain-delay", Usage: "time a replica being stopped gets no new request before it is signalled"},
		&ucli.BoolFlag{Name: "public", Usage: "the ingress serves it without a token when the cluster has ACLs"},
	}
	flags = append(flags, jobSpecFlags("each replica", "skein service")...)
	flags = append(flags, &ucli.BoolFlag{Name: "json", Usage: "print the updated service as JSON"})
	return &ucli.Command{
		Name:      "update",
		Usage:     "roll out a new version of a service, a few replicas at a time",
		ArgsUsage: "NAME [-- CMD [ARGS...]]",
		Description: "Gives the service NAME a new spec: its current one with what the flags and CMD change\n" +
			"(--env adds to or replaces its variables; flags not given keep their values). The\n" +
			"leader then starts up to --max-surge replicas of the new version, stops an old one\n" +
			"each time a new one is healthy (at most --max-unavailable fewer than wanted), and\n" +
			"rolls back, saying why, if a new replica crash-loops or stays unhealthy for\n" +
			"--unhealthy-timeout after its grace, or the rollout makes no progress for\n" +
			"--progress-deadline (a new replica no node has room for). Both are the new spec's.\n" +
			"skein service NAME shows how far it got.",
		Flags:  flags,
		Action: serviceUpdateAction,
	}
}

func serviceUpdateAction(c *ucli.Context) error {
	rest := c.Args().Slice()
	var command []string
	if i := slices.Index(rest, "--"); i >= 0 {
		rest, command = rest[:i], rest[i+1:]
	}
	args, err := cmdArgsOf(c, rest, "NAME")
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	// The whole current spec, secrets included: the update replaces it.
	cur, err := cl.ServiceWithSecrets(c.Context, args[0])
	if err != nil {
		return err
	}
	req, err := updateRequest(c, cur.Service, command)
	if err != nil {
		return err
	}
	d, err := cl.UpdateService(c.Context, cur.Service.Name, req)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		hideSecrets(&d.Service.Spec.Job)
		return printJSON(c.App.Writer, d)
	}
	r := d.Service.Rollout
	_, err = fmt.Fprintf(c.App.Writer, "service %s: rolling out version %d over version %d (max surge %d, max unavailable %d); skein service %s shows how far it got\n",
		d.Service.Name, r.Version, r.From, r.MaxSurge, r.MaxUnavailable, d.Service.Name)
	return err
}

// updateRequest is svc's spec changed by the flags and, when given, the
// new command, checked as the state will check it.
func updateRequest(c *ucli.Context, svc structs.Service, command []string) (api.ServiceUpdateRequest, error) {
	spec := svc.Spec.Copy()
	if c.IsSet("image") && !c.IsSet("workdir") {
		spec.Job.Workdir = "" // a host's directory means nothing in a container
	}
	if err := jobSpecFromFlags(c, &spec.Job); err != nil {
		return api.ServiceUpdateRequest{}, err
	}
	if len(command) > 0 {
		spec.Job.Command = command
	} else {
		spec.Job.Command = svc.Spec.Job.Command // jobSpecFromFlags took NAME for one
	}
	if c.IsSet("port-env") {
		spec.PortEnv = c.String("port-env")
	}
	if c.IsSet("health") {
		h, err := parseHealth(c.String("health"))
		if err != nil {
			return api.ServiceUpdateRequest{}, usagef(c, "--health: %v", err)
		}
		if old := spec.Health; old != nil {
			h.Interval, h.Timeout, h.Failures, h.Grace = old.Interval, old.Timeout, old.Failures, old.Grace
		}
		spec.Health = h
	}
	if err := healthFlags(c, &spec); err != nil {
		return api.ServiceUpdateRequest{}, err
	}
	if err := decodeFlag(c, "drain-timeout", &spec.DrainTimeout, structs.ParseDuration); err != nil {
		return api.ServiceUpdateRequest{}, err
	}
	if err := rolloutFlags(c, &spec); err != nil {
		return api.ServiceUpdateRequest{}, err
	}
	if err := decodeFlag(c, "drain-delay", &spec.DrainDelay, structs.ParseDuration); err != nil {
		return api.ServiceUpdateRequest{}, err
	}
	if c.IsSet("public") {
		spec.Public = c.Bool("public")
	}
	upd := structs.ServiceUpdateRequest{Name: svc.Name, Spec: spec, MaxSurge: c.Int("max-surge"), MaxUnavailable: c.Int("max-unavailable")}
	upd.Spec.Normalize()
	if err := upd.Validate(); err != nil {
		var fe *structs.FieldError
		if errors.As(err, &fe) && (fe.Field == "max_surge" || fe.Field == "max_unavailable") {
			return api.ServiceUpdateRequest{}, &structs.FieldError{Field: "--" + strings.ReplaceAll(fe.Field, "_", "-"), Msg: fe.Msg}
		}
		return api.ServiceUpdateRequest{}, serviceFlagError(err)
	}
	return api.ServiceUpdateRequest{Spec: upd.Spec, MaxSurge: upd.MaxSurge, MaxUnavailable: upd.MaxUnavailable}, nil
}

// versionSummary says which version of its spec a service runs and how
// its latest rollout stands: "2 (rolling out over version 1: max surge 1,
// max unavailable 0)", "1 (rolled back from version 2: rolled back:
// replica r2 of version 2 crash-looping: exited with code 1)".
func versionSummary(svc structs.Service) string {
	v := strconv.Itoa(svc.Version)
	r := svc.Rollout
	if r == nil {
		return v
	}
	switch r.State {
	case structs.RolloutRunning:
		return fmt.Sprintf("%s (rolling out over version %d: max surge %d, max unavailable %d)", v, r.From, r.MaxSurge, r.MaxUnavailable)
	case structs.RolloutRollingBack:
		return fmt.Sprintf("%s (rolling back from version %d: %s)", v, r.From, printable(r.Reason))
	case structs.RolloutRolledBack:
		return fmt.Sprintf("%s (rolled back from version %d: %s)", v, r.From, printable(r.Reason))
	}
	return fmt.Sprintf("%s (rolled out over version %d)", v, r.From)
}
