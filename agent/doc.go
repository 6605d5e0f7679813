// Package agent is a skein node: it wires the replicated state (fsm), Raft
// (cluster), the scheduler (sched), GPU discovery (gpu) and the local job
// runner together, serves the HTTP API, and carries out the leader's duties
// when this node leads.
//
// The main loops of every agent:
//   - the HTTP server, answering reads from the local FSM and turning writes
//     into Raft entries;
//   - the local loop, which watches the FSM for allocations of this node and
//     starts or stops their processes through the runner;
//   - the leader loop, driven by Raft leadership events, which schedules
//     queued jobs while this node leads;
//   - the health loop, which runs the GPU monitor and reports this node's
//     GPU health to the leader when it differs from the replicated state.
package agent
