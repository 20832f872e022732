package payout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/partnerpay/api/services/payout/internal/store"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/quote"
)

// Validate before anyone deposits (DESIGN §3): POST /v1/bank/payout/validate
// runs the checks executing the quote runs on a beneficiary (the same code,
// beneficiary.Validate, which Check is the first problem of) and reports
// every problem; on a rail with a payee check, it asks the payee's bank
// whether the name holds the account. It consumes nothing, binds nothing
// and records nothing: the quote executes afterwards to any valid
// beneficiary.

// ValidateRequest is BankPayoutValidateRequest.
type ValidateRequest struct {
	QuoteID     string          `json:"quoteId"`
	Beneficiary json.RawMessage `json:"beneficiary"`
}

// NullsReportedUnder lets a null in the beneficiary through the body's
// decoding: validation reports it as one of its problems (an errors item
// naming the field), as it does every other.
func (ValidateRequest) NullsReportedUnder() string { return "/beneficiary/" }

// Validation is BankPayoutValidation less environment.
type Validation struct {
	Valid     bool                  `json:"valid"`
	Errors    []beneficiary.Problem `json:"errors"`
	NameCheck *NameCheck            `json:"nameCheck,omitempty"`
}

// NameCheck is the payee's bank's word on the beneficiary's name.
type NameCheck struct {
	Result         string `json:"result"`
	RegisteredName string `json:"registeredName,omitempty"`
}

// payeeCheckRails are the rails whose payee's bank checks a name (SEPA's
// Verification of Payee, the UK's Confirmation of Payee, PIX's key
// lookup); the others' answers have no nameCheck.
var payeeCheckRails = []string{"sepa", "sepa_instant", "faster_payments", "pix"}

var errAlreadyExecuted = envelope.New(envelope.CodeQuoteAlreadyExecuted,
	"This quote was already executed; there is nothing left to validate. Request a new quote for a new payout.")

var payeeResults = []string{bankprovider.PayeeMatch, bankprovider.PayeeCloseMatch, bankprovider.PayeeNoMatch, bankprovider.PayeeNotPossible}

// Validate checks req's beneficiary against its quote. The quote's own
// refusals are execution's: 404 quote_not_found, 410 quote_expired, 409
// quote_already_executed (once a payout of it exists, or an execution has
// bound it).
func (s *service) Validate(ctx context.Context, caller partner.Caller, req ValidateRequest) (Validation, error) {
	if req.QuoteID == "" {
		return Validation{}, envelope.InvalidRequest("quoteId is required: the id of a quote from POST /v1/bank/payout/quote.")
	}
	if s.env == environment.Production {
		return Validation{}, errUnavailable
	}
	id, ok := BankPayout.Parse(req.QuoteID)
	if !ok {
		return Validation{}, errQuoteNotFound
	}
	q, err := s.validating(ctx, caller, id)
	if err != nil {
		return Validation{}, err
	}
	raw := req.Beneficiary
	if string(raw) == "null" {
		raw = nil
	}
	_, found, err := beneficiary.Validate(q.Rail, q.Country, raw)
	if err != nil {
		return Validation{}, err
	}
	v := Validation{Valid: len(found) == 0, Errors: found}
	if v.Errors == nil {
		v.Errors = []beneficiary.Problem{}
	}
	if v.Valid && slices.Contains(payeeCheckRails, q.Rail) {
		v.NameCheck = s.checkPayee(ctx, q, req.Beneficiary)
	}
	return v, nil
}

// validating is the caller's quote id, open and not executed, or
// execution's refusal of it.
func (s *service) validating(ctx context.Context, caller partner.Caller, id quote.ID) (StoredQuote, error) {
	executed := func() error {
		switch done, err := s.payouts.ByQuote(ctx, id.String()); {
		case err == nil && done.KeyID == caller.KeyID:
			return errAlreadyExecuted
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("read payout: %w", err)
		}
		return nil
	}
	found, err := s.book.Find(ctx, id, caller.KeyID)
	if err != nil {
		return StoredQuote{}, errors.Join(err, executed())
	}
	var q StoredQuote
	switch found.State {
	case quote.Expired:
		if err := executed(); err != nil {
			return StoredQuote{}, err
		}
		return StoredQuote{}, errQuoteExpired
	case quote.Open:
		if err := json.Unmarshal(found.Record, &q); err != nil {
			return StoredQuote{}, fmt.Errorf("stored quote: %w", err)
		}
	default:
		if err := executed(); err != nil {
			return StoredQuote{}, err
		}
		return StoredQuote{}, errQuoteNotFound
	}
	if err := executed(); err != nil {
		return StoredQuote{}, err
	}
	switch closed, err := s.book.Closed(ctx, id); {
	case err != nil:
		return StoredQuote{}, err
	case closed:
		return StoredQuote{}, errAlreadyExecuted
	case !s.now().Before(q.ExpiresAt):
		return StoredQuote{}, errQuoteExpired
	}
	return q, nil
}

// checkPayee asks the payee's bank about the beneficiary's name: an answer
// it cannot give (the provider down, slow, or saying something we do not
// know) is not_possible.
func (s *service) checkPayee(ctx context.Context, q StoredQuote, raw json.RawMessage) *NameCheck {
	if s.checker == nil {
		return &NameCheck{Result: bankprovider.PayeeNotPossible}
	}
	pctx, cancel := context.WithTimeout(ctx, worker.ProviderWait)
	defer cancel()
	res, err := s.checker.CheckPayee(pctx, bankprovider.PayeeCheck{Rail: q.Rail, Country: q.Country, Beneficiary: raw})
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "the payee check failed; answered not_possible", "rail", q.Rail, "err", err)
		return &NameCheck{Result: bankprovider.PayeeNotPossible}
	case !slices.Contains(payeeResults, res.Result):
		s.log.WarnContext(ctx, "the payee check answered out of shape; answered not_possible", "rail", q.Rail)
		return &NameCheck{Result: bankprovider.PayeeNotPossible}
	case res.Result != bankprovider.PayeeCloseMatch || len(res.RegisteredName) > 140:
		return &NameCheck{Result: res.Result}
	}
	return &NameCheck{Result: res.Result, RegisteredName: res.RegisteredName}
}
