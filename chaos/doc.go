// Package chaos is skein's container proving ground (DESIGN.md §10, level
// 4): the image built FROM scratch (Dockerfile, `make image`), the 3-node
// demo (demo.sh, `make demo-up`) and a test that kills the leader's
// container under load and checks, with the workload in chaos/workload,
// that no GPU and no job was ever used twice at once.
//
// The package holds no code of its own; its test runs only where a Docker
// engine answers and skips with the reason elsewhere.
package chaos
