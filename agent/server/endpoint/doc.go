// Package endpoint holds what the user API's routes decide, apart from
// HTTP: one small type per resource, over the narrow interface of the
// state it reads and, for writes, a Writer, the one path of every write.
//
//   - Jobs, Services, Nodes, Policy and ACL: the writes of their
//     resources, and the reads that answer with what the caller may see
//     (a job's env is redacted unless it is the caller's).
//   - Trust: the trust API of a secure cluster, over Authority, what it
//     asks of this node's cluster trust (agent/secure satisfies it).
//   - Cluster: the reads of the cluster as a whole (status, nodes,
//     members, Raft peers, GPUs, events), from the state, Raft and
//     gossip; and whether this node may leave.
//   - Queue: fair share's views of the queue, computed as a scheduling
//     pass would.
//   - Allocs: what reaches a running job's processes on the nodes that
//     run them (exec, terminals, signals, logs): which job, whether the
//     caller may, and a plan of what this node does and which nodes the
//     transport relays to. It writes nothing.
//
// An endpoint takes plain Go values (the caller's Identity, the api
// request, the names in the path) and answers plain Go values or
// errors: the domain's own (fsm, sched, structs), a *BadRequest, a
// *Conflict, or ErrForwarded. It knows nothing of routes, decoding,
// authentication, status codes or streams: agent/server decodes a
// request, authenticates its caller, calls the endpoint with the
// request's Writer (which applies through Raft on the leader and passes
// the request on to the leader elsewhere), maps the answer to HTTP and
// carries out a plan (streams, proxies, relays).
//
// An endpoint checks on whatever node takes the request all it can
// check there (fields, permissions, the state it needs to find), so a
// bad request is refused without a trip to the leader; what must be
// decided by the leader (IDs, times, the limits of the state it commits
// on) it does in the entry function it hands the Writer, which only the
// leader calls.
//
// A new route's logic goes here: a method on its resource's type (or a
// new type beside them), its checks and its entry or its answer, and a
// test with a fake Writer and a fake state; agent/server then routes to
// it. A read that only passes the state on as it is (no filter, no
// permission, nothing computed) may stay in agent/server.
package endpoint
