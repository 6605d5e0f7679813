package ui

import (
	"fmt"
	"html/template"
	"time"

	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"short": structs.ShortID,
	"when":  when,
	"ago":   ago,
	"since": since,
	"mib":   mib,
	"has":   has,
	"cordonArgs": func(node string, g structs.GPU, csrf string) cordonArgs {
		return cordonArgs{Node: node, GPU: g, CSRF: csrf}
	},
}

// cordonArgs is what the cordon form of a GPU needs.
type cordonArgs struct {
	Node string
	GPU  structs.GPU
	CSRF string
}

// readings names the optional readings of a sample for the templates.
var readings = map[string]gpu.Readings{
	"util": gpu.HasUtil, "memutil": gpu.HasMemUtil, "memory": gpu.HasMemory,
	"temp": gpu.HasTemp, "power": gpu.HasPower, "ecc": gpu.HasECC,
}

// has reports whether a sample took the reading named.
func has(s *gpu.Sample, name string) (bool, error) {
	r, ok := readings[name]
	if !ok {
		return false, fmt.Errorf("no reading %q", name)
	}
	return s.Has&r != 0, nil
}

// when is a time in UTC to the second; "-" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// ago is how long a duration is, to the second: "3m12s".
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

// since is how long ago t was, seen at now; "-" for no time.
func since(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return ago(now.Sub(t))
}

// mib is a size in MiB in words: "80 GiB", "512 MiB".
func mib(v any) (string, error) {
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case structs.SizeMiB:
		n = int64(v)
	default:
		return "", fmt.Errorf("mib of %T", v)
	}
	return mibString(n), nil
}

func mibString(n int64) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d GiB", n/1024)
	}
	if n >= 1024 {
		return fmt.Sprintf("%.1f GiB", float64(n)/1024)
	}
	return fmt.Sprintf("%d MiB", n)
}
