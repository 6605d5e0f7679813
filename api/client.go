package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skein-dev/skein/structs"
)

// DefaultAddr is where the CLI looks for an agent unless told otherwise.
const DefaultAddr = "http://127.0.0.1:7470"

// Error is a non-2xx answer from an agent.
type Error struct {
	StatusCode int
	Message    string
	// Field is the request's field the answer is about (ErrorBody.Field);
	// "" where none.
	Field string
	// RetryAfter is, for the leader's back-pressure (a 429 with
	// BusyHeader), how long it asked the client to wait before sending
	// the request again; 0 for any other answer.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// IsNotFound reports whether err is a 404 from the agent.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// DefaultBusyWait bounds, by default, how long one call waits in all for
// a busy cluster to take it (WithBusyRetry).
const DefaultBusyWait = 30 * time.Second

// minBusyWait is the least wait before a request refused as busy is sent
// again, whatever its Retry-After says.
const minBusyWait = 100 * time.Millisecond

// Client talks to an agent's HTTP API. Given several agents, it keeps
// working while any node of the cluster answers: a read (or a submission,
// which its request ID makes safe to send twice) goes to the next agent
// when one cannot be reached or has not answered within hedgeAfter (a
// frozen node takes connections and answers nothing), and the first
// answer is taken; a write that must be done once goes to the first agent
// that answers a ping, alone. The agent that answered last is asked first
// next time. A request the leader refuses as busy is sent again after the
// delay it asks for (WithBusyRetry).
type Client struct {
	bases []*url.URL
	token string
	http  *http.Client
	// pref is the index in bases of the agent that answered last; the
	// copies a client makes share it.
	pref *atomic.Int32
	// hedgeAfter and answerWait are the client's patience (WithTimeouts).
	hedgeAfter, answerWait time.Duration
	// tlsSet says https servers are verified with a configuration the
	// caller gave (WithTLS), not the system roots.
	tlsSet bool
	// busyWait bounds the waits of one call on busy answers; busyNotify,
	// when set, is told of each wait before it starts.
	busyWait   time.Duration
	busyNotify func(wait time.Duration)
}

// NewClient returns a client for the agent at addr ("http://host:port" or
// "host:port"), or for several, comma-separated. It waits for an answer
// as long as a request's context allows; WithTimeouts bounds that.
func NewClient(addr, token string) (*Client, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	c := &Client{token: token, http: &http.Client{Transport: newTransport()}, busyWait: DefaultBusyWait,
		pref: new(atomic.Int32), hedgeAfter: DefaultHedgeAfter}
	for _, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		if !strings.Contains(a, "://") {
			a = "http://" + a
		}
		u, err := url.Parse(a)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("--addr %q: want http://HOST:PORT (several separated by commas)", a)
		}
		c.bases = append(c.bases, u)
	}
	return c, nil
}

// SubmitJob creates a job, or returns the job an earlier request with the
// same RequestID created. With a RequestID it may be sent to several
// agents (see Client): the cluster creates one job all the same.
func (c *Client) SubmitJob(ctx context.Context, req SubmitRequest) (*structs.Job, error) {
	var job structs.Job
	mode := sendOnce
	if req.RequestID != "" {
		mode = sendAny
	}
	return &job, c.doAs(ctx, mode, http.MethodPost, "/v1/jobs", nil, req, &job)
}

// JobsQuery selects a page of GET /v1/jobs.
type JobsQuery struct {
	// All includes every finished job the cluster keeps, not only those
	// that finished within the last hour.
	All bool
	// Limit is the most jobs in the page; 0 is the agent's default
	// (DefaultJobsPage), and more than MaxJobsPage is refused.
	Limit int
	// After is the cursor a previous page gave (JobPage.Next); "" starts
	// at the oldest job.
	After string
	// Mine keeps only the caller's own jobs; Owner only that user's.
	Mine  bool
	Owner string
}

// JobPage is one page of jobs, oldest first.
type JobPage struct {
	Jobs []structs.Job
	// Next is the cursor of the next page; "" when this is the last.
	Next string
}

