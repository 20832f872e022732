package payout

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"
	"unicode/utf8"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/iban"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/quote"
)

// ExecuteRequest is the body of POST /v1/bank/payout.
type ExecuteRequest struct {
	QuoteID     string      `json:"quoteId"`
	Beneficiary Beneficiary `json:"beneficiary"`
}

// Beneficiary is the bank account paid.
type Beneficiary struct {
	Name string `json:"name"`
	IBAN string `json:"iban"`
}

// Payout is the answer to an execution, less environment. While the payout
// provider is a mock, nothing is sent anywhere and Mock is true.
type Payout struct {
	Mock                bool   `json:"mock"`
	PayoutID            string `json:"payoutId"`
	QuoteID             string `json:"quoteId"`
	Status              string `json:"status"`
	Rail                string `json:"rail"`
	EstimatedSettlement string `json:"estimatedSettlement"`
}

// Payouts is the system of record of executed quotes (Store in
// production).
type Payouts interface {
	ByQuote(ctx context.Context, quoteID string) (StoredPayout, error)
	Execute(ctx context.Context, p StoredPayout, answer func(StoredPayout) (Payout, error)) (Payout, error)
}

const maxNameLen = 140 // what SEPA carries for a creditor name

var (
	errQuoteNotFound = envelope.New(envelope.CodeQuoteNotFound, "No quote with this quoteId exists for this key.")
	errQuoteExpired  = envelope.New(envelope.CodeQuoteExpired, "This quote has expired; request a new quote. Expired quotes are never repriced.")
	errOtherPayee    = envelope.New(envelope.CodeQuoteAlreadyExecuted,
		"This quote was already executed for another beneficiary; nothing was sent. Request a new quote for a new payout.")
)

// Execute runs a quote's payout, once, to the beneficiary it was executed
// for. Checks, in order: the body; the quote (unknown, malformed and
// another key's answer alike); an existing payout (the same beneficiary
// gets it again, whatever time it is and whether or not Redis still has
// the offer; another is 409 and nothing moves); expiry; the key's
// execution ceiling.
//
// The system of record decides whether the quote was executed: an open
// offer goes straight to the insert, whose unique quote id answers a
// payout already there; anything else (no offer, an expired one, one over
// the ceiling, Redis unreachable) is looked up in PostgreSQL before it is
// refused. Expiry is read on the database's clock (s.now is DB.Now), and
// PostgreSQL's own now() has the last word at the insert.
//
// Nothing is answered 200 that a synchronous standby lacks: a payout
// committed by this request is (its commit waited for the standby), and a
// payout read back is confirmed first. A commit or a confirmation that
// does not report back in time, or a wait on another request's payout of
// the same quote that outlasts the request, is 409
// idempotency_in_progress: the outcome is not known yet, and the same
// request retried learns it.
func (s *service) Execute(ctx context.Context, caller partner.Caller, req ExecuteRequest) (Payout, error) {
	p, err := s.executeOnce(ctx, caller, req)
	if err != nil && ctx.Err() != nil && !errors.As(err, new(*envelope.Error)) {
		return Payout{}, fmt.Errorf("%w: %w", database.ErrOutcomeUnknown, err)
	}
	return p, err
}

func (s *service) executeOnce(ctx context.Context, caller partner.Caller, req ExecuteRequest) (Payout, error) {
	account, err := validateExecution(req)
	if err != nil {
		return Payout{}, err
	}
	payee := Beneficiary{Name: req.Beneficiary.Name, IBAN: account}
	id, ok := BankPayout.Parse(req.QuoteID)
	if !ok {
		return Payout{}, errQuoteNotFound
	}
	found, err := s.book.Find(ctx, id, caller.KeyID)
	var refusal error = errQuoteNotFound
	if err != nil {
		// Without Redis (down, failing over) no payout can start, but an
		// executed quote still answers from the system of record.
		refusal = err
	}
	var q StoredQuote
	now := s.now().UTC()
	switch found.State {
	case quote.Expired:
		refusal = errQuoteExpired
	case quote.Open:
		if err := json.Unmarshal(found.Record, &q); err != nil {
			return Payout{}, fmt.Errorf("stored quote: %w", err)
		}
		if !now.Before(q.ExpiresAt) {
			refusal = errQuoteExpired
		} else if refusal = checkCeiling(q, caller.Grants.MaxExecutionUSD); refusal == nil {
			p, err := s.execute(ctx, caller, q, payee, now)
			if !errors.Is(err, ErrExpired) {
				return p, err
			}
			refusal = errQuoteExpired // on PostgreSQL's clock, a moment after ours
		}
	}
	switch done, err := s.payouts.ByQuote(ctx, id.String()); {
	case err == nil && done.KeyID == caller.KeyID:
		return samePayee(done, payee)
	case err != nil && !errors.Is(err, ErrNotFound):
		return Payout{}, fmt.Errorf("read payout: %w", err)
	}
	return Payout{}, refusal
}

