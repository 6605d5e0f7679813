package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/structs"
)

func cancelCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "cancel",
		Usage:     "cancel a job, or every task of a job array, naming each",
		ArgsUsage: "ID",
		Action:    cancelAction,
	}
}

func cancelAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "ID")
	if err != nil {
		return err
	}
	jobs, err := cl.Cancel(c.Context, args[0])
	if err != nil {
		return err
	}
	return sayAllCancelled(c, jobs)
}

// sayAllCancelled confirms what a cancel did to each job it answered: one,
// or every task of an array.
func sayAllCancelled(c *ucli.Context, jobs []structs.Job) error {
	for i := range jobs {
		if err := sayCancelled(c, &jobs[i], structs.ShortID(jobs[i].ID)); err != nil {
			return err
		}
	}
	return nil
}

// sayCancelled confirms what a cancel did to a job, named short, as
// skein cancel does.
func sayCancelled(c *ucli.Context, job *structs.Job, short string) error {
	var err error
	switch {
	case job.State == structs.JobCancelled:
		_, err = fmt.Fprintf(c.App.Writer, "cancelled %s\n", short)
	case !job.State.Terminal():
		_, err = fmt.Fprintf(c.App.Writer, "stopping %s\n", short)
	default:
		_, err = fmt.Fprintf(c.App.Writer, "job %s already %s\n", short, job.State)
	}
	return err
}