// JobsPage returns one page of jobs.
func (c *Client) JobsPage(ctx context.Context, jq JobsQuery) (*JobPage, error) {
	q := url.Values{}
	if jq.All {
		q.Set("all", "true")
	}
	if jq.Limit != 0 {
		q.Set("limit", strconv.Itoa(jq.Limit))
	}
	if jq.After != "" {
		q.Set("after", jq.After)
	}
	if jq.Mine {
		q.Set("mine", "true")
	}
	if jq.Owner != "" {
		q.Set("owner", jq.Owner)
	}
	var p JobPage
	h, err := c.doHeader(ctx, sendAny, http.MethodGet, "/v1/jobs", q, nil, &p.Jobs)
	if err != nil {
		return nil, err
	}
	p.Next = h.Get(NextCursorHeader)
	return &p, nil
}

// Jobs lists active and recently finished jobs, or every job with all,
// walking every page. Each job is listed once, even while jobs are
// submitted; callers that show jobs to people use JobsPage.
func (c *Client) Jobs(ctx context.Context, all bool) ([]structs.Job, error) {
	return c.JobsAll(ctx, JobsQuery{All: all})
}

// JobsAll walks every page of the jobs jq selects, MaxJobsPage at a time
// whatever jq.Limit says. A filter the agent has no parameter for is
// applied by the caller to what it returns: fine for the thousands of jobs
// a cluster keeps.
func (c *Client) JobsAll(ctx context.Context, jq JobsQuery) ([]structs.Job, error) {
	var jobs []structs.Job
	jq.Limit = MaxJobsPage
	for {
		p, err := c.JobsPage(ctx, jq)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, p.Jobs...)
		if p.Next == "" || p.Next == jq.After {
			return jobs, nil
		}
		jq.After = p.Next
	}
}

// Job returns a job and its allocations; id may be a unique prefix.
func (c *Client) Job(ctx context.Context, id string) (*JobDetail, error) {
	var d JobDetail
	return &d, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil, &d)
}

// JobWithSecrets is Job with the values of the job's secret_env, which
// only its owner and operators may see.
func (c *Client) JobWithSecrets(ctx context.Context, id string) (*JobDetail, error) {
	var d JobDetail
	return &d, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), url.Values{"secrets": {"true"}}, nil, &d)
}

// CancelJob stops a job; it returns the job as the cancel left it (for a
// job array, the last of the tasks it cancelled: Cancel returns them all).
func (c *Client) CancelJob(ctx context.Context, id string) (*structs.Job, error) {
	jobs, err := c.Cancel(ctx, id)
	if err != nil {
		return nil, err
	}
	return &jobs[len(jobs)-1], nil
}

// UpdateJob holds, releases or changes a queued job, or every queued task
// of an array, and returns each job changed.
func (c *Client) UpdateJob(ctx context.Context, id string, u JobUpdate) ([]structs.Job, error) {
	var jobs []structs.Job
	return jobs, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/update", nil, u, &jobs)
}

// Exec runs a command beside one rank of a running job and returns how
// it ended.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	var res ExecResult
	return &res, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/exec", nil, req, &res)
}

// Cancel stops a job, or every task of a job array that has not ended,
// and returns each as the cancel left it, tasks in index order.
func (c *Client) Cancel(ctx context.Context, id string) ([]structs.Job, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil, nil, &raw); err != nil {
		return nil, err
	}
	var jobs []structs.Job
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		if err := json.Unmarshal(raw, &jobs); err != nil {
			return nil, fmt.Errorf("decode the answer to a cancel: %w", err)
		}
	} else {
		var job structs.Job
		if err := json.Unmarshal(raw, &job); err != nil {
			return nil, fmt.Errorf("decode the answer to a cancel: %w", err)
		}
		jobs = append(jobs, job)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("cancel %s: the agent answered no job", id)
	}
	return jobs, nil
}

// Nodes lists every registered node.
func (c *Client) Nodes(ctx context.Context) ([]NodeInfo, error) {
	var nodes []NodeInfo
	return nodes, c.do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &nodes)
}

// Partitions lists the cluster's partitions: those nodes declare and
// those with settings, by name.
func (c *Client) Partitions(ctx context.Context) ([]PartitionInfo, error) {
	var parts []PartitionInfo
	return parts, c.do(ctx, http.MethodGet, "/v1/partitions", nil, nil, &parts)
}

// SetPartition sets a partition's limits, or with Delete drops them, and
// returns its settings as they now are.
func (c *Client) SetPartition(ctx context.Context, req structs.PartitionSetRequest) (*structs.Partition, error) {
	var p structs.Partition
	return &p, c.do(ctx, http.MethodPost, "/v1/partitions", nil, req, &p)
}

// Status summarises the cluster.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &s)
}

