package structs

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that travels as a Go duration string ("90m").
type Duration time.Duration

// MarshalJSON writes the duration as a string, or 0 as "".
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == 0 {
		return []byte(`""`), nil
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a duration string ("2h30m") or "" for none.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"2h\": %w", err)
	}
	return d.UnmarshalText([]byte(s))
}

// UnmarshalText reads a duration as ParseDuration does; a job file's
// durations decode through it.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// String returns the Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// ParseDuration parses a non-negative Go duration; "" is zero.
func ParseDuration(s string) (Duration, error) {
	if s == "" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use a number with a unit, like 90s, 30m or 2h", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return Duration(v), nil
}

// SizeMiB is an amount of memory in MiB. As text it is a size with an
// optional unit (ParseSizeMiB: "512M", "80G"); in JSON it stays a plain
// number of MiB.
type SizeMiB int64

// UnmarshalText reads a size as ParseSizeMiB does; a job file's sizes
// decode through it.
func (m *SizeMiB) UnmarshalText(b []byte) error {
	v, err := ParseSizeMiB(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalJSON reads a plain number of MiB, as the API has always sent
// it. It is needed because encoding/json would otherwise hand only strings
// to UnmarshalText and refuse numbers.
func (m *SizeMiB) UnmarshalJSON(b []byte) error {
	n := int64(*m)
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*m = SizeMiB(n)
	return nil
}

// ParseSizeMiB parses a memory size into MiB. A bare number is MiB; the
// suffixes K, M, G, T (optionally followed by "i", "B" or "iB") are binary
// multiples. "512M", "80G", "1.5T" and "2048" are all accepted.
func ParseSizeMiB(s string) (SizeMiB, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	if t == "" {
		return 0, fmt.Errorf("invalid size %q: empty", s)
	}
	t = strings.TrimSuffix(t, "B")
	t = strings.TrimSuffix(t, "I")
	mult := 1.0 // MiB
	switch {
	case strings.HasSuffix(t, "K"):
		mult = 1.0 / 1024
	case strings.HasSuffix(t, "M"):
		mult = 1
	case strings.HasSuffix(t, "G"):
		mult = 1024
	case strings.HasSuffix(t, "T"):
		mult = 1024 * 1024
	}
	t = strings.TrimRight(t, "KMGT")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid size %q: use a number with an optional unit, like 512M or 80G", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	}
	mib := v * mult
	if mib > float64(MaxMemoryMiB) {
		return 0, fmt.Errorf("invalid size %q: larger than the limit of %d MiB", s, MaxMemoryMiB)
	}
	return SizeMiB(math.Ceil(mib)), nil
}

// FormatMiB renders a size in MiB for people: "80G", "512M".
func FormatMiB(mib int64) string {
	switch {
	case mib >= 1024*1024 && mib%(1024*1024) == 0:
		return fmt.Sprintf("%dT", mib/(1024*1024))
	case mib >= 1024 && mib%1024 == 0:
		return fmt.Sprintf("%dG", mib/1024)
	case mib >= 1024:
		return fmt.Sprintf("%.1fG", float64(mib)/1024)
	}
	return fmt.Sprintf("%dM", mib)
}

// FormatBytes renders an amount of memory in bytes for people, rounded to
// the unit it is shown in: "64M", "1.5G", "300K".
func FormatBytes(b int64) string {
	const kib, mib, gib = 1 << 10, 1 << 20, 1 << 30
	switch {
	case b >= gib:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(b)/gib), ".0") + "G"
	case b >= mib:
		return fmt.Sprintf("%dM", (b+mib/2)/mib)
	case b >= kib:
		return fmt.Sprintf("%dK", (b+kib/2)/kib)
	}
	return fmt.Sprintf("%dB", b)
}
