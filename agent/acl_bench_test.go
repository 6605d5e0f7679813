package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkRevokeTakesEffect measures how soon a revoked token stops
// working everywhere: on an idle 3-node cluster with production timings,
// a reader's token, seen working on every node, is revoked through a node
// that does not lead; the figure is the time from the revoke call
// returning to the token being refused ("ACL token revoked") by the last
// of the three nodes, each asked over its API in a loop from the moment
// the call returned. The leader answers once a majority holds the entry
// and it has applied it; the followers apply it once they learn it is
// committed, with the leader's next append or heartbeat. One revoke per
// iteration; run with -benchtime 100x for p99 over 100.
func BenchmarkRevokeTakesEffect(b *testing.B) {
	tc := benchCluster(b, 3, SecurityAuto)
	tc.bootstrapACL()
	follower := tc.agents[(tc.leader()+1)%3]
	admin := tc.client(follower)
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tok, err := admin.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: fmt.Sprintf("user%d", i), Role: structs.RoleReader})
		if err != nil {
			b.Fatal(err)
		}
		users := make([]*api.Client, len(tc.agents))
		for j, a := range tc.agents {
			users[j] = clientFor(b, a, tok.Token)
			if _, err := users[j].Status(ctx); err != nil { // a node that has not applied it yet waits for it
				b.Fatalf("the new token on %s: %v", a.Name(), err)
			}
		}
		b.StartTimer()
		if _, err := admin.RevokeACLToken(ctx, tok.Info.ID); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			last    time.Duration
			failure error
		)
		for j, c := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := untilRevoked(ctx, c, t0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && failure == nil {
					failure = fmt.Errorf("%s: %w", tc.agents[j].Name(), err)
				}
				last = max(last, d)
			}()
		}
		wg.Wait()
		if failure != nil {
			b.Fatal(failure)
		}
		took = append(took, last)
	}
	b.StopTimer()
	report(b, "refused-everywhere", took)
}

// untilRevoked asks for the status with c's token until the answer is
// that the token is revoked, and returns how long after since that came;
// an answer other than success or that refusal, or 10 s, is an error.
func untilRevoked(ctx context.Context, c *api.Client, since time.Time) (time.Duration, error) {
	for time.Since(since) < 10*time.Second {
		_, err := c.Status(ctx)
		var ae *api.Error
		switch {
		case errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized && strings.Contains(ae.Message, "ACL token revoked"):
			return time.Since(since), nil
		case err != nil:
			return 0, err
		}
	}
	return 0, errors.New("the revoked token still worked after 10 s")
}