// Logs copies an allocation's output to w. With Follow it returns when the
// allocation has ended and all its output was sent, or when ctx ends.
func (c *Client) Logs(ctx context.Context, id string, opts LogOptions, w io.Writer) error {
	ls, err := c.OpenLogs(ctx, id, opts)
	if err != nil {
		return err
	}
	defer ls.Close()
	if _, err := io.Copy(w, ls); err != nil && ctx.Err() == nil {
		return fmt.Errorf("read logs: %w", err)
	}
	return nil
}

// LogStream is an allocation's output as GET /v1/jobs/{id}/logs streams it.
type LogStream struct {
	io.ReadCloser
	// Dropped is how many bytes of the stream its node's log cap dropped
	// before the answer began, and LogMax that cap (0: the node did not
	// say).
	Dropped int64
	LogMax  int64
	// Attempt is the attempt whose output this is (0: the node did not
	// say).
	Attempt int
	// Offset is where in the stream the answer begins (LogOffsetHeader);
	// -1 when the node did not say.
	Offset int64
	// Host is the agent that answered.
	Host string
}

// OpenLogs starts streaming an allocation's output, as Logs does; the
// caller reads it and closes it.
func (c *Client) OpenLogs(ctx context.Context, id string, opts LogOptions) (*LogStream, error) {
	q := url.Values{}
	q.Set("rank", strconv.Itoa(opts.Rank))
	if opts.Attempt > 0 {
		q.Set("attempt", strconv.Itoa(opts.Attempt))
	}
	if opts.Stream != "" {
		q.Set("stream", opts.Stream)
	}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Tail > 0 {
		q.Set("tail", strconv.Itoa(opts.Tail))
	}
	if opts.Lines > 0 {
		q.Set("lines", strconv.Itoa(opts.Lines))
	}
	if opts.Offset > 0 {
		q.Set("offset", strconv.FormatInt(opts.Offset, 10))
	}
	resp, err := c.send(ctx, sendAny, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs", q, nil)
	if err != nil {
		return nil, err
	}
	offset := int64(-1)
	if v := resp.Header.Get(LogOffsetHeader); v != "" {
		offset = headerBytes(resp.Header, LogOffsetHeader)
	}
	return &LogStream{ReadCloser: resp.Body,
		Dropped: headerBytes(resp.Header, LogDroppedHeader), LogMax: headerBytes(resp.Header, LogMaxHeader),
		Attempt: int(headerBytes(resp.Header, LogAttemptHeader)), Offset: offset, Host: resp.Request.URL.Host}, nil
}

// headerBytes reads a count (of bytes) from a header; a missing or
// malformed one is 0.
func headerBytes(h http.Header, name string) int64 {
	n, err := strconv.ParseInt(h.Get(name), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// do sends a request, a read to any agent and a write to one (modeOf),
// and decodes its answer into out.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	_, err := c.doHeader(ctx, modeOf(method), method, path, q, in, out)
	return err
}

// doAs is do for a request sent as mode says.
func (c *Client) doAs(ctx context.Context, mode sendMode, method, path string, q url.Values, in, out any) error {
	_, err := c.doHeader(ctx, mode, method, path, q, in, out)
	return err
}

// doHeader is doAs that also returns the answer's headers.
func (c *Client) doHeader(ctx context.Context, mode sendMode, method, path string, q url.Values, in, out any) (http.Header, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
	}
	resp, err := c.send(ctx, mode, method, path, q, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out == nil {
		// A call with no answer to read: any body (or none) will do.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return resp.Header, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, fmt.Errorf("decode answer from %s: %w", resp.Request.URL.Host, err)
	}
	return resp.Header, nil
}

// send performs a request, sending it again while the leader refuses it
// as busy: after the delay its Retry-After asks, with up to half as much
// again at random so that the clients of a burst do not come back
// together, for at most busyWait in all. A busy answer means nothing was
// done, so sending it again never does anything twice.
func (c *Client) send(ctx context.Context, mode sendMode, method, path string, q url.Values, body []byte) (*http.Response, error) {
	var waited time.Duration
	for {
		resp, err := c.sendOnce(ctx, mode, method, path, q, body)
		var busy *Error
		if !errors.As(err, &busy) || busy.RetryAfter <= 0 {
			return resp, err
		}
		wait := busy.RetryAfter + rand.N(busy.RetryAfter/2+1)
		if waited+wait > c.busyWait {
			if waited > 0 {
				busy.Message += fmt.Sprintf(" (still busy after %s of retries)", waited.Round(100*time.Millisecond))
			}
			return nil, busy
		}
		if c.busyNotify != nil {
			c.busyNotify(wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("%w (while waiting for a busy cluster: %s)", ctx.Err(), busy.Message)
		case <-timer.C:
		}
		waited += wait
	}
}

// WithBusyRetry returns a copy of the client that waits at most maxWait in
// all, over one call, for a busy cluster to take it (0: it never waits,
// and returns the busy answer as an *Error with RetryAfter), and tells
// notify (nil: no one) of each wait before it starts.
func (c *Client) WithBusyRetry(maxWait time.Duration, notify func(wait time.Duration)) *Client {
	cp := *c
	cp.busyWait, cp.busyNotify = maxWait, notify
	return &cp
}

// ReadError reads a non-2xx answer's {"error"} body (or, failing that, its
// text or status line) into an *Error, and closes the body.
func ReadError(resp *http.Response) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb ErrorBody
	if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
		eb.Error = strings.TrimSpace(string(b))
		if eb.Error == "" {
			eb.Error = resp.Status
		}
	}
	e := &Error{StatusCode: resp.StatusCode, Message: eb.Error, Field: eb.Field}
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get(BusyHeader) != "" {
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
	}
	return e
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date; a
// missing or malformed one is a second. It is never less than
// minBusyWait.
func retryAfter(v string) time.Duration {
	d := time.Second
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = time.Until(at)
	}
	return max(d, minBusyWait)
}

func (c *Client) sendTo(ctx context.Context, base *url.URL, method, path string, q url.Values, body []byte) (*http.Response, error) {
	// path comes escaped (url.PathEscape of IDs): keep it so, or an
	// escaped slash would be escaped again.
	u := *base
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, fmt.Errorf("build request: path %q: %w", path, err)
	}
	u.Path = p
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set(TokenHeader, c.token)
	}
	return c.http.Do(req)
}