// execute commits the payout of an open quote, or answers the one it was
// executed as.
func (s *service) execute(ctx context.Context, caller partner.Caller, q StoredQuote, payee Beneficiary, now time.Time) (Payout, error) {
	id, _ := BankPayout.Parse(q.ID)
	// The offer closes, for this beneficiary, before the payout commits:
	// whatever fails between the two, the same quote request never answers
	// an executed id again, and no one else can execute it.
	switch mine, err := s.book.Close(ctx, id, payee.digest()); {
	case err != nil:
		return Payout{}, err
	case !mine:
		return Payout{}, errOtherPayee
	}
	return s.payouts.Execute(ctx, StoredPayout{
		ID: newPayoutID(), QuoteID: q.ID, KeyID: caller.KeyID, Beneficiary: payee,
		Chain: q.Chain, CryptoCurrency: q.CryptoCurrency, FiatCurrency: q.FiatCurrency, Country: q.Country,
		CryptoAmount: q.CryptoAmount, FiatAmount: q.FiatAmount, Rail: q.Rail, Settlement: q.Settlement,
		Status: lifecycle.PayoutPending, QuoteExpiresAt: q.ExpiresAt, CreatedAt: now,
	}, func(stored StoredPayout) (Payout, error) {
		if stored.KeyID != caller.KeyID {
			return Payout{}, errQuoteNotFound
		}
		return samePayee(stored, payee)
	})
}

// digest names the beneficiary in the quote book's closed mark without
// keeping its account there.
func (b Beneficiary) digest() string {
	sum := sha256.Sum256([]byte(b.Name + "\x00" + b.IBAN))
	return hex.EncodeToString(sum[:16])
}

// samePayee answers the stored payout to the beneficiary it was made for,
// and refuses anyone else.
func samePayee(p StoredPayout, payee Beneficiary) (Payout, error) {
	if p.Beneficiary != payee {
		return Payout{}, errOtherPayee
	}
	return Payout{Mock: true, PayoutID: p.ID, QuoteID: p.QuoteID, Status: p.Status, Rail: p.Rail, EstimatedSettlement: p.Settlement}, nil
}

// validateExecution checks the body. Our own checks name the field in the
// message; error.fields is for refusals that come from the bank provider.
func validateExecution(req ExecuteRequest) (account string, err error) {
	if req.QuoteID == "" {
		return "", envelope.InvalidRequest("quoteId is required: the id of a quote from POST /v1/bank/payout/quote.")
	}
	switch {
	case req.Beneficiary.Name == "":
		return "", envelope.InvalidRequest("beneficiary.name is required: the account holder's name.")
	case !utf8.ValidString(req.Beneficiary.Name) || utf8.RuneCountInString(req.Beneficiary.Name) > maxNameLen:
		return "", envelope.InvalidRequest("beneficiary.name must be at most 140 characters.")
	}
	account, err = iban.Validate(req.Beneficiary.IBAN)
	var ie *iban.Error
	if errors.As(err, &ie) {
		return "", envelope.InvalidRequest(ibanMessages[ie.Label])
	}
	return account, err
}

var ibanMessages = map[string]string{
	iban.Required:           "beneficiary.iban is required: the account's IBAN.",
	iban.InvalidFormat:      "beneficiary.iban is not an IBAN: its length or characters do not fit its country's format.",
	iban.UnsupportedCountry: "beneficiary.iban is from a country that does not issue IBANs.",
	iban.InvalidChecksum:    "beneficiary.iban has an invalid checksum; check it for a mistyped character.",
}

// checkCeiling holds the quote's amount to the key's maxExecutionUsd:
// cryptoAmount in the currency its token is pegged to, or fiatAmount.
func checkCeiling(q StoredQuote, ceiling string) error {
	amount, currency := q.CryptoAmount, q.TokenCurrency
	if amount == "" {
		amount, currency = q.FiatAmount, q.FiatCurrency
	}
	a, ok := new(big.Rat).SetString(amount)
	if !ok {
		return fmt.Errorf("stored quote amount %q is not a decimal", amount)
	}
	return catalog.CheckCeiling("payout", a, currency, ceiling)
}

func newPayoutID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "bpo_" + hex.EncodeToString(b[:])
}
