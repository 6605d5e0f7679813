package cli

import (
	"fmt"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func prioCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "prio",
		Usage: "each queued job's priority and the factors it is made of, in queue order (like sprio)",
		Description: "The factors are weighted as the admin set them (skein account weights): a column shows\n" +
			"the points each factor gives. OWN is the job's --priority, which orders only its owner's jobs.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only this user's jobs"},
			&ucli.IntFlag{Name: "limit", Value: 100, Usage: "show the first `N` jobs of the queue"},
			jsonFlag(),
		},
		Action: prioAction,
	}
}

func prioAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	info, err := cl.Prio(c.Context, c.String("user"), c.Int("limit"))
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(w, info)
	}
	if info.Weights == nil {
		rows := make([][]string, 0, len(info.Jobs))
		for _, j := range info.Jobs {
			rows = append(rows, []string{strconv.Itoa(j.Position), structs.ShortID(j.JobID), userLabel(j.Owner),
				strconv.FormatInt(j.Priority, 10), strconv.Itoa(j.Own)})
		}
		if err := printTable(w, []string{"#", "JOB", "USER", "PRIORITY", "OWN"}, rows); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "(no accounts: priority is --priority plus a point per minute waited; %d queued)\n", info.Total)
		return err
	}
	wt := info.Weights
	pts := func(weight int, f float64) string { return strconv.FormatFloat(float64(weight)*f, 'f', 0, 64) }
	rows := make([][]string, 0, len(info.Jobs))
	for _, j := range info.Jobs {
		rows = append(rows, []string{strconv.Itoa(j.Position), structs.ShortID(j.JobID), userLabel(j.Owner), dashIfEmpty(j.Account),
			dashIfEmpty(j.QoS), strconv.FormatInt(j.Priority, 10), pts(wt.FairShare, j.FairShare), pts(wt.QoS, j.QoSFactor),
			pts(wt.Age, j.Age), pts(wt.JobSize, j.JobSize), strconv.Itoa(j.Own)})
	}
	if err := printTable(w, []string{"#", "JOB", "USER", "ACCOUNT", "QOS", "PRIORITY", "FAIRSHARE", "QOS PTS", "AGE", "JOBSIZE", "OWN"}, rows); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "(weights: fair share %d, QoS %d, age %d, job size %d; %d queued)\n", wt.FairShare, wt.QoS, wt.Age, wt.JobSize, info.Total)
	return err
}

// queueFields are the lines `skein job` prints of a queued job's place.
func queueFields(q *api.QueuePlace) []field {
	out := []field{{"Queue", fmt.Sprintf("%d of %d, priority %d", q.Position, q.Total, q.Priority)}}
	if q.Account != "" || q.QoS != "" || q.FairShare > 0 {
		out = append(out, field{"Factors", fmt.Sprintf("fair share %.2f, QoS %.2f, age %.2f, job size %.2f",
			q.FairShare, q.QoSFactor, q.Age, q.JobSize)})
	}
	if q.Behind != "" {
		out = append(out, field{"Behind", q.Behind})
	}
	return out
}
