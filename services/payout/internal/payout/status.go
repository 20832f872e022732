package payout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/partnerpay/api/services/payout/internal/store"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/mover"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// StatusRequest is the body of POST /v1/bank/payout/status, and of
// POST /v1/sandbox/payouts/expire.
type StatusRequest struct {
	PayoutID string `json:"payoutId"`
}

// DepositRequest is the body of POST /v1/sandbox/payouts/deposit: a deposit
// arrives for the payout now. With the payout's own amount and token it
// pays the payout, which comes to outcome (completed, the default; failed
// or returned, with a reason); another amount or token is a mismatch
// (DESIGN §3).
type DepositRequest struct {
	PayoutID       string  `json:"payoutId"`
	Outcome        *string `json:"outcome"`
	Reason         *string `json:"reason"`
	Amount         *string `json:"amount"`
	CryptoCurrency *string `json:"cryptoCurrency"`
}

// RefundAddressRequest is the body of POST /v1/bank/payout/refund-address.
type RefundAddressRequest struct {
	PayoutID string `json:"payoutId"`
	Address  string `json:"address"`
}

var (
	errPayoutNotFound = envelope.New(envelope.CodePayoutNotFound, "No payout with this payoutId exists for this key.")
	errNotAwaiting    = envelope.New(envelope.CodePayoutNotAwaiting,
		"This payout is not awaiting its deposit: its stablecoins arrived already, or it failed. See POST /v1/bank/payout/status.")
	errAddressLocked = envelope.New(envelope.CodeRefundAddressLocked,
		"This payout's refund address is set already; it is never changed. Its refunds go to the address it has.")
)

// findPayout reads a payout of the caller's: a malformed id is not looked
// up, and another key's payout answers as an unknown one.
func (s *service) findPayout(ctx context.Context, caller partner.Caller, id string) (record.Record, error) {
	if !record.ValidID(id) {
		return record.Record{}, errPayoutNotFound
	}
	r, err := s.payouts.ByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return record.Record{}, errPayoutNotFound
	case err != nil:
		return record.Record{}, err
	case r.KeyID != caller.KeyID:
		return record.Record{}, errPayoutNotFound
	}
	return r, nil
}

// update is Payouts.Update for a payout of the caller's (findPayout's
// rules): decide sees it locked, as it stands.
func (s *service) update(ctx context.Context, caller partner.Caller, id string, decide func(record.Record) (record.Change, error)) (record.Record, error) {
	if !record.ValidID(id) {
		return record.Record{}, errPayoutNotFound
	}
	r, err := s.payouts.Update(ctx, id, func(r record.Record) (record.Change, error) {
		if r.KeyID != caller.KeyID {
			return record.Change{}, errPayoutNotFound
		}
		return decide(r)
	})
	if errors.Is(err, store.ErrNotFound) {
		return record.Record{}, errPayoutNotFound
	}
	return r, err
}

// Status answers a payout as the system of record has it: the worker
// moves it on the provider's word and closes its deposit window, so a read
// never calls the provider and never waits for it.
func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (PayoutStatus, error) {
	r, err := s.findPayout(ctx, caller, req.PayoutID)
	if err != nil {
		return PayoutStatus{}, err
	}
	return s.view.Status(r), nil
}

// SetRefundAddress sets where the payout's refunds go, once: refunds
// awaiting an address become pending in the same transaction. The same
// address again answers the payout; another is 409 refund_address_locked.
func (s *service) SetRefundAddress(ctx context.Context, caller partner.Caller, req RefundAddressRequest) (PayoutStatus, error) {
	if req.PayoutID == "" {
		return PayoutStatus{}, envelope.InvalidRequest("payoutId is required: the id of a payout from POST /v1/bank/payout.")
	}
	address, err := s.refundAddress(ctx, "address", req.Address)
	if err != nil {
		return PayoutStatus{}, err
	}
	r, err := s.update(ctx, caller, req.PayoutID, func(r record.Record) (record.Change, error) {
		switch r.RefundAddress {
		case "":
			return record.Change{Steps: []record.Step{{At: s.clock(), RefundAddress: address}}}, nil
		case address:
			return record.Change{}, nil
		}
		return record.Change{}, errAddressLocked
	})
	if err != nil {
		return PayoutStatus{}, err
	}
	return s.view.Status(r), nil
}

// refundAddress checks a refund address sent in field: an EVM address
// (EIP-55 checked), and not one where stablecoins are lost or loop back
// (DESIGN §3): the zero address, a token contract of the catalogue, or one
// of our own deposit addresses. It answers the address checksummed.
func (s *service) refundAddress(ctx context.Context, field, addr string) (string, error) {
	a, err := format.EVMAddress(field, addr)
	if err != nil {
		return "", err
	}
	if a == zeroAddress {
		return "", envelope.InvalidRequest(field + " is the zero address: stablecoins sent there are lost. Send an address whose owner can receive the refund.")
	}
	for _, c := range s.chains.List {
		for _, t := range c.Tokens {
			if a == t.Address {
				return "", envelope.InvalidRequest(field + " is a token's contract (" + t.Symbol + "): stablecoins sent there are lost. Send an address whose owner can receive the refund.")
			}
		}
	}
	switch ours, err := s.payouts.IsDepositAddress(ctx, a); {
	case err != nil:
		return "", err
	case ours:
		return "", envelope.InvalidRequest(field + " is one of our deposit addresses: a refund sent there would arrive as a deposit again. Send an address of the payer's own.")
	}
	return a, nil
}

