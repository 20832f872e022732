package payout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/partnerpay/api/services/payout/internal/store"

	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// ExecuteRequest is the body of POST /v1/bank/payout. The beneficiary's
// fields are the quote's rail's (pkg/beneficiary), read once the quote is
// known.
type ExecuteRequest struct {
	QuoteID     string          `json:"quoteId"`
	Beneficiary json.RawMessage `json:"beneficiary"`
	Reference   *string         `json:"reference"`
	// RefundAddress is where what the payout owes back goes (an EVM
	// address on the quote's chain), when the partner knows it now.
	RefundAddress *string `json:"refundAddress"`
}

// DepositWindow is how long a payout waits for its stablecoins.
const DepositWindow = 30 * time.Minute

// Payouts is the system of record of payouts (Store in production).
type Payouts interface {
	ByQuote(ctx context.Context, quoteID string) (record.Record, error)
	ByID(ctx context.Context, id string) (record.Record, error)
	Execute(ctx context.Context, p record.StoredPayout, answer func(record.Record) (Payout, error)) (Payout, error)
	Update(ctx context.Context, id string, decide func(record.Record) (record.Change, error)) (record.Record, error)
	List(ctx context.Context, keyID string, p listing.Params) ([]record.Record, error)
	// Failed backs payout id off alone after its n-th failure in a row,
	// until at.
	Failed(ctx context.Context, id string, n int, at time.Time) error
	// IsDepositAddress reports whether address is one of our deposit
	// addresses.
	IsDepositAddress(ctx context.Context, address string) (bool, error)
	// Hold binds quote quoteID to a beneficiary (its digest) in the
	// system of record, before a keyed execution's claim.
	Hold(ctx context.Context, quoteID, beneficiaryDigest string) error
	// Held is the digest of the beneficiary quote quoteID is bound to
	// ("" when none is).
	Held(ctx context.Context, quoteID string) (string, error)
}

var (
	errQuoteNotFound = envelope.New(envelope.CodeQuoteNotFound, "No quote with this quoteId exists for this key.")
	errQuoteExpired  = envelope.New(envelope.CodeQuoteExpired, "This quote has expired; request a new quote. Expired quotes are never repriced.")
	errOtherPayee    = envelope.New(envelope.CodeQuoteAlreadyExecuted,
		"This quote was already executed for another beneficiary; nothing was sent. Request a new quote for a new payout.")
	errOtherTerms = envelope.New(envelope.CodeQuoteAlreadyExecuted,
		"This quote was already executed with another reference or refundAddress; nothing changed. Send the execution again as it was made, or request a new quote for a new payout.")
	errUnavailable = envelope.New(envelope.CodePayoutUnavailable,
		"Payouts are not yet available in production; integrate in sandbox. Nothing was recorded.")
)

// errChainUnavailable refuses a new payout on a chain this deployment
// reaches no node of: no deposit to it would be seen.
func errChainUnavailable(chain int64) error {
	return envelope.New(envelope.CodePayoutUnavailable, "Payouts on chain "+strconv.FormatInt(chain, 10)+
		" are not available in this deployment now; quote on another chain of GET /v1/config. Nothing was recorded.")
}

// Execute runs a quote's payout, once, to the beneficiary it was executed
// for. Checks, in order (DESIGN §3): the body; the quote (unknown,
// malformed and another key's answer alike); an existing payout (the same
// beneficiary gets it again, whatever time it is and whether or not Redis
// still has the offer; another is 409 and nothing moves); expiry; the
// beneficiary against the quote's rail; the key's execution ceiling.
//
// The system of record decides whether the quote was executed: an open
// offer goes straight to the insert, whose unique quote id answers a
// payout already there; anything else (no offer, an expired one, a
// refused beneficiary or ceiling, Redis unreachable) is looked up in
// PostgreSQL before it is refused. Expiry is read on the database's clock
// (s.now is DB.Now), and PostgreSQL's own now() has the last word at the
// insert.
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
	a, err := s.prepare(ctx, caller, req)
	if err != nil {
		return Payout{}, err
	}
	if a.open {
		p, err := s.execute(ctx, caller, a, req)
		if errors.Is(err, store.ErrHeld) {
			return Payout{}, errOtherPayee
		}
		if !errors.Is(err, store.ErrExpired) {
			return p, err
		}
		a.refusal = errQuoteExpired // on PostgreSQL's clock, a moment after ours
	}
	switch done, err := s.payouts.ByQuote(ctx, a.id.String()); {
	case err == nil && done.KeyID == caller.KeyID:
		payee, err := beneficiary.Check(done.Rail, done.Country, req.Beneficiary)
		if err != nil {
			return Payout{}, errOtherPayee
		}
		return s.samePayee(done, payee, req)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return Payout{}, fmt.Errorf("read payout: %w", err)
	}
	return Payout{}, a.refusal
}

