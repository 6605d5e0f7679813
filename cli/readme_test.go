package cli

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

// The user documentation is README.md and the pages of docs/, and these
// tests hold all of it to the command line; in their names and comments,
// "the README" stands for all of it.

// readmeLine is a line of the documentation: its file and number, its
// text, and whether it is inside a fenced code block.
type readmeLine struct {
	file  string
	n     int
	text  string
	fence bool
}

// pos is where the line is, as file:line.
func (l readmeLine) pos() string { return fmt.Sprintf("%s:%d", l.file, l.n) }

// docFiles are the documentation's files, from this package's folder:
// ../README.md, then ../docs/*.md in name order.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no ../docs/*.md")
	}
	slices.Sort(docs)
	return append([]string{"../README.md"}, docs...)
}

// readmeLines reads every file of the documentation in turn, joining a
// fenced line that ends in a backslash with the next, as the shell does.
func readmeLines(t *testing.T) []readmeLine {
	t.Helper()
	var out []readmeLine
	for _, file := range docFiles(t) {
		out = append(out, docLines(t, file)...)
	}
	return out
}

// docLines reads one file of the documentation.
func docLines(t *testing.T, file string) []readmeLine {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(file, "../")
	var out []readmeLine
	fence := false
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := readmeLine{file: name, n: i + 1, text: lines[i], fence: fence}
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
		t.Fatalf("%s: a code block is not closed", name)
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
				t.Errorf("%s: %s: exit %d, no command run: %s", l.pos(), strings.Join(words, " "), code, strings.TrimSpace(stderr.String()))
			}
		}
	}
	t.Logf("%d commands parsed", checked)
	if checked < 50 {
		t.Fatalf("checked %d commands: the documentation's code blocks should hold more", checked)
	}
}

// readmeSpan is an inline code span of the documentation outside the code blocks
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
		if commandFlagOf(cmd.Flags, flag) == nil && !shortFlagsOf(cmd, m[1]) {
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

// readmeParagraphs is the documentation's text outside the code blocks, a
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
		case cur == nil || cur.file != l.file || strings.HasPrefix(l.text, "|"):
			out = append(out, l)
			cur = &out[len(out)-1]
		default:
			cur.text += " " + strings.TrimSpace(l.text)
		}
	}
	return out
}

// shortFlagsOf reports whether word is one-letter flags of cmd run
// together (-it), as a command with UseShortOptionHandling takes them.
func shortFlagsOf(cmd *ucli.Command, word string) bool {
	letters, ok := strings.CutPrefix(word, "-")
	if !cmd.UseShortOptionHandling || !ok || strings.HasPrefix(letters, "-") || len(letters) < 2 {
		return false
	}
	for _, l := range letters {
		if commandFlagOf(cmd.Flags, string(l)) == nil {
			return false
		}
	}
	return true
}

func TestREADME_EveryCommandAndFlagItsProseAndTablesNameExists(t *testing.T) {
	app := NewApp(io.Discard, io.Discard)
	checked := 0
	for _, p := range readmeParagraphs(t) {
		for _, m := range readmeSpan.FindAllStringSubmatch(p.text, -1) {
			checked++
			for _, problem := range synopsisProblems(app, m[1]) {
				t.Errorf("%s (that paragraph): `%s`: %s", p.pos(), m[1], problem)
			}
		}
	}
	t.Logf("%d spans checked", checked)
	if checked < 100 {
		t.Fatalf("checked %d spans: the documentation should hold more", checked)
	}
}

