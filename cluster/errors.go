package cluster

import (
	"errors"

	"github.com/hashicorp/raft"
)

// Sentinel errors. ErrNotLeader, ErrShutdown and ErrTimeout also match the
// raft error they stand for, so errors.Is works with either.
var (
	// ErrNotLeader means the operation needs the leader and this node is not it.
	ErrNotLeader error = &raftError{msg: "not the leader", cause: raft.ErrNotLeader}
	// ErrShutdown means the cluster (or its raft node) has been shut down.
	ErrShutdown error = &raftError{msg: "cluster is shut down", cause: raft.ErrRaftShutdown}
	// ErrTimeout means raft did not accept the operation within its timeout.
	ErrTimeout error = &raftError{msg: "timed out waiting for raft", cause: raft.ErrEnqueueTimeout}
	// ErrLeadershipLost means this node stopped leading while the operation
	// was being committed: it may or may not have been applied.
	ErrLeadershipLost error = &raftError{msg: "leadership lost while committing; the write may or may not have been applied", cause: raft.ErrLeadershipLost}
	// errRevokedMember refuses a revoked member's alive message.
	errRevokedMember = errors.New("revoked: refused in gossip")
	// ErrNoLeader means no leader became known before the caller gave up.
	ErrNoLeader = errors.New("no leader")
	// ErrInvalidConfig means a Config field is missing or malformed.
	ErrInvalidConfig = errors.New("invalid cluster config")
	// ErrInvalidServer means a membership change named an empty ID or address.
	ErrInvalidServer = errors.New("invalid server")
	// ErrStoreLocked means another Cluster (in this or another process)
	// holds the raft store in the same data directory.
	ErrStoreLocked = errors.New("raft store is locked by another user of the data directory")
	// ErrNoGossip means a gossip operation was asked of a node started
	// without gossip (Config.GossipBind empty).
	ErrNoGossip = errors.New("gossip is not enabled")
	// ErrNotEncrypted means a keyring change was asked of a node whose
	// gossip runs without encryption (which cannot be turned on at runtime).
	ErrNotEncrypted = errors.New("gossip is not encrypted")
	// ErrJoin means Join reached none of the addresses it was given.
	ErrJoin = errors.New("join failed")
	// ErrInvalidKey means a gossip encryption key is malformed.
	ErrInvalidKey = errors.New("invalid gossip key")
	// ErrBadMeta means a member's gossip metadata could not be decoded.
	ErrBadMeta = errors.New("bad member metadata")
	// ErrLeave means Leave could not hand this node's place over safely.
	ErrLeave = errors.New("leave failed")
)

// raftError is a package error that reads on its own but still unwraps to
// the raft error it replaces.
type raftError struct {
	msg   string
	cause error
}

func (e *raftError) Error() string { return e.msg }
func (e *raftError) Unwrap() error { return e.cause }

// translate maps raft's errors onto this package's sentinels and leaves all
// others (transfer in progress, ...) as they are.
func translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrLeadershipLost):
		return ErrLeadershipLost
	}
	return err
}
