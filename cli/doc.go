// Package cli is skein's command line: it turns flags and arguments into
// calls on the agent's HTTP API (package api) and prints the answers for
// people or, with --json, for programs.
//
// Each command lives in its own file and returns an error; only Run turns
// errors into exit codes: 0 ok, 1 error, 2 usage.
package cli
