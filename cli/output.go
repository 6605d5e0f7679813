package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/skein-dev/skein/structs"
)

// printJSON writes v as JSON indented by two spaces.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// printTable writes a header and rows as aligned columns.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// field is one line of a `key: value` listing.
type field struct{ key, value string }

// printFields writes `key: value` lines with the values aligned.
func printFields(w io.Writer, indent string, fields []field) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, f := range fields {
		fmt.Fprintf(tw, "%s%s:\t%s\n", indent, f.key, printable(f.value))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printable replaces control characters, which would break the columns or
// drive the terminal, with spaces.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// age renders how long ago t was, in its largest whole unit: "5s", "3m",
// "2h", "4d"; "-" for a zero time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// shortDuration renders a duration without trailing zero units: "24h",
// "1h30m", "90s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// timeWithAge renders a time for people, with how long ago it was.
func timeWithAge(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (%s ago)", t.Local().Format("2006-01-02 15:04:05 MST"), age(now, t))
}

// truncate shortens s to at most n characters, marking the cut with "...".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// orDash returns s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shellJoin renders argv as a shell command line a person could paste.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote single-quotes a word unless it is made only of characters the
// shell leaves alone.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// gpuList renders GPUs, given by UUID, for a table: their indexes on
// their node as ranges ("0-7", "0,2,5"), from index (UUID to index), and
// a GPU index does not know (its node gone) by the start of its UUID.
// Tables with --wide, and --json, show the UUIDs whole.
func gpuList(uuids []string, index map[string]int) string {
	var nums []int
	var unknown []string
	for _, u := range uuids {
		if i, ok := index[u]; ok {
			nums = append(nums, i)
		} else {
			unknown = append(unknown, truncate(u, shortUUIDLen))
		}
	}
	slices.Sort(nums)
	parts := unknown
	if len(nums) > 0 {
		parts = append([]string{structs.NumberRanges(slices.Compact(nums), 0)}, unknown...)
	}
	return orDash(strings.Join(parts, ","))
}

// shortUUIDLen is how much of a GPU UUID gpuList shows: "GPU-39a9e1c2...".
const shortUUIDLen = 15
