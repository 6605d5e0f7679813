package doccheck

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// A repo is a tree of files, read once: the Markdown documents' headings
// are looked up for every reference to them.
type repo struct {
	root     string
	files    map[string]bool            // every file, by slash path from the root
	dirs     map[string]bool            // every directory, likewise ("" is the root)
	headings map[string]map[string]bool // a Markdown file's headings, as written (inline code marks dropped)
	anchors  map[string]map[string]bool // and as GitHub's anchors
}

// skipDirs are not the repository's: build output, a failed chaos run's
// evidence, version control.
var skipDirs = []string{".git", "bin", "dist", "results"}

func readRepo(t *testing.T, root string) *repo {
	t.Helper()
	r := &repo{root: root, files: map[string]bool{}, dirs: map[string]bool{},
		headings: map[string]map[string]bool{}, anchors: map[string]map[string]bool{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		if d.IsDir() {
			if rel != "" && slices.Contains(skipDirs, d.Name()) {
				return filepath.SkipDir
			}
			r.dirs[rel] = true
			return nil
		}
		if d.Type().IsRegular() {
			r.files[rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *repo) read(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fence finds a fenced code block's opening or closing line.
var fence = regexp.MustCompile("^\\s*(```|~~~)")

// prose is a Markdown document with its fenced code blocks blanked out
// (every character a space but the line ends), so that offsets and line
// numbers stay those of the file.
func prose(text string) string {
	lines := strings.SplitAfter(text, "\n")
	in := false
	for i, l := range lines {
		if fence.MatchString(l) {
			in = !in
			lines[i] = blank(l)
			continue
		}
		if in {
			lines[i] = blank(l)
		}
	}
	return strings.Join(lines, "")
}

// blank is s with every byte but a line end turned into a space, so
// that it keeps its length in bytes.
func blank(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c != '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

// atxHeading is a Markdown heading line.
var atxHeading = regexp.MustCompile(`(?m)^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$`)

// headingText is a heading as a reference quotes it: inline code marks
// dropped, white space collapsed.
func headingText(h string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(h, "`", "")), " ")
}

// anchor is the anchor GitHub gives a heading: lower case, punctuation
// and symbols dropped (hyphens and underscores kept), spaces to hyphens.
func anchor(h string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case c == ' ':
			b.WriteByte('-')
		case c == '-' || c == '_' || unicode.IsLetter(c) || unicode.IsNumber(c) || unicode.Is(unicode.Mn, c):
			b.WriteRune(c)
		}
	}
	return b.String()
}

// markdownHeadings reads a Markdown file's headings, as text and as
// anchors; a repeated anchor gets -1, -2 ... as on GitHub.
func (r *repo) markdownHeadings(t *testing.T, file string) (map[string]bool, map[string]bool) {
	t.Helper()
	if h, ok := r.headings[file]; ok {
		return h, r.anchors[file]
	}
	texts, anchors := map[string]bool{}, map[string]bool{}
	seen := map[string]int{}
	for _, m := range atxHeading.FindAllStringSubmatch(prose(r.read(t, file)), -1) {
		texts[headingText(m[1])] = true
		a := anchor(headingText(m[1]))
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	r.headings[file], r.anchors[file] = texts, anchors
	return texts, anchors
}

// A problem is a reference that does not hold, where it is.
type problem struct {
	file string
	line int
	what string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.what) }

// lineOf is the line of text that offset off is on, from 1.
func lineOf(text string, off int) int { return strings.Count(text[:off], "\n") + 1 }

var (
	// mdLink is a Markdown inline link or image, [text](target "title").
	mdLink = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// mdRefDef is a reference-style link's definition, [label]: target.
	mdRefDef = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	// scheme starts an address outside the repository (https:, mailto:).
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// named is a Markdown file named in text, by a path ending in .md,
	// with the heading that may follow it: #anchor, or a comma and the
	// heading in quotes (the comma may be left out).
	named = regexp.MustCompile(`(?:^|[^\w./-])((?:\.\.?/)*(?:[\w.-]+/)*[\w.-]*\w\.md)\b(?:#([\w-]+)|(?:\s*,\s*|\s+)"([^"]{1,120})")?`)
	// designSection and issueNumber are what no text may say: a section
	// of a design document that is not in the repository, and an issue by
	// its number, which no reader can look up.
	designSection = regexp.MustCompile(`DESIGN\.md\s*§`)
	issueNumber   = regexp.MustCompile(`(?i)\bissues?\s+#?[0-9]+\b`)
)

// resolve finds the file a reference names: a link's target relative to
// the document; a name in text relative to the file it is in, then to the
// repository's root. It returns the path from the root, and false when
// nothing there exists or the path leaves the repository.
func (r *repo) resolve(from, target string, fromRootToo bool) (string, bool) {
	try := func(base string) (string, bool) {
		p := path.Clean(path.Join(base, target))
		if p == ".." || strings.HasPrefix(p, "../") {
			return "", false
		}
		if p == "." {
			p = ""
		}
		return p, r.files[p] || r.dirs[p]
	}
	if p, ok := try(path.Dir(from)); ok || !fromRootToo {
		return p, ok
	}
	return try("")
}

// checkHeading says whether the heading (as text, or as an anchor) is
// one of the file's.
func (r *repo) checkHeading(t *testing.T, file, text, anc string) string {
	t.Helper()
	if !strings.HasSuffix(file, ".md") || !r.files[file] {
		return fmt.Sprintf("%s is not a Markdown file, so it has no headings", file)
	}
	texts, anchors := r.markdownHeadings(t, file)
	switch {
	case anc != "" && !anchors[anc]:
		return fmt.Sprintf("%s has no heading whose anchor is #%s", file, anc)
	case text != "" && !texts[headingText(text)]:
		return fmt.Sprintf("%s has no heading %q", file, headingText(text))
	}
	return ""
}

// checkNamed checks every Markdown file named in text (already stripped of what
// is not prose), which is in file.
func (r *repo) checkNamed(t *testing.T, file, text string) []problem {
	t.Helper()
	var out []problem
	for _, m := range named.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		at := lineOf(text, m[2])
		target, ok := r.resolve(file, name, true)
		if !ok || !r.files[target] {
			out = append(out, problem{file, at, fmt.Sprintf("%s names no file of the repository", name)})
			continue
		}
		var anc, heading string
		if m[4] >= 0 {
			anc = text[m[4]:m[5]]
		}
		if m[6] >= 0 {
			heading = text[m[6]:m[7]]
		}
		if anc == "" && heading == "" {
			continue
		}
		if msg := r.checkHeading(t, target, heading, anc); msg != "" {
			out = append(out, problem{file, at, msg})
		}
	}
	return out
}

// checkMarkdown checks a Markdown document's links and the files its
// prose names.
func (r *repo) checkMarkdown(t *testing.T, file string) []problem {
	t.Helper()
	text := prose(r.read(t, file))
	var out []problem
	checkLink := func(off int, target string) {
		at := lineOf(text, off)
		if target == "" || scheme.MatchString(target) {
			return
		}
		p, anc, _ := strings.Cut(target, "#")
		dest := file
		if p != "" {
			var ok bool
			if dest, ok = r.resolve(file, p, false); !ok {
				out = append(out, problem{file, at, fmt.Sprintf("link to %s: no such file in the repository", target)})
				return
			}
		}
		if anc != "" {
			if msg := r.checkHeading(t, dest, "", anc); msg != "" {
				out = append(out, problem{file, at, "link to " + target + ": " + msg})
			}
		}
	}
	for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
		checkLink(m[4], text[m[4]:m[5]])
	}
	for _, m := range mdRefDef.FindAllStringSubmatchIndex(text, -1) {
		checkLink(m[2], text[m[2]:m[3]])
	}
	// The links' targets are checked; what is left of the prose is
	// searched for names, code marks dropped (`agent/DESIGN.md`, "Heading").
	plain := mdLink.ReplaceAllStringFunc(text, func(l string) string {
		i := strings.LastIndex(l, "](")
		return l[:i+1] + blank(l[i+1:])
	})
	plain = mdRefDef.ReplaceAllStringFunc(plain, blank)
	plain = strings.ReplaceAll(plain, "`", " ")
	return append(out, r.checkNamed(t, file, plain)...)
}

