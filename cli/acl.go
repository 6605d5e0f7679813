package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/structs"
)

func aclCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "acl",
		Usage: "users, roles and their tokens",
		Description: "A cluster has ACLs once `skein acl bootstrap` has made its first admin token; from then on\n" +
			"each token names a user and a role:\n" +
			"  reader     sees the cluster: nodes, GPUs, jobs (others' env values hidden), limits\n" +
			"  submitter  also submits jobs, and cancels, reads the logs and sees the env of its own\n" +
			"  operator   also runs the nodes and GPUs and acts on anyone's jobs\n" +
			"  admin      also manages tokens, users and limits, and reads the audit log",
		Subcommands: []*ucli.Command{
			aclBootstrapCommand(),
			aclTokenCommand(),
			aclUserCommand(),
			aclWhoAmICommand(),
		},
	}
}

func aclTokenCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "token",
		Usage: "make, list and revoke users' tokens (an admin's)",
		Subcommands: []*ucli.Command{
			aclTokenCreateCommand(),
			aclTokenListCommand(),
			aclTokenRevokeCommand(),
		},
	}
}

// checkFlag turns err, a check of the value of flag --name, into a usage
// error naming the flag.
func checkFlag(c *ucli.Context, name string, err error) error {
	if err == nil {
		return nil
	}
	var fe *structs.FieldError
	if errors.As(err, &fe) {
		return usagef(c, "--%s: %s", name, fe.Msg)
	}
	return usagef(c, "--%s: %v", name, err)
}

// day is the unit a token's TTL may be given in besides Go's.
const day = 24 * time.Hour

// parseTTL reads a token's lifetime: whole days ("30d") or a Go duration
// ("12h", "90m"), more than 0 and at most structs.MaxACLTokenTTL.
func parseTTL(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid TTL %q: want whole days (30d) or a duration (12h)", s)
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, bad
		}
		// Checked before multiplying: a day count can overflow a Duration.
		days = min(days, int(structs.MaxACLTokenTTL/day)+1)
		d = time.Duration(days) * day
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	if d <= 0 || d > structs.MaxACLTokenTTL {
		return 0, fmt.Errorf("%s: want more than 0 and at most %s (without --ttl a token works until revoked)", s, ttlText(structs.MaxACLTokenTTL))
	}
	return d, nil
}

// ttlText renders a token's lifetime: in days when it is whole days,
// else as a short duration.
func ttlText(d time.Duration) string {
	if d >= day && d%day == 0 {
		return strconv.Itoa(int(d/day)) + "d"
	}
	return shortDuration(d)
}
