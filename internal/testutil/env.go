package testutil

import (
	"os"
	"strconv"
	"testing"
)

// EnvInt is the environment variable name as a positive number, or def
// when it is unset; anything else fails tb naming the variable.
// Benchmarks take their sizes this way.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}
