package partnerapi

// This file is written by hand; partnerapi.gen.go is generated from the
// OpenAPI document (make generate) and must not be edited.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"time"
)

// WithAPIKey authenticates every call with the partner key
// (Authorization: Bearer pk_…).
func WithAPIKey(key string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+key)
		return nil
	})
}

// NewPartnerClient is the client of the API at server (e.g.
// https://api.example, or http://127.0.0.1:8080 for make run's sandbox),
// authenticating with key, each answer decoded into its typed form.
func NewPartnerClient(server, key string, opts ...ClientOption) (*ClientWithResponses, error) {
	return NewClientWithResponses(server, append([]ClientOption{WithAPIKey(key)}, opts...)...)
}

// APIError is any error answer of the API, whatever its status: the
// envelope's code (branch on it), message and per-field complaints, and
// the request id to quote to support.
type APIError struct {
	Status      int
	Environment Environment
	Code        ErrorEnvelopeErrorCode // e.g. ErrorEnvelopeErrorCodeQuoteExpired
	Message     string
	Fields      map[string]string
	RequestID   string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("partner API: %d %s: %s (request %s)", e.Status, e.Code, e.Message, e.RequestID)
}

// ErrorOf is the APIError of an answer that is not 2xx, or nil: resp is
// the HTTPResponse of a ...WithResponse call and body its Body.
func ErrorOf(resp *http.Response, body []byte) *APIError {
	if resp == nil || resp.StatusCode < 300 {
		return nil
	}
	e := &APIError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var env ErrorEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		e.Code, e.Message = "", "undecodable answer: "+err.Error()
		return e
	}
	e.Environment, e.Code, e.Message = env.Environment, env.Error.Code, env.Error.Message
	if env.Error.Fields != nil {
		e.Fields = *env.Error.Fields
	}
	return e
}

// AllBankPayouts pages through the key's payouts (GET /v1/bank/payouts),
// newest first, filtered by params (its StartingAfter is where to begin):
// the loop gets each payout in turn, and the next page is fetched when the
// loop reaches it, as Stripe's SDK iterators do. An answer that is not a
// page ends the loop with its *APIError.
//
//	for p, err := range c.AllBankPayouts(ctx, &partnerapi.ListBankPayoutsParams{Reference: &ref}) {
//		if err != nil { return err }
//		fmt.Println(p.PayoutId, p.Status)
//	}
func (c *ClientWithResponses) AllBankPayouts(ctx context.Context, params *ListBankPayoutsParams, reqEditors ...RequestEditorFn) iter.Seq2[BankPayoutListItem, error] {
	var p ListBankPayoutsParams
	if params != nil {
		p = *params
	}
	return paged(p.StartingAfter, func(after *string) ([]BankPayoutListItem, bool, *string, error) {
		p.StartingAfter = after
		r, err := c.ListBankPayoutsWithResponse(ctx, &p, reqEditors...)
		if err != nil {
			return nil, false, nil, err
		}
		if r.JSON200 == nil {
			return nil, false, nil, ErrorOf(r.HTTPResponse, r.Body)
		}
		return r.JSON200.Data, r.JSON200.HasMore, r.JSON200.NextCursor, nil
	})
}

// AllOrders pages through the key's card orders (GET /v1/orders), newest
// first, filtered by params, as AllBankPayouts does.
func (c *ClientWithResponses) AllOrders(ctx context.Context, params *ListOrdersParams, reqEditors ...RequestEditorFn) iter.Seq2[OrderListItem, error] {
	var p ListOrdersParams
	if params != nil {
		p = *params
	}
	return paged(p.StartingAfter, func(after *string) ([]OrderListItem, bool, *string, error) {
		p.StartingAfter = after
		r, err := c.ListOrdersWithResponse(ctx, &p, reqEditors...)
		if err != nil {
			return nil, false, nil, err
		}
		if r.JSON200 == nil {
			return nil, false, nil, ErrorOf(r.HTTPResponse, r.Body)
		}
		return r.JSON200.Data, r.JSON200.HasMore, r.JSON200.NextCursor, nil
	})
}

// AllFiatAccounts pages through the key's onboarded users (GET /v1/fiat/accounts), newest first, filtered by params, as
// AllBankPayouts does.
func (c *ClientWithResponses) AllFiatAccounts(ctx context.Context, params *ListFiatAccountsParams, reqEditors ...RequestEditorFn) iter.Seq2[FiatAccountListItem, error] {
	var p ListFiatAccountsParams
	if params != nil {
		p = *params
	}
	return paged(p.StartingAfter, func(after *string) ([]FiatAccountListItem, bool, *string, error) {
		p.StartingAfter = after
		r, err := c.ListFiatAccountsWithResponse(ctx, &p, reqEditors...)
		if err != nil {
			return nil, false, nil, err
		}
		if r.JSON200 == nil {
			return nil, false, nil, ErrorOf(r.HTTPResponse, r.Body)
		}
		return r.JSON200.Data, r.JSON200.HasMore, r.JSON200.NextCursor, nil
	})
}

