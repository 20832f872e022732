package lifecycle

import (
	"slices"
	"testing"
)

// Every kind of event takes the statuses of a resource of All, and every
// type is a closed, well-formed label.
func TestEventTypes(t *testing.T) {
	t.Parallel()
	types := EventTypes()
	for _, want := range []string{"payout.awaiting_deposit", "payout.refund.sent", "payout.refund.confirmed", "order.completed", "fiat_account.active",
		"virtual_account.active", "virtual_account.funding.funded", "fiat_deposit.funded", "consent.returned"} {
		if !slices.Contains(types, want) {
			t.Errorf("no event type %s", want)
		}
	}
	for _, k := range EventKinds() {
		if !slices.ContainsFunc(All(), func(r Resource) bool { return r.Resource == k.Resource }) {
			t.Errorf("kind %s: no resource %s", k.Prefix, k.Resource)
		}
	}
	if len(types) != 6+4+6+4+2+2+2+2 {
		t.Errorf("%d event types: %v", len(types), types)
	}
}
