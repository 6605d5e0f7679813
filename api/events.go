package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/skein-dev/skein/structs"
)

// EventsQuery selects events (GET /v1/events): those after a cursor, of
// one job or one node when set, at most Limit per answer (the agent's
// bound when 0).
type EventsQuery struct {
	After structs.EventCursor
	Job   string
	Node  string
	Limit int
}

func (q EventsQuery) values() url.Values {
	v := url.Values{}
	if !q.After.IsZero() {
		v.Set("after", q.After.String())
	}
	if q.Job != "" {
		v.Set("job", q.Job)
	}
	if q.Node != "" {
		v.Set("node", q.Node)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// EventsPage is one answer of GET /v1/events.
type EventsPage struct {
	Events []structs.Event `json:"events"`
	// Next is the cursor to ask after for the events that follow.
	Next structs.EventCursor `json:"next"`
	// Dropped, when set, is the newest of the events after the query's
	// cursor that the agent no longer keeps: they are lost to this read.
	Dropped structs.EventCursor `json:"dropped,omitzero"`
}

// Events reads one page of events.
func (c *Client) Events(ctx context.Context, q EventsQuery) (*EventsPage, error) {
	var p EventsPage
	return &p, c.do(ctx, http.MethodGet, "/v1/events", q.values(), nil, &p)
}

// Backoff between tries of a followed event stream that broke: from
// followRetryMin, doubled after each failed try, up to followRetryMax.
const (
	followRetryMin = 100 * time.Millisecond
	followRetryMax = 5 * time.Second
)

// EventKeepAlive is how often a followed event stream with nothing to say
// sends an empty line, so that its client can tell a quiet stream from a
// dead one (a node that froze or was cut off sends nothing, not even a
// close). It is short, so that a follower leaves a frozen node in a few
// seconds (followIdle).
const EventKeepAlive = time.Second

// followIdle is how long FollowEvents waits for an answer, and then for
// each line of it, before it takes the stream for dead and tries again.
var followIdle = 3 * EventKeepAlive

// FollowEvents gives fn each event after q.After as it happens (GET
// /v1/events?follow=true), until ctx ends (then it returns nil) or fn
// returns an error (which it returns). When the stream breaks (the agent
// stopped, the network went, or it has been silent for three keep-alives)
// it connects again after a growing wait, to the first of the client's
// agents that answers, the one whose stream broke asked last (a dead
// machine may not even refuse, a frozen one takes connections), and resumes
// after the last event fn was given: none is given twice, none is skipped
// that the agents still keep (a gap says so with an events-dropped event).
// retry, if not nil, hears of each break and the wait before the next try.
// An answer that says the request itself is wrong (4xx) ends it.
func (c *Client) FollowEvents(ctx context.Context, q EventsQuery, retry func(err error, wait time.Duration), fn func(structs.Event) error) error {
	wait := followRetryMin
	for {
		got, host, err := c.followOnce(ctx, &q, fn)
		if ctx.Err() != nil {
			return nil
		}
		var fnErr *handlerError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.StatusCode/100 == 4 {
			return err
		}
		if got {
			wait = followRetryMin
		}
		if host != "" {
			c.passOver(host)
		}
		if retry != nil {
			retry(err, wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, followRetryMax)
	}
}

// handlerError is an error of FollowEvents' fn, told apart from the
// stream's own.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

// followOnce reads one follow stream until it breaks, or is silent for
// followIdle, moving q.After past each event it gives fn. It reports
// whether it gave fn any, and the agent that streamed them ("": none
// answered).
func (c *Client) followOnce(ctx context.Context, q *EventsQuery, fn func(structs.Event) error) (bool, string, error) {
	v := q.values()
	v.Set("follow", "true")
	attempt, cancel := context.WithCancel(ctx)
	defer cancel()
	var silent atomic.Bool
	watchdog := time.AfterFunc(followIdle, func() { silent.Store(true); cancel() })
	defer watchdog.Stop()
	resp, err := c.send(attempt, sendAny, http.MethodGet, "/v1/events", v, nil)
	if silent.Load() {
		return false, "", fmt.Errorf("no answer from an agent in %s", followIdle)
	}
	if err != nil {
		return false, "", err
	}
	host := resp.Request.URL.Host
	defer resp.Body.Close()
	got := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4<<10), 64<<10)
	for sc.Scan() {
		watchdog.Reset(followIdle)
		if len(sc.Bytes()) == 0 {
			continue // a keep-alive
		}
		var e structs.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return got, host, fmt.Errorf("decode event from %s: %w", host, err)
		}
		if e.Cursor().Compare(q.After) <= 0 {
			continue // never twice
		}
		if err := fn(e); err != nil {
			return got, host, &handlerError{err}
		}
		q.After, got = e.Cursor(), true
	}
	if silent.Load() {
		return got, host, fmt.Errorf("event stream from %s: silent for %s", host, followIdle)
	}
	if err := sc.Err(); err != nil {
		return got, host, fmt.Errorf("event stream from %s: %w", host, err)
	}
	return got, host, fmt.Errorf("event stream from %s ended", host)
}