func TestSynopsisProblems_FindsWhatIsNotThere(t *testing.T) {
	app := NewApp(io.Discard, io.Discard)
	for _, tc := range []struct{ synopsis, want string }{
		{"skein gpu cordon [--reason R] NODE/INDEX", ""},
		{`skein limits set USER\|--default\|--cluster [--max-queued N]`, ""},
		{"skein submit [flags] --gpus 2 -- python train.py --epochs 3", ""},
		{"skein jobz", "skein has no command jobz"},
		{"skein exec -it JOB -- bash", ""},
		{"skein exec -ix JOB -- bash", "skein exec has no flag -ix"},
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
// cluster's state to print: they change it, run something, print a
// file's content (a key, a script, the CA bundle in PEM) or write one
// (a backup).
var notReads = []string{
	"skein agent", "skein sbatch", "skein cancel", "skein scancel", "skein gpu fault", "skein join", "skein leave",
	"skein node revoke", "skein keygen", "skein version", "skein supervise", "skein completion", "skein ca export",
	"skein scontrol", // Slurm's key=value records, as scripts parse them
	"skein partition set", "skein partition unset", "skein exec", "skein salloc", "skein run", "skein srun",
	"skein node drain", "skein node undrain", "skein node remove", "skein snapshot save",
}

// README.md and docs/commands.md: "Every read command takes --json."
func TestREADME_EveryReadCommandTakesJSON(t *testing.T) {
	var walk func(name string, cmds []*ucli.Command)
	walk = func(name string, cmds []*ucli.Command) {
		for _, cmd := range cmds {
			full := name + " " + cmd.Name
			walk(full, cmd.Subcommands)
			if cmd.Action == nil || cmd.Name == "help" {
				continue // a group, or urfave's help
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

// transcriptStep is one `$ ...` line of a transcript in the README and the
// lines it is shown printing: a skein command, perhaps piped into tail,
// or `echo $?`, the exit status of the step before.
type transcriptStep struct {
	line   readmeLine
	args   []string
	tail   int  // | tail -n N: the last N lines of its stdout are shown
	status bool // echo $?
	out    string
}

// readmeTranscripts are the transcripts of the section under the
// heading: its code blocks that begin with a `$ ` line, each as the
// commands it shows and what each prints.
func readmeTranscripts(t *testing.T, heading string) [][]transcriptStep {
	t.Helper()
	var blocks [][]transcriptStep
	inBlock, transcript := false, false
	for _, l := range readmeSection(t, heading) {
		switch {
		case !l.fence:
			inBlock = false
			continue
		case !inBlock:
			// A block of commands alone, or a file, is no transcript.
			inBlock, transcript = true, strings.HasPrefix(l.text, "$ ")
			if transcript {
				blocks = append(blocks, nil)
			}
		}
		if !transcript {
			continue
		}
		steps := &blocks[len(blocks)-1]
		if strings.HasPrefix(l.text, "$ ") {
			*steps = append(*steps, transcriptStepOf(t, l))
		} else {
			(*steps)[len(*steps)-1].out += l.text + "\n"
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("the documentation has no transcript under %q", heading)
	}
	return blocks
}

// transcriptStepOf reads the command of a `$ ` line.
func transcriptStepOf(t *testing.T, l readmeLine) transcriptStep {
	t.Helper()
	cmds := shellCommands(l.text[2:])
	s := transcriptStep{line: l}
	switch {
	case len(cmds) == 1 && slices.Equal(cmds[0], []string{"echo", "$?"}):
		s.status = true
		return s
	case len(cmds) == 2 && len(cmds[1]) == 3 && cmds[1][0] == "tail" && cmds[1][1] == "-n":
		n, err := strconv.Atoi(cmds[1][2])
		if err != nil || n < 1 {
			t.Fatalf("%s: %q: tail of what?", l.pos(), l.text)
		}
		s.tail = n
	case len(cmds) != 1:
		t.Fatalf("%s: %q is not one skein command", l.pos(), l.text)
	}
	if cmds[0][0] != "skein" {
		t.Fatalf("%s: %q is not a skein command", l.pos(), l.text)
	}
	s.args = cmds[0][1:]
	return s
}

// readmeTranscript is the first transcript under the heading.
func readmeTranscript(t *testing.T, heading string) []transcriptStep {
	t.Helper()
	return readmeTranscripts(t, heading)[0]
}

// transcriptRun runs README transcripts against the agent the CLI points
// at, as the README shows them, and checks that skein prints what the
// README shows, with what differs from one run to the next masked: IDs
// (the README's job IDs stand for those the run's submits printed),
// times and ages, demo node names, and the columns that depend on
// placement.
type transcriptRun struct {
	t       *testing.T
	ids     map[string]string // the README's job ID: this run's
	columns []string          // table columns masked
	last    int               // the exit status of the last command
	sorted  bool              // compare lines in any order
	// brief matches the documentation's lines for states so short that
	// a run on a slow machine may not see them (a job's wait between two
	// attempts): compared where the run printed them, else left out.
	brief *regexp.Regexp
}

func newTranscriptRun(t *testing.T, columns ...string) *transcriptRun {
	return &transcriptRun{t: t, ids: map[string]string{}, columns: columns}
}

// hexID is a job's or allocation's ID, whole or as shown.
var hexID = regexp.MustCompile(`\b(?:[0-9a-f]{32}|[0-9a-f]{8})\b`)

// firstID is the first whole ID on the first line of out.
func firstID(out string) string {
	line, _, _ := strings.Cut(out, "\n")
	return regexp.MustCompile(`\b[0-9a-f]{32}\b`).FindString(line)
}

// run runs the steps in turn.
func (tr *transcriptRun) run(steps ...transcriptStep) {
	for _, s := range steps {
		tr.step(s)
	}
}

func (tr *transcriptRun) step(s transcriptStep) {
	t := tr.t
	t.Helper()
	if s.status {
		if got := fmt.Sprintf("%d\n", tr.last); got != s.out {
			t.Errorf("%s: echo $? printed %q, the documentation shows %q", s.line.pos(), got, s.out)
		}
		return
	}
	args := make([]string, len(s.args))
	for i, a := range s.args {
		args[i] = tr.realID(a)
	}
	r := runCLI(t, args...)
	tr.last = r.code
	if want, got := firstID(s.out), cmp.Or(firstID(r.stdout), firstID(r.stderr)); want != "" && got != "" && tr.ids[want] == "" {
		tr.ids[want] = got
	}
	stdout := r.stdout
	if s.tail > 0 {
		lines := strings.SplitAfter(stdout, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		stdout = strings.Join(lines[max(0, len(lines)-s.tail):], "")
	}
	want, outs, errs := tr.lines(s.out, false), tr.lines(stdout, true), tr.lines(r.stderr, true)
	if tr.brief != nil {
		want = slices.DeleteFunc(want, func(l string) bool {
			return tr.brief.MatchString(l) && !slices.Contains(outs, l) && !slices.Contains(errs, l)
		})
	}
	ok := interleaves(want, outs, errs)
	if tr.sorted {
		all := append(slices.Clone(outs), errs...)
		slices.Sort(all)
		ok = slices.Equal(slices.Sorted(slices.Values(want)), all)
	}
	if !ok {
		t.Errorf("%s: skein %s: exit %d, printed on stdout\n%s\non stderr\n%s\nthe documentation shows (as compared)\n%s\nwhere this run printed\n%s\n%s",
			s.line.pos(), strings.Join(args, " "), r.code, stdout, r.stderr,
			strings.Join(want, "\n"), strings.Join(outs, "\n"), strings.Join(errs, "\n"))
	}
}

// realID is arg with a prefix of one of the README's job IDs replaced by
// the same prefix of the ID it stands for.
func (tr *transcriptRun) realID(arg string) string {
	id, _, _ := strings.Cut(arg, "-")
	if len(id) < 4 || strings.Trim(id, "0123456789abcdef") != "" {
		return arg
	}
	for readme, ours := range tr.ids {
		if strings.HasPrefix(readme, id) {
			return strings.Replace(arg, id, ours[:len(id)], 1)
		}
	}
	return arg
}

// lines are out's lines, masked for comparing; of what this run printed
// (ours), its IDs are first turned into the README's.
func (tr *transcriptRun) lines(out string, ours bool) []string {
	for _, c := range tr.columns {
		out = maskColumn(out, c)
	}
	known := map[string]bool{}
	for readme, id := range tr.ids {
		if ours {
			out = strings.ReplaceAll(out, id, readme)
			out = strings.ReplaceAll(out, id[:structs.ShortIDLen], readme[:structs.ShortIDLen])
		}
		known[readme], known[readme[:structs.ShortIDLen]] = true, true
	}
	out = hexID.ReplaceAllStringFunc(out, func(id string) string {
		if known[id] {
			return id
		}
		return "<id>"
	})
	for _, m := range transcriptMasks {
		out = m.re.ReplaceAllString(out, m.with)
	}
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// transcriptMasks mask what differs between the README's runs and a
// test's: times, ages, the demo cluster's node names, and the widths of
// table columns, which follow from them.
var transcriptMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`), "<time>"},
	{regexp.MustCompile(`\(\d[0-9a-z.]* ago\)`), "(<age> ago)"},
	{regexp.MustCompile(`\bskein-[a-e]\b`), "skein-?"},
	{regexp.MustCompile(`[ \t]+`), " "},
	{regexp.MustCompile(` +\n| +$`), "\n"},
}

// maskColumn blanks the cells of the column called name in each table
// of out: after a header line that has it, up to an empty line.
func maskColumn(out, name string) string {
	header := regexp.MustCompile(`(?:^|  )(` + regexp.QuoteMeta(name) + `)(?: +|$)`)
	lines := strings.Split(out, "\n")
	from, to := -1, -1
	for i, l := range lines {
		if l == "" {
			from = -1
			continue
		}
		if m := header.FindStringSubmatchIndex(l); m != nil && l == strings.ToUpper(l) {
			from, to = m[2], m[1]
			if to == len(l) {
				to = -1 // the last column
			}
			continue
		}
		if from < 0 || len(l) <= from {
			continue
		}
		if to < 0 || len(l) <= to {
			lines[i] = l[:from] + "*"
			continue
		}
		lines[i] = l[:from] + "*" + strings.Repeat(" ", to-from-1) + l[to:]
	}
	return strings.Join(lines, "\n")
}

// interleaves reports whether want is an interleaving of a and b: what a
// terminal shows of a command's stdout a and stderr b, in an order
// between the two streams that a run does not fix.
func interleaves(want, a, b []string) bool {
	if len(want) != len(a)+len(b) {
		return false
	}
	// ok[i][j]: want[:i+j] interleaves a[:i] and b[:j].
	ok := make([][]bool, len(a)+1)
	for i := range ok {
		ok[i] = make([]bool, len(b)+1)
	}
	ok[0][0] = true
	for i := 0; i <= len(a); i++ {
		for j := 0; j <= len(b); j++ {
			switch {
			case i > 0 && ok[i-1][j] && want[i+j-1] == a[i-1]:
				ok[i][j] = true
			case j > 0 && ok[i][j-1] && want[i+j-1] == b[j-1]:
				ok[i][j] = true
			}
		}
	}
	return ok[len(a)][len(b)]
}

func TestInterleaves_KeepsEachStreamsOrder(t *testing.T) {
	out, errs := []string{"o1", "o2"}, []string{"e1", "e2"}
	for _, tc := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"o1", "o2", "e1", "e2"}, true},
		{[]string{"e1", "o1", "e2", "o2"}, true},
		{[]string{"o2", "o1", "e1", "e2"}, false}, // stdout out of order
		{[]string{"o1", "e1", "e2"}, false},       // a line missing
		{[]string{"o1", "o2", "e1", "e2", "e3"}, false},
		{[]string{"o1", "x", "e1", "e2"}, false},
	} {
		if got := interleaves(tc.want, out, errs); got != tc.ok {
			t.Errorf("interleaves(%q) = %v, want %v", tc.want, got, tc.ok)
		}
	}
}

func TestMaskColumn_BlanksOneColumnOfATable(t *testing.T) {
	in := "ALLOC     RANK  GPUS  REASON\nad6b8466  0     0-3   -\nad6b8467  1     4-11  lost\n\nGPUS\n"
	want := "ALLOC     RANK  GPUS  REASON\nad6b8466  0     *     -\nad6b8467  1     *     lost\n\nGPUS\n"
	if got := maskColumn(in, "GPUS"); got != want {
		t.Errorf("maskColumn:\n%s\nwant\n%s", got, want)
	}
	if got, want := maskColumn("NODE  RUNS AS\na     nobody (uid 65534)", "RUNS AS"), "NODE  RUNS AS\na     *"; got != want {
		t.Errorf("the last column: %q, want %q", got, want)
	}
}

func TestREADME_BadInputExampleIsWhatSkeinPrints(t *testing.T) {
	t.Parallel()
	startRealAgent(t, eightGPUs)
	for _, s := range readmeTranscript(t, "Bad input") {
		r := runCLI(t, s.args...)
		if got := r.stdout + r.stderr; got != s.out || r.code == exitOK {
			t.Errorf("%s: skein %s: exit %d, printed\n%s\nthe documentation shows\n%s", s.line.pos(), strings.Join(s.args, " "), r.code, got, s.out)
		}
	}
	if r := runCLI(t, "jobs", "--json"); r.stdout != "[]\n" {
		t.Errorf("the refused submits made jobs: %s", r.stdout)
	}
}

// asUser points the CLI at a token of a new submitter called name.
func asUser(t *testing.T, name string) {
	t.Helper()
	r := runCLI(t, "acl", "token", "create", "--user", name, "--role", "submitter")
	if r.code != exitOK {
		t.Fatalf("token of %s: %d %s", name, r.code, r.stderr)
	}
	file := filepath.Join(t.TempDir(), name+".token")
	writeTestFile(t, file, strings.TrimSpace(r.stdout))
	realAgentOf(t).tokenFile.Store(&file)
}

// TestREADME_JobArraysExampleIsWhatSkeinPrints runs the README's sweep
// as the demo cluster's user demo, on one node with the GPUs of two of
// the demo's (which nodes and GPUs a task gets are masked), and checks
// that skein shows it as the README does once task 1 has failed.
func TestREADME_JobArraysExampleIsWhatSkeinPrints(t *testing.T) {
	t.Parallel()
	startRealAgent(t, func(c *agent.Config) { c.Name, c.GPUs = "skein-a", "sim:16xH100-80" })
	asUser(t, "demo")
	columns := []string{"GPUS"}
	if os.Getuid() != 0 {
		columns = append(columns, "RUNS AS") // only root runs demo's jobs as a uid of demo's own
	}
	tr := newTranscriptRun(t, columns...)
	steps := readmeTranscript(t, "Job arrays")
	tr.run(steps[0]) // the submit
	var arr string
	for _, id := range tr.ids {
		arr = id
	}
	if arr == "" {
		t.Fatal("the submit printed no ID")
	}
	defer cancelAll(t, arr)
	testutil.WaitFor(t, 30*time.Second, func() error {
		a, err := arrayJSON(t, arr)
		if err != nil {
			return err
		}
		if want := map[structs.JobState]int{structs.JobQueued: 3, structs.JobRunning: 4, structs.JobFailed: 1}; fmt.Sprint(a.States) != fmt.Sprint(want) {
			return fmt.Errorf("states %v, want %v", a.States, want)
		}
		return nil
	})
	tr.run(steps[1:]...)
}

// TestREADME_FollowingAJobExamplesAreWhatSkeinPrints runs the README's
// examples of following a job on a dev agent on a host called vm, as
// they were made: the second transcript submits the job whose logs the
// first and the third read.
func TestREADME_FollowingAJobExamplesAreWhatSkeinPrints(t *testing.T) {
	t.Parallel()
	startRealAgent(t, func(c *agent.Config) { c.Name, c.GPUs = "vm", "sim:8xH100-80" })
	blocks := readmeTranscripts(t, "Following a job")
	if len(blocks) != 3 {
		t.Fatalf("%d transcripts under Following a job, want 3: update the test", len(blocks))
	}
	tr := newTranscriptRun(t)
	// The wait before a restart lasts a second; a follower busy with the
	// attempt's last output may poll only once the next attempt runs.
	tr.brief = regexp.MustCompile(`queued: restarting in `)
	tr.run(blocks[1]...)
	tr.run(blocks[0]...)
	// The JSON lines of stdout and stderr output come in the order the
	// streams were read, which a run does not fix.
	tr.sorted = true
	tr.run(blocks[2]...)
}

// headingName is the text of a Markdown heading line without its #s,
// and "" for a line that is no heading.
func headingName(l readmeLine) string {
	rest := strings.TrimLeft(l.text, "#")
	if l.fence || len(rest) == len(l.text) || !strings.HasPrefix(rest, " ") {
		return ""
	}
	return strings.TrimSpace(rest)
}

// readmeSection is the text of the documentation under the heading
// (its text, at any level), up to the next heading or the end of its file.
func readmeSection(t *testing.T, heading string) []readmeLine {
	t.Helper()
	var out []readmeLine
	var in *readmeLine
	for _, l := range readmeLines(t) {
		switch {
		case in == nil:
			if headingName(l) == heading {
				in = &l
			}
		case headingName(l) != "" || l.file != in.file:
			return out
		default:
			out = append(out, l)
		}
	}
	if in == nil {
		t.Fatalf("the documentation has no section %q", heading)
	}
	return out
}

// sbatchLong and sbatchPair find the options a cell of the README's
// sbatch table names: --job-name, and -J, --job-name as a pair.
var (
	sbatchLong = regexp.MustCompile(`--([a-z][a-z-]*[a-z])`)
	sbatchPair = regexp.MustCompile(`(?:^|[^a-z-])-([A-Za-z]), --([a-z][a-z-]*[a-z])`)
)

// TestREADME_SbatchTableNamesWhatTheSlurmPackageCarriesOut: the options
// of the README's sbatch table are those package slurm carries out,
// each with its letter, and every option it knows is in the section
// (the table, or its text for --parsable and --wait, those accepted with
// a warning and those refused).
func TestREADME_SbatchTableNamesWhatTheSlurmPackageCarriesOut(t *testing.T) {
	known := map[string]slurm.Option{}
	for _, o := range slurm.Options() {
		known[o.Long] = o
	}
	section := readmeSection(t, "Slurm scripts")
	var text strings.Builder
	rows, inTable := 0, false
	for _, l := range section {
		text.WriteString(l.text + "\n")
		switch {
		case l.text == "| sbatch | skein |":
			inTable = true
			continue
		case !strings.HasPrefix(l.text, "|"):
			inTable = false
		}
		if !inTable || strings.HasPrefix(l.text, "|---") {
			continue
		}
		rows++
		cell, _, _ := strings.Cut(strings.ReplaceAll(l.text[1:], `\|`, "/"), "|")
		for _, m := range sbatchLong.FindAllStringSubmatch(cell, -1) {
			switch o, ok := known[m[1]]; {
			case !ok:
				t.Errorf("%s: --%s is no sbatch option of package slurm", l.pos(), m[1])
			case o.Refused != "":
				t.Errorf("%s: --%s is refused (%s), yet the table maps it", l.pos(), m[1], o.Refused)
			case o.Warning != "":
				t.Errorf("%s: --%s has no effect (%s), yet the table maps it", l.pos(), m[1], o.Warning)
			}
		}
		for _, m := range sbatchPair.FindAllStringSubmatch(cell, -1) {
			if o := known[m[2]]; o.Short != m[1] {
				t.Errorf("%s: -%s, --%s: package slurm's letter for --%s is %q", l.pos(), m[1], m[2], m[2], o.Short)
			}
		}
	}
	if rows < 15 {
		t.Fatalf("the sbatch table has %d rows: is it still under `| sbatch | skein |`?", rows)
	}
	for _, o := range slurm.Options() {
		if !regexp.MustCompile(`--` + o.Long + `\b[^-]`).MatchString(text.String()) {
			t.Errorf("package slurm knows --%s, which docs/slurm.md's Slurm scripts does not name", o.Long)
		}
		if o.Refused != "" {
			continue
		}
		if o.Short != "" && !regexp.MustCompile(`-`+o.Short+`[,/ ]`).MatchString(text.String()) {
			t.Errorf("docs/slurm.md's Slurm scripts does not give --%s's letter -%s", o.Long, o.Short)
		}
	}
}
