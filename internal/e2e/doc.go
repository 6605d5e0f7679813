// Package e2e tests skein as users run it: the real binary, real agent
// processes on loopback addresses, signals and restarts.
package e2e
