package structs

import "time"

// SnapshotSummary describes a backup of the cluster's state (skein
// snapshot save): what `skein snapshot inspect` shows of a file and what
// a restore answers.
type SnapshotSummary struct {
	// Version is the snapshot format's version, Index the Raft index of
	// the state it holds.
	Version int    `json:"version"`
	Index   uint64 `json:"index"`
	// Bytes is the size of the snapshot, SHA256 its digest (hex).
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Newest is when the newest event in it happened, a bound on when
	// it was taken (zero: it holds no event).
	Newest     time.Time        `json:"newest_event,omitzero"`
	Nodes      int              `json:"nodes"`
	Jobs       map[JobState]int `json:"jobs"`
	LiveAllocs int              `json:"live_allocs"`
	Services   int              `json:"services"`
	ACLTokens  int              `json:"acl_tokens"`
	ACLUsers   int              `json:"acl_users"`
	JoinTokens int              `json:"join_tokens"`
	Trust      bool             `json:"trust"`
	ACL        bool             `json:"acl"`
	Events     int              `json:"events"`
}
