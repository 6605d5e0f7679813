// Package structs holds skein's shared state model: nodes, GPUs, jobs,
// allocations, the Raft message types that change them, and the one codec
// used to put those messages into the log.
//
// It imports nothing else from skein, so every other package can depend on it.
package structs
