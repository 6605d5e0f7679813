package slurm

import "testing"

func TestOptions_ListsEachOptionOnceWithItsLetterAndWhetherItIsRefused(t *testing.T) {
	longs, shorts := map[string]bool{}, map[string]string{}
	byName := map[string]Option{}
	for _, o := range Options() {
		if longs[o.Long] {
			t.Errorf("--%s is listed twice", o.Long)
		}
		if other, ok := shorts[o.Short]; ok && o.Short != "" {
			t.Errorf("-%s names both --%s and --%s", o.Short, other, o.Long)
		}
		longs[o.Long], shorts[o.Short], byName[o.Long] = true, o.Long, o
	}
	for _, want := range []Option{
		{Long: "job-name", Short: "J"},
		{Long: "gres"},
		{Long: "wait", Short: "W"},
		{Long: "wrap", CommandLine: true},
		{Long: "account", Short: "A"},
		{Long: "reservation", Refused: "skein has no reservations"},
		{Long: "licenses", Short: "L", Refused: "skein has no licenses"},
		{Long: "nodelist", Short: "w"},
	} {
		if got := byName[want.Long]; got != want {
			t.Errorf("--%s: %+v, want %+v", want.Long, got, want)
		}
	}
}
