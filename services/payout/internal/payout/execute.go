package payout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"
	"unicode/utf8"

	"github.com/partnerpay/api/pkg/catalog"
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

// StoredPayout is a payout as the book keeps it, as the redemption of its
// quote. It holds the beneficiary, which is personal data: it is never
// logged.
type StoredPayout struct {
	ID          string      `json:"id"`
	QuoteID     string      `json:"quoteId"`
	Beneficiary Beneficiary `json:"beneficiary"` // name as sent, IBAN in electronic form
	Status      string      `json:"status"`
	Rail        string      `json:"rail"`
	Settlement  string      `json:"estimatedSettlement"`
	CreatedAt   time.Time   `json:"createdAt"`
}

// PayoutRetention is how long a payout record is kept.
const PayoutRetention = 30 * 24 * time.Hour

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
// gets it again, whatever time it is; another is 409 and nothing moves);
// expiry; the key's execution ceiling.
func (s *service) Execute(ctx context.Context, caller partner.Caller, req ExecuteRequest) (Payout, error) {
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
	if err != nil {
		return Payout{}, err
	}
	switch found.State {
	case quote.Unknown:
		return Payout{}, errQuoteNotFound
	case quote.Expired:
		return Payout{}, errQuoteExpired
	case quote.Redeemed:
		return samePayee(found.Redemption, payee)
	}
	var q StoredQuote
	if err := json.Unmarshal(found.Record, &q); err != nil {
		return Payout{}, fmt.Errorf("stored quote: %w", err)
	}
	if !s.now().Before(q.ExpiresAt) {
		return Payout{}, errQuoteExpired
	}
	if err := checkCeiling(q, caller.Grants.MaxExecutionUSD); err != nil {
		return Payout{}, err
	}
	record, err := json.Marshal(StoredPayout{
		ID: newPayoutID(), QuoteID: q.ID, Beneficiary: payee,
		Status: lifecycle.PayoutPending, Rail: q.Rail, Settlement: q.Settlement, CreatedAt: s.now().UTC(),
	})
	if err != nil {
		return Payout{}, err
	}
	stored, _, err := s.book.Redeem(ctx, id, caller.KeyID, record, PayoutRetention)
	if errors.Is(err, quote.ErrExpired) {
		return Payout{}, errQuoteExpired
	}
	if err != nil {
		return Payout{}, err
	}
	return samePayee(stored, payee)
}

// samePayee answers the stored payout to the beneficiary it was made for,
// and refuses anyone else.
func samePayee(stored []byte, payee Beneficiary) (Payout, error) {
	var p StoredPayout
	if err := json.Unmarshal(stored, &p); err != nil {
		return Payout{}, fmt.Errorf("stored payout: %w", err)
	}
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
			"This payout is worth more than the key's maxExecutionUsd of "+ceiling+" USD at the reference rates of GET /v1/rates.")
	}
	return nil
}

func newPayoutID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "bpo_" + hex.EncodeToString(b[:])
}
