// Package engine talks to the node's container engine (Docker Engine, or
// another that speaks its API) through the engine's official client. For
// now it only probes the engine: whether it answers, which version and API
// it speaks, and whether it can hand out NVIDIA GPUs. It is the only
// importer of the Docker client.
package engine
