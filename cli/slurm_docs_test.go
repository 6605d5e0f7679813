package cli

import (
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/slurm"
)

// docTable returns the rows of the table under `| name | head |` in the
// documentation's section heading: each row's first cell and the rest.
func docTable(t *testing.T, heading, name, head string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	in := false
	for _, l := range readmeSection(t, heading) {
		switch {
		case l.text == "| "+name+" | "+head+" |":
			in = true
			continue
		case !strings.HasPrefix(l.text, "|"):
			in = false
		}
		if !in || strings.HasPrefix(l.text, "|---") {
			continue
		}
		cells := strings.SplitN(strings.ReplaceAll(l.text[1:], `\|`, "/"), "|", 2)
		if len(cells) != 2 {
			t.Fatalf("%s: a row of the %s table without two cells", l.pos(), name)
		}
		rows[strings.TrimSpace(cells[0])] = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(cells[1]), "|"))
	}
	if len(rows) == 0 {
		t.Fatalf("the documentation's %q has no table under | %s | %s |", heading, name, head)
	}
	return rows
}

// docOption finds the options a table's first cell names: --long, -X.
var docOption = regexp.MustCompile("(?:^|[^A-Za-z0-9-])(--?[A-Za-z][A-Za-z0-9-]*)")

// optionsOf lists the options the first cells of rows name.
func optionsOf(rows map[string]string) map[string]bool {
	out := map[string]bool{}
	for cell := range rows {
		for _, m := range docOption.FindAllStringSubmatch(cell, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestDocs_SbatchWarningsAndRefusalsSayWhyAsSbatchDoes: every sbatch
// option package slurm accepts with a warning, or refuses, has a row in
// docs/slurm.md's tables giving the reason sbatch gives, and every row is
// such an option.
func TestDocs_SbatchWarningsAndRefusalsSayWhyAsSbatchDoes(t *testing.T) {
	warned := docTable(t, "Slurm scripts", "sbatch", "why it has no effect")
	refused := docTable(t, "Slurm scripts", "sbatch", "why skein refuses it")
	for _, o := range slurm.Options() {
		cell := "`--" + o.Long + "`"
		if o.Short != "" {
			cell = "`-" + o.Short + ", --" + o.Long + "`"
		}
		for _, c := range []struct {
			rows map[string]string
			why  string
			what string
		}{{warned, o.Warning, "warns of"}, {refused, o.Refused, "refuses"}} {
			got, listed := c.rows[cell]
			switch {
			case c.why == "" && listed:
				t.Errorf("docs/slurm.md lists %s among the options sbatch %s, which it does not", cell, c.what)
			case c.why != "" && got != c.why:
				t.Errorf("docs/slurm.md: %s: %q, want sbatch's reason %q", cell, got, c.why)
			}
			delete(c.rows, cell)
		}
	}
	for _, rows := range []map[string]string{warned, refused} {
		for cell := range rows {
			t.Errorf("docs/slurm.md lists %s, which is no option sbatch warns of or refuses", cell)
		}
	}
}

// TestDocs_EveryOptionOfTheLookAlikesIsListed: every flag of squeue,
// sinfo, sacct, scancel and scontrol, by each of its names, and every
// option skein's srun takes in an allocation, has a row in docs/slurm.md's
// Options, command by command, and every option a row names is one the
// command takes.
func TestDocs_EveryOptionOfTheLookAlikesIsListed(t *testing.T) {
	app := NewApp(io.Discard, io.Discard)
	// -h is squeue's and sinfo's --noheader (commandArgs), and salloc's
	// help: the commands see it before their flags do.
	extra := map[string][]string{"squeue": {"-h"}, "sinfo": {"-h"}, "salloc": {"-h", "--help"}}
	for _, name := range []string{"squeue", "sinfo", "sacct", "scancel", "scontrol", "salloc"} {
		t.Run(name, func(t *testing.T) {
			want := map[string]bool{}
			for _, f := range app.Command(name).Flags {
				for _, n := range f.Names() {
					if n == "help" {
						continue
					}
					if len(n) == 1 {
						want["-"+n] = true
					} else {
						want["--"+n] = true
					}
				}
			}
			for _, n := range extra[name] {
				want[n] = true
			}
			documented := optionsOf(docTable(t, "Options, command by command", name, "skein"))
			for _, n := range slices.Sorted(maps.Keys(want)) {
				if !documented[n] {
					t.Errorf("%s takes %s, which docs/slurm.md's table does not list", name, n)
				}
			}
			for _, n := range slices.Sorted(maps.Keys(documented)) {
				if !want[n] {
					t.Errorf("docs/slurm.md's %s table lists %s, which %s does not take", name, n, name)
				}
			}
		})
	}
	t.Run("srun", func(t *testing.T) {
		documented := optionsOf(docTable(t, "Options, command by command", "srun", "skein"))
		want := []string{"--pty", "-N", "--nodes", "-n", "--ntasks", "--ntasks-per-node", "-l", "--label", "--jobid", "--mpi"}
		want = append(want, slices.Collect(maps.Keys(srunNoEffect))...)
		want = append(want, slices.Collect(maps.Keys(srunNoEffectFlags))...)
		for _, n := range want {
			if !documented[n] {
				t.Errorf("srun takes %s, which docs/slurm.md's table does not list", n)
			}
		}
	})
	t.Run("scontrol commands", func(t *testing.T) {
		rows := docTable(t, "Options, command by command", "scontrol", "skein")
		var cells strings.Builder
		for cell := range rows {
			cells.WriteString(cell + "\n")
		}
		for _, cmd := range append([]string{"show hostnames", "show hostlist", "show job", "show node", "show partition", "hold", "release", "update", "requeue"}, scontrolRefused...) {
			if !strings.Contains(cells.String(), "`"+cmd) {
				t.Errorf("scontrol's %s is not in docs/slurm.md's table", cmd)
			}
		}
	})
}
