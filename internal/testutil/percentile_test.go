package testutil

import (
	"testing"
	"time"
)

func TestPercentile_NearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name string
		d    []time.Duration
		q    float64
		want time.Duration
	}{
		{"no samples", nil, 0.99, 0},
		{"one sample", ms(7), 0.5, 7 * time.Millisecond},
		{"median of four is the second", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of twenty is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 0.99, 20 * time.Millisecond},
		{"p99 of a hundred is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.d, tc.q); got != tc.want {
				t.Errorf("Percentile(q=%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}