// AllFiatVirtualAccounts pages through the key's virtual accounts (GET /v1/fiat/virtual-accounts), newest first, filtered by params, as
// AllBankPayouts does.
func (c *ClientWithResponses) AllFiatVirtualAccounts(ctx context.Context, params *ListFiatVirtualAccountsParams, reqEditors ...RequestEditorFn) iter.Seq2[FiatVirtualAccountListItem, error] {
	var p ListFiatVirtualAccountsParams
	if params != nil {
		p = *params
	}
	return paged(p.StartingAfter, func(after *string) ([]FiatVirtualAccountListItem, bool, *string, error) {
		p.StartingAfter = after
		r, err := c.ListFiatVirtualAccountsWithResponse(ctx, &p, reqEditors...)
		if err != nil {
			return nil, false, nil, err
		}
		if r.JSON200 == nil {
			return nil, false, nil, ErrorOf(r.HTTPResponse, r.Body)
		}
		return r.JSON200.Data, r.JSON200.HasMore, r.JSON200.NextCursor, nil
	})
}

// AllFiatDeposits pages through the key's one-off deposits (GET /v1/fiat/deposits), newest first, filtered by params, as
// AllBankPayouts does.
func (c *ClientWithResponses) AllFiatDeposits(ctx context.Context, params *ListFiatDepositsParams, reqEditors ...RequestEditorFn) iter.Seq2[FiatDepositListItem, error] {
	var p ListFiatDepositsParams
	if params != nil {
		p = *params
	}
	return paged(p.StartingAfter, func(after *string) ([]FiatDepositListItem, bool, *string, error) {
		p.StartingAfter = after
		r, err := c.ListFiatDepositsWithResponse(ctx, &p, reqEditors...)
		if err != nil {
			return nil, false, nil, err
		}
		if r.JSON200 == nil {
			return nil, false, nil, ErrorOf(r.HTTPResponse, r.Body)
		}
		return r.JSON200.Data, r.JSON200.HasMore, r.JSON200.NextCursor, nil
	})
}

// paged iterates over every item of a list from the page after after,
// fetching each page with fetch (its items, whether more follow, and the
// cursor of the next) when the loop reaches it.
func paged[T any](after *string, fetch func(after *string) ([]T, bool, *string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			items, more, next, err := fetch(after)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items {
				if !yield(item, nil) {
					return
				}
			}
			if !more || next == nil {
				return
			}
			after = next
		}
	}
}

// FollowEvents follows the key's events feed (GET /v1/events) from
// params.StartingAfter (nil: from the oldest event kept) until ctx ends:
// each page that holds events, oldest first, asking again at once while
// the feed has more and every between polls when it has none (or when a
// page came back empty though it has more: a service is behind, and its
// events come later). Handle a page's events, then keep its NextCursor:
// passed back as StartingAfter, it resumes the feed after them, none
// skipped and none twice.
//
// A follower waits, never stops, for what passes: a 429 rate_limited or
// a 409 idempotency_in_progress is asked again after its Retry-After, and
// a 5xx or a network error after a wait that doubles from every up to 30
// seconds, the cursor kept. Any other error ends the iteration (a 410
// cursor_expired: start again without a cursor and reconcile with the
// lists; a 401 or a 403: the key).
func (c *ClientWithResponses) FollowEvents(ctx context.Context, params *ListEventsParams, every time.Duration, reqEditors ...RequestEditorFn) iter.Seq2[EventList, error] {
	var p ListEventsParams
	if params != nil {
		p = *params
	}
	return func(yield func(EventList, error) bool) {
		failures := 0
		for {
			wait := every
			r, err := c.ListEventsWithResponse(ctx, &p, reqEditors...)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil || r.StatusCode() >= 500:
				failures++
				wait = backoff(every, failures) // the cursor is kept
			case r.StatusCode() == http.StatusTooManyRequests || r.StatusCode() == http.StatusConflict:
				wait = retryAfter(r.HTTPResponse, every)
			case r.JSON200 == nil:
				yield(EventList{}, ErrorOf(r.HTTPResponse, r.Body))
				return
			default:
				failures = 0
				page := *r.JSON200
				if len(page.Data) > 0 && !yield(page, nil) {
					return
				}
				p.StartingAfter = &page.NextCursor
				if page.HasMore && len(page.Data) > 0 {
					continue
				}
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// retryAfter is the answer's Retry-After (whole seconds, 1 to 60), or
// every when it has none.
func retryAfter(r *http.Response, every time.Duration) time.Duration {
	if r != nil {
		if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil && n >= 1 {
			return time.Duration(min(n, 60)) * time.Second
		}
	}
	return every
}

// backoff is the wait after the n-th failure in a row: every, doubled each
// time, up to 30 seconds.
func backoff(every time.Duration, n int) time.Duration {
	d := max(every, 100*time.Millisecond)
	for i := 1; i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}
