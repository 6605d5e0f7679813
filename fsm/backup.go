package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/skein-dev/skein/structs"
)

// WriteSnapshot writes the current state to w in the snapshot format
// (Persist's), as a backup: `skein snapshot save`, and the periodic
// snapshots of --snapshot-every. It returns the index of the state
// written.
func (f *FSM) WriteSnapshot(w io.Writer) (uint64, error) {
	f.mu.RLock()
	snap := f.st.snapshot()
	f.mu.RUnlock()
	if err := snap.write(w); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	return snap.index, nil
}

// Inspect reads a whole snapshot, checking it as Restore does, and says
// what it holds. An error wraps ErrBadSnapshot.
func Inspect(r io.Reader) (structs.SnapshotSummary, error) {
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(r, h)}
	st, version, err := readSnapshotVersion(cr)
	if err != nil {
		return structs.SnapshotSummary{}, err
	}
	// Whatever follows the last record is read too, so the digest and
	// size are the file's.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return structs.SnapshotSummary{}, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	sum := structs.SnapshotSummary{
		Version: version, Index: st.index, Bytes: cr.n, SHA256: hex.EncodeToString(h.Sum(nil)),
		Nodes: len(st.nodes), Jobs: map[structs.JobState]int{}, Services: len(st.services),
		ACLTokens: len(st.aclTokens), ACLUsers: len(st.aclUsers), JoinTokens: len(st.joinTokens),
		Trust: st.trust != nil, ACL: st.acl != nil, Events: st.events.len(),
	}
	for _, j := range st.jobs {
		sum.Jobs[j.State]++
	}
	for _, a := range st.allocs {
		if a.Live() {
			sum.LiveAllocs++
		}
	}
	if e := st.events.last(); e != nil {
		sum.Newest = e.Time
	}
	return sum, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Reindex copies the snapshot in data with its header's index set to
// index: a backup restored into a running cluster takes an index past
// every entry the cluster has applied, so that the nodes, which tell
// newer state by its index, take it for the newer. data must have passed
// Inspect.
func Reindex(data []byte, index uint64) ([]byte, error) {
	line, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return nil, fmt.Errorf("%w: no header line", ErrBadSnapshot)
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	h.Index = index
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	if err := json.NewEncoder(bw).Encode(h); err != nil {
		return nil, err
	}
	if _, err := bw.Write(rest); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
