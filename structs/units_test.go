package structs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSizeMiB_UnmarshalText(t *testing.T) {
	cases := []struct {
		name, in string
		want     SizeMiB
		err      string
	}{
		{"bare number is MiB", "2048", 2048, ""},
		{"megabytes", "512M", 512, ""},
		{"gigabytes", "80G", 80 * 1024, ""},
		{"gibibytes suffix", "80GiB", 80 * 1024, ""},
		{"lower case", "4g", 4096, ""},
		{"terabytes fraction", "1.5T", 1536 * 1024, ""},
		{"kilobytes round up", "1K", 1, ""},
		{"zero", "0", 0, ""},
		{"the limit itself", "64T", MaxMemoryMiB, ""},
		{"empty", "", 0, `invalid size "": empty`},
		{"negative", "-5G", 0, `invalid size "-5G": must not be negative`},
		{"garbage", "12Q", 0, `invalid size "12Q": use a number with an optional unit, like 512M or 80G`},
		{"nan", "NaNG", 0, "like 512M or 80G"},
		{"too large", "65T", 0, `invalid size "65T": larger than the limit of 67108864 MiB`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got SizeMiB
			err := got.UnmarshalText([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("UnmarshalText(%q) error = %v, want it to contain %q", c.in, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("UnmarshalText(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
		})
	}
}

func TestSizeMiB_JSONIsAPlainNumber(t *testing.T) {
	b, err := json.Marshal(SizeMiB(81920))
	if err != nil || string(b) != "81920" {
		t.Fatalf("Marshal = %s, %v; want 81920", b, err)
	}
	var m SizeMiB
	if err := json.Unmarshal([]byte("81920"), &m); err != nil || m != 81920 {
		t.Fatalf("Unmarshal(81920) = %d, %v", m, err)
	}
	if err := json.Unmarshal([]byte("null"), &m); err != nil || m != 81920 {
		t.Fatalf("Unmarshal(null) = %d, %v; want the value kept", m, err)
	}
	for _, in := range []string{`"80G"`, `1.5`, `true`} {
		if err := json.Unmarshal([]byte(in), &m); err == nil {
			t.Errorf("Unmarshal(%s) accepted %d; the wire carries a whole number of MiB", in, m)
		}
	}
}

func TestDuration_UnmarshalText(t *testing.T) {
	cases := []struct {
		name, in string
		want     time.Duration
		err      string
	}{
		{"minutes", "90m", 90 * time.Minute, ""},
		{"mixed units", "2h30m", 150 * time.Minute, ""},
		{"fraction", "1.5s", 1500 * time.Millisecond, ""},
		{"empty is none", "", 0, ""},
		{"no unit", "90", 0, `invalid duration "90": use a number with a unit, like 90s, 30m or 2h`},
		{"words", "soon", 0, `invalid duration "soon"`},
		{"negative", "-1h", 0, `invalid duration "-1h": must not be negative`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got Duration
			err := got.UnmarshalText([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("UnmarshalText(%q) error = %v, want it to contain %q", c.in, err, c.err)
				}
				return
			}
			if err != nil || got != Duration(c.want) {
				t.Fatalf("UnmarshalText(%q) = %s, %v; want %s", c.in, got, err, c.want)
			}
		})
	}
}

func TestFormatMiB(t *testing.T) {
	for in, want := range map[int64]string{512: "512M", 1024: "1G", 81920: "80G", 1536: "1.5G", 2 << 20: "2T"} {
		if got := FormatMiB(in); got != want {
			t.Errorf("FormatMiB(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestDuration_JSONRoundTrip(t *testing.T) {
	for _, d := range []Duration{0, Duration(90 * time.Second), Duration(2 * time.Hour)} {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if back != d {
			t.Errorf("round trip of %v gave %v (json %s)", d, back, b)
		}
	}
}

func TestDuration_RejectsBadInput(t *testing.T) {
	for _, in := range []string{`"-1h"`, `"soon"`, `3600`} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("Unmarshal(%s) accepted %v", in, d)
		}
	}
}

func TestFormatBytes_RoundsToTheUnitShown(t *testing.T) {
	for b, want := range map[int64]string{
		0: "0B", 900: "900B", 1536: "2K", 64 << 20: "64M", 67_100_000: "64M", 3 << 30: "3G", 3<<30 + 1<<29: "3.5G",
	} {
		if got := FormatBytes(b); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

func TestAllocUsage_AddKeepsThePeakAndSumsTheRest(t *testing.T) {
	u := AllocUsage{MemoryPeakBytes: 100, MemoryLimitBytes: 200, CPUTime: Duration(time.Second), OOMKills: 1}
	u.Add(AllocUsage{MemoryPeakBytes: 50, MemoryLimitBytes: 300, CPUTime: Duration(2 * time.Second),
		CPUThrottled: Duration(time.Millisecond), ThrottledPeriods: 3})
	want := AllocUsage{MemoryPeakBytes: 100, MemoryLimitBytes: 300, CPUTime: Duration(3 * time.Second),
		CPUThrottled: Duration(time.Millisecond), ThrottledPeriods: 3, OOMKills: 1}
	if u != want {
		t.Errorf("got %+v, want %+v", u, want)
	}
}
