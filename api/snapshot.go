package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/skein-dev/skein/structs"
)

// SaveSnapshot writes a backup of the cluster's whole state, as its
// leader holds it, to w, and returns the Raft index of that state. The
// backup holds secrets (token hashes, the gossip keyring, jobs' secret
// env): keep it as such. An admin's.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error) {
	resp, err := c.send(ctx, sendAny, http.MethodGet, "/v1/snapshot", nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read the snapshot from %s: %w", resp.Request.URL.Host, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return 0, fmt.Errorf("read the snapshot from %s: %d of %d bytes", resp.Request.URL.Host, n, resp.ContentLength)
	}
	index, _ := strconv.ParseUint(resp.Header.Get(SnapshotIndexHeader), 10, 64)
	return index, nil
}

// RestoreSnapshot replaces the cluster's whole state with the backup in
// data (at most MaxSnapshotBytes), and returns what the backup held, at
// the index the cluster installed it at. An admin's.
func (c *Client) RestoreSnapshot(ctx context.Context, data []byte) (*structs.SnapshotSummary, error) {
	if len(data) > MaxSnapshotBytes {
		return nil, fmt.Errorf("snapshot: %d bytes, more than the limit of %d", len(data), MaxSnapshotBytes)
	}
	resp, err := c.send(ctx, sendOnce, http.MethodPost, "/v1/snapshot/restore", nil, data)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var sum structs.SnapshotSummary
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
		return nil, fmt.Errorf("decode answer from %s: %w", resp.Request.URL.Host, err)
	}
	return &sum, nil
}
