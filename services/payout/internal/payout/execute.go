package payout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"time"
	"unicode/utf8"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/iban"
	"github.com/partnerpay/api/pkg/partner"
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

// StoredPayout is a payout as the store keeps it. It holds the beneficiary,
// which is personal data: it is never logged.
type StoredPayout struct {
	ID          string      `json:"id"`
	QuoteID     string      `json:"quoteId"`
	Owner       string      `json:"owner"`
	Beneficiary Beneficiary `json:"beneficiary"`
	Status      string      `json:"status"`
	Rail        string      `json:"rail"`
	Settlement  string      `json:"estimatedSettlement"`
	CreatedAt   time.Time   `json:"createdAt"`
}

const maxNameLen = 140 // what SEPA carries for a creditor name

var (
	errQuoteNotFound = envelope.New(envelope.CodeQuoteNotFound, "No quote with this quoteId exists for this key.")
	errQuoteExpired  = envelope.New(envelope.CodeQuoteExpired, "This quote has expired; request a new quote. Expired quotes are never repriced.")
)

// Execute runs a quote's payout, once. Checks, in order: the body, the quote
// (unknown and another key's answer alike), an existing payout (answered
// again, whatever time it is), expiry, the key's execution ceiling.
func (s *service) Execute(ctx context.Context, caller partner.Caller, req ExecuteRequest) (Payout, error) {
	account, err := validateExecution(req)
	if err != nil {
		return Payout{}, err
	}
	q, err := s.store.Get(ctx, req.QuoteID)
	if errors.Is(err, ErrNotFound) || (err == nil && q.Owner != caller.KeyID) {
		return Payout{}, errQuoteNotFound
	}
	if err != nil {
		return Payout{}, fmt.Errorf("read quote: %w", err)
	}
	if p, err := s.store.PayoutFor(ctx, q.ID); err == nil {
		return answer(p), nil
	} else if !errors.Is(err, ErrNotFound) {
		return Payout{}, fmt.Errorf("read payout: %w", err)
	}
	if !s.now().Before(q.ExpiresAt) {
		return Payout{}, errQuoteExpired
	}
	if err := checkCeiling(q, caller.Grants.MaxExecutionUSD); err != nil {
		return Payout{}, err
	}
	p, err := s.store.CreatePayout(ctx, StoredPayout{
		ID: newPayoutID(), QuoteID: q.ID, Owner: caller.KeyID,
		Beneficiary: Beneficiary{Name: req.Beneficiary.Name, IBAN: account},
		Status:      "pending", Rail: q.Rail, Settlement: q.Settlement, CreatedAt: s.now().UTC(),
	})
	if err != nil {
		return Payout{}, fmt.Errorf("create payout: %w", err)
	}
	return answer(p), nil
}

func validateExecution(req ExecuteRequest) (account string, err error) {
	if req.QuoteID == "" {
		return "", envelope.InvalidRequest("quoteId is required: the id of a quote from POST /v1/bank/payout/quote.")
	}
	fields := map[string]string{}
	switch {
	case req.Beneficiary.Name == "":
		fields["beneficiary.name"] = "required"
	case utf8.RuneCountInString(req.Beneficiary.Name) > maxNameLen:
		fields["beneficiary.name"] = "too_long"
	}
	account, ibanErr := iban.Validate(req.Beneficiary.IBAN)
	var ie *iban.Error
	if errors.As(ibanErr, &ie) {
		fields["beneficiary.iban"] = ie.Label
	}
	if len(fields) > 0 {
		e := envelope.InvalidRequest("The beneficiary is not valid; see error.fields.")
		e.Fields = fields
		return "", e
	}
	return account, nil
}

// checkCeiling holds the quote's amount, in USD at the reference rates, to
// the key's maxExecutionUsd.
func checkCeiling(q StoredQuote, ceiling string) error {
	amount, currency := q.CryptoAmount, q.TokenCurrency
	if amount == "" {
		amount, currency = q.FiatAmount, q.FiatCurrency
	}
	usd, ok := catalog.USDValue(amount, currency)
	if !ok {
		return fmt.Errorf("no reference rate for %s", currency)
	}
	limit, ok := new(big.Rat).SetString(ceiling)
	if !ok {
		return fmt.Errorf("key ceiling %q is not a decimal", ceiling)
	}
	if usd.Cmp(limit) > 0 {
		return envelope.New(envelope.CodeExecutionCapped,
			"This payout is worth more than the key's maxExecutionUsd of "+ceiling+" USD at the reference rates of GET /v1/limits.")
	}
	return nil
}

func answer(p StoredPayout) Payout {
	return Payout{Mock: true, PayoutID: p.ID, QuoteID: p.QuoteID, Status: p.Status, Rail: p.Rail, EstimatedSettlement: p.Settlement}
}

func newPayoutID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "bpo_" + hex.EncodeToString(b[:])
}
