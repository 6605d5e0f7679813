package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func auditCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "audit",
		Usage: "show the writes users made (who, what, when, from where), newest last; an admin's",
		Description: "Each node records the writes it took from users; the answer merges every node's\n" +
			"records (--local: only the node asked) and says whose could not be read.",
		Flags: []ucli.Flag{
			&ucli.IntFlag{Name: "limit", Usage: fmt.Sprintf("show the newest N records (default %d, at most %d)", api.DefaultAuditLimit, api.MaxAuditLimit)},
			&ucli.BoolFlag{Name: "local", Usage: "only the records of the node asked"},
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: auditAction,
	}
}

func auditAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	if n := c.Int("limit"); c.IsSet("limit") && (n < 1 || n > api.MaxAuditLimit) {
		return usagef(c, "--limit %d: want 1 to %d", n, api.MaxAuditLimit)
	}
	page, err := cl.Audit(c.Context, api.AuditQuery{Limit: c.Int("limit"), Local: c.Bool("local")})
	if err != nil {
		return err
	}
	if err := printAudit(c, page.Records); err != nil {
		return err
	}
	if page.Missing == "" {
		return nil
	}
	var nodes []string
	for n := range strings.SplitSeq(page.Missing, ",") {
		if n = strings.TrimSpace(n); n != "" {
			nodes = append(nodes, n)
		}
	}
	_, err = fmt.Fprintf(c.App.ErrWriter, "Records of these nodes are missing (they did not answer): %s\n", printable(strings.Join(nodes, ", ")))
	return err
}

// printAudit prints the records as JSON or as a table.
func printAudit(c *ucli.Context, records []api.AuditRecord) error {
	if c.Bool("json") {
		if records == nil {
			records = []api.AuditRecord{}
		}
		return printJSON(c.App.Writer, records)
	}
	if len(records) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No audit records.")
		return err
	}
	rows := make([][]string, 0, len(records))
	for _, r := range records {
		rows = append(rows, []string{
			r.At.Local().Format("2006-01-02 15:04:05"), r.Node, orDash(r.User), orDash(string(r.Role)),
			orDash(r.Remote), r.Method, r.Path, strconv.Itoa(r.Status),
		})
	}
	return printTable(c.App.Writer, []string{"TIME", "NODE", "USER", "ROLE", "FROM", "METHOD", "PATH", "STATUS"}, rows)
}
