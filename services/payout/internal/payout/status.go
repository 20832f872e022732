package payout

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/partnerpay/api/services/payout/internal/chain"
	"github.com/partnerpay/api/services/payout/internal/store"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/partner"
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

// SandboxDeposit is the answer of the sandbox's faucet: the payout as it
// stands when the transfer was sent, and the transfer's hash on the local
// chain.
type SandboxDeposit struct {
	PayoutStatus
	TxHash string `json:"txHash"`
}

// errNoChain is the faucet on a chain this deployment reaches no node of.
var errNoChain = envelope.New(envelope.CodePayoutUnavailable,
	"No chain node is configured for this payout's chain in this deployment (CHAIN_RPC_URL_<chain>), so the faucet cannot send its deposit.")

// SandboxDeposit is the sandbox's faucet (DESIGN §3, "Sandbox"): it sends
// a real ERC-20 transfer from the sandbox's wallet to the payout's deposit
// address on the local chain (deposit.amount of its token, or amount of
// cryptoCurrency: a mismatch) and answers with the transfer's hash. The
// payout moves when the chain watcher sees the transfer confirmed, as a
// partner's own transfer would: there is no side door into its record.
// outcome and reason are kept on the payout first: they tell the sandbox
// bank what to do with its hand-over.
func (s *service) SandboxDeposit(ctx context.Context, caller partner.Caller, req DepositRequest) (SandboxDeposit, error) {
	if s.env != environment.Sandbox {
		return SandboxDeposit{}, envelope.NotFound()
	}
	d, err := s.checkDeposit(req)
	if err != nil {
		return SandboxDeposit{}, err
	}
	r, err := s.findPayout(ctx, caller, req.PayoutID)
	if err != nil {
		return SandboxDeposit{}, err
	}
	token := r.CryptoCurrency
	if d.token != "" {
		ch, err := s.chains.Find("chain", r.Chain)
		if err != nil {
			return SandboxDeposit{}, err
		}
		t, ok := ch.Token(d.token)
		if !ok {
			return SandboxDeposit{}, envelope.InvalidRequest(fmt.Sprintf("cryptoCurrency is not a token on chain %d; see GET /v1/currencies.", r.Chain))
		}
		token = t.Symbol
	}
	if d.amount == "" {
		d.amount = record.Owed(r.StoredPayout)
	}
	if s.faucet == nil {
		return SandboxDeposit{}, errNoChain
	}
	if d.outcome != lifecycle.PayoutCompleted && r.Status == lifecycle.PayoutAwaitingDeposit && r.SandboxOutcome == "" {
		r, err = s.update(ctx, caller, req.PayoutID, func(r record.Record) (record.Change, error) {
			if r.Status != lifecycle.PayoutAwaitingDeposit || r.SandboxOutcome != "" {
				return record.Change{}, nil // its deposit came meanwhile, or one was asked for already
			}
			return record.Change{Steps: []record.Step{{At: s.clock(), SandboxOutcome: d.outcome, SandboxReason: d.reason}}}, nil
		})
		if err != nil {
			return SandboxDeposit{}, err
		}
	}
	// A request with an Idempotency-Key broadcasts the transaction it kept
	// on a retry after a crash, never a second transfer.
	var kept chain.Sends
	if sends, ok := s.payouts.(chain.Sends); ok && idempotency.Claimed(ctx) {
		kept = sends
	}
	tx, err := s.faucet.Send(ctx, r.Chain, token, r.DepositAddress, d.amount, idempotency.NewID(ctx, "faucet-"), kept)
	switch {
	case errors.Is(err, chain.ErrTooPrecise):
		return SandboxDeposit{}, envelope.InvalidRequest("amount has more decimals than the token has (6).")
	case errors.Is(err, chain.ErrNoChain):
		return SandboxDeposit{}, errNoChain
	case err != nil:
		return SandboxDeposit{}, fmt.Errorf("the faucet's transfer: %w", err)
	}
	s.sent(r.Chain)
	return SandboxDeposit{PayoutStatus: s.view.Status(r), TxHash: tx}, nil
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

// deposit is a sandbox deposit, checked: its amount and token (empty: the
// payout's), and the outcome the provider is to play out.
type deposit struct {
	amount, token   string
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
	d := deposit{outcome: lifecycle.PayoutCompleted}
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