// attempt is what an execution learns of its quote before anything is
// written: whether it may execute it for payee now (open), and otherwise
// why not (refusal), unless the quote turns out to have been executed for
// this beneficiary, which the system of record says.
type attempt struct {
	id      quote.ID
	quote   StoredQuote
	payee   beneficiary.Checked
	open    bool
	refusal error
	// closing is what reading the quote did to its offer (FindClosing):
	// closed for payee already, found closed for another, or neither.
	closing quote.Closing
}

// prepare runs execution's checks up to the write: the body, the
// deployment, the quote's id, its offer (unknown, another key's, expired),
// the beneficiary against its rail and the key's ceiling. An error is a
// refusal of the request as sent, answered at once.
//
// The offer is read by FindClosing under the key's corridor
// (corridors.guess): when the quote is of it, the offer is closed for the
// beneficiary in the same round trip, and a check that then refuses the
// request takes back a closing it made (Reopen), so a refused request
// leaves the offer as it found it.
func (s *service) prepare(ctx context.Context, caller partner.Caller, req ExecuteRequest) (attempt, error) {
	if err := validateExecution(req); err != nil {
		return attempt{}, err
	}
	if a, ok := takeHeld(ctx, caller.KeyID, req.QuoteID); ok {
		// This request's Hold read the offer and closed it for this
		// beneficiary moments ago, before the claim; only time has passed.
		a.refusal = s.check(&a, caller, req, a.payee)
		a.open = a.refusal == nil
		return a, nil
	}
	if req.RefundAddress != nil {
		if _, err := s.refundAddress(ctx, "refundAddress", *req.RefundAddress); err != nil {
			return attempt{}, err
		}
	}
	if s.env == environment.Production {
		// The quote is a mock: nothing real may be paid from it, and no
		// payout is acknowledged that will not happen.
		return attempt{}, errUnavailable
	}
	id, ok := BankPayout.Parse(req.QuoteID)
	if !ok {
		return attempt{}, errQuoteNotFound
	}
	a := attempt{id: id, refusal: errQuoteNotFound}
	g, guessed := s.guess(caller.KeyID, id.Chain, req.Beneficiary)
	found, err := s.book.FindClosing(ctx, id, caller.KeyID, g)
	if err != nil {
		// Without Redis (down, failing over) no payout can start, but an
		// executed quote still answers from the system of record.
		a.refusal = err
	}
	switch found.State {
	case quote.Expired:
		a.refusal = errQuoteExpired
	case quote.Open:
		if err := json.Unmarshal(found.Record, &a.quote); err != nil {
			return attempt{}, fmt.Errorf("stored quote: %w", err)
		}
		s.corridors.remember(caller.KeyID, a.quote.Rail, a.quote.Country)
		a.closing = found.Closing
		a.refusal = s.check(&a, caller, req, guessed)
		a.open = a.refusal == nil
		if !a.open && found.Made {
			if err := s.book.Reopen(ctx, id, g.By); err != nil {
				s.log.WarnContext(ctx, "a refused execution's closing of its quote was not taken back; it lapses with the quote", "err", err)
			}
			a.closing = quote.NotTried
		}
	}
	return a, nil
}

// check holds an open quote's execution to the checks after its offer is
// read: its expiry, its chain, the beneficiary against its rail (as
// guessed, when the offer was closed for the guess: its rail and country
// are the quote's) and the key's ceiling; nil when it may be executed.
func (s *service) check(a *attempt, caller partner.Caller, req ExecuteRequest, guessed beneficiary.Checked) error {
	if !s.now().Before(a.quote.ExpiresAt) {
		return errQuoteExpired
	}
	if !s.offered(a.quote.Chain) {
		return errChainUnavailable(a.quote.Chain)
	}
	if a.closing == quote.NotTried {
		var err error
		if a.payee, err = beneficiary.Check(a.quote.Rail, a.quote.Country, req.Beneficiary); err != nil {
			return err // unless the quote was executed: then it is 409
		}
	} else {
		a.payee = guessed
	}
	return checkCeiling(a.quote, caller.Grants.MaxExecutionUSD)
}

