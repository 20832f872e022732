package bankprovider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// The payout side of the provider (DESIGN §3): the payout service hands it
// a payout whose stablecoins arrived, and reads its word back on status.

// NewPayout is the body that hands a payout to the provider. Reference is
// our payout id, and the Idempotency-Key of the call: a retry hands over
// nothing twice.
type NewPayout struct {
	Reference   string          `json:"reference"`
	Rail        string          `json:"rail"`
	Currency    string          `json:"currency"`
	Country     string          `json:"country"`
	Amount      string          `json:"amount"`
	Beneficiary json.RawMessage `json:"beneficiary"` // the rail's fields, as the API took them
	// Sandbox is the outcome a sandbox provider plays out; a real one
	// refuses the field.
	Sandbox *SandboxOutcome `json:"sandbox,omitempty"`
}

// SandboxOutcome is what a sandbox payout comes to: completed (the
// default), failed with a failure reason, or returned with a return reason
// after it completed.
type SandboxOutcome struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// Payout is a payout as the provider reports it. Status uses the API's
// payout statuses (processing, completed, failed, returned); the caller
// checks every value against its own closed sets before it keeps one.
type Payout struct {
	ID            string `json:"id"`
	Reference     string `json:"reference"`
	Status        string `json:"status"`
	FailureReason string `json:"failure_reason,omitempty"`
	ReturnReason  string `json:"return_reason,omitempty"`
	// ReturnCode is the rail's own code for a return (NACHA's R codes,
	// ISO 20022's), where the provider gives one.
	ReturnCode  string `json:"return_code,omitempty"`
	CompletedAt string `json:"completed_at,omitempty"`
}

// Change is one entry of the provider's changes feed: a record as it
// stood once it changed (Type payout.updated: Payout).
type Change struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Payout    Payout `json:"payout"`
}

// ChangePayout is the type of a change of a payout.
const ChangePayout = "payout.updated"

// Changes is a page of the provider's changes feed after the change
// after ("" for the feed's start), oldest first, at most limit, and
// whether more follow. A follower keeps the id of the last change it
// applied and asks again from there: the provider's changes reach us in
// order, each once, however many payouts are in flight or in their
// return window. A cursor the provider no longer knows (a sandbox
// provider restarted) is TypeStateLost.
func (c *Client) Changes(ctx context.Context, after string, limit int) ([]Change, bool, error) {
	var out struct {
		Data    []Change `json:"data"`
		HasMore bool     `json:"has_more"`
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	err := c.do(ctx, opChanges, http.MethodGet, "/v1/changes?"+q.Encode(), nil, "", true, &out)
	return out.Data, out.HasMore, err
}

// CreatePayout hands a payout to the provider; the provider answers the
// same payout to a retry with the same reference.
func (c *Client) CreatePayout(ctx context.Context, in NewPayout) (Payout, error) {
	var out Payout
	return out, c.do(ctx, opCreatePayout, http.MethodPost, "/v1/payouts", in, in.Reference, true, &out)
}

// PayoutByReference reads a payout back by our payout id: the provider's
// word on where it stands.
func (c *Client) PayoutByReference(ctx context.Context, reference string) (Payout, error) {
	var out Payout
	return out, c.do(ctx, opPayout, http.MethodGet, "/v1/payouts/by_reference/"+url.PathEscape(reference), nil, "", true, &out)
}

// PayeeCheck asks the payee's bank whether the beneficiary's name is the
// account's holder, before anything is sent: SEPA's Verification of Payee,
// the UK's Confirmation of Payee, PIX's key lookup. Beneficiary is the
// rail's fields, as the API took them.
type PayeeCheck struct {
	Rail        string          `json:"rail"`
	Country     string          `json:"country"`
	Beneficiary json.RawMessage `json:"beneficiary"`
}

// The results of a payee check.
const (
	PayeeMatch       = "match"
	PayeeCloseMatch  = "close_match" // RegisteredName is the holder's name
	PayeeNoMatch     = "no_match"
	PayeeNotPossible = "not_possible" // the payee's bank could not say
)

// PayeeResult is the payee's bank's word; the caller checks Result against
// the closed set above before it answers it.
type PayeeResult struct {
	Result         string `json:"result"`
	RegisteredName string `json:"registered_name,omitempty"`
}

// CheckPayee runs a payee check. It records nothing at the provider, so a
// retry is safe.
func (c *Client) CheckPayee(ctx context.Context, in PayeeCheck) (PayeeResult, error) {
	var out PayeeResult
	return out, c.do(ctx, opCheckPayee, http.MethodPost, "/v1/payee_checks", in, "", true, &out)
}
