package payout

import (
	"context"
	"sync"

	"github.com/partnerpay/api/pkg/bankprovider"
)

// fakeProvider is the bank provider as the payout service sees it: it takes
// payouts over, once each by reference, and reports whatever status a test
// sets for each.
type fakeProvider struct {
	mu      sync.Mutex
	payouts map[string]bankprovider.NewPayout
	word    map[string]bankprovider.Payout
	creates int
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{payouts: map[string]bankprovider.NewPayout{}, word: map[string]bankprovider.Payout{}}
}

func (f *fakeProvider) CreatePayout(_ context.Context, in bankprovider.NewPayout) (bankprovider.Payout, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	if _, ok := f.payouts[in.Reference]; !ok {
		f.payouts[in.Reference] = in
		f.word[in.Reference] = bankprovider.Payout{ID: "po_" + in.Reference, Reference: in.Reference, Status: "processing"}
	}
	return f.word[in.Reference], nil
}

func (f *fakeProvider) PayoutByReference(_ context.Context, ref string) (bankprovider.Payout, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.word[ref]
	if !ok {
		e := &bankprovider.Error{Status: 404}
		e.Body.Error.Type = bankprovider.TypeResourceMissing
		return bankprovider.Payout{}, e
	}
	return w, nil
}

// says sets the provider's word on ref.
func (f *fakeProvider) says(ref string, w bankprovider.Payout) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Reference = ref
	f.word[ref] = w
}
