package cli

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func joinTokenCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "join-token",
		Usage: "make, list and revoke the tokens that admit new nodes to a secure cluster",
		Subcommands: []*ucli.Command{
			joinTokenCreateCommand(),
			joinTokenListCommand(),
			joinTokenRevokeCommand(),
		},
	}
}

func joinTokenCreateCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "create",
		Usage: "make a join token; it is printed alone on stdout, once (the cluster keeps only its hash)",
		Description: "Save it to a file and start the new node with --join-token-file FILE:\n" +
			"  skein join-token create --uses 1 > token",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "ttl", Value: shortDuration(api.DefaultJoinTokenTTL), Usage: "how long the token admits nodes (at most " + shortDuration(api.MaxJoinTokenTTL) + ")"},
			&ucli.IntFlag{Name: "uses", Usage: fmt.Sprintf("how many nodes it may admit (0: any number until it expires; at most %d)", api.MaxJoinTokenUses)},
			&ucli.StringFlag{Name: "description", Usage: "what the token is for, shown in skein join-token list"},
			&ucli.BoolFlag{Name: "json", Usage: "print the token and its record as JSON"},
		},
		Action: joinTokenCreateAction,
	}
}

func joinTokenCreateAction(c *ucli.Context) error {
	if _, err := cmdArgs(c); err != nil {
		return err
	}
	req := api.JoinTokenCreateRequest{
		TTL:         structs.Duration(api.DefaultJoinTokenTTL),
		Uses:        c.Int("uses"),
		Description: c.String("description"),
	}
	if err := decodeFlag(c, "ttl", &req.TTL, structs.ParseDuration); err != nil {
		return err
	}
	if ttl := time.Duration(req.TTL); ttl <= 0 || ttl > api.MaxJoinTokenTTL {
		return usagef(c, "--ttl %s: want more than 0 and at most %s", shortDuration(ttl), shortDuration(api.MaxJoinTokenTTL))
	}
	if req.Uses < 0 || req.Uses > api.MaxJoinTokenUses {
		return usagef(c, "--uses %d: want 0 (any number) to %d", req.Uses, api.MaxJoinTokenUses)
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	created, err := cl.CreateJoinToken(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		err = printJSON(c.App.Writer, created)
	} else {
		_, err = fmt.Fprintln(c.App.Writer, created.Token)
	}
	if err != nil {
		return err
	}
	info := created.Info
	uses := "any number of nodes"
	if info.MaxUses > 0 {
		uses = fmt.Sprintf("up to %d node(s)", info.MaxUses)
	}
	_, err = fmt.Fprintf(c.App.ErrWriter,
		"join token %s expires %s (valid %s) and admits %s\nstart a new node with it: skein agent %s--data-dir DIR --join %s --join-token-file FILE\n",
		info.ID, info.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"), shortDuration(info.ExpiresAt.Sub(info.CreatedAt).Round(time.Minute)), uses,
		loopbackTLSFlag(c), joinAddr(c.Context, c, cl))
	return err
}

// firstAddr is the scheme and host of the first --addr ("HOST" when it
// names none).
func firstAddr(c *ucli.Context) (scheme, host string) {
	first, _, _ := strings.Cut(c.String("addr"), ",")
	first = strings.TrimSpace(first)
	if !strings.Contains(first, "://") {
		first = "http://" + first
	}
	scheme, host = "http", "HOST"
	if u, err := url.Parse(first); err == nil && u.Hostname() != "" {
		scheme, host = u.Scheme, u.Hostname()
	}
	return scheme, host
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// loopbackTLSFlag is "--tls " when the agent asked is on loopback and
// speaks https: an agent on loopback runs secure only when told, so the
// new node must be told too.
func loopbackTLSFlag(c *ucli.Context) string {
	if scheme, host := firstAddr(c); scheme == "https" && isLoopback(host) {
		return "--tls "
	}
	return ""
}

// joinAddr is the address a new node should --join: the host of the first
// --addr, unless that is loopback, which means nothing to another machine;
// then the gossip address the node that answers advertises, if it says.
func joinAddr(ctx context.Context, c *ucli.Context, cl *api.Client) string {
	_, host := firstAddr(c)
	if !isLoopback(host) {
		return host
	}
	st, err := cl.Status(ctx)
	if err != nil {
		return host
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return host
	}
	for _, n := range nodes {
		if n.Name == st.Node && n.Addresses.Gossip != "" {
			return n.Addresses.Gossip
		}
	}
	return host
}
