// Package e2e tests skein as users run it: the real binary, real agent
// processes on loopback addresses, signals and restarts. Each test's
// cluster has its ACLs on, bootstrapped by its first agent (runAgent),
// unless the test is about the time before.
package e2e
