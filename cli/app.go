package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// Exit codes of the skein command.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError marks an error in how a command was called: bad or unknown
// flags, missing or extra arguments, values that do not parse.
type usageError struct {
	cmd string // the command's full name, "skein submit"
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError for the command running in c.
func usagef(c *ucli.Context, format string, args ...any) error {
	return &usageError{cmd: c.Command.HelpName, err: fmt.Errorf(format, args...)}
}

// decodeFlag sets *dst from flag name when it is given, with parse: the
// structs decoder a job file uses for the same value. A value that does
// not parse is a usage error naming the flag.
func decodeFlag[T any](c *ucli.Context, name string, dst *T, parse func(string) (T, error)) error {
	if !c.IsSet(name) {
		return nil
	}
	v, err := parse(c.String(name))
	if err != nil {
		return usagef(c, "--%s: %v", name, err)
	}
	*dst = v
	return nil
}

// exitStatus ends the program with a code; the action has already said why.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// urfave/cli gives every app and command the same two flag values,
// HelpFlag and VersionFlag, and a parse writes into them (BoolFlag.Apply
// records its default): two command lines parsed at once in one process,
// as the parallel tests do, would race. Each parse applies a copy.
func init() {
	ucli.HelpFlag = &copiedBoolFlag{*ucli.HelpFlag.(*ucli.BoolFlag)}
	ucli.VersionFlag = &copiedBoolFlag{*ucli.VersionFlag.(*ucli.BoolFlag)}
}

// copiedBoolFlag is a BoolFlag whose Apply leaves the flag value shared
// by every app untouched.
type copiedBoolFlag struct{ ucli.BoolFlag }

func (f *copiedBoolFlag) Apply(set *flag.FlagSet) error {
	c := f.BoolFlag
	return c.Apply(set)
}

// GetDefaultText keeps help from printing "(default: false)" after the
// flag, which urfave leaves out only for its own BoolFlag type.
func (f *copiedBoolFlag) GetDefaultText() string {
	if f.DisableDefaultText {
		return ""
	}
	return f.BoolFlag.GetDefaultText()
}

// helpCommand is urfave's help subcommand (skein help, skein node help
// drain), taken once. urfave adds its one package-wide value to the
// commands of every command line and writes into it on each run, so
// each command line gets copies of its own (newHelpCommand).
var helpCommand = func() ucli.Command {
	app := &ucli.App{Writer: io.Discard}
	app.Setup()
	return *app.Command("help")
}()

// newHelpCommand returns a copy of the help subcommand.
func newHelpCommand() *ucli.Command {
	c := helpCommand
	return &c
}

// isBoolFlag reports whether f is a switch, given without a value.
func isBoolFlag(f ucli.Flag) bool {
	df, ok := f.(ucli.DocGenerationFlag)
	return ok && !df.TakesValue()
}

// Run runs the skein command line with os.Args-style args and returns the
// process exit code. Called through a link named like one of Slurm's
// commands (slurmNames), it runs that command.
func Run(args []string) int {
	return run(NewApp(os.Stdout, os.Stderr), args)
}

// NewApp builds the skein command line writing to stdout and stderr. It never
// calls os.Exit; run turns the error an action returns into an exit code.
func NewApp(stdout, stderr io.Writer) *ucli.App {
	app := &ucli.App{
		Name:      "skein",
		HelpName:  "skein",
		Usage:     "a peer-to-peer GPU cluster agent",
		Version:   structs.Version,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []ucli.Flag{
			&ucli.StringFlag{
				Name:    "addr",
				Usage:   "URL of the skein agent to talk to; several, comma-separated, are tried in order",
				EnvVars: []string{"SKEIN_ADDR"},
				Value:   api.DefaultAddr,
			},
			&ucli.StringFlag{
				Name:    "token-file",
				Usage:   "read the API token from `FILE`",
				EnvVars: []string{"SKEIN_TOKEN_FILE"},
			},
			&ucli.StringFlag{
				Name:    "token",
				Usage:   "API token (prefer --token-file: a command line is visible to other users)",
				EnvVars: []string{"SKEIN_TOKEN"},
			},
			&ucli.StringFlag{
				Name:    "ca-cert",
				Usage:   "verify https agents against the cluster CA bundle in `FILE` (from skein ca export)",
				EnvVars: []string{"SKEIN_CACERT"},
			},
			// urfave adds it only where it adds its own help command.
			ucli.HelpFlag,
		},
		Commands:       append(commands(), newHelpCommand()),
		Action:         rootAction,
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*ucli.Context, error) {},
		// --env and --constraint values may contain commas.
		DisableSliceFlagSeparator: true,
		// `skein completion` scripts ask for the next words with
		// --generate-bash-completion.
		EnableBashCompletion: true,
	}
	prepare(app.Commands)
	return app
}

