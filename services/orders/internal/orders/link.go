package orders

import (
	"context"
	"errors"
	"fmt"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/partner"
)

// LinkRequest is the body of POST /v1/orders/link.
type LinkRequest struct {
	OrderID string `json:"orderId"`
	// ReturnURL, optional, is where the browser goes once back from the
	// hosted card page; without it, it is shown a short page.
	ReturnURL string `json:"returnUrl,omitempty"`
}

// Link is the answer, less environment.
type Link struct {
	Link string `json:"link"`
}

// Returned is where to send a browser that came back.
type Returned struct {
	OrderID       string
	Status        string // the provider's word, read back
	FailureReason string
	Redirect      string // the partner's return URL with the outcome; empty: show a page
}

const linkPrefix = "ol_"

var errNoProviderOrder = envelope.InvalidRequest("This order was made before card payments were connected and cannot be paid; create a new order.")

// Link mints the hosted card page link at click time: a fresh link at the
// provider (dead after five minutes, killing the order's earlier ones),
// whose return address carries a signed state naming it.
func (s *service) Link(ctx context.Context, caller partner.Caller, req LinkRequest) (Link, error) {
	if req.ReturnURL != "" && !hostedlink.ValidReturnURL(s.env, req.ReturnURL) {
		return Link{}, hostedlink.ErrReturnURL
	}
	r, err := s.owned(ctx, caller, req.OrderID)
	if err != nil {
		return Link{}, err
	}
	if r.ProviderID == "" {
		return Link{}, errNoProviderOrder
	}
	id := format.NewID(linkPrefix)
	cs, err := s.provider.CreateCardSession(ctx, r.ProviderID, s.signer.ReturnAddress(s.returnURL, id))
	if err != nil {
		return Link{}, bankprovider.ToAPI(err)
	}
	if !providerRef(cs.ID) || !hostedPage(cs.URL) {
		return Link{}, fmt.Errorf("card provider: a session of an unexpected shape")
	}
	// The provider killed the earlier links; minting makes this one the
	// order's current link, so their return addresses no longer count.
	if err := s.store.Mint(ctx, LinkRecord{ID: id, OrderID: r.ID, ProviderSessionID: cs.ID, ReturnURL: req.ReturnURL, CreatedAt: s.now().UTC()}); err != nil {
		return Link{}, fmt.Errorf("save link: %w", err)
	}
	return Link{Link: cs.URL}, nil
}

// Return checks the signed state, that it names the order's current link
// and is used once, and reads the outcome back from the provider: what the
// browser's address says is never read.
func (s *service) Return(ctx context.Context, state string) (Returned, error) {
	id, err := s.signer.Verify(state)
	if err != nil {
		return Returned{}, err
	}
	l, err := s.store.Link(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return Returned{}, hostedlink.ErrBadState
	case err != nil:
		return Returned{}, fmt.Errorf("read link: %w", err)
	case l.Used:
		return Returned{}, hostedlink.ErrUsedState
	case !l.Current:
		return Returned{}, hostedlink.ErrOldState
	}
	r, err := s.store.Get(ctx, l.OrderID)
	if err != nil {
		return Returned{}, fmt.Errorf("read order: %w", err)
	}
	if r, err = s.sync(ctx, r); err != nil {
		return Returned{}, fmt.Errorf("read the order back: %w", err)
	}
	switch err := s.store.Redeem(ctx, l.ID, s.now().UTC()); {
	case errors.Is(err, ErrUsed):
		return Returned{}, hostedlink.ErrUsedState // another return took it a moment ago
	case errors.Is(err, ErrSuperseded):
		return Returned{}, hostedlink.ErrOldState // a newer link was minted a moment ago
	case err != nil:
		return Returned{}, fmt.Errorf("redeem link: %w", err)
	}
	out := Returned{OrderID: r.ID, Status: r.Status, FailureReason: r.FailureReason}
	if l.ReturnURL != "" {
		params := []string{"orderId", r.ID, "status", r.Status}
		if r.FailureReason != "" {
			params = append(params, "failureReason", r.FailureReason)
		}
		out.Redirect = hostedlink.WithQuery(l.ReturnURL, params...)
	}
	return out, nil
}
