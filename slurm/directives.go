package slurm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Errors of this package; each is wrapped with where and what.
var (
	// ErrNotScript: the file does not start with #! and an interpreter, as
	// sbatch requires.
	ErrNotScript = errors.New("not a batch script: the first line must be #! and the path of an interpreter, like #!/bin/bash")
	// ErrTooLarge: the script is larger than MaxScriptBytes.
	ErrTooLarge = errors.New("script too large")
	// ErrUnsupported: options skein has no equivalent for; nothing is submitted.
	ErrUnsupported = errors.New("unsupported options")
	// ErrBadValue: an option's value does not parse or is out of range.
	ErrBadValue = errors.New("bad value")
	// ErrUsage: the command line is not `[OPTIONS] SCRIPT [ARGS...]`.
	ErrUsage = errors.New("usage")
	// errUnclosedQuote: a directive opens a quote it does not close.
	errUnclosedQuote = errors.New("unclosed quote")
)

// MaxScriptBytes bounds a script: it travels in the job's command, which
// structs.MaxCommandBytes bounds with the wrapper and the arguments, and is
// stored with every task of an array.
const MaxScriptBytes = 64 << 10

// directivePrefix starts a directive line, at the start of the line.
const directivePrefix = "#SBATCH"

// word is one option word and where it was read.
type word struct {
	text  string
	where string // "train.sh: line 4" or "command line"
}

// scriptDirectives returns the words of the #SBATCH lines of the script's
// leading comment block, and the interpreter its #! line names (the path,
// then the one argument Linux passes, if any). name names the script in
// the words' places.
func scriptDirectives(script []byte, name string) (interp []string, words [][]word, err error) {
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 0, 4096), MaxScriptBytes+1)
	if !sc.Scan() {
		return nil, nil, fmt.Errorf("%s: %w", name, ErrNotScript)
	}
	first := strings.TrimSuffix(sc.Text(), "\r")
	rest, ok := strings.CutPrefix(first, "#!")
	path, arg, _ := strings.Cut(strings.TrimLeft(rest, " \t"), " ")
	if path, _, _ = strings.Cut(path, "\t"); !ok || path == "" {
		return nil, nil, fmt.Errorf("%s: %w", name, ErrNotScript)
	}
	interp = []string{path}
	if arg = strings.Trim(arg, " \t"); arg != "" {
		interp = append(interp, arg)
	}
	for line := 2; sc.Scan(); line++ {
		text := strings.TrimSuffix(sc.Text(), "\r")
		trimmed := strings.TrimSpace(text)
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			break // the first command ends the directives, as in sbatch
		}
		body, ok := strings.CutPrefix(text, directivePrefix)
		if !ok || body != "" && body[0] != ' ' && body[0] != '\t' {
			continue // a comment, "##SBATCH", "#SBATCHX"
		}
		where := fmt.Sprintf("%s: line %d", name, line)
		fields, err := splitWords(body)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s%s: %w", where, directivePrefix, body, err)
		}
		ws := make([]word, len(fields))
		for i, f := range fields {
			ws[i] = word{text: f, where: where}
		}
		words = append(words, ws)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	return interp, words, nil
}

// splitWords splits a directive's text into words as sbatch does: at
// white space, with single or double quotes keeping white space in a
// word (and dropped); an unquoted # that starts a word begins a comment.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errUnclosedQuote
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