// Hold binds an open quote to the request's beneficiary, as execution's
// first write does, before a request with an Idempotency-Key claims its
// key (idempotency.Holder). The claim is a commit that waits for the
// synchronous standby, and may answer 409 idempotency_in_progress: from
// then on the request's outcome is in doubt, and nobody else may execute
// its quote, even when the claim is lost in a failover (DESIGN §6). A
// request that would be refused does nothing here, and nor does a failure:
// execution closes the offer itself, and refuses what it must.
//
// Redis's mark is set as the quote is read when the key's corridor is
// guessed (prepare), else after the binding. Either order binds the same
// beneficiary: the binding in PostgreSQL is written before the claim, where
// the claim will be, so a failover that keeps the claim keeps the binding
// (WAL is ordered), whatever Redis keeps; and a request that dies between
// the two has claimed nothing, so its retry holds the quote again.
//
// What it learned (the offer, closed for the beneficiary) is left in the
// request's context when the route gave it a slot (withHeld): the
// execution after the claim then checks the offer again (expiry, chain,
// ceiling) without reading it from Redis again. A keyed execution makes
// one round trip to Redis, as an execution without a key does.
func (s *service) Hold(ctx context.Context, caller partner.Caller, req ExecuteRequest) {
	a, err := s.prepare(ctx, caller, req)
	if err != nil || !a.open {
		return
	}
	if err := s.payouts.Hold(ctx, a.id.String(), record.Digest(a.payee.Fields)); err != nil {
		s.log.WarnContext(ctx, "the quote's binding to its beneficiary was not written; Redis's mark stands alone", "err", err)
	}
	if a.closing == quote.NotTried {
		if mine, err := s.book.Close(ctx, a.id, record.Digest(a.payee.Fields)); err == nil && mine {
			a.closing = quote.ClosedForBy
		}
	}
	if slot, ok := ctx.Value(heldKey{}).(*held); ok {
		*slot = held{keyID: caller.KeyID, quoteID: req.QuoteID, a: a}
	}
}

// held is what a keyed execution's Hold learned of its quote, kept in the
// request's context (withHeld) for the execution after the claim.
type held struct {
	keyID, quoteID string
	a              attempt // open; its closing as Hold left it
}

type heldKey struct{}

// withHeld is ctx with a slot for Hold to leave its attempt in.
func withHeld(ctx context.Context) context.Context {
	return context.WithValue(ctx, heldKey{}, &held{})
}

// takeHeld is the attempt Hold left in ctx for this key's execution of
// quoteID, once: the slot is emptied.
func takeHeld(ctx context.Context, keyID, quoteID string) (attempt, bool) {
	slot, ok := ctx.Value(heldKey{}).(*held)
	if !ok || slot.quoteID == "" || slot.keyID != keyID || slot.quoteID != quoteID {
		return attempt{}, false
	}
	a := slot.a
	*slot = held{}
	return a, true
}

// execute commits the payout of an open quote, or answers the one it was
// executed as.
func (s *service) execute(ctx context.Context, caller partner.Caller, a attempt, req ExecuteRequest) (Payout, error) {
	q, payee, id := a.quote, a.payee, a.id
	// The offer closes, for this beneficiary, before the payout commits:
	// whatever fails between the two, the same quote request never answers
	// an executed id again, and no one else can execute it. Reading the
	// quote may have closed it already (FindClosing).
	mine, err := a.closing == quote.ClosedForBy, error(nil)
	if a.closing == quote.NotTried {
		mine, err = s.book.Close(ctx, id, record.Digest(payee.Fields))
	}
	switch {
	case err != nil:
		return Payout{}, err
	case !mine:
		// Redis's mark names another. The binding in PostgreSQL, where a
		// keyed execution holds its quote, has the last word: a Redis that
		// lost its mark in a failover, and took another's since, does not
		// refuse the beneficiary the quote is bound to.
		if held, err := s.payouts.Held(ctx, id.String()); err != nil || held != record.Digest(payee.Fields) {
			return Payout{}, errOtherPayee
		}
	}
	p, err := s.newPayout(ctx, caller, q, payee, req)
	if err != nil {
		return Payout{}, err
	}
	return s.payouts.Execute(ctx, p, func(stored record.Record) (Payout, error) {
		if stored.KeyID != caller.KeyID {
			return Payout{}, errQuoteNotFound
		}
		return s.samePayee(stored, payee, req)
	})
}

