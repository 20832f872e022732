// Package consent is the consent service: the sessions in which a user
// accepts the bank provider's terms on its hosted page. It mints a fresh
// provider link each time one is asked for (dead after five minutes; minting
// one kills every earlier link of the session), and marks a session returned
// when the browser comes back through the gateway's public GET
// /consent/return with a signed, single-use state.
//
// The user's decision is the provider's word, never the browser's: on the
// way back the outcome is read from the provider's API, so editing the
// redirect cannot turn a decline into an acceptance.
package consent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/partner"
)

// Session states.
const (
	StatePending  = consentapi.StatePending
	StateReturned = consentapi.StateReturned
)

// Service is what the consent service does.
type Service interface {
	// CreateSession opens a session for an account whose provider customer
	// must accept the terms; Session reads one for its owner. Both are the
	// internal API of the fiat service, never routed by the gateway.
	CreateSession(ctx context.Context, in consentapi.CreateSession) (consentapi.Session, error)
	Session(ctx context.Context, owner, id string) (consentapi.Session, error)
	Link(ctx context.Context, caller partner.Caller, req LinkRequest) (Link, error)
	Status(ctx context.Context, caller partner.Caller, req StatusRequest) (Status, error)
	// Return handles the browser coming back from the hosted page with the
	// state the link carried.
	Return(ctx context.Context, state string) (Returned, error)
}

// LinkRequest is the body of POST /v1/fiat/consent/link.
type LinkRequest struct {
	ConsentSessionID string `json:"consentSessionId"`
	// ReturnURL, optional, is where the browser goes once back from the
	// hosted page; without it, it is shown "you can close this page".
	ReturnURL string `json:"returnUrl,omitempty"`
}

// Link is the answer, less environment.
type Link struct {
	Link string `json:"link"`
}

// StatusRequest is the body of POST /v1/fiat/consent/status.
type StatusRequest struct {
	ConsentSessionID string `json:"consentSessionId"`
}

// Status is the answer, less environment.
type Status struct {
	ConsentSessionID string `json:"consentSessionId"`
	State            string `json:"state"`
}

// statusOf is session r as its status call answers it.
func statusOf(r Record) Status { return Status{ConsentSessionID: r.ID, State: r.State} }

// Returned is where to send a browser that came back.
type Returned struct {
	SessionID string
	Result    string // the provider's: accepted or declined
	Redirect  string // the partner's return URL with the outcome; empty: show "you can close this page"
}

// Record is a session as the store keeps it.
type Record struct {
	ID                 string
	Owner              string
	AccountID          string
	ProviderCustomerID string
	State              string
	Result             string // the provider's decision once returned
	CurrentAttempt     string // the last link minted; earlier ones no longer count
	CreatedAt          time.Time
	ReturnedAt         time.Time
}

// Attempt is one minted link, redeemable once on return while it is its
// session's current one.
type Attempt struct {
	ID                string
	SessionID         string
	ProviderSessionID string
	ReturnURL         string
	CreatedAt         time.Time
	Used              bool
}

// Store keeps sessions and attempts (DBStore in production).
type Store interface {
	Create(ctx context.Context, r Record) error
	Get(ctx context.Context, id string) (Record, error)
	// Mint makes a the session's current attempt.
	Mint(ctx context.Context, a Attempt) error
	Attempt(ctx context.Context, id string) (Attempt, error)
	// Return redeems a once (ErrUsed after), while it is current
	// (ErrSuperseded otherwise), recording result unless the session has
	// one already.
	Return(ctx context.Context, a Attempt, result string, at time.Time) (Record, error)
}

// Provider is what the service needs of the bank provider.
type Provider interface {
	CreateTermsSession(ctx context.Context, customerID, returnURL string) (bankprovider.TermsSession, error)
	TermsSession(ctx context.Context, id string) (bankprovider.TermsSession, error)
}

type service struct {
	env      environment.Name
	store    Store
	provider Provider
	links    *hostedlink.Lifecycle // the hosted consent page's links (attempts)
	now      func() time.Time
}

var _ Service = (*service)(nil)

// NewService returns the consent service. returnURL is the gateway's public
// return address; secret signs the state carried through the browser.
func NewService(env environment.Name, store Store, provider Provider, secret []byte, returnURL string, now func() time.Time) Service {
	s := &service{env: env, store: store, provider: provider, now: now}
	s.links = &hostedlink.Lifecycle{Env: env, Signer: hostedlink.Signer{Secret: secret, Now: now}, ReturnTo: returnURL,
		Prefix: "att_", Now: now, Find: s.findAttempt, Keep: s.keepAttempt}
	return s
}

var (
	errSessionNotFound = envelope.New(envelope.CodeConsentSessionNotFound, "No consent session with this consentSessionId exists for this key.")
	errNoSessionID     = envelope.InvalidRequest("consentSessionId is required: the id from a consent_required answer.")
	// Shown to a person in a browser.
	errNoDecision = envelope.InvalidRequest("The bank has no decision from you for this link. Go back to the app and open the link again.")
)

