package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// passLog is a leader that takes rounds: it records each, holds the
// first until released, and fails while fail is set.
type passLog struct {
	mu      sync.Mutex
	rounds  [][]string
	passed  map[string]bool // nodes of the rounds that completed
	fail    error
	entered chan struct{}
	release chan struct{}
}

func newPassLog() *passLog {
	return &passLog{passed: map[string]bool{}, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (p *passLog) pass(_ context.Context, nodes []string) (string, error) {
	p.mu.Lock()
	first := len(p.rounds) == 0
	p.rounds = append(p.rounds, nodes)
	p.mu.Unlock()
	if first {
		p.entered <- struct{}{}
		<-p.release
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return "", p.fail
	}
	for _, id := range nodes {
		p.passed[id] = true
	}
	return "leader", nil
}

func (p *passLog) wasPassed(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.passed[id]
}

func TestLeaseRelay_ARenewalIsAnsweredOnlyOnceARoundHoldingItWasPassed(t *testing.T) {
	p := newPassLog()
	r := NewLeaseRelay(p.pass)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	// The first renewal's round is held at the leader (an election, a
	// slow leader); the renewals that arrive meanwhile cannot be in it,
	// and do not wait for it: later rounds carry them.
	firstDone := make(chan error, 1)
	go func() {
		_, err := r.Renew(ctx, "w-first")
		firstDone <- err
	}()
	<-p.entered
	const later = 50
	var wg sync.WaitGroup
	errs := make(chan error, later)
	for i := range later {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("w-%02d", i)
			leader, err := r.Renew(ctx, id)
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %v", id, err)
			case leader != "leader":
				errs <- fmt.Errorf("%s: leader %q, want the one the round named", id, leader)
			case !p.wasPassed(id):
				errs <- fmt.Errorf("%s was answered before a round holding it reached the leader", id)
			}
		}()
	}
	answered := make(chan struct{})
	go func() {
		wg.Wait()
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		close(p.release)
		t.Fatal("the renewals after a held round waited for it")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	select {
	case err := <-firstDone:
		t.Fatalf("the first renewal was answered while its round was held: %v", err)
	default:
	}
	close(p.release)
	if err := <-firstDone; err != nil || !p.wasPassed("w-first") {
		t.Fatalf("the first renewal once its round was let go: %v, passed %v", err, p.wasPassed("w-first"))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.rounds[0], []string{"w-first"}) {
		t.Errorf("first round %v, want [w-first]", p.rounds[0])
	}
	carried := 0
	for _, round := range p.rounds[1:] {
		carried += len(round)
	}
	if carried != later {
		t.Errorf("the later rounds carried %d renewals, want %d, each once", carried, later)
	}
}

func TestLeaseRelay_AFailedRoundFailsItsRenewalsAndTheNextOneWorks(t *testing.T) {
	p := newPassLog()
	p.fail = errors.New("no leader")
	close(p.release)
	go func() { <-p.entered }()
	r := NewLeaseRelay(p.pass)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	if _, err := r.Renew(ctx, "w"); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("renewal in a failed round: %v, want the round's error", err)
	}
	p.mu.Lock()
	p.fail = nil
	p.mu.Unlock()
	if _, err := r.Renew(ctx, "w"); err != nil {
		t.Fatalf("renewal after the leader is back: %v", err)
	}
	// A renewal whose caller gives up returns at once.
	gone, stop := context.WithCancel(ctx)
	stop()
	if _, err := r.Renew(gone, "w2"); !errors.Is(err, context.Canceled) {
		t.Fatalf("renewal of a caller gone: %v, want context.Canceled", err)
	}
}

// A server on its way out answers the renewals it holds at once, those
// in a round not yet passed too, so their workers ask the leader instead
// of waiting on it until their leases run out.
func TestLeaseRelay_AStoppedRelayAnswersItsRenewalsAtOnce(t *testing.T) {
	entered := make(chan struct{}, 1)
	// A leader that holds every round until the server stops.
	r := NewLeaseRelay(func(ctx context.Context, _ []string) (string, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return "", ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { r.Run(ctx); close(ran) }()

	// The first round is passed and held; the second waits its turn.
	wait, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	first := make(chan error, 1)
	go func() { _, err := r.Renew(wait, "w1"); first <- err }()
	<-entered
	second := make(chan error, 1)
	go func() { _, err := r.Renew(wait, "w2"); second <- err }()
	cancel()
	for _, ch := range []chan error{first, second} {
		// context.Canceled: a round passed and cut short, as the first.
		if err := <-ch; !errors.Is(err, ErrRelayStopped) && !errors.Is(err, context.Canceled) {
			t.Fatalf("renewal held by a stopped relay: %v, want an answer at once", err)
		}
	}
	<-ran
	if _, err := r.Renew(wait, "w3"); !errors.Is(err, ErrRelayStopped) {
		t.Fatalf("renewal reaching a stopped relay: %v, want ErrRelayStopped", err)
	}
}
