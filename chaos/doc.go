// Package chaos is skein's container proving ground, levels 4 and 5 of
// docs/development.md, "Testing levels": the image built FROM scratch (Dockerfile, `make image`), the
// demo cluster of 3 to 5 nodes (demo.sh, `make demo-up`), a test that kills
// the leader's container under load, and the chaos suite.
//
// The chaos suite (TestChaos, `make chaos-short` and `make chaos`) runs a
// seeded, randomised schedule of faults — docker kill, pause, network
// disconnect, restart with data kept, restart of every node, the leader and
// a worker killed at once — while a client submits workload jobs
// (chaos/workload) with unique request IDs through random nodes and records
// every outcome. After the faults it heals the cluster, waits for it to
// settle and checks: acknowledged jobs exist once on every node, no request
// made two jobs, no GPU held twice (committed state and the workload's
// locks), no lost allocation replaced twice, one leader per term, one state
// hash at one applied index, every job ended. A failed run keeps its
// evidence in results/<seed>/; SKEIN_CHAOS_SEED=<seed> replays the schedule.
//
// The package holds no code of its own; its tests run only where a Docker
// engine answers and skip with the reason elsewhere.
package chaos