// Members lists the gossip members this agent knows.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var m []Member
	return m, c.do(ctx, http.MethodGet, "/v1/members", nil, nil, &m)
}

// RaftPeers lists the servers of the Raft configuration.
func (c *Client) RaftPeers(ctx context.Context) ([]RaftPeer, error) {
	var p []RaftPeer
	return p, c.do(ctx, http.MethodGet, "/v1/raft/peers", nil, nil, &p)
}

// Join asks the agent to join the cluster of the given members.
func (c *Client) Join(ctx context.Context, addrs []string) (*JoinResponse, error) {
	var r JoinResponse
	return &r, c.doAs(ctx, sendPinned, http.MethodPost, "/v1/join", nil, JoinRequest{Addrs: addrs}, &r)
}

// Leave asks the agent to leave the cluster gracefully and exit.
func (c *Client) Leave(ctx context.Context) (*LeaveResponse, error) {
	var r LeaveResponse
	return &r, c.doAs(ctx, sendPinned, http.MethodPost, "/v1/leave", nil, struct{}{}, &r)
}

// Heartbeat renews this node's lease with the leader, or through the
// server asked, which passes it on.
func (c *Client) Heartbeat(ctx context.Context, nodeID string) (*HeartbeatResponse, error) {
	var r HeartbeatResponse
	return &r, c.do(ctx, http.MethodPost, "/v1/internal/heartbeat", nil, HeartbeatRequest{NodeID: nodeID}, &r)
}

// RelayHeartbeats passes the leader a round of the lease renewals that
// reached the server from.
func (c *Client) RelayHeartbeats(ctx context.Context, from string, nodeIDs []string) (*HeartbeatResponse, error) {
	var r HeartbeatResponse
	return &r, c.do(ctx, http.MethodPost, "/v1/internal/heartbeats", nil, RelayedHeartbeatsRequest{From: from, NodeIDs: nodeIDs}, &r)
}

// Register records a node's inventory through the leader.
func (c *Client) Register(ctx context.Context, n structs.Node) error {
	return c.do(ctx, http.MethodPost, "/v1/internal/register", nil, RegisterRequest{Node: n}, &struct{}{})
}

// Depart asks the leader to take the node nodeID, which leaves, out of
// the cluster: out of Raft where it is a server, and marked left.
func (c *Client) Depart(ctx context.Context, nodeID string) error {
	return c.do(ctx, http.MethodPost, "/v1/internal/depart", nil, DepartRequest{NodeID: nodeID}, &struct{}{})
}

