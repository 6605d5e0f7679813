package cli

import (
	"bytes"
	"testing"
	"time"
)

func TestAge_UsesLargestWholeUnit(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		ago  time.Duration
		want string
	}{
		{"seconds", 5 * time.Second, "5s"},
		{"just under a minute", 59*time.Second + 999*time.Millisecond, "59s"},
		{"minutes", 3*time.Minute + 59*time.Second, "3m"},
		{"hours", 2*time.Hour + 59*time.Minute, "2h"},
		{"days", 4*24*time.Hour + 23*time.Hour, "4d"},
		{"in the future", -time.Minute, "0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := age(now, now.Add(-tc.ago)); got != tc.want {
				t.Errorf("age(%v) = %q, want %q", tc.ago, got, tc.want)
			}
		})
	}
	if got := age(now, time.Time{}); got != "-" {
		t.Errorf("age of zero time = %q, want -", got)
	}
}

func TestShellJoin_QuotesOnlyWhatNeedsIt(t *testing.T) {
	cases := []struct {
		name string
		argv []string
		want string
	}{
		{"plain words", []string{"python", "train.py", "--lr=3e-4", "/data/x,y"}, "python train.py --lr=3e-4 /data/x,y"},
		{"space", []string{"echo", "a b"}, "echo 'a b'"},
		{"single quote", []string{"echo", "it's"}, `echo 'it'\''s'`},
		{"empty argument", []string{"printf", ""}, "printf ''"},
		{"shell characters", []string{"sh", "-c", "ls $HOME | wc -l"}, "sh -c 'ls $HOME | wc -l'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := shellJoin(tc.argv); got != tc.want {
				t.Errorf("shellJoin(%q) = %q, want %q", tc.argv, got, tc.want)
			}
		})
	}
}

func TestTruncate_CutsLongTextWithMarker(t *testing.T) {
	cases := []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"long", "abcdefgh", 5, "ab..."},
		{"multibyte", "äöüäöüäöü", 6, "äöü..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := truncate(tc.in, tc.n); got != tc.want {
				t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

func TestPrintTable_ControlCharactersCannotBreakColumns(t *testing.T) {
	var buf bytes.Buffer
	if err := printTable(&buf, []string{"A", "B"}, [][]string{{"x\ty\nz\x1b[31m", "1"}}); err != nil {
		t.Fatal(err)
	}
	want := "A           B\nx y z [31m  1\n"
	if buf.String() != want {
		t.Errorf("table = %q, want %q", buf.String(), want)
	}
}
