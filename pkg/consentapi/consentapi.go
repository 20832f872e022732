// Package consentapi is the consent service's internal API, as its callers
// (the fiat service) use it: the typed requests and answers and a client.
// It is served on the consent service's own /internal routes, guarded by
// the internal token, and never routed by the gateway: callers say whose
// session it is in the request, they do not pose as the gateway.
package consentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// The internal routes.
const (
	RouteCreate = "POST /internal/sessions"
	RouteGet    = "GET /internal/sessions/{id}"
)

// Session states, as the partner API reports them.
const (
	StatePending  = lifecycle.ConsentPending
	StateReturned = lifecycle.ConsentReturned
)

// CreateSession opens a consent session for an account whose provider
// customer must accept the provider's terms.
type CreateSession struct {
	Owner              string `json:"owner"` // the partner key id the session belongs to
	AccountID          string `json:"accountId"`
	ProviderCustomerID string `json:"providerCustomerId"`
}

// Session is a consent session as its owner may see it.
type Session struct {
	ConsentSessionID string `json:"consentSessionId"`
	State            string `json:"state"`
	// Result is the provider's word on the user's decision once returned:
	// "accepted" or "declined".
	Result string `json:"result,omitempty"`
}

// LogAttrs of a creation: whose session, for which account.
func (c CreateSession) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("key_id", c.Owner), slog.String("account_id", c.AccountID)}
}

// LogAttrs of a session: its id and state.
func (s Session) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("consent_session_id", s.ConsentSessionID), slog.String("state", s.State)}
}

// ErrNotFound is a session that does not exist, or is another owner's.
var ErrNotFound = errors.New("consent session not found")

// Client calls the consent service's internal API.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// NewClient returns a client of the consent service at base, over rt.
func NewClient(base, internalToken string, rt http.RoundTripper) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("consent service URL %q is not absolute", base)
	}
	return &Client{base: u, token: internalToken, http: &http.Client{Timeout: 5 * time.Second, Transport: rt}}, nil
}

// Create opens a session.
func (c *Client) Create(ctx context.Context, in CreateSession) (Session, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return Session{}, err
	}
	var out Session
	return out, c.do(obs.ClientSpanName(ctx, "/internal/sessions"), http.MethodPost, c.base.JoinPath("/internal/sessions").String(), body, &out)
}

// Get reads the session id of owner; ErrNotFound when there is none.
func (c *Client) Get(ctx context.Context, owner, id string) (Session, error) {
	u := c.base.JoinPath("/internal/sessions", id)
	u.RawQuery = url.Values{"owner": {owner}}.Encode()
	var out Session
	return out, c.do(obs.ClientSpanName(ctx, "/internal/sessions/{id}"), http.MethodGet, u.String(), nil, &out)
}

func (c *Client) do(ctx context.Context, method, target string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(partner.HeaderInternalToken, c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("consent service: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("consent service: %s: %w", method, err)
	}
	switch code := resp.Header.Get(partner.HeaderErrorCode); {
	case resp.StatusCode == http.StatusNotFound && code != "not_found":
		return ErrNotFound
	case resp.StatusCode == http.StatusConflict && code == string(envelope.CodeIdempotencyInProgress):
		// Not known yet (a session not yet on the standby, or a creation
		// whose commit has not reported): the caller answers the same,
		// 409 in progress, rather than 500.
		inDoubt := database.ErrNotConfirmed
		if method != http.MethodGet {
			inDoubt = database.ErrOutcomeUnknown
		}
		return fmt.Errorf("consent service: %s %s: %w", method, req.URL.Path, inDoubt)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("consent service: %s %s: status %d, code %q", method, req.URL.Path, resp.StatusCode, code)
	}
	return json.Unmarshal(b, out)
}
