package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

func shareCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "share",
		Usage: "fair share: each account's and user's shares, GPU time and fair-share factor (like sshare)",
		Description: "Accounts and their users in the order the fair-tree ranking meets them: the first user\n" +
			"listed has the highest fair-share factor. LEVEL FS is the part of its siblings' shares over\n" +
			"the part of their GPU time it used: above 1 it got less than its share, below 1 more.",
		Flags:  []ucli.Flag{jsonFlag()},
		Action: shareAction,
	}
}

func shareAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	info, err := cl.Share(c.Context)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(w, info)
	}
	if !info.On {
		_, err := fmt.Fprintln(w, "No accounts: fair share is off, the queue goes by --priority and age (skein account create).")
		return err
	}
	rows := make([][]string, 0, len(info.Rows))
	for _, r := range info.Rows {
		name, user, fs := strings.Repeat("  ", r.Depth)+r.Account, "", ""
		if r.User != "" {
			user, fs = r.User, strconv.FormatFloat(r.FairShare, 'f', 3, 64)
		}
		lf := "inf"
		if r.LevelFS != nil {
			lf = strconv.FormatFloat(*r.LevelFS, 'f', 3, 64)
		}
		rows = append(rows, []string{name, dashIfEmpty(user), strconv.Itoa(r.Shares), strconv.FormatFloat(r.NormShares, 'f', 3, 64),
			strconv.FormatFloat(r.Usage.GPUSeconds/3600, 'f', 1, 64), strconv.FormatFloat(r.NormUsage, 'f', 3, 64), lf, dashIfEmpty(fs)})
	}
	if err := printTable(w, []string{"ACCOUNT", "USER", "SHARES", "NORM SHARES", "GPU-HOURS", "NORM USAGE", "LEVEL FS", "FAIRSHARE"}, rows); err != nil {
		return err
	}
	if !info.ChargedAt.IsZero() {
		_, err = fmt.Fprintf(w, "(GPU-hours decayed, as charged at %s)\n", info.ChargedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	return err
}
