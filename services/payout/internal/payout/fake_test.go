package payout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
)

// fakeProvider is the bank provider as the payout service sees it: it takes
// payouts over, once each by reference, and reports whatever status a test
// sets for each. A test can make it fail (down), lose its answers to
// creations it made (the hand-over's answer lost, as when our process dies
// after the provider took the payout), or forget everything (a sandbox
// provider restarted empty).
type fakeProvider struct {
	mu      sync.Mutex
	payouts map[string]bankprovider.NewPayout
	word    map[string]bankprovider.Payout
	creates int            // calls to CreatePayout
	made    int            // payouts it took
	taken   map[string]int // payouts it took by reference, across forgets
	// retaken, when set, is told of a payout taken again after the
	// provider forgot it (f.mu held).
	retaken  func(ref string)
	asked    int                      // calls to PayoutByReference
	checked  int                      // calls to CheckPayee
	payee    bankprovider.PayeeResult // its answer to a payee check (match when empty)
	down     bool
	loseNext bool // the next creation is made, and its answer lost
	// The changes feed: every word it takes or is given, in order, under
	// the ids of its boot (epoch); forget starts a new one.
	changes []bankprovider.Change
	epoch   int
	fed     int // calls to Changes
	// hold, when set, holds each creation until it is closed (a provider
	// taking its time), and held is told each time one is held.
	hold, held chan struct{}
	// settles: a payout taken over is completed at once (in its feed too).
	settles bool
	// latency: every call takes this long (a slow provider).
	latency time.Duration
	// asking, when set, runs as a payout is asked about (PayoutByReference),
	// before the provider answers: what happens while a check is out.
	asking func(ref string)
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{payouts: map[string]bankprovider.NewPayout{}, word: map[string]bankprovider.Payout{}, taken: map[string]int{}}
}

var errProviderDown = errors.New("bank provider: connection refused")

func (f *fakeProvider) CreatePayout(_ context.Context, in bankprovider.NewPayout) (bankprovider.Payout, error) {
	f.mu.Lock()
	hold, held, latency := f.hold, f.held, f.latency
	f.creates++
	f.mu.Unlock()
	time.Sleep(latency)
	if hold != nil {
		held <- struct{}{}
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return bankprovider.Payout{}, errProviderDown
	}
	if _, ok := f.payouts[in.Reference]; !ok {
		f.made++
		f.taken[in.Reference]++
		if f.taken[in.Reference] > 1 && f.retaken != nil {
			f.retaken(in.Reference)
		}
		f.payouts[in.Reference] = in
		f.word[in.Reference] = bankprovider.Payout{ID: "po_" + in.Reference, Reference: in.Reference, Status: "processing"}
		f.publish(f.word[in.Reference])
		if f.settles {
			f.word[in.Reference] = bankprovider.Payout{ID: "po_" + in.Reference, Reference: in.Reference, Status: "completed",
				CompletedAt: "2026-11-29T12:00:00Z"}
			f.publish(f.word[in.Reference])
		}
	}
	if f.loseNext {
		f.loseNext = false
		return bankprovider.Payout{}, errProviderDown
	}
	return f.word[in.Reference], nil
}

func (f *fakeProvider) PayoutByReference(_ context.Context, ref string) (bankprovider.Payout, error) {
	f.mu.Lock()
	asking := f.asking
	f.mu.Unlock()
	if asking != nil {
		asking(ref)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.down {
		return bankprovider.Payout{}, errProviderDown
	}
	w, ok := f.word[ref]
	if !ok {
		e := &bankprovider.Error{Status: 404}
		e.Body.Error.Type = bankprovider.TypeResourceMissing
		return bankprovider.Payout{}, e
	}
	return w, nil
}

// CheckPayee answers payee, or the provider being down.
func (f *fakeProvider) CheckPayee(_ context.Context, in bankprovider.PayeeCheck) (bankprovider.PayeeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked++
	if f.down {
		return bankprovider.PayeeResult{}, errProviderDown
	}
	if f.payee.Result == "" {
		return bankprovider.PayeeResult{Result: bankprovider.PayeeMatch}, nil
	}
	return f.payee, nil
}

// Changes is the feed after the change after, limit at a time; a change
// of an earlier boot is state_lost.
func (f *fakeProvider) Changes(_ context.Context, after string, limit int) ([]bankprovider.Change, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fed++
	if f.down {
		return nil, false, errProviderDown
	}
	from := 0
	if after != "" {
		var epoch int
		if _, err := fmt.Sscanf(after, "chg_%d_%d", &epoch, &from); err != nil {
			return nil, false, err
		}
		if epoch != f.epoch {
			e := &bankprovider.Error{Status: 410}
			e.Body.Error.Type = bankprovider.TypeStateLost
			return nil, false, e
		}
	}
	to := min(from+limit, len(f.changes))
	return slices.Clone(f.changes[from:to]), to < len(f.changes), nil
}

// publish enters w into the feed (f.mu held).
func (f *fakeProvider) publish(w bankprovider.Payout) {
	f.changes = append(f.changes, bankprovider.Change{ID: fmt.Sprintf("chg_%d_%d", f.epoch, len(f.changes)+1),
		Type: bankprovider.ChangePayout, Payout: w})
}

// says sets the provider's word on ref, and publishes it as a change.
func (f *fakeProvider) says(ref string, w bankprovider.Payout) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Reference = ref
	f.word[ref] = w
	f.publish(w)
}

// tells sets the provider's word on ref without publishing it: a change
// the feed lost, found only by asking.
func (f *fakeProvider) tells(ref string, w bankprovider.Payout) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Reference = ref
	f.word[ref] = w
}

// set runs change with the provider locked.
func (f *fakeProvider) set(change func(f *fakeProvider)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// forget loses every payout, as a sandbox provider restarted empty.
func (f *fakeProvider) forget() {
	f.set(func(f *fakeProvider) {
		f.payouts, f.word = map[string]bankprovider.NewPayout{}, map[string]bankprovider.Payout{}
		f.changes, f.epoch = nil, f.epoch+1
	})
}

// counts are the calls it was made (creations, reads) and the payouts it
// took.
func (f *fakeProvider) counts() (creates, asked, made int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.asked, f.made
}

// feeds is how many times the feed was read.
func (f *fakeProvider) feeds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fed
}

// creating is how many creations were asked for.
func (f *fakeProvider) creating() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates
}

// lastChange is the id of the feed's last change.
func (f *fakeProvider) lastChange() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.changes) == 0 {
		return ""
	}
	return f.changes[len(f.changes)-1].ID
}
