package cli

import (
	"fmt"
	"slices"

	ucli "github.com/urfave/cli/v2"
)

// The shell completion scripts. The bash and zsh ones ask skein itself:
// a command line ending in --generate-bash-completion prints the words
// that may come next (urfave's EnableBashCompletion), with a
// description when the variable 0 ends in zsh.
const (
	bashCompletion = `# bash completion for skein. Load it with
#   source <(skein completion bash)
# or install it as /etc/bash_completion.d/skein.
_skein() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local words=("${COMP_WORDS[@]:1:COMP_CWORD-1}") w
	for w in "${words[@]}"; do
		[[ $w == "--" ]] && return # the job's command: file names
	done
	if [[ $cur == -* ]]; then
		words+=("$cur")
	fi
	local IFS=$'\n'
	COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" "${words[@]}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
}
complete -o default -F _skein skein
`
	zshCompletion = `#compdef skein
# zsh completion for skein. Load it with
#   source <(skein completion zsh)
# or install it as _skein in a directory of $fpath.
_skein() {
	local -a next
	local cur=${words[CURRENT]}
	local -a before=("${(@)words[2,CURRENT-1]}")
	if (( ${before[(Ie)--]} )); then
		_files # the job's command
		return
	fi
	if [[ $cur == -* ]]; then
		before+=("$cur")
	fi
	next=("${(@f)$(env 0=zsh ${words[1]} "${(@)before}" --generate-bash-completion 2>/dev/null)}")
	if [[ -n ${next[1]} ]]; then
		_describe 'skein' next
	else
		_files
	fi
}
compdef _skein skein
`
)

// completingAfterDoubleDash says whether args ask for completions of a
// word after `--`: urfave would take --generate-bash-completion there for
// an argument and run the command (TAB in `skein submit -- trai` would
// submit a job), and only the shell knows what may come there.
func completingAfterDoubleDash(args []string) bool {
	n := len(args)
	return n > 0 && args[n-1] == "--generate-bash-completion" && slices.Contains(args[:n-1], "--")
}

func completionCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: "bash: source <(skein completion bash), or save it as /etc/bash_completion.d/skein\n" +
			"zsh:  source <(skein completion zsh), or save it as _skein in a directory of $fpath\n" +
			"fish: skein completion fish > ~/.config/fish/completions/skein.fish",
		Action: completionAction,
	}
}

func completionAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "SHELL")
	if err != nil {
		return err
	}
	var script string
	switch args[0] {
	case "bash":
		script = bashCompletion
	case "zsh":
		script = zshCompletion
	case "fish":
		// From a fresh command tree, less the help commands and the
		// root's help flag that NewApp adds: urfave's script names the
		// help flag itself, and would name it twice.
		if script, err = withoutHelp(NewApp(c.App.Writer, c.App.ErrWriter)).ToFishCompletion(); err != nil {
			return fmt.Errorf("fish completion: %w", err)
		}
	default:
		return usagef(c, "shell %q: want bash, zsh or fish", args[0])
	}
	_, err = fmt.Fprint(c.App.Writer, script)
	return err
}

// withoutHelp removes from app's tree the help commands and the root's
// help flag that NewApp adds.
func withoutHelp(app *ucli.App) *ucli.App {
	app.Flags = slices.DeleteFunc(app.Flags, func(f ucli.Flag) bool { return f == ucli.HelpFlag })
	var strip func([]*ucli.Command) []*ucli.Command
	strip = func(cmds []*ucli.Command) []*ucli.Command {
		cmds = slices.DeleteFunc(cmds, func(c *ucli.Command) bool { return c.Name == "help" })
		for _, c := range cmds {
			c.Subcommands = strip(c.Subcommands)
		}
		return cmds
	}
	app.Commands = strip(app.Commands)
	return app
}
