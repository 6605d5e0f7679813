// Package endpoint holds what the user API's writes do, apart from HTTP:
// one small type per resource (Jobs, Services, Nodes, Policy, ACL), over
// the narrow interface of the state it reads and a Writer, the one path
// of every write. An endpoint takes plain Go values (the caller's Identity, the
// api request, the names in the path) and answers plain Go values or
// errors: the domain's own (fsm, sched, structs), a *BadRequest, or
// ErrForwarded. It knows nothing of routes, decoding, authentication or
// status codes: agent/server decodes a request, authenticates its
// caller, calls the endpoint with the request's Writer (which applies
// through Raft on the leader and passes the request on to the leader
// elsewhere) and maps the answer to HTTP.
//
// An endpoint checks on whatever node takes the request all it can
// check there (fields, permissions, the state it needs to find), so a
// bad request is refused without a trip to the leader; what must be
// decided by the leader (IDs, times, the limits of the state it commits
// on) it does in the entry function it hands the Writer, which only the
// leader calls.
//
// A new write of the user API goes here: a method on its resource's type
// (or a new type beside them), its checks and its entry, and a test with
// a fake Writer and a fake state; agent/server then routes to it.
package endpoint
