package cli

import (
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func nodeDrainAction(c *ucli.Context) error {
	return drainNode(c, true)
}

func nodeUndrainAction(c *ucli.Context) error {
	return drainNode(c, false)
}

// drainNode sends a drain or an undrain of the node named by the first
// argument, and says what the node does now.
func drainNode(c *ucli.Context, drain bool) error {
	req := api.NodeDrainRequest{Force: c.Bool("force"), Reason: c.String("reason")}
	if s := c.String("deadline"); s != "" {
		var d structs.Duration
		if err := d.UnmarshalText([]byte(s)); err != nil {
			return usagef(c, "--deadline %q: %v", s, err)
		}
		if d <= 0 || time.Duration(d) > structs.MaxDrainDeadline {
			return usagef(c, "--deadline %s is out of range: more than 0, at most %s", s, structs.MaxDrainDeadline)
		}
		req.Deadline = d
	}
	args, cl, err := commandClient(c, "NODE")
	if err != nil {
		return err
	}
	id, name, err := resolveNode(c.Context, cl, args[0])
	if err != nil {
		return err
	}
	n, err := cl.DrainNode(c.Context, id, req, drain)
	if err != nil {
		return err
	}
	var what string
	switch {
	case !drain:
		what = "takes work again"
	case n.Drain == nil:
		what = "is not draining"
	case n.Drain.Drained():
		what = "is drained: nothing runs on it"
	case n.Drain.Force:
		what = "is draining: everything on it is being stopped"
	case !n.Drain.Deadline.IsZero():
		what = fmt.Sprintf("is draining; jobs that cannot move are stopped at %s", n.Drain.Deadline.Local().Format(time.DateTime))
	default:
		what = "is draining; jobs that cannot move run out"
	}
	_, err = fmt.Fprintf(c.App.Writer, "node %s %s\n", name, what)
	return err
}

func nodeRemoveAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "NODE")
	if err != nil {
		return err
	}
	id, name, err := resolveNode(c.Context, cl, args[0])
	if err != nil {
		return err
	}
	n, err := cl.RemoveNode(c.Context, id, api.NodeRemoveRequest{Reason: c.String("reason")})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "removed node %s (%s), which was %s\n", name, id, n.Status)
	return err
}
