package hostedlink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
)

// Link is one minted link to a provider's hosted page, as the service
// that minted it keeps it: the consent session or the card order it is for
// (Subject), the provider's session behind it, and the partner's return URL.
type Link struct {
	ID                string
	Subject           string
	ProviderSessionID string
	ReturnURL         string // the partner's; "" for none
	Used              bool   // a return took it
	Current           bool   // the newest link of its subject: minting another ends it
}

// What a service's store answers about its links: none with that id; and,
// from the step that redeems one, that another return took it a moment ago,
// or a newer link was minted a moment ago.
var (
	ErrNotFound   = errors.New("hosted link not found")
	ErrUsed       = errors.New("hosted link already used")
	ErrSuperseded = errors.New("hosted link superseded by a newer one")
)

// Lifecycle is a hosted-page link's life, which consent and card orders
// share: minted at click time, the subject's current link from then on (a
// newer one ends it), its return taken once, its outcome read back from the
// provider, never from the browser. Each service keeps only what is its
// own: where it keeps links (Find, Keep) and the provider calls.
type Lifecycle struct {
	Env      environment.Name
	Signer   Signer
	ReturnTo string // the gateway's public return route
	Prefix   string // of the link ids
	Now      func() time.Time
	// Find reads a link (ErrNotFound for none).
	Find func(ctx context.Context, id string) (Link, error)
	// Keep records l, minted at at, as its subject's current link: the
	// earlier ones stop counting, in the same transaction.
	Keep func(ctx context.Context, l Link, at time.Time) error
}

// CheckReturnURL refuses a partner's returnUrl that breaks ValidReturnURL.
func (lc *Lifecycle) CheckReturnURL(raw string) error {
	if raw != "" && !ValidReturnURL(lc.Env, raw) {
		return ErrReturnURL
	}
	return nil
}

// Mint makes a new link for subject: open asks the provider for a hosted
// page that returns to returnAddress (a fresh attempt, which kills the
// subject's earlier ones there), and answers its session id and address;
// the link is then kept as the subject's current one. The answer is the
// page's address. returnURL must have passed CheckReturnURL.
func (lc *Lifecycle) Mint(ctx context.Context, subject, returnURL string,
	open func(ctx context.Context, returnAddress string) (providerSessionID, address string, err error)) (string, error) {
	id := format.NewID(lc.Prefix)
	sessionID, address, err := open(ctx, lc.Signer.ReturnAddress(lc.ReturnTo, id))
	if err != nil {
		return "", err
	}
	l := Link{ID: id, Subject: subject, ProviderSessionID: sessionID, ReturnURL: returnURL, Current: true}
	if err := lc.Keep(ctx, l, lc.Now().UTC()); err != nil {
		return "", fmt.Errorf("save link: %w", err)
	}
	return address, nil
}

// Return takes the browser's return with state: the link it names must be
// one of ours, unexpired, unused and its subject's current one. redeem is
// the service's: it reads the outcome back from the provider, records it
// with the link's use (ErrUsed or ErrSuperseded when another return, or a
// newer link, won a moment ago), and answers the parameters the partner's
// return URL gets. The answer is that URL with them ("" when the partner
// gave none: the service shows its own page).
func (lc *Lifecycle) Return(ctx context.Context, state string, redeem func(ctx context.Context, l Link) (params []string, err error)) (string, error) {
	id, err := lc.Signer.Verify(state)
	if err != nil {
		return "", err
	}
	l, err := lc.Find(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", ErrBadState
	case err != nil:
		return "", fmt.Errorf("read link: %w", err)
	case l.Used:
		return "", ErrUsedState
	case !l.Current:
		return "", ErrOldState
	}
	params, err := redeem(ctx, l)
	switch {
	case errors.Is(err, ErrUsed):
		return "", ErrUsedState // another return took it a moment ago
	case errors.Is(err, ErrSuperseded):
		return "", ErrOldState // a newer link was minted a moment ago
	case err != nil:
		return "", err
	}
	if l.ReturnURL == "" {
		return "", nil
	}
	return WithQuery(l.ReturnURL, params...), nil
}
