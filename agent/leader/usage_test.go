package leader

import (
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func TestLeader_UsageIsChargedOnceTheClusterHasAnAccountThenEveryInterval(t *testing.T) {
	h := newHarness(t)
	const interval = 200 * time.Millisecond
	if err := h.l.chargeUsage(interval); err != nil {
		t.Fatal(err)
	}
	if on, last := h.f.UsageClock(); on || !last.IsZero() {
		t.Fatalf("without accounts: charged (%v, %s)", on, last)
	}
	before := h.f.Index()
	h.must(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountCreate, Name: "ml"})
	if err := h.l.chargeUsage(interval); err != nil {
		t.Fatal(err)
	}
	_, first := h.f.UsageClock()
	if first.IsZero() || h.f.Index() != before+2 {
		t.Fatalf("no first charge once an account exists (index %d, clock %s)", h.f.Index(), first)
	}
	// Not again within the interval: no entry.
	if err := h.l.chargeUsage(interval); err != nil || h.f.Index() != before+2 {
		t.Fatalf("charged again within the interval: %v, index %d", err, h.f.Index())
	}
	testutil.WaitFor(t, 5*time.Second, func() error {
		if err := h.l.chargeUsage(interval); err != nil {
			return err
		}
		if _, last := h.f.UsageClock(); !last.After(first) {
			return fmt.Errorf("no charge after the interval (last %s)", last)
		}
		return nil
	})
	if _, last := h.f.UsageClock(); last.Sub(first) < interval {
		t.Fatalf("charges %s apart, want at least %s", last.Sub(first), interval)
	}
}
