package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

// newClient builds the API client from the global --addr, --token or
// --token-file, and --ca-cert flags. A request never waits on one agent
// for long: a read (or a submission) goes to the next agent of --addr
// after api.DefaultHedgeAfter without an answer, and no request waits more
// than api.DefaultAnswerWait for one. A write the cluster refuses as busy
// is sent again after the delay the leader asks for, up to
// api.DefaultBusyWait in all, and the first wait is said on stderr.
func newClient(c *ucli.Context) (*api.Client, error) {
	token, err := apiToken(c)
	if err != nil {
		return nil, err
	}
	cl, err := api.NewClient(c.String("addr"), token)
	if err != nil {
		return nil, &usageError{cmd: c.Command.HelpName, err: err}
	}
	cl = cl.WithTimeouts(api.DefaultHedgeAfter, api.DefaultAnswerWait)
	var once sync.Once
	cl = cl.WithBusyRetry(api.DefaultBusyWait, func(wait time.Duration) {
		once.Do(func() {
			fmt.Fprintf(c.App.ErrWriter, "cluster busy, retrying in %s\n", wait.Round(100*time.Millisecond))
		})
	})
	cfg, err := clusterTLS(c)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		cl = cl.WithTLS(cfg)
	}
	closeWhenDone(c.App, cl)
	return cl, nil
}

// openClients is the key under which an App's Metadata lists the clients
// its command made, for run to close their connections when it ends.
const openClients = "skein.openClients"

// closeWhenDone has run close cl's idle connections once the command
// ends.
func closeWhenDone(app *ucli.App, cl *api.Client) {
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	list, _ := app.Metadata[openClients].([]*api.Client)
	app.Metadata[openClients] = append(list, cl)
}

// closeClients closes the idle connections of every client app's command
// made.
func closeClients(app *ucli.App) {
	list, _ := app.Metadata[openClients].([]*api.Client)
	for _, cl := range list {
		cl.CloseIdle()
	}
}

// apiToken returns the API token from --token (SKEIN_TOKEN) or the file
// --token-file (SKEIN_TOKEN_FILE) names, whichever was given; both is a
// usage error, neither is "".
func apiToken(c *ucli.Context) (string, error) {
	file, fromFile := lineageString(c, "token-file")
	token, given := lineageString(c, "token")
	switch {
	case fromFile && given:
		return "", usagef(c, "--token (or SKEIN_TOKEN) and --token-file (or SKEIN_TOKEN_FILE) are both set: use one")
	case fromFile:
		return readSecretFile("--token-file", file)
	}
	return token, nil
}

// lineageString returns the value of the string flag name as given to the
// command running in c or, failing that, to a command above it. An empty
// value (an exported but empty SKEIN_TOKEN) counts as not given.
func lineageString(c *ucli.Context, name string) (string, bool) {
	for _, ctx := range c.Lineage() {
		if v := ctx.String(name); ctx.IsSet(name) && v != "" {
			return v, true
		}
	}
	return "", false
}

// maxSecretFile bounds what readSecretFile reads: tokens are short.
const maxSecretFile = 64 << 10

// readSecretFile returns the secret in file, with surrounding white space
// trimmed; flag names where the file came from in errors.
func readSecretFile(flag, file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: read %s: %w", flag, file, err)
	case len(b) > maxSecretFile:
		return "", fmt.Errorf("%s: %s is larger than %d KiB: not a token file", flag, file, maxSecretFile>>10)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", flag, file)
	}
	return s, nil
}

// clusterTLS returns a TLS configuration that verifies agents against the
// CA bundle --ca-cert (SKEIN_CACERT) names, or nil when none is set.
func clusterTLS(c *ucli.Context) (*tls.Config, error) {
	file, ok := lineageString(c, "ca-cert")
	if !ok {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	cfg, err := api.ClusterTLS(b)
	if errors.Is(err, api.ErrNoCACert) {
		return nil, fmt.Errorf("--ca-cert %s: no PEM certificate in it (want the file `skein ca export` writes)", file)
	}
	if err != nil {
		return nil, fmt.Errorf("--ca-cert %s: %w", file, err)
	}
	return cfg, nil
}

// commandClient is cmdArgs and newClient, what almost every command starts
// with.
func commandClient(c *ucli.Context, want ...string) ([]string, *api.Client, error) {
	args, err := cmdArgs(c, want...)
	if err != nil {
		return nil, nil, err
	}
	cl, err := newClient(c)
	return args, cl, err
}

// cmdArgs returns the positional arguments of the command running in c,
// exactly one per name in want, and applies flags given after them, so that
// `skein job ID --json` works like `skein job --json ID`.
func cmdArgs(c *ucli.Context, want ...string) ([]string, error) {
	return cmdArgsOf(c, c.Args().Slice(), want...)
}

// cmdArgsOf is cmdArgs over rest, some of the command's arguments.
func cmdArgsOf(c *ucli.Context, rest []string, want ...string) ([]string, error) {
	var pos []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := commandFlag(c.Command, name)
		if f == nil {
			return nil, &usageError{cmd: c.Command.HelpName, err: suggestFlag(fmt.Errorf("flag provided but not defined: %s", a), c.Command.Flags)}
		}
		if isBoolFlag(f) && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 == len(rest) {
				return nil, usagef(c, "flag needs an argument: %s", a)
			}
			i++
			value = rest[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, usagef(c, "invalid value %q for flag -%s: %v", value, name, err)
		}
	}
	if c.Bool("help") {
		if err := ucli.ShowCommandHelp(c.Lineage()[1], c.Command.Name); err != nil {
			return nil, err
		}
		return nil, exitStatus(exitOK)
	}
	switch {
	case len(pos) < len(want):
		return nil, usagef(c, "missing %s", strings.Join(want[len(pos):], " "))
	case len(pos) > len(want):
		return nil, usagef(c, "unexpected argument %q", pos[len(want)])
	}
	return pos, nil
}

// commandFlag returns the flag of cmd called name, or nil.
func commandFlag(cmd *ucli.Command, name string) ucli.Flag {
	return commandFlagOf(cmd.Flags, name)
}

// commandFlagOf returns the flag among flags called name, or nil.
func commandFlagOf(flags []ucli.Flag, name string) ucli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}