// UpdateAllocs reports allocation progress to the leader.
func (c *Client) UpdateAllocs(ctx context.Context, nodeID string, updates []structs.AllocUpdate) error {
	return c.do(ctx, http.MethodPost, "/v1/internal/alloc-updates", nil, AllocUpdatesRequest{NodeID: nodeID, Updates: updates}, &struct{}{})
}

// WithHTTPClient returns a copy of the client that sends through hc.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	cp := *c
	cp.http = hc
	return &cp
}

// WithTLS returns a copy of the client that verifies https servers with
// cfg (ClusterTLS makes one for a cluster CA) instead of the system roots.
// Plain http addresses are unaffected.
func (c *Client) WithTLS(cfg *tls.Config) *Client {
	cp := *c
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok || tr == nil {
		tr = http.DefaultTransport.(*http.Transport)
	}
	tr = tr.Clone()
	tr.TLSClientConfig = cfg
	hc := *c.http
	hc.Transport = tr
	cp.http = &hc
	cp.tlsSet = true
	return &cp
}

// CloseIdle closes the connections the client keeps open between
// requests. A process that ends closes them anyway; one that makes a
// client per command (the CLI's tests) would otherwise pile them up at
// the agents. The client may still be used after.
func (c *Client) CloseIdle() {
	c.http.CloseIdleConnections()
}

// StatusWithHash is Status plus a digest of the whole replicated state and
// the index it was taken at, for comparing replicas.
func (c *Client) StatusWithHash(ctx context.Context) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodGet, "/v1/status", url.Values{"hash": {"true"}}, nil, &s)
}

// UpdateGPUHealth sends a node's GPU health to the leader.
func (c *Client) UpdateGPUHealth(ctx context.Context, req structs.NodeGPUHealthRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/internal/gpu-health", nil, req, &struct{}{})
}

// ReportLoads sends this node's view of the autoscaled services' load to
// the leader.
func (c *Client) ReportLoads(ctx context.Context, nodeID string, loads []structs.ServiceLoad) error {
	return c.do(ctx, http.MethodPost, "/v1/internal/loads", nil, LoadsRequest{NodeID: nodeID, Services: loads}, &struct{}{})
}

// AutoscaleObserved asks the leader for its latest observation of an
// autoscaled service's load.
func (c *Client) AutoscaleObserved(ctx context.Context, name string) (*structs.AutoscaleObservation, error) {
	var o structs.AutoscaleObservation
	return &o, c.do(ctx, http.MethodGet, "/v1/internal/autoscale/"+url.PathEscape(name), nil, nil, &o)
}

// GPUs lists every GPU of every node.
func (c *Client) GPUs(ctx context.Context) ([]GPUInfo, error) {
	var gpus []GPUInfo
	return gpus, c.do(ctx, http.MethodGet, "/v1/gpus", nil, nil, &gpus)
}

// CordonGPU takes a GPU out of service by hand (cordon) or returns it to
// service (!cordon), which also ends a fault quarantine.
func (c *Client) CordonGPU(ctx context.Context, req GPURequest, cordon bool) (*GPUInfo, error) {
	path := "/v1/gpus/uncordon"
	if cordon {
		path = "/v1/gpus/cordon"
	}
	var g GPUInfo
	return &g, c.do(ctx, http.MethodPost, path, nil, req, &g)
}

// InjectGPUFault reports a health event on a simulated GPU, as if the GPU
// had produced it.
func (c *Client) InjectGPUFault(ctx context.Context, req GPUFaultRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/gpus/fault", nil, req, &struct{}{})
}

// DrainNode starts (drain) or ends (!drain) the drain of the node with
// ID id and returns the node as the state then holds it.
func (c *Client) DrainNode(ctx context.Context, id string, req NodeDrainRequest, drain bool) (*structs.Node, error) {
	path := "/v1/nodes/" + url.PathEscape(id) + "/undrain"
	if drain {
		path = "/v1/nodes/" + url.PathEscape(id) + "/drain"
	}
	var n structs.Node
	return &n, c.do(ctx, http.MethodPost, path, nil, req, &n)
}

// RemoveNode forgets the node with ID id, which must be down or have
// left, and returns it as the state held it.
func (c *Client) RemoveNode(ctx context.Context, id string, req NodeRemoveRequest) (*structs.Node, error) {
	var n structs.Node
	return &n, c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(id)+"/remove", nil, req, &n)
}
