package fiat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/partnerpay/api/pkg/partner"
)

// ConsentClient calls the consent service, as a trusted internal caller.
type ConsentClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

var _ Consent = (*ConsentClient)(nil)

// NewConsentClient returns a client of the consent service at base, over rt.
func NewConsentClient(base, internalToken string, rt http.RoundTripper) (*ConsentClient, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("consent service URL %q is not absolute", base)
	}
	return &ConsentClient{base: u, token: internalToken, http: &http.Client{Timeout: 5 * time.Second, Transport: rt}}, nil
}

// CreateSession opens a consent session for an account.
func (c *ConsentClient) CreateSession(ctx context.Context, owner, accountID, providerCustomerID string) (string, error) {
	var out struct {
		ConsentSessionID string `json:"consentSessionId"`
	}
	in := map[string]string{"owner": owner, "accountId": accountID, "providerCustomerId": providerCustomerID}
	if err := c.post(ctx, "/internal/sessions", in, nil, &out); err != nil {
		return "", err
	}
	return out.ConsentSessionID, nil
}

// Returned asks the session's state on behalf of its owner.
func (c *ConsentClient) Returned(ctx context.Context, caller partner.Caller, sessionID string) (bool, error) {
	var out struct {
		State string `json:"state"`
	}
	if err := c.post(ctx, "/v1/fiat/consent/status", map[string]string{"consentSessionId": sessionID}, &caller, &out); err != nil {
		return false, err
	}
	return out.State == "returned", nil
}

func (c *ConsentClient) post(ctx context.Context, path string, in any, caller *partner.Caller, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(path).String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(partner.HeaderInternalToken, c.token)
	if caller != nil {
		grants, _ := json.Marshal(caller.Grants)
		req.Header.Set(partner.HeaderKeyID, caller.KeyID)
		req.Header.Set(partner.HeaderGrants, string(grants))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("consent service: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("consent service: %s %s: %d %s", http.MethodPost, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}
