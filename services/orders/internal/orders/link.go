package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
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
	if err := s.links.CheckReturnURL(req.ReturnURL); err != nil {
		return Link{}, err
	}
	r, err := s.owned(ctx, caller, req.OrderID)
	if err != nil {
		return Link{}, err
	}
	if r.ProviderID == "" {
		return Link{}, errNoProviderOrder
	}
	address, err := s.links.Mint(ctx, r.ID, req.ReturnURL, func(ctx context.Context, returnAddress string) (string, string, error) {
		cs, err := s.provider.CreateCardSession(ctx, r.ProviderID, returnAddress)
		if err != nil {
			return "", "", bankprovider.ToAPI(err)
		}
		if !providerRef(cs.ID) || !hostedPage(cs.URL) {
			return "", "", fmt.Errorf("card provider: a session of an unexpected shape")
		}
		return cs.ID, cs.URL, nil
	})
	if err != nil {
		return Link{}, err
	}
	return Link{Link: address}, nil
}

// Return takes the browser's return (hostedlink.Lifecycle.Return) and reads
// the order's outcome back from the provider: what the browser's address
// says is never read.
func (s *service) Return(ctx context.Context, state string) (Returned, error) {
	var out Returned
	redirect, err := s.links.Return(ctx, state, func(ctx context.Context, l hostedlink.Link) ([]string, error) {
		r, err := s.store.Get(ctx, l.Subject)
		if err != nil {
			return nil, fmt.Errorf("read order: %w", err)
		}
		if r, err = s.sync(ctx, r); err != nil {
			return nil, fmt.Errorf("read the order back: %w", err)
		}
		if err := s.store.Redeem(ctx, l.ID, s.now().UTC()); err != nil {
			return nil, err
		}
		out = Returned{OrderID: r.ID, Status: r.Status, FailureReason: r.FailureReason}
		params := []string{"orderId", r.ID, "status", r.Status}
		if r.FailureReason != "" {
			params = append(params, "failureReason", r.FailureReason)
		}
		return params, nil
	})
	if err != nil {
		return Returned{}, err
	}
	out.Redirect = redirect
	return out, nil
}

// findLink and keepLink are the order links the lifecycle keeps.
func (s *service) findLink(ctx context.Context, id string) (hostedlink.Link, error) {
	l, err := s.store.Link(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return hostedlink.Link{}, hostedlink.ErrNotFound
	}
	return hostedlink.Link{ID: l.ID, Subject: l.OrderID, ProviderSessionID: l.ProviderSessionID, ReturnURL: l.ReturnURL,
		Used: l.Used, Current: l.Current}, err
}

func (s *service) keepLink(ctx context.Context, l hostedlink.Link, at time.Time) error {
	return s.store.Mint(ctx, LinkRecord{ID: l.ID, OrderID: l.Subject, ProviderSessionID: l.ProviderSessionID, ReturnURL: l.ReturnURL, CreatedAt: at})
}
