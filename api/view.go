package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Headers of GET /v1/internal/nodes/{id}/view: the hash of the view
// answered, the index of the state it was taken at, and the ID of the
// leader the server's Raft names.
const (
	ViewHashHeader   = "X-Skein-View-Hash"
	ViewIndexHeader  = "X-Skein-View-Index"
	ViewLeaderHeader = "X-Skein-Leader"
)

// maxViewBytes bounds a node view read from a server.
const maxViewBytes = 256 << 20

// NodeView is one answer to a node's view watch.
type NodeView struct {
	// Hash and Index are the server's view's, and Leader the leader its
	// Raft names ("": none); Data is nil when neither the view's hash nor
	// the leader changed from those asked with.
	Hash   string
	Index  uint64
	Leader string
	Data   []byte
}

// NodeView asks a server for the node's view, waiting up to wait for its
// hash to differ from hash (the hash of the view the node holds, "" for
// none, at index) or the leader from leader (the one the node knows).
func (c *Client) NodeView(ctx context.Context, nodeID, hash string, index uint64, leader string, wait time.Duration) (*NodeView, error) {
	q := url.Values{}
	q.Set("hash", hash)
	q.Set("index", strconv.FormatUint(index, 10))
	q.Set("leader", leader)
	q.Set("wait", wait.String())
	resp, err := c.send(ctx, sendAny, http.MethodGet, "/v1/internal/nodes/"+url.PathEscape(nodeID)+"/view", q, nil)
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusNotModified {
		return &NodeView{Hash: hash, Leader: leader}, nil
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	v := &NodeView{Hash: resp.Header.Get(ViewHashHeader), Leader: resp.Header.Get(ViewLeaderHeader)}
	v.Index, _ = strconv.ParseUint(resp.Header.Get(ViewIndexHeader), 10, 64)
	if v.Data, err = io.ReadAll(io.LimitReader(resp.Body, maxViewBytes)); err != nil {
		return nil, err
	}
	return v, nil
}