const zeroAddress = "0x0000000000000000000000000000000000000000"

// SandboxDeposit says stablecoins arrived for a payout now (a testnet
// transaction). What they do is decided in one transaction with the
// payout locked (arrival): the deposit that pays the payout is recorded
// with the intent to hand it over, before the provider is called; a
// mismatch moves the payout or not and owes its refund. The hand-over is
// then made at once, with no lock held (the deposit's lease on it keeps
// the worker's hand-over queue from making it too); whatever stops it (a
// provider down, this process killed), the worker finishes it from the
// recorded intent once the lease is over.
func (s *service) SandboxDeposit(ctx context.Context, caller partner.Caller, req DepositRequest) (PayoutStatus, error) {
	if s.env != environment.Sandbox {
		return PayoutStatus{}, envelope.NotFound()
	}
	d, err := s.checkDeposit(req)
	if err != nil {
		return PayoutStatus{}, err
	}
	// The same deposit on every attempt of a request with an
	// Idempotency-Key: a retry after a crash makes no second refund.
	sum := sha256.Sum256([]byte(idempotency.NewID(ctx, "deposit-")))
	d.txHash = "0x" + hex.EncodeToString(sum[:])
	r, err := s.update(ctx, caller, req.PayoutID, func(r record.Record) (record.Change, error) { return s.arrival(r.StoredPayout, d) })
	if err != nil {
		return PayoutStatus{}, err
	}
	// Best effort: the mover's hand-over queue finishes what this leaves.
	if s.mover.HandOver(ctx, r.StoredPayout) {
		if moved, err := s.payouts.ByID(ctx, r.ID); err == nil {
			r = moved
		}
	}
	return s.view.Status(r), nil
}

// SandboxExpire closes an awaiting_deposit payout's window now, as its end
// would: it is expired, and a deposit after it is a late one.
func (s *service) SandboxExpire(ctx context.Context, caller partner.Caller, req StatusRequest) (PayoutStatus, error) {
	if s.env != environment.Sandbox {
		return PayoutStatus{}, envelope.NotFound()
	}
	if req.PayoutID == "" {
		return PayoutStatus{}, envelope.InvalidRequest("payoutId is required: the id of a payout from POST /v1/bank/payout.")
	}
	r, err := s.update(ctx, caller, req.PayoutID, func(r record.Record) (record.Change, error) {
		if r.Status != lifecycle.PayoutAwaitingDeposit || r.HandoverAt != nil {
			return record.Change{}, errNotAwaiting
		}
		return record.Change{Steps: []record.Step{{To: lifecycle.PayoutExpired, At: s.clock()}}}, nil
	})
	if err != nil {
		return PayoutStatus{}, err
	}
	return s.view.Status(r), nil
}

// deposit is a sandbox deposit, checked: its amount and token, a testnet
// transaction, and the outcome the provider is to play out.
type deposit struct {
	amount, token   string
	txHash          string
	outcome, reason string
}

// checkDeposit reads the sandbox deposit: the outcome (completed, the
// default, no reason; failed with a failure reason; returned with a return
// reason), the amount (the payout's deposit.amount by default) and the
// token (the payout's by default; another is checked against the
// catalogue once the payout's chain is known).
func (s *service) checkDeposit(req DepositRequest) (deposit, error) {
	if req.PayoutID == "" {
		return deposit{}, envelope.InvalidRequest("payoutId is required: the id of a payout from POST /v1/bank/payout.")
	}
	d := deposit{outcome: lifecycle.PayoutCompleted, amount: MockMoney}
	if req.Outcome != nil {
		d.outcome = *req.Outcome
	}
	if req.Reason != nil {
		d.reason = *req.Reason
	}
	switch d.outcome {
	case lifecycle.PayoutCompleted:
		if req.Reason != nil {
			return deposit{}, envelope.InvalidRequest("reason is for a failed or returned outcome; a completed payout has none.")
		}
	case lifecycle.PayoutFailed:
		if !slices.Contains(lifecycle.PayoutFailureReasons, d.reason) {
			return deposit{}, envelope.InvalidRequest("reason must be, for a failed payout, one of account_closed, account_not_found, name_mismatch, invalid_account, rail_unavailable, compliance_rejected.")
		}
	case lifecycle.PayoutReturned:
		if !slices.Contains(lifecycle.PayoutReturnReasons, d.reason) {
			return deposit{}, envelope.InvalidRequest("reason must be, for a returned payout, one of account_closed, beneficiary_deceased, refused_by_beneficiary.")
		}
	default:
		return deposit{}, envelope.InvalidRequest("outcome must be completed, failed or returned.")
	}
	if req.Amount != nil {
		a, err := format.Amount("amount", *req.Amount)
		if err != nil {
			return deposit{}, err
		}
		if v, _ := new(big.Rat).SetString(a); v.Sign() <= 0 {
			return deposit{}, envelope.InvalidRequest("amount must be more than 0: what arrived, in major units of the token.")
		}
		d.amount = a
	}
	if req.CryptoCurrency != nil {
		if *req.CryptoCurrency == "" || len(*req.CryptoCurrency) > 16 {
			return deposit{}, envelope.InvalidRequest("cryptoCurrency, when sent, is the symbol of the token that arrived, as GET /v1/currencies lists it.")
		}
		d.token = *req.CryptoCurrency
	}
	return d, nil
}

