package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/structs"
)

func accountCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "account",
		Usage: "fair share: the tree of accounts, their shares and members (changes take an admin token)",
		Description: "An account's shares are its part of its parent's part of the cluster: two accounts of\n" +
			"70 and 30 shares under the root get 70% and 30% of the GPU time when both want more than\n" +
			"the cluster holds. A user's first account is its default (submit --account picks another).\n" +
			"  skein account create ml --shares 70\n" +
			"  skein account create nlp --parent ml --shares 1 --max-gpus 16\n" +
			"  skein account add-user ml alice\n" +
			"  skein account weights --fair-share 10000 --age 1000 --qos 2000",
		Subcommands: []*ucli.Command{
			{Name: "list", Usage: "show the account tree, members and limits, the QoS and the weights", Action: accountListAction,
				Flags: []ucli.Flag{jsonFlag()}},
			{Name: "create", Usage: "create an account", ArgsUsage: "NAME", Flags: accountFlags(), Action: accountChangeAction(structs.AccountCreate)},
			{Name: "update", Usage: "change an account's shares, parent or limits (values not given stay)", ArgsUsage: "NAME",
				Flags: accountFlags(), Action: accountChangeAction(structs.AccountUpdate)},
			{Name: "delete", Usage: "delete an account without sub-accounts (its usage goes with it)", ArgsUsage: "NAME",
				Flags: []ucli.Flag{jsonFlag()}, Action: accountChangeAction(structs.AccountDelete)},
			{Name: "add-user", Usage: "make USER a member of ACCOUNT", ArgsUsage: "ACCOUNT USER", Flags: []ucli.Flag{jsonFlag()},
				Action: accountMemberAction(structs.AccountAddUser)},
			{Name: "remove-user", Usage: "take USER out of ACCOUNT", ArgsUsage: "ACCOUNT USER", Flags: []ucli.Flag{jsonFlag()},
				Action: accountMemberAction(structs.AccountRemoveUser)},
			{Name: "weights", Usage: "set the weights of the priority factors (values not given stay)", Flags: []ucli.Flag{
				&ucli.IntFlag{Name: "age", Usage: "weight of waiting (full after --max-age)"},
				&ucli.IntFlag{Name: "fair-share", Usage: "weight of the fair-share factor"},
				&ucli.IntFlag{Name: "job-size", Usage: "weight of the job's share of the cluster's GPUs"},
				&ucli.IntFlag{Name: "qos", Usage: "weight of the QoS's priority"},
				&ucli.StringFlag{Name: "max-age", Usage: "the wait at which the age factor is full (7d)"},
				jsonFlag(),
			}, Action: accountWeightsAction},
		},
	}
}

func jsonFlag() ucli.Flag { return &ucli.BoolFlag{Name: "json", Usage: "print JSON"} }

func accountFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "parent", Usage: "the account above it (default: the root)"},
		&ucli.IntFlag{Name: "shares", Usage: "its part among its siblings (default 1)"},
		&ucli.StringFlag{Name: "max-gpus", Usage: "most GPUs its running jobs hold together (a count or unlimited)"},
		&ucli.StringFlag{Name: "max-jobs", Usage: "most of its jobs running at once (a count or unlimited)"},
		jsonFlag(),
	}
}

func accountChangeAction(op string) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		args, err := cmdArgs(c, "NAME")
		if err != nil {
			return err
		}
		req := structs.AccountRequest{Op: op, Name: args[0]}
		if op != structs.AccountDelete {
			if c.IsSet("parent") {
				p := c.String("parent")
				req.Parent = &p
			}
			if c.IsSet("shares") {
				n := c.Int("shares")
				req.Shares = &n
			}
			if req.MaxGPUs, err = limitFlag(c, "max-gpus"); err != nil {
				return err
			}
			if req.MaxJobs, err = limitFlag(c, "max-jobs"); err != nil {
				return err
			}
		}
		return sendAccount(c, req)
	}
}

func accountMemberAction(op string) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		args, err := cmdArgs(c, "ACCOUNT", "USER")
		if err != nil {
			return err
		}
		return sendAccount(c, structs.AccountRequest{Op: op, Name: args[0], User: args[1]})
	}
}

func accountWeightsAction(c *ucli.Context) error {
	if _, err := cmdArgs(c); err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	tab, err := cl.Accounts(c.Context)
	if err != nil {
		return err
	}
	w := tab.PriorityWeights()
	for name, dst := range map[string]*int{"age": &w.Age, "fair-share": &w.FairShare, "job-size": &w.JobSize, "qos": &w.QoS} {
		if c.IsSet(name) {
			*dst = c.Int(name)
		}
	}
	if err := decodeFlag(c, "max-age", &w.MaxAge, structs.ParseDuration); err != nil {
		return err
	}
	return sendAccount(c, structs.AccountRequest{Op: structs.AccountSetWeights, Weights: &w})
}

// sendAccount commits a change and prints the table as it is now.
func sendAccount(c *ucli.Context, req structs.AccountRequest) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	tab, err := cl.SetAccount(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, tab)
	}
	return printAccounts(c.App.Writer, tab)
}

func accountListAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	tab, err := cl.Accounts(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, tab)
	}
	return printAccounts(c.App.Writer, tab)
}

// printAccounts prints the account tree (children under their parent,
// by name), then the QoS and the weights.
func printAccounts(w io.Writer, tab *structs.AccountTable) error {
	children := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(tab.Accounts)) {
		p := tab.Accounts[name].Parent
		children[p] = append(children[p], name)
	}
	var rows [][]string
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, name := range children[parent] {
			a := tab.Accounts[name]
			users := make([]string, len(a.Users))
			for i, u := range a.Users {
				users[i] = u
				if tab.Defaults[u] == name {
					users[i] += "*"
				}
			}
			rows = append(rows, []string{strings.Repeat("  ", depth) + name, strconv.Itoa(a.Shares),
				limitOf(a.MaxGPUs), limitOf(a.MaxJobs), dashIfEmpty(strings.Join(users, ","))})
			walk(name, depth+1)
		}
	}
	walk("", 0)
	if len(rows) == 0 {
		if _, err := fmt.Fprintln(w, "No accounts: fair share is off (skein account create NAME --shares N)."); err != nil {
			return err
		}
	} else {
		if err := printTable(w, []string{"ACCOUNT", "SHARES", "MAX GPUS", "MAX JOBS", "USERS"}, rows); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w, "(* the user's default account)"); err != nil {
			return err
		}
	}
	if len(tab.QoS) > 0 {
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
		if err := printQoS(w, tab); err != nil {
			return err
		}
	}
	wt := tab.PriorityWeights()
	_, err := fmt.Fprintf(w, "\nPriority weights: fair share %d, QoS %d, age %d (full after %s), job size %d\n",
		wt.FairShare, wt.QoS, wt.Age, wt.MaxAge, wt.JobSize)
	return err
}

func limitOf(p *int) string {
	if p == nil {
		return "-"
	}
	return structs.LimitText(*p)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