// sessionPrefix starts every consent session id (format.NewID).
const sessionPrefix = "cs_"

func (s *service) CreateSession(ctx context.Context, in consentapi.CreateSession) (consentapi.Session, error) {
	if in.Owner == "" || in.AccountID == "" || in.ProviderCustomerID == "" {
		return consentapi.Session{}, envelope.InvalidRequest("owner, accountId and providerCustomerId are required.")
	}
	r := Record{ID: format.NewID(sessionPrefix), Owner: in.Owner, AccountID: in.AccountID, ProviderCustomerID: in.ProviderCustomerID,
		State: StatePending, CreatedAt: s.now().UTC()}
	if err := s.store.Create(ctx, r); err != nil {
		return consentapi.Session{}, fmt.Errorf("save consent session: %w", err)
	}
	return r.wire(), nil
}

func (s *service) Session(ctx context.Context, owner, id string) (consentapi.Session, error) {
	r, err := s.owned(ctx, owner, id)
	if err != nil {
		return consentapi.Session{}, err
	}
	return r.wire(), nil
}

func (r Record) wire() consentapi.Session {
	return consentapi.Session{ConsentSessionID: r.ID, State: r.State, Result: r.Result}
}

// owned loads a session of owner's; another key's answers as unknown.
func (s *service) owned(ctx context.Context, owner, id string) (Record, error) {
	if id == "" {
		return Record{}, errNoSessionID
	}
	if !format.ValidID(sessionPrefix, id) {
		return Record{}, errSessionNotFound
	}
	r, err := s.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && r.Owner != owner) {
		return Record{}, errSessionNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("read consent session: %w", err)
	}
	return r, nil
}

func (s *service) Link(ctx context.Context, caller partner.Caller, req LinkRequest) (Link, error) {
	if err := s.links.CheckReturnURL(req.ReturnURL); err != nil {
		return Link{}, err
	}
	r, err := s.owned(ctx, caller.KeyID, req.ConsentSessionID)
	if err != nil {
		return Link{}, err
	}
	address, err := s.links.Mint(ctx, r.ID, req.ReturnURL, func(ctx context.Context, returnAddress string) (string, string, error) {
		ts, err := s.provider.CreateTermsSession(ctx, r.ProviderCustomerID, returnAddress)
		if err != nil {
			return "", "", bankprovider.ToAPI(err)
		}
		return ts.ID, ts.URL, nil
	})
	if err != nil {
		return Link{}, err
	}
	return Link{Link: address}, nil
}

func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (Status, error) {
	r, err := s.owned(ctx, caller.KeyID, req.ConsentSessionID)
	if err != nil {
		return Status{}, err
	}
	return statusOf(r), nil
}

// Return takes the browser's return (hostedlink.Lifecycle.Return) and reads
// the user's decision back from the provider.
func (s *service) Return(ctx context.Context, state string) (Returned, error) {
	var out Returned
	redirect, err := s.links.Return(ctx, state, func(ctx context.Context, l hostedlink.Link) ([]string, error) {
		ts, err := s.provider.TermsSession(ctx, l.ProviderSessionID)
		if err != nil {
			return nil, fmt.Errorf("read the decision back: %w", err)
		}
		switch ts.Status {
		case bankprovider.TermsAccepted, bankprovider.TermsDeclined:
		case "expired", "superseded":
			return nil, hostedlink.ErrLateState
		default:
			return nil, errNoDecision
		}
		r, err := s.store.Return(ctx, Attempt{ID: l.ID, SessionID: l.Subject, ProviderSessionID: l.ProviderSessionID, ReturnURL: l.ReturnURL},
			ts.Status, s.now().UTC())
		if err != nil {
			return nil, err
		}
		out = Returned{SessionID: r.ID, Result: ts.Status}
		return []string{"consentSessionId", r.ID, "result", ts.Status}, nil
	})
	if err != nil {
		return Returned{}, err
	}
	out.Redirect = redirect
	return out, nil
}

// findAttempt and keepAttempt are the session attempts the lifecycle
// keeps: an attempt is current while its session names it.
func (s *service) findAttempt(ctx context.Context, id string) (hostedlink.Link, error) {
	a, err := s.store.Attempt(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return hostedlink.Link{}, hostedlink.ErrNotFound
	}
	if err != nil {
		return hostedlink.Link{}, err
	}
	l := hostedlink.Link{ID: a.ID, Subject: a.SessionID, ProviderSessionID: a.ProviderSessionID, ReturnURL: a.ReturnURL, Used: a.Used}
	if a.Used {
		return l, nil
	}
	r, err := s.store.Get(ctx, a.SessionID)
	if err != nil {
		return l, fmt.Errorf("read consent session: %w", err)
	}
	l.Current = r.CurrentAttempt == a.ID
	return l, nil
}

func (s *service) keepAttempt(ctx context.Context, l hostedlink.Link, at time.Time) error {
	return s.store.Mint(ctx, Attempt{ID: l.ID, SessionID: l.Subject, ProviderSessionID: l.ProviderSessionID, ReturnURL: l.ReturnURL, CreatedAt: at})
}
