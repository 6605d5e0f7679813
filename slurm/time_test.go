package slurm

import (
	"testing"
	"time"
)

func TestParseDate_TheFormsSlurmCommandsTake(t *testing.T) {
	now := time.Date(2026, 3, 4, 15, 30, 0, 0, time.Local)
	today := time.Date(2026, 3, 4, 0, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02", time.Date(2026, 1, 2, 0, 0, 0, 0, time.Local)},
		{"2026-01-02T03:04", time.Date(2026, 1, 2, 3, 4, 0, 0, time.Local)},
		{"2026-01-02T03:04:05", time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)},
		{"02/03", time.Date(2026, 2, 3, 0, 0, 0, 0, time.Local)},
		{"02/03/25", time.Date(2025, 2, 3, 0, 0, 0, 0, time.Local)},
		{"08:15", today.Add(8*time.Hour + 15*time.Minute)},
		{"08:15:30", today.Add(8*time.Hour + 15*time.Minute + 30*time.Second)},
		{"now", now},
		{"now-90", now.Add(-90 * time.Second)},
		{"now-2hours", now.Add(-2 * time.Hour)},
		{"now-1days", now.Add(-24 * time.Hour)},
		{"today", today},
		{"midnight", today},
		{"now+1hours", now.Add(time.Hour)},
		{"2030-01-02T03:04:00Z", time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)},
		{"noon", today.Add(12 * time.Hour)},
		{"teatime", today.Add(16 * time.Hour)},
		{"tomorrow", today.AddDate(0, 0, 1)},
	} {
		got, err := ParseDate(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseDate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "yesterday-ish", "2026-13-01", "now-2fortnights", "25:00"} {
		if _, err := ParseDate(bad, now); err == nil {
			t.Errorf("ParseDate(%q) parsed", bad)
		}
	}
}