// goText splits a Go file in two texts of its length: its comments'
// text (the rest blanked out, and the comment marks, so that a comment
// over several lines reads as one text), and the rest, its code (the
// comments blanked out). Offsets and line numbers stay the file's.
func goText(t *testing.T, file, src string) (comments, code string) {
	t.Helper()
	com, cod := []byte(blank(src)), []byte(src)
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(file, -1, len(src)), []byte(src), func(pos token.Position, msg string) {
		t.Errorf("%s: %s", pos, msg)
	}, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		off := fset.Position(pos).Offset
		body := lit[2:]
		if strings.HasPrefix(lit, "/*") {
			body = strings.TrimSuffix(body, "*/")
		}
		copy(com[off+2:], body)
		copy(cod[off:], blank(lit))
	}
	return string(com), string(cod)
}

// forbidden finds what no text may say.
func forbidden(file, text string) []problem {
	var out []problem
	for _, m := range designSection.FindAllStringIndex(text, -1) {
		out = append(out, problem{file, lineOf(text, m[0]), fmt.Sprintf("%q points at a design document outside the repository: name the repository's file and heading instead", text[m[0]:m[1]])})
	}
	for _, m := range issueNumber.FindAllStringIndex(text, -1) {
		out = append(out, problem{file, lineOf(text, m[0]), fmt.Sprintf("%q names an issue no reader can look up: say what the thing is instead", strings.Join(strings.Fields(text[m[0]:m[1]]), " "))})
	}
	return out
}

// textFile reports whether a file is one whose text the forbidden words
// are looked for in.
func textFile(file string) bool {
	switch path.Base(file) {
	case "Makefile", "Dockerfile":
		return true
	}
	if file == ".ci/run" {
		return true
	}
	switch path.Ext(file) {
	case ".go", ".md", ".sh", ".yaml", ".yml", ".json", ".service", ".html", ".css", ".txt":
		return true
	}
	return false
}

