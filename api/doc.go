// Package api is skein's HTTP contract: the wire types of the /v1 API and
// the client that the CLI (and, later, agents talking to each other) use.
package api