// arrival decides what deposit d does to payout p (DESIGN §3):
//
//   - after the window (p expired, or its window closed): the payout is
//     expired, and the deposit refunded (deposit_late);
//
//   - another token: refunded (deposit_wrong_token), and the payout keeps
//     waiting;
//
//   - less than deposit.amount: the payout fails (deposit_short), the
//     whole deposit refunded;
//
//   - deposit.amount or more: the deposit is the payout's, recorded with
//     the intent to hand the payout over, and the excess refunded
//     (deposit_excess).
//
//   - a deposit to a payout that took one already, or that is final
//     (completed, failed, returned): refunded (deposit_unexpected). A
//     chain cannot refuse a transfer, so no deposit is answered "not now"
//     and left where it landed.
//
// The same deposit again (its transaction hash: a request retried with
// its Idempotency-Key) changes nothing; its refund, if any, is owed once
// (once per cause).
func (s *service) arrival(p record.StoredPayout, d deposit) (record.Change, error) {
	now := s.clock()
	token := p.CryptoCurrency
	if d.token != "" {
		chain, err := s.chains.Find("chain", p.Chain)
		if err != nil {
			return record.Change{}, err
		}
		t, ok := chain.Token(d.token)
		if !ok {
			return record.Change{}, envelope.InvalidRequest(fmt.Sprintf("cryptoCurrency is not a token on chain %d; see GET /v1/currencies.", p.Chain))
		}
		token = t.Symbol
	}
	refund := func(reason, amount string) record.Refund {
		return record.Refund{ID: record.NewRefundID(), Reason: reason, Amount: amount, CryptoCurrency: token, Chain: p.Chain, DepositTxHash: d.txHash, CreatedAt: now}
	}
	waiting := p.Status == lifecycle.PayoutAwaitingDeposit && p.HandoverAt == nil
	switch {
	case p.DepositTxHash == d.txHash:
		// The same deposit again (a request retried with its
		// Idempotency-Key after its answer was lost): taken already.
		return record.Change{}, nil
	case p.Status == lifecycle.PayoutExpired:
		return record.Change{Refunds: []record.Refund{refund(lifecycle.RefundDepositLate, d.amount)}}, nil
	case waiting && !now.Before(p.DepositExpiresAt):
		return record.Change{Steps: []record.Step{{To: lifecycle.PayoutExpired, At: now}}, Refunds: []record.Refund{refund(lifecycle.RefundDepositLate, d.amount)}}, nil
	case !waiting:
		return record.Change{Refunds: []record.Refund{refund(lifecycle.RefundDepositUnexpected, d.amount)}}, nil
	case token != p.CryptoCurrency:
		return record.Change{Refunds: []record.Refund{refund(lifecycle.RefundDepositWrongToken, d.amount)}}, nil
	}
	got, _ := new(big.Rat).SetString(d.amount)
	owed, _ := new(big.Rat).SetString(record.Owed(p))
	switch got.Cmp(owed) {
	case -1:
		return record.Change{Steps: []record.Step{{To: lifecycle.PayoutFailed, At: now, FailureReason: lifecycle.PayoutDepositShort,
			DepositTxHash: d.txHash, DepositAmount: d.amount}}, Refunds: []record.Refund{refund(lifecycle.RefundDepositShort, d.amount)}}, nil
	}
	// The hand-over is leased to whoever recorded the deposit (it makes
	// it at once); the worker's queue makes it once the lease is over.
	lease := now.Add(mover.CallLease)
	c := record.Change{Steps: []record.Step{{At: now, DepositTxHash: d.txHash, DepositAmount: d.amount, HandoverAt: &now,
		SandboxOutcome: d.outcome, SandboxReason: d.reason}}, HandOver: &lease}
	if got.Cmp(owed) > 0 {
		c.Refunds = []record.Refund{refund(lifecycle.RefundDepositExcess, new(big.Rat).Sub(got, owed).FloatString(decimals(d.amount)))}
	}
	return c, nil
}

// decimals is how many digits a decimal amount has after its point (at
// least 2): the excess is written as precisely as the deposit was.
func decimals(amount string) int {
	for i := range len(amount) {
		if amount[i] == '.' {
			return max(2, len(amount)-i-1)
		}
	}
	return 2
}
