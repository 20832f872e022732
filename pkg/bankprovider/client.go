package bankprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/obs"
)

// Error is a refusal from the provider: its HTTP status and error document.
type Error struct {
	Status int
	Body   ErrorBody
}

func (e *Error) Error() string {
	fields := make([]string, 0, len(e.Body.Error.Details))
	for _, d := range e.Body.Error.Details {
		fields = append(fields, d.Field+"="+d.Constraint) // never d.Value
	}
	return fmt.Sprintf("bank provider: %d %s: %s [%s]", e.Status, e.Body.Error.Type, e.Body.Error.Message, strings.Join(fields, " "))
}

// ProviderAnswered reports that the provider answered: a refusal is no
// failure of the provider (worker.Circuit).
func (e *Error) ProviderAnswered() bool { return e.Status < 500 }

// IsType reports whether err is a provider refusal of type t.
func IsType(err error, t string) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Body.Error.Type == t
}

// AttemptTimeout bounds one call to the provider.
const AttemptTimeout = 15 * time.Second

// Client calls the provider.
type Client struct {
	base    *url.URL
	key     string
	http    *http.Client
	retries int
	backoff time.Duration
	metrics *metrics
}

// New returns a client for the provider at base, authenticating with key.
func New(base, key string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("bank provider URL %q is not absolute", base)
	}
	// An attempt may take up to AttemptTimeout; retries happen only while
	// the caller's context (the gateway's route timeout, 20 s) allows.
	return &Client{
		base: u, key: key, retries: 2, backoff: 100 * time.Millisecond,
		http: &http.Client{
			Timeout: AttemptTimeout,
			Transport: &http.Transport{
				DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConnsPerHost:   64,
				IdleConnTimeout:       90 * time.Second,
				ResponseHeaderTimeout: AttemptTimeout,
			},
		},
	}, nil
}

// Instrument registers the client's metrics on reg
// (partnerapi_bankprovider_*): every attempt, by operation and outcome.
func (c *Client) Instrument(reg prometheus.Registerer) *Client {
	c.metrics = newMetrics(reg)
	return c
}

// WrapTransport wraps the client's transport (tracing).
func (c *Client) WrapTransport(wrap func(http.RoundTripper) http.RoundTripper) *Client {
	c.http.Transport = wrap(c.http.Transport)
	return c
}

// CreateCustomer onboards a user. idempotencyKey makes a retry safe.
func (c *Client) CreateCustomer(ctx context.Context, in NewCustomer, idempotencyKey string) (Customer, error) {
	var out Customer
	return out, c.do(ctx, opCreateCustomer, http.MethodPost, "/v1/customers", in, idempotencyKey, idempotencyKey != "", &out)
}

// Customer reads a customer.
func (c *Client) Customer(ctx context.Context, id string) (Customer, error) {
	var out Customer
	return out, c.do(ctx, opCustomer, http.MethodGet, "/v1/customers/"+url.PathEscape(id), nil, "", true, &out)
}

// CreateTermsSession mints a hosted consent page link that sends the browser
// back to returnURL. Each call is a fresh attempt.
func (c *Client) CreateTermsSession(ctx context.Context, customerID, returnURL string) (TermsSession, error) {
	var out TermsSession
	body := map[string]string{"return_url": returnURL}
	return out, c.do(ctx, opCreateTerms, http.MethodPost, "/v1/customers/"+url.PathEscape(customerID)+"/terms_sessions", body, "", false, &out)
}

// TermsSession reads a terms session back: its status is the user's
// decision as the provider recorded it (TermsAccepted, TermsDeclined), or
// open, expired or superseded.
func (c *Client) TermsSession(ctx context.Context, id string) (TermsSession, error) {
	var out TermsSession
	return out, c.do(ctx, opTerms, http.MethodGet, "/v1/terms_sessions/"+url.PathEscape(id), nil, "", true, &out)
}

// ForceIdentity sets a sandbox customer's identity check result.
func (c *Client) ForceIdentity(ctx context.Context, customerID, result string) (Customer, error) {
	var out Customer
	body := map[string]string{"result": result}
	return out, c.do(ctx, opForceIdentity, http.MethodPost, "/v1/sandbox/customers/"+url.PathEscape(customerID)+"/identity", body, "", false, &out)
}

// CreateVirtualAccount issues (or reads back) the customer's account in currency.
func (c *Client) CreateVirtualAccount(ctx context.Context, customerID, currency string) (VirtualAccount, error) {
	var out VirtualAccount
	body := map[string]string{"currency": currency}
	// The provider answers the existing account for the same currency, so a
	// retry cannot make a second one.
	return out, c.do(ctx, opCreateVirtual, http.MethodPost, "/v1/customers/"+url.PathEscape(customerID)+"/virtual_accounts", body, "", true, &out)
}