// newPayout is the payout of quote q to payee, awaiting its deposit at an
// address of its own: a key we hold, at an index no payout had.
func (s *service) newPayout(ctx context.Context, caller partner.Caller, q StoredQuote, payee beneficiary.Checked, req ExecuteRequest) (record.StoredPayout, error) {
	if s.deposits == nil {
		return record.StoredPayout{}, errors.New("no deposit key is configured (DEPOSIT_XPUB)")
	}
	index, address, err := s.deposits.Next(ctx)
	if err != nil {
		return record.StoredPayout{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	payoutID := record.NewID()
	p := record.StoredPayout{
		ID: payoutID, QuoteID: q.ID, KeyID: caller.KeyID, BeneficiaryName: payee.Name, Beneficiary: payee.Fields,
		Chain: q.Chain, CryptoCurrency: q.CryptoCurrency, FiatCurrency: q.FiatCurrency, Country: q.Country,
		CryptoAmount: q.CryptoAmount, FiatAmount: q.FiatAmount, Rail: q.Rail, Settlement: q.Settlement,
		Status: lifecycle.PayoutAwaitingDeposit, QuoteExpiresAt: q.ExpiresAt, CreatedAt: now, StatusAt: now,
		DepositAddress: address, DepositIndex: &index, DepositExpiresAt: now.Add(DepositWindow),
	}
	p.Reference, p.RefundAddress = optional(req.Reference), refundAddressOf(req)
	return p, nil
}

func optional(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// refundAddressOf is the request's refund address in its checksummed form
// (validateExecution checked it), or "".
func refundAddressOf(req ExecuteRequest) string {
	if req.RefundAddress == nil {
		return ""
	}
	a, _ := format.Checksummed(*req.RefundAddress)
	return a
}

// samePayee answers the stored payout to the execution it was made by
// (DESIGN §3: the same body again answers the same payout): another
// beneficiary is refused, and so is another reference or refund address
// (the payout keeps those it was made with, and a partner who sent others
// must not believe they were taken).
func (s *service) samePayee(p record.Record, payee beneficiary.Checked, req ExecuteRequest) (Payout, error) {
	if string(p.Beneficiary) != string(payee.Fields) {
		return Payout{}, errOtherPayee
	}
	if optional(req.Reference) != p.Reference || refundAddressOf(req) != p.RefundAddress {
		return Payout{}, errOtherTerms
	}
	return s.view.PayoutAs(p, payee.Masked()), nil
}

// validateExecution checks the body's shape. Our own checks name the field
// in the message; error.fields is for refusals that come from the bank
// provider.
func validateExecution(req ExecuteRequest) error {
	switch {
	case req.QuoteID == "":
		return envelope.InvalidRequest("quoteId is required: the id of a quote from POST /v1/bank/payout/quote.")
	case len(req.Beneficiary) == 0:
		return envelope.InvalidRequest("beneficiary is required: the bank account paid, with the fields of the quote's rail (GET /v1/limits).")
	case req.Beneficiary[0] != '{':
		return envelope.InvalidRequest(`Field "beneficiary" must be an object.`)
	}
	if req.RefundAddress != nil {
		if _, err := format.EVMAddress("refundAddress", *req.RefundAddress); err != nil {
			return err
		}
	}
	return checkReference(req.Reference)
}

// checkReference checks the partner's own reference, when sent
// (listing.Reference: the rule every resource's reference follows).
func checkReference(ref *string) error {
	if ref != nil && !listing.Reference(*ref) {
		return envelope.InvalidRequest("reference, when sent, must be 1 to 64 printable ASCII characters: your own id for the payout.")
	}
	return nil
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
