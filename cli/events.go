package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func eventsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "events",
		Usage: "print what happened in the cluster: jobs, nodes, GPUs, services, leaders",
		Description: "Prints the events the cluster keeps (the newest 10,000), oldest first, from any node: each is made\n" +
			"from a change of the replicated state, with its time, its subject and why. Each event has a cursor,\n" +
			"INDEX.SEQ (the Raft index of the change, then its place in it); --since-index prints only what came\n" +
			"after one. With --follow it keeps printing as events happen, and if the connection breaks (the node\n" +
			"went away) it connects again, to the first node of --addr that answers, and goes on after the last\n" +
			"event it printed, so none is printed twice or left out.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing events as they happen"},
			&ucli.StringFlag{Name: "job", Usage: "only events about this job (ID or unique prefix)"},
			&ucli.StringFlag{Name: "node", Usage: "only events about this node, its GPUs and the work it ran (name or ID)"},
			&ucli.StringFlag{Name: "since-index", Usage: "only events after this cursor (`INDEX` or INDEX.SEQ)"},
			&ucli.BoolFlag{Name: "json", Usage: "print one JSON object per event, a line each"},
		},
		Action: eventsAction,
	}
}

func eventsAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	after, err := structs.ParseEventCursor(c.String("since-index"))
	if err != nil {
		return fmt.Errorf("--since-index: %w", err)
	}
	q := api.EventsQuery{After: after, Job: c.String("job"), Node: c.String("node")}
	p := eventPrinter{w: c.App.Writer, json: c.Bool("json")}
	if err := p.header(); err != nil {
		return err
	}
	if !c.Bool("follow") {
		return printEvents(c.Context, cl, q, p, c.App.ErrWriter)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()
	retry := func(err error, wait time.Duration) {
		fmt.Fprintf(c.App.ErrWriter, "skein: event stream broke (%v); connecting again in %s\n", err, wait)
	}
	return cl.FollowEvents(ctx, q, retry, p.print)
}

// printEvents prints every event the query selects, page by page, and
// says on errw when older ones were dropped.
func printEvents(ctx context.Context, cl *api.Client, q api.EventsQuery, p eventPrinter, errw io.Writer) error {
	for first := true; ; first = false {
		page, err := cl.Events(ctx, q)
		if err != nil {
			return err
		}
		if first && !page.Dropped.IsZero() {
			fmt.Fprintf(errw, "skein: events after %s up to %s were dropped: the cluster keeps only the newest\n",
				q.After, page.Dropped)
		}
		for _, e := range page.Events {
			if err := p.print(e); err != nil {
				return err
			}
		}
		if len(page.Events) == 0 || page.Next == q.After {
			return nil
		}
		q.After = page.Next
	}
}

// eventPrinter prints events as table rows (TIME KIND SUBJECT REASON, in
// fixed columns, so a followed stream lines up without waiting for the
// end) or as JSON lines.
type eventPrinter struct {
	w    io.Writer
	json bool
}

const eventRow = "%-20s  %-19s  %-24s  %s\n"

func (p eventPrinter) header() error {
	if p.json {
		return nil
	}
	_, err := fmt.Fprintf(p.w, eventRow, "TIME", "KIND", "SUBJECT", "REASON")
	return err
}

func (p eventPrinter) print(e structs.Event) error {
	if p.json {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("write json: %w", err)
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(p.w, eventRow, e.Time.UTC().Format("2006-01-02T15:04:05Z"), e.Kind, printable(e.Subject()), printable(e.Reason))
	return err
}
