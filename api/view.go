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
// answered, and the index of the state it was taken at.
const (
	ViewHashHeader  = "X-Skein-View-Hash"
	ViewIndexHeader = "X-Skein-View-Index"
)

// maxViewBytes bounds a node view read from a server.
const maxViewBytes = 256 << 20

// NodeView is one answer to a node's view watch.
type NodeView struct {
	// Hash and Index are the server's view's; Data is nil when the view's
	// hash is the one asked with (nothing changed).
	Hash  string
	Index uint64
	Data  []byte
}

// NodeView asks a server for the node's view, waiting up to wait for its
// hash to differ from hash (the hash of the view the node holds, "" for
// none).
func (c *Client) NodeView(ctx context.Context, nodeID, hash string, wait time.Duration) (*NodeView, error) {
	q := url.Values{}
	q.Set("hash", hash)
	q.Set("wait", wait.String())
	resp, err := c.send(ctx, http.MethodGet, "/v1/internal/nodes/"+url.PathEscape(nodeID)+"/view", q, nil)
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusNotModified {
		return &NodeView{Hash: hash}, nil
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	v := &NodeView{Hash: resp.Header.Get(ViewHashHeader)}
	v.Index, _ = strconv.ParseUint(resp.Header.Get(ViewIndexHeader), 10, 64)
	if v.Data, err = io.ReadAll(io.LimitReader(resp.Body, maxViewBytes)); err != nil {
		return nil, err
	}
	return v, nil
}
