package cli

import (
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func aclTokenCreateCommand() *ucli.Command {
	roles := make([]string, len(structs.Roles))
	for i, r := range structs.Roles {
		roles[i] = string(r)
	}
	return &ucli.Command{
		Name:  "create",
		Usage: "make a token for a user; it is printed alone on stdout, once (the cluster keeps only its hash)",
		Description: "Hand it to the user, who keeps it in a file and sets SKEIN_TOKEN_FILE to it:\n" +
			"  skein acl token create --user alice --role submitter --ttl 30d > alice.token",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "user", Usage: "the user the token acts for; its jobs are owned by and run as this user"},
			&ucli.StringFlag{Name: "role", Usage: "what the token may do: " + strings.Join(roles, ", ") + " (see skein acl --help)"},
			&ucli.StringFlag{Name: "ttl", Usage: "how long the token works, in days (30d) or a duration (12h); at most " + ttlText(structs.MaxACLTokenTTL) + " (default: until revoked)"},
			&ucli.StringFlag{Name: "description", Usage: "what the token is for, shown in skein acl token list"},
			&ucli.BoolFlag{Name: "json", Usage: "print the token and its record as JSON"},
		},
		Action: aclTokenCreateAction,
	}
}

func aclTokenCreateAction(c *ucli.Context) error {
	if _, err := cmdArgs(c); err != nil {
		return err
	}
	req, err := aclTokenRequest(c)
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	created, err := cl.CreateACLToken(c.Context, req)
	if err != nil {
		return err
	}
	if err := printCreatedToken(c, created); err != nil {
		return err
	}
	info := created.Info
	expires := "never expires (revoke it with skein acl token revoke " + info.ID + ")"
	if !info.ExpiresAt.IsZero() {
		expires = fmt.Sprintf("expires %s (valid %s)", info.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"), ttlText(info.ExpiresAt.Sub(info.CreatedAt).Round(time.Minute)))
	}
	_, err = fmt.Fprintf(c.App.ErrWriter,
		"token %s for user %s, role %s, %s; shown this once\nthe user keeps it in a file only they can read and uses it: export SKEIN_TOKEN_FILE=FILE\n",
		info.ID, info.User, info.Role, expires)
	return err
}

// aclTokenRequest reads and checks the flags of token create.
func aclTokenRequest(c *ucli.Context) (api.ACLTokenCreateRequest, error) {
	req := api.ACLTokenCreateRequest{User: c.String("user"), Description: c.String("description")}
	if !c.IsSet("user") || !c.IsSet("role") {
		return req, usagef(c, "give the token's --user and --role")
	}
	if err := checkFlag(c, "user", structs.ValidateUserName(req.User)); err != nil {
		return req, err
	}
	role, err := structs.ParseRole(c.String("role"))
	if err := checkFlag(c, "role", err); err != nil {
		return req, err
	}
	req.Role = role
	if c.IsSet("ttl") {
		ttl, err := parseTTL(c.String("ttl"))
		if err := checkFlag(c, "ttl", err); err != nil {
			return req, err
		}
		req.TTL = structs.Duration(ttl)
	}
	if n := len(req.Description); n > structs.MaxDescriptionLen {
		return req, usagef(c, "--description: %d bytes; at most %d", n, structs.MaxDescriptionLen)
	}
	return req, nil
}
