package cli

import (
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func servicesCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "services",
		Usage: "list services and how their replicas stand",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: servicesAction,
	}
}

func servicesAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	list, err := cl.Services(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if list == nil {
			list = []api.ServiceInfo{}
		}
		for i := range list {
			hideSecrets(&list[i].Service.Spec.Job)
		}
		return printJSON(c.App.Writer, list)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No services.")
		return err
	}
	now := time.Now()
	rows := make([][]string, 0, len(list))
	for _, s := range list {
		rows = append(rows, []string{
			s.Service.Name,
			orDash(s.Service.Owner),
			fmt.Sprintf("%d/%d", s.Healthy, s.Service.Replicas),
			s.State,
			truncate(imageOrCommand(s.Service.Spec.Job.Image, s.Service.Spec.Job.Command), infoWidth),
			age(now, s.Service.CreatedAt),
		})
	}
	return printTable(c.App.Writer, []string{"NAME", "OWNER", "REPLICAS", "STATE", "IMAGE/COMMAND", "AGE"}, rows)
}

// imageOrCommand is what a service's replicas run: their image, else
// their command.
func imageOrCommand(image string, command []string) string {
	if image != "" {
		return image
	}
	return shellJoin(command)
}