// CreateDepositInstruction asks for a one-off deposit for the customer.
// idempotencyKey makes a retry safe.
func (c *Client) CreateDepositInstruction(ctx context.Context, customerID string, in NewDepositInstruction, idempotencyKey string) (DepositInstruction, error) {
	var out DepositInstruction
	return out, c.do(ctx, opCreateDeposit, http.MethodPost, "/v1/customers/"+url.PathEscape(customerID)+"/deposit_instructions", in, idempotencyKey, idempotencyKey != "", &out)
}

// Transactions lists a virtual account's transactions, raw records kept.
func (c *Client) Transactions(ctx context.Context, virtualAccountID string) ([]Transaction, error) {
	return c.transactions(ctx, opTransactions, "/v1/virtual_accounts/"+url.PathEscape(virtualAccountID)+"/transactions")
}

// DepositTransactions lists the transactions sent for a deposit
// instruction, matched or not, raw records kept.
func (c *Client) DepositTransactions(ctx context.Context, instructionID string) ([]Transaction, error) {
	return c.transactions(ctx, opDepositTransaction, "/v1/deposit_instructions/"+url.PathEscape(instructionID)+"/transactions")
}

func (c *Client) transactions(ctx context.Context, op, path string) ([]Transaction, error) {
	var out struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := c.do(ctx, op, http.MethodGet, path, nil, "", true, &out); err != nil {
		return nil, err
	}
	return DecodeTransactions(out.Data)
}

// DecodeTransactions reads the provider's raw transaction records (as its
// API lists them, or as a store kept them), each keeping its raw form.
func DecodeTransactions(raws []json.RawMessage) ([]Transaction, error) {
	txs := make([]Transaction, 0, len(raws))
	for _, raw := range raws {
		var t Transaction
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("bank provider: transaction: %w", err)
		}
		t.Raw = raw
		txs = append(txs, t)
	}
	return txs, nil
}

// SimulateDeposit makes a sandbox pay-in. idempotencyKey makes a retry safe.
func (c *Client) SimulateDeposit(ctx context.Context, in Deposit, idempotencyKey string) (Transaction, error) {
	var out json.RawMessage
	if err := c.do(ctx, opSimulateDeposit, http.MethodPost, "/v1/sandbox/deposits", in, idempotencyKey, idempotencyKey != "", &out); err != nil {
		return Transaction{}, err
	}
	var t Transaction
	if err := json.Unmarshal(out, &t); err != nil {
		return t, fmt.Errorf("bank provider: deposit: %w", err)
	}
	t.Raw = out
	return t, nil
}

// do sends one call. A retryable call (a read, or a write the provider
// dedupes) is retried at most c.retries times, with backoff, on network
// errors and 5xx: repeating it cannot do anything twice.
func (c *Client) do(ctx context.Context, op, method, path string, in any, idempotencyKey string, retryable bool, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	var lastErr error
	ctx = obs.ClientSpanName(ctx, "bank provider "+op) // the path has ids in it
	for attempt := 0; ; attempt++ {
		start := time.Now()
		status, respBody, err := c.once(ctx, method, path, body, idempotencyKey)
		c.metrics.observe(op, attempt, status, err, time.Since(start))
		switch {
		case err == nil && status < 300:
			if err := json.Unmarshal(respBody, out); err != nil {
				return fmt.Errorf("bank provider: %s %s: undecodable answer: %w", method, path, err)
			}
			return nil
		case err == nil && status < 500:
			var eb ErrorBody
			if json.Unmarshal(respBody, &eb) != nil || eb.Error.Type == "" {
				return fmt.Errorf("bank provider: %s %s: %d with an undecodable error", method, path, status)
			}
			return &Error{Status: status, Body: eb}
		case err == nil:
			lastErr = fmt.Errorf("bank provider: %s %s: status %d", method, path, status)
		default:
			lastErr = fmt.Errorf("bank provider: %s %s: %w", method, path, err)
		}
		if !retryable || attempt >= c.retries || ctx.Err() != nil {
			return lastErr
		}
		select {
		case <-ctx.Done():
			return lastErr
		case <-time.After(c.backoff << attempt):
		}
	}
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, idempotencyKey string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	p, query, _ := strings.Cut(path, "?")
	u := c.base.JoinPath(p)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

// Config is the bank provider part of a binary's configuration
// (config.Load), a field of every binary that calls the provider.
type Config struct {
	URL config.URL    `env:"BANK_PROVIDER_URL, default=http://127.0.0.1:8090"`
	Key config.Secret `env:"BANK_PROVIDER_KEY, required"`
}

// Client builds the provider client of c, its transport wrapped (tracing)
// and its metrics registered on reg.
func (c Config) Client(wrap func(http.RoundTripper) http.RoundTripper, reg prometheus.Registerer) (*Client, error) {
	p, err := New(string(c.URL), string(c.Key))
	if err != nil {
		return nil, err
	}
	return p.WrapTransport(wrap).Instrument(reg), nil
}
