package structs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseSizeMiB(t *testing.T) {
	cases := []struct {
		name, in string
		want     int64
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
		{"empty", "", 0, "empty"},
		{"negative", "-5G", 0, "must not be negative"},
		{"garbage", "12Q", 0, "like 512M or 80G"},
		{"nan", "NaNG", 0, "like 512M or 80G"},
		{"too large", "65T", 0, "larger than the limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSizeMiB(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseSizeMiB(%q) error = %v, want it to contain %q", c.in, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ParseSizeMiB(%q) = %d, %v; want %d", c.in, got, err, c.want)
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