// check checks every file of the repository.
func (r *repo) check(t *testing.T) []problem {
	t.Helper()
	var files []string
	for f := range r.files {
		files = append(files, f)
	}
	slices.Sort(files)
	var out []problem
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, ".md"):
			out = append(out, r.checkMarkdown(t, f)...)
		case strings.HasSuffix(f, ".go"):
			comments, code := goText(t, f, r.read(t, f))
			out = append(out, r.checkNamed(t, f, comments)...)
			out = append(out, forbidden(f, comments)...)
			out = append(out, forbidden(f, code)...)
			continue
		case path.Base(f) == "Makefile":
			out = append(out, r.checkNamed(t, f, r.read(t, f))...)
		}
		if textFile(f) {
			out = append(out, forbidden(f, r.read(t, f))...)
		}
	}
	return out
}

func TestDocs_EveryReferenceNamesAFileAndHeadingThatExist(t *testing.T) {
	r := readRepo(t, filepath.Join("..", ".."))
	for _, want := range []string{"README.md", "Makefile", "docs/architecture.md", "internal/doccheck/doccheck_test.go"} {
		if !r.files[want] {
			t.Fatalf("the repository read from ../.. has no %s", want)
		}
	}
	for _, p := range r.check(t) {
		t.Error(p)
	}
}

// TestCheck_FindsWhatDoesNotHold runs the check on a small tree with a
// reference of every kind, good and bad, and sees each bad one reported,
// where it is, and nothing else.
func TestCheck_FindsWhatDoesNotHold(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	issue := "issue" + " 17" // kept apart, or this file would be reported
	write("pkg/DESIGN.md", "# pkg\n\n## Node views\n\n## Re-run after `sched.Decide` (2x)\n\n## Node views\n\n```\n## Not a heading\n```\n")
	write("docs/guide.md", strings.Join([]string{
		"# Guide", // 1
		"",        // 2
		"See [views](../pkg/DESIGN.md#node-views) and",             // 3: good
		"[again](../pkg/DESIGN.md#node-views-1), [here](#guide),",  // 4: good, good
		"[gone](../pkg/GONE.md) and [bad](../pkg/DESIGN.md#nope).", // 5: two problems
		"[web](https://example.com/x.md) [code](../pkg)",           // 6: good (an address; a directory)
		"`pkg/DESIGN.md`, \"Node views\" and pkg/DESIGN.md.",       // 7: good
		"\"Re-run after sched.Decide (2x)\" is fsm.md's.",          // 8: no such file
		"pkg/DESIGN.md, \"Not a heading\"",                         // 9: a heading in a code block is none
		"```",                                                      // 10
		"missing/FILE.md " + issue,                                 // 11: code: not a reference; but the issue is
		"```",                                                      // 12
		"[up](../../outside.md)",                                   // 13: leaves the repository
	}, "\n")+"\n")
	write("pkg/code.go", "package pkg\n\n// See DESIGN.md, \"Node views\", and\n// pkg/DESIGN.md#re-run-after-scheddecide-2x, and DESIGN.md,\n// \"No such\n// heading\".\nvar s = \"DESIGN.md, \\\"Nowhere\\\"\" // DESIGN.md "+"§2\n"+"// The "+"issue\n// 9 wrapped.\n")
	write("Makefile", "# Figures go in BENCHMARKS.md.\nall:\n")

	r := readRepo(t, dir)
	var got []string
	for _, p := range r.check(t) {
		got = append(got, p.String())
	}
	want := []string{
		"Makefile:1: BENCHMARKS.md names no file of the repository",
		"docs/guide.md:5: link to ../pkg/GONE.md: no such file in the repository",
		`docs/guide.md:5: link to ../pkg/DESIGN.md#nope: pkg/DESIGN.md has no heading whose anchor is #nope`,
		"docs/guide.md:8: fsm.md names no file of the repository",
		`docs/guide.md:9: pkg/DESIGN.md has no heading "Not a heading"`,
		"docs/guide.md:13: link to ../../outside.md: no such file in the repository",
		`docs/guide.md:11: "` + issue + `" names an issue no reader can look up: say what the thing is instead`,
		`pkg/code.go:4: pkg/DESIGN.md has no heading "No such heading"`,
		`pkg/code.go:8: "issue ` + `9" names an issue no reader can look up: say what the thing is instead`,
		`pkg/code.go:7: "DESIGN.md ` + `§" points at a design document outside the repository: name the repository's file and heading instead`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAnchor_IsGitHubs(t *testing.T) {
	for h, want := range map[string]string{
		"Node views": "node-views",
		"The queue: who runs first, and why a job waits": "the-queue-who-runs-first-and-why-a-job-waits",
		"Multi-node training (torchrun)":                 "multi-node-training-torchrun",
		"B8 — submit → running":                          "b8--submit--running",
		"Re-run after `sched.Decide`":                    "re-run-after-scheddecide",
		"Jobs run as their owner, not as root":           "jobs-run-as-their-owner-not-as-root",
		"max_writes and 1,024":                           "max_writes-and-1024",
	} {
		if got := anchor(headingText(h)); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}
