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
		Usage: "show what users and nodes did at the cluster's doors (who, what, when, from where), newest last; an admin's",
		Description: "Each node records what it took: users' writes, revocations and keyring rotations,\n" +
			"reads of secrets, sign-ins to the web UI, failed logins at the API, the UI and the\n" +
			"ingress, nodes admitted or refused. The answer merges every node's records (--local:\n" +
			"only the node asked) and says whose could not be read.\n\n" +
			"Events: " + strings.Join([]string{api.AuditWrite, api.AuditLogin, api.AuditLoginFailed, api.AuditNodeAdmit,
			api.AuditNodeRefused, api.AuditNodeRevoke, api.AuditTokenRevoke, api.AuditKeyringRotate, api.AuditSecretsRead}, ", ") +
			";\n--event takes them, or a family: login, node, token, keyring, secrets.",
		Flags: []ucli.Flag{
			&ucli.IntFlag{Name: "limit", Usage: fmt.Sprintf("show the newest N records (default %d, at most %d)", api.DefaultAuditLimit, api.MaxAuditLimit)},
			&ucli.StringSliceFlag{Name: "event", Usage: "only records of `EVENT` (or of its family, the part before a dot); repeat or comma-separate"},
			&ucli.StringFlag{Name: "user", Usage: "only records of `USER`"},
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
	var events []string
	for _, e := range c.StringSlice("event") {
		for part := range strings.SplitSeq(e, ",") {
			if part = strings.TrimSpace(part); part != "" {
				events = append(events, part)
			}
		}
	}
	page, err := cl.Audit(c.Context, api.AuditQuery{Limit: c.Int("limit"), Local: c.Bool("local"), Events: events, User: c.String("user")})
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
		event, status := r.Event, "-"
		if event == "" {
			event = api.AuditWrite
		}
		if r.Status != 0 {
			status = strconv.Itoa(r.Status)
		}
		rows = append(rows, []string{
			r.At.Local().Format("2006-01-02 15:04:05"), r.Node, event, orDash(r.User), orDash(string(r.Role)),
			orDash(r.Remote), orDash(r.Via), orDash(r.Method), orDash(r.Path), status, orDash(r.Detail),
		})
	}
	return printTable(c.App.Writer, []string{"TIME", "NODE", "EVENT", "USER", "ROLE", "FROM", "VIA", "METHOD", "PATH", "STATUS", "DETAIL"}, rows)
}
