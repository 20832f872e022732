package hostedlink

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The lifecycle both hosted pages share: a minted link is its subject's
// current one; a return is taken once, only for the current link, with
// the outcome the service reads back; each refusal is the page's own.
func TestALinkIsReturnedOnceWhileCurrent(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	links := map[string]Link{}
	lc := &Lifecycle{Env: "sandbox", Signer: Signer{Secret: []byte("0123456789abcdef0123456789abcdef"), Now: func() time.Time { return now }},
		ReturnTo: "https://gw.example/x/return", Prefix: "l_", Now: func() time.Time { return now },
		Find: func(_ context.Context, id string) (Link, error) {
			l, ok := links[id]
			if !ok {
				return Link{}, ErrNotFound
			}
			return l, nil
		},
		Keep: func(_ context.Context, l Link, _ time.Time) error {
			for id, old := range links {
				if old.Subject == l.Subject {
					old.Current = false
					links[id] = old
				}
			}
			links[l.ID] = l
			return nil
		}}
	ctx := context.Background()
	if err := lc.CheckReturnURL("http://evil.example/"); err != ErrReturnURL {
		t.Errorf("a plain http return URL: %v", err)
	}
	var sent string
	open := func(_ context.Context, ret string) (string, string, error) {
		sent = ret
		return "ps_1", "https://provider.example/p/1", nil
	}
	address, err := lc.Mint(ctx, "sub_1", "https://partner.example/done", open)
	if err != nil || address != "https://provider.example/p/1" || len(links) != 1 {
		t.Fatalf("mint: %q %v %v", address, err, links)
	}
	if _, err := lc.Mint(ctx, "sub_1", "", func(context.Context, string) (string, string, error) { return "", "", errors.New("provider down") }); err == nil || len(links) != 1 {
		t.Errorf("a failed provider call kept a link: %v %v", err, links)
	}
	state := sent[len("https://gw.example/x/return?state="):]
	var l1 Link
	for _, l := range links {
		l1 = l
	}
	// A newer link ends the first one.
	_, _ = lc.Mint(ctx, "sub_1", "", open)
	redeem := func(params ...string) func(context.Context, Link) ([]string, error) {
		return func(context.Context, Link) ([]string, error) { return params, nil }
	}
	if _, err := lc.Return(ctx, state, redeem()); err != ErrOldState {
		t.Errorf("a superseded link: %v", err)
	}
	l1.Current = true
	links[l1.ID] = l1
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"another return won a moment ago", ErrUsed, ErrUsedState},
		{"a newer link was minted a moment ago", ErrSuperseded, ErrOldState},
		{"the provider has no decision yet", errors.New("no decision"), nil},
	} {
		_, err := lc.Return(ctx, state, func(context.Context, Link) ([]string, error) { return nil, tc.err })
		if (tc.want != nil && err != tc.want) || (tc.want == nil && err == nil) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	redirect, err := lc.Return(ctx, state, redeem("subjectId", "sub_1", "result", "accepted"))
	if err != nil || redirect != "https://partner.example/done?result=accepted&subjectId=sub_1" {
		t.Errorf("the return: %q %v", redirect, err)
	}
	l1.Used = true
	links[l1.ID] = l1
	if _, err := lc.Return(ctx, state, redeem()); err != ErrUsedState {
		t.Errorf("a used link: %v", err)
	}
	if _, err := lc.Return(ctx, lc.Signer.Sign("l_none"), redeem()); err != ErrBadState {
		t.Errorf("a signed state for no link: %v", err)
	}
	if _, err := lc.Return(ctx, "forged.state", redeem()); err != ErrBadState {
		t.Errorf("a forged state: %v", err)
	}
}
