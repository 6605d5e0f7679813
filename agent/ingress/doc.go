// Package ingress is every node's door to the cluster's services: an HTTP
// proxy (Proxy) that sends a request for service NAME (Host:
// NAME.<domain>, or the path /NAME/..., whose prefix the replica does not
// see) to one of the service's endpoints, wherever in the cluster it runs,
// and streams the answer back unbuffered.
//
// An endpoint is a running allocation of one of the service's replica
// jobs, not asked to stop, on a node that is not down, that passed its
// health check (Allocation.Health, which its node reports) or whose
// service has none; its address is its node's advertised host and the
// allocation's port (MasterPort). The proxy reads them from the replicated
// state through a small interface (State), and again only once an entry
// was applied since. Of the endpoints it picks the one with the fewest
// requests it has in flight there (InFlight counts them for the
// autoscaler), and tries another when the connection cannot be made, or
// again on a fresh connection when the kept-alive one it was given had
// been closed by the replica before a byte of the request went.
// DESIGN.md says why it works the way it does.
package ingress
