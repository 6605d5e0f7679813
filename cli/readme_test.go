package cli

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

// readmeLine is a line of README.md: its number and text, and whether it
// is inside a fenced code block.
type readmeLine struct {
	n     int
	text  string
	fence bool
}

// readmeLines reads ../README.md, joining a fenced line that ends in a
// backslash with the next, as the shell does.
func readmeLines(t *testing.T) []readmeLine {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeLine
	fence := false
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := readmeLine{n: i + 1, text: lines[i], fence: fence}
		if strings.HasPrefix(strings.TrimSpace(l.text), "```") {
			fence = !fence
			continue
		}
		for l.fence && strings.HasSuffix(l.text, `\`) && i+1 < len(lines) {
			i++
			l.text = strings.TrimSuffix(l.text, `\`) + " " + strings.TrimSpace(lines[i])
		}
		out = append(out, l)
	}
	if fence {
		t.Fatal("README.md: a code block is not closed")
	}
	return out
}

// shellCommands splits a line of shell into its simple commands' words,
// as far as README's examples need: quotes, comments, ; | & && || ( )
// $( ), redirections (dropped with their targets) and leading variable
// assignments and keywords (dropped). A word like <id> is a placeholder,
// not a redirection.
func shellCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord, redirect := false, false
	endWord := func() {
		if !inWord {
			return
		}
		if redirect {
			redirect = false // the redirection's target
		} else {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		for len(words) > 0 && (strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") ||
			slices.Contains([]string{"do", "then", "else", "!", "time"}, words[0])) {
			words = words[1:]
		}
		if len(words) > 0 && !slices.Contains([]string{"for", "while", "if", "done", "fi"}, words[0]) {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '\\' && i+1 < len(line):
			w.WriteByte(line[i+1])
			inWord, i = true, i+1
		case c == '#' && !inWord:
			endCmd()
			return cmds
		case c == ' ' || c == '\t':
			endWord()
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			endCmd()
			i++
		case strings.IndexByte(";|&()`", c) >= 0:
			endCmd()
		case c == '<' && strings.IndexByte(line[i:], '>') > 0 && !strings.ContainsAny(line[i:i+strings.IndexByte(line[i:], '>')], " \t"):
			j := strings.IndexByte(line[i:], '>')
			w.WriteString(line[i : i+j+1])
			inWord, i = true, i+j
		case c == '>' || c == '<':
			if inWord && strings.Trim(w.String(), "0123456789") == "" {
				w.Reset() // 2>: the descriptor
				inWord = false
			}
			endWord()
			for i+1 < len(line) && strings.IndexByte(">&", line[i+1]) >= 0 {
				i++
			}
			redirect = true
			if i+1 < len(line) && line[i+1] >= '0' && line[i+1] <= '9' && (i+2 == len(line) || line[i+2] == ' ') {
				i++ // >&1
				redirect = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

func TestShellCommands_SplitsWhatREADMEWrites(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"skein jobs --mine   # alice's jobs", "skein jobs --mine"},
		{"SKEIN_TOKEN_FILE=/tmp/a skein logs <id>   # uid=1001(alice)", "skein logs <id>"},
		{"(umask 077; skein acl bootstrap > /tmp/skein-admin)", "umask 077|skein acl bootstrap"},
		{"for i in 1 2 3; do skein submit --gpus 8 -- w --dir /shared; done", "skein submit --gpus 8 -- w --dir /shared"},
		{`gpu=$(skein job 2eca --json | grep -o 'GPU-[0-9a-f-]*' | head -n 1)`, "skein job 2eca --json|grep -o GPU-[0-9a-f-]*|head -n 1"},
		{"skein agent --name a 2>&1 &", "skein agent --name a"},
		{`skein submit -- sh -c 'echo "$PORT"; exit 1'`, `skein submit -- sh -c echo "$PORT"; exit 1`},
	} {
		var got []string
		for _, words := range shellCommands(tc.line) {
			got = append(got, strings.Join(words, " "))
		}
		if strings.Join(got, "|") != tc.want {
			t.Errorf("shellCommands(%q) = %q, want %q", tc.line, strings.Join(got, "|"), tc.want)
		}
	}
}

// stubbedApp is the skein command line with every command's action
// replaced by one that records the command it ran, so that a command
// line can be parsed, flags and all, without doing anything.
func stubbedApp(stderr io.Writer, ran *string) *ucli.App {
	app := NewApp(io.Discard, stderr)
	var stub func(cmds []*ucli.Command)
	stub = func(cmds []*ucli.Command) {
		for _, cmd := range cmds {
			if cmd.Action != nil {
				cmd.Action = func(c *ucli.Context) error {
					*ran = c.Command.HelpName
					return nil
				}
			}
			stub(cmd.Subcommands)
		}
	}
	stub(app.Commands)
	return app
}

func TestREADME_EveryCommandInItsCodeBlocksParses(t *testing.T) {
	checked := 0
	for _, l := range readmeLines(t) {
		if !l.fence {
			continue
		}
		for _, words := range shellCommands(strings.TrimPrefix(strings.TrimSpace(l.text), "$ ")) {
			if words[0] != "skein" {
				continue
			}
			checked++
			var stderr bytes.Buffer
			var ran string
			code := run(stubbedApp(&stderr, &ran), words)
			if code != exitOK || ran == "" {
				t.Errorf("README.md:%d: %s: exit %d, no command run: %s", l.n, strings.Join(words, " "), code, strings.TrimSpace(stderr.String()))
			}
		}
	}
	t.Logf("%d commands parsed", checked)
	if checked < 50 {
		t.Fatalf("checked %d commands: README.md's code blocks should hold more", checked)
	}
}

// readmeSpan is an inline code span of README.md outside the code blocks
// that shows a skein command, like the Commands table's synopses.
var readmeSpan = regexp.MustCompile("`(skein [^`]+)`")

// synopsisFlag finds the flags a synopsis names: --name or -n at the
// start or after a space, [ or |.
var synopsisFlag = regexp.MustCompile(`(?:^|[\s\[|])(--?[A-Za-z][A-Za-z0-9-]*)`)

// synopsisProblems resolves a synopsis ("skein gpu cordon [--reason R]
// NODE/INDEX") to its command and says what does not resolve, and which
// flags it names that the command lacks. A command group named alone
// (`skein acl`) names the group. sbatch parses its options itself (they
// are sbatch's), so only its command is checked.
func synopsisProblems(app *ucli.App, synopsis string) []string {
	synopsis = strings.ReplaceAll(synopsis, `\|`, "|")
	if i := strings.Index(synopsis+" ", " -- "); i >= 0 {
		synopsis = synopsis[:i] // the job's own command follows
	}
	words := strings.Fields(synopsis)[1:]
	cmd, name := &ucli.Command{Flags: app.Flags, Subcommands: app.Commands, Action: app.Action}, "skein"
	for len(words) > 0 {
		next := findCommand(cmd.Subcommands, words[0])
		if next == nil {
			break
		}
		cmd, name, words = next, name+" "+next.Name, words[1:]
	}
	if len(words) > 0 && !strings.HasPrefix(words[0], "-") && len(cmd.Subcommands) > 0 && (cmd.Action == nil || name == "skein") {
		return []string{name + " has no command " + words[0]}
	}
	if cmd.SkipFlagParsing {
		return nil
	}
	var problems []string
	for _, m := range synopsisFlag.FindAllStringSubmatch(strings.Join(words, " "), -1) {
		flag := strings.TrimLeft(m[1], "-")
		if flag == "h" && slices.Contains(noHeaderCommands, cmd.Name) {
			flag = "noheader" // as commandArgs reads it
		}
		if commandFlagOf(cmd.Flags, flag) == nil {
			problems = append(problems, name+" has no flag "+m[1])
		}
	}
	return problems
}

// findCommand is the command of cmds named or aliased name.
func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// readmeParagraphs is README.md's text outside the code blocks, a
// paragraph (or table row) at a time with its lines joined, so that a
// code span broken over two lines is whole; each with its first line.
func readmeParagraphs(t *testing.T) []readmeLine {
	t.Helper()
	var out []readmeLine
	var cur *readmeLine
	for _, l := range readmeLines(t) {
		switch {
		case l.fence || strings.TrimSpace(l.text) == "":
			cur = nil
		case cur == nil || strings.HasPrefix(l.text, "|"):
			out = append(out, l)
			cur = &out[len(out)-1]
		default:
			cur.text += " " + strings.TrimSpace(l.text)
		}
	}
	return out
}

func TestREADME_EveryCommandAndFlagItsProseAndTablesNameExists(t *testing.T) {
	app := NewApp(io.Discard, io.Discard)
	checked := 0
	for _, p := range readmeParagraphs(t) {
		for _, m := range readmeSpan.FindAllStringSubmatch(p.text, -1) {
			checked++
			for _, problem := range synopsisProblems(app, m[1]) {
				t.Errorf("README.md:%d (that paragraph): `%s`: %s", p.n, m[1], problem)
			}
		}
	}
	t.Logf("%d spans checked", checked)
	if checked < 100 {
		t.Fatalf("checked %d spans: README.md should hold more", checked)
	}
}

func TestSynopsisProblems_FindsWhatIsNotThere(t *testing.T) {
	app := NewApp(io.Discard, io.Discard)
	for _, tc := range []struct{ synopsis, want string }{
		{"skein gpu cordon [--reason R] NODE/INDEX", ""},
		{`skein limits set USER\|--default\|--cluster [--max-queued N]`, ""},
		{"skein submit [flags] --gpus 2 -- python train.py --epochs 3", ""},
		{"skein jobz", "skein has no command jobz"},
		{"skein acl", ""},
		{"skein acl tokn create", "skein acl has no command tokn"},
		{"skein squeue -h", ""},
		{"skein sbatch --no-such-sbatch-option x.sh", ""},
		{"skein gpu cordon [--reason R] [--force]", "skein gpu cordon has no flag --force"},
		{"skein logs [-f] [-x]", "skein logs has no flag -x"},
	} {
		if got := strings.Join(synopsisProblems(app, tc.synopsis), "; "); got != tc.want {
			t.Errorf("synopsisProblems(%q) = %q, want %q", tc.synopsis, got, tc.want)
		}
	}
}

// notReads are the commands without --json that read nothing of the
// cluster's state to print: they change it, run something, or print a
// file's content (a key, a script, the CA bundle in PEM).
var notReads = []string{
	"skein agent", "skein sbatch", "skein cancel", "skein scancel", "skein gpu fault", "skein join", "skein leave",
	"skein node revoke", "skein keygen", "skein version", "skein supervise", "skein completion", "skein ca export",
}

// README.md: "Every read command takes --json."
func TestREADME_EveryReadCommandTakesJSON(t *testing.T) {
	var walk func(name string, cmds []*ucli.Command)
	walk = func(name string, cmds []*ucli.Command) {
		for _, cmd := range cmds {
			full := name + " " + cmd.Name
			walk(full, cmd.Subcommands)
			if cmd.Action == nil {
				continue // a group
			}
			hasJSON := commandFlagOf(cmd.Flags, "json") != nil
			switch {
			case slices.Contains(notReads, full) && hasJSON:
				t.Errorf("%s takes --json: take it off notReads", full)
			case !hasJSON && !slices.Contains(notReads, full):
				t.Errorf("%s reads the cluster's state but takes no --json (or belongs in notReads)", full)
			}
		}
	}
	walk("skein", NewApp(io.Discard, io.Discard).Commands)
}

// transcriptStep is one `$ skein ...` line of a README transcript and
// the lines it is shown printing.
type transcriptStep struct {
	line int
	args []string
	out  string
}

// readmeTranscript is the first code block after the heading: its
// `$ ` lines and what each prints.
func readmeTranscript(t *testing.T, heading string) []transcriptStep {
	t.Helper()
	var steps []transcriptStep
	found := false
	for _, l := range readmeLines(t) {
		switch {
		case !found:
			found = l.text == heading
		case !l.fence && len(steps) > 0:
			return steps // the block is over
		case !l.fence:
		case strings.HasPrefix(l.text, "$ "):
			cmds := shellCommands(l.text[2:])
			if len(cmds) != 1 || cmds[0][0] != "skein" {
				t.Fatalf("README.md:%d: %q is not one skein command", l.n, l.text)
			}
			steps = append(steps, transcriptStep{line: l.n, args: cmds[0][1:]})
		case len(steps) == 0:
			t.Fatalf("README.md:%d: output before a command", l.n)
		default:
			steps[len(steps)-1].out += l.text + "\n"
		}
	}
	t.Fatalf("README.md has no transcript under %q", heading)
	return nil
}

func TestREADME_BadInputExampleIsWhatSkeinPrints(t *testing.T) {
	startRealAgent(t, eightGPUs)
	for _, s := range readmeTranscript(t, "### Bad input") {
		r := runCLI(t, s.args...)
		if got := r.stdout + r.stderr; got != s.out || r.code == exitOK {
			t.Errorf("README.md:%d: skein %s: exit %d, printed\n%s\nREADME shows\n%s", s.line, strings.Join(s.args, " "), r.code, got, s.out)
		}
	}
	if r := runCLI(t, "jobs", "--json"); r.stdout != "[]\n" {
		t.Errorf("the refused submits made jobs: %s", r.stdout)
	}
}
