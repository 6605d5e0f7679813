// Package engine talks to the node's container engine (Docker Engine, or
// another that speaks its API) through the engine's official client. It
// probes the engine (whether it answers, which version and API it speaks,
// whether it can hand out NVIDIA GPUs, which images it holds, which
// process listens on its socket) and runs
// containers on it: pull, create, attach, start, wait, signal, inspect,
// remove, list by label, and exec a command in a running one (a service
// replica's health check), killed with what it started when its context
// ends, or under a terminal (ExecTTY: skein exec -it), sized, resized and
// signalled as a process group. Every container it creates runs without privileges: every
// capability dropped but those it is given, no-new-privileges (a setuid
// binary or file capability in the image gives nothing), no device but
// its own GPUs, and held to its limits of memory (no swap), CPUs and
// processes by its cgroup (Create). Every call is bounded by its context,
// and an engine that does not answer is ErrUnreachable. It is the only
// importer of the Docker client.
package engine