// commands is every skein command.
func commands() []*ucli.Command {
	return []*ucli.Command{
		agentCommand(),
		submitCommand(),
		sbatchCommand(),
		jobsCommand(),
		jobCommand(),
		cancelCommand(),
		logsCommand(),
		serveCommand(),
		servicesCommand(),
		serviceCommand(),
		scaleCommand(),
		nodesCommand(),
		gpusCommand(),
		gpuCommand(),
		statusCommand(),
		eventsCommand(),
		membersCommand(),
		raftCommand(),
		joinCommand(),
		leaveCommand(),
		joinTokenCommand(),
		limitsCommand(),
		accountCommand(),
		qosCommand(),
		shareCommand(),
		prioCommand(),
		aclCommand(),
		auditCommand(),
		caCommand(),
		keyringCommand(),
		nodeCommand(),
		snapshotCommand(),
		keygenCommand(),
		versionCommand(),
		superviseCommand(),
		squeueCommand(),
		scancelCommand(),
		sinfoCommand(),
		sacctCommand(),
		scontrolCommand(),
		execCommand(),
		sallocCommand(),
		runCommand(),
		srunCommand(),
		partitionCommand(),
		completionCommand(),
	}
}

// prepare makes every command report flag errors as usage errors and keeps
// urfave from treating a leaf command's first argument "help" as a
// subcommand (`skein submit -- help` runs a program called help).
func prepare(cmds []*ucli.Command) {
	for _, cmd := range cmds {
		if cmd.OnUsageError == nil {
			cmd.OnUsageError = onUsageError
		}
		if len(cmd.Subcommands) == 0 {
			cmd.HideHelpCommand = true
		} else if !cmd.HideHelp && !cmd.HideHelpCommand {
			cmd.Subcommands = append(cmd.Subcommands, newHelpCommand())
		}
		prepare(cmd.Subcommands)
	}
}

func onUsageError(c *ucli.Context, err error, _ bool) error {
	flags := c.App.Flags
	if c.Command != nil && c.Command.Name != "" {
		flags = append(slices.Clip(c.Command.Flags), flags...)
	}
	return &usageError{cmd: c.Command.HelpName, err: suggestFlag(err, flags)}
}

// suggestFlag adds to an unknown flag's error the flag among flags it
// most likely meant: "flag provided but not defined: -gpu (did you mean
// --gpus?)".
func suggestFlag(err error, flags []ucli.Flag) error {
	const unknown = "flag provided but not defined: "
	msg := err.Error()
	if !strings.HasPrefix(msg, unknown) {
		return err
	}
	name, _, _ := strings.Cut(strings.TrimLeft(strings.TrimPrefix(msg, unknown), "-"), "=")
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	near := closest(name, names)
	if near == "" {
		return err
	}
	dashes := "--"
	if len(near) == 1 {
		dashes = "-"
	}
	return fmt.Errorf("%w (did you mean %s%s?)", err, dashes, near)
}

// rootAction runs for `skein` without a known command. `skein` alone is
// a usage error (exit 2) that prints the help on stderr; `skein --help`
// prints it on stdout and succeeds.
func rootAction(c *ucli.Context) error {
	if c.Args().Present() {
		return usagef(c, "unknown command %q", c.Args().First())
	}
	out := c.App.Writer
	c.App.Writer = c.App.ErrWriter
	defer func() { c.App.Writer = out }()
	if err := ucli.ShowAppHelp(c); err != nil {
		return err
	}
	return exitStatus(exitUsage)
}

// run runs app with args and turns the outcome into an exit code, printing
// errors on app.ErrWriter.
func run(app *ucli.App, args []string) int {
	if completingAfterDoubleDash(args) {
		return exitOK // the shell offers file names
	}
	err := app.Run(commandArgs(app, args))
	closeClients(app)
	if err == nil {
		return exitOK
	}
	var (
		status exitStatus
		usage  *usageError
		coder  ucli.ExitCoder
		apiErr *api.Error
	)
	switch {
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &usage):
		fmt.Fprintf(app.ErrWriter, "Error: %s\nRun '%s --help' for usage.\n", usage.err, usage.cmd)
		return exitUsage
	case errors.As(err, &coder):
		// urfave's own errors, such as `skein help nosuchcommand` (code 3),
		// are usage errors; ucli.Exit(msg, 1) keeps its code.
		fmt.Fprintf(app.ErrWriter, "Error: %s\n", err)
		if coder.ExitCode() == exitError {
			return exitError
		}
		return exitUsage
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusForbidden &&
		strings.HasPrefix(apiErr.Message, structs.ErrPermission.Error()):
		// The token's role lacks what the command needs, and the
		// caller may not know which token is in use.
		fmt.Fprintf(app.ErrWriter, "Error: %s\n(skein acl whoami shows the user and role of your token)\n", err)
		return exitError
	case errors.As(err, &apiErr) && flagAdvice(apiErr.Field) != "":
		fmt.Fprintf(app.ErrWriter, "Error: %s\n(%s)\n", err, flagAdvice(apiErr.Field))
		return exitError
	}
	fmt.Fprintf(app.ErrWriter, "Error: %s\n", err)
	return exitError
}
