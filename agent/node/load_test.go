package node

import (
	"strings"
	"testing"
)

func TestParseGauge_UnlabelledOrSummedOverLabelSets(t *testing.T) {
	text := `# HELP q waiting
# TYPE q gauge
q_total 99
q{model="a"} 2
q{model="b",x="}"} 3.5 1700000000
other 7
`
	cases := []struct {
		name, gauge string
		want        float64
		err         bool
	}{
		{"labelled sum", "q", 5.5, false},
		{"unlabelled", "other", 7, false},
		{"prefix of another is not it", "q_tot", 0, true},
		{"absent", "nope", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseGauge(strings.NewReader(text), c.gauge)
			if (err != nil) != c.err || got != c.want {
				t.Fatalf("got %v, %v; want %v (error %v)", got, err, c.want, c.err)
			}
		})
	}
}
