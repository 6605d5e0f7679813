// Command skein-workload is the test workload of skein's container proving
// ground: it proves physically that no GPU and no job is used twice at once.
//
// It takes an exclusive, non-blocking flock on DIR/gpu-<uuid>.lock for every
// GPU UUID in CUDA_VISIBLE_DEVICES and on DIR/job-<id>.lock for its job,
// where DIR is a directory shared by every node (a bind mount across the
// containers of one host: flock works across containers on one kernel). It
// appends one JSON line per event (start, stop, violation) to
// DIR/events.log, runs for --for, and exits 0 when that time is up or on
// SIGTERM or SIGINT. A lock that is already held is a violation: it is
// recorded, naming the holder, and the workload exits 3.
//
//	skein submit --gpus 2 --restarts 2 -- skein-workload --dir /shared --for 5m
//
// With --serve-port-env NAME it also serves HTTP on the port $NAME holds
// while it runs, as a service's replica (skein serve) would: /health (503
// while the file --unhealthy-if names exists), /work?ms=N (a slow request
// that answers with the allocation and the path it got), /stream?n=K
// (flushed lines) and /metrics (the in-flight gauge).
//
//	skein serve --name web --replicas 2 -- skein-workload --dir /shared --serve-port-env PORT
//
// With --sim-gpu-util-per-request P, on simulated GPUs, it reports them
// P % busy per request in flight to /work, at most 100 %, in the file
// $SKEIN_SIM_GPU_UTIL_FILE names, which the node's simulated telemetry
// reads: a service autoscaled on GPU utilisation then scales with load.
//
//	skein serve --name web --gpus 1 --autoscale 1-4 --target gpu=50 -- \
//	    skein-workload --dir /shared --serve-port-env PORT --sim-gpu-util-per-request 25
//
// The kernel drops a lock when its holder dies, so a killed workload (or a
// killed container) frees its GPUs at once, as a real GPU would be freed.
package main
