package payout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/partner"
)

// StatusRequest is the body of POST /v1/bank/payout/status.
type StatusRequest struct {
	PayoutID string `json:"payoutId"`
}

// DepositRequest is the body of POST /v1/sandbox/payouts/deposit: the
// payout's stablecoins arrive now, and it comes to outcome (completed, the
// default; failed or returned, with a reason).
type DepositRequest struct {
	PayoutID string  `json:"payoutId"`
	Outcome  *string `json:"outcome"`
	Reason   *string `json:"reason"`
}

// PayoutStatus is the payout answer plus what happened to it: every status
// it has been in (oldest first), and, as they happen, the deposit's
// transaction, when the bank was credited, and why it failed or came back.
type PayoutStatus struct {
	Payout
	History       []HistoryEntry `json:"history"`
	DepositTxHash string         `json:"depositTxHash,omitempty"`
	CompletedAt   string         `json:"completedAt,omitempty"`
	FailureReason string         `json:"failureReason,omitempty"`
	ReturnReason  string         `json:"returnReason,omitempty"`
}

// HistoryEntry is one status a payout has been in, and since when.
type HistoryEntry struct {
	Status string `json:"status"`
	At     string `json:"at"`
}

// Provider carries payouts: the bank provider (pkg/bankprovider).
type Provider interface {
	CreatePayout(ctx context.Context, in bankprovider.NewPayout) (bankprovider.Payout, error)
	PayoutByReference(ctx context.Context, reference string) (bankprovider.Payout, error)
}

// ProviderWait is how long a status read waits for the provider's word
// before it answers the status last known.
const ProviderWait = 3 * time.Second

var (
	errPayoutNotFound = envelope.New(envelope.CodePayoutNotFound, "No payout with this payoutId exists for this key.")
	errNotAwaiting    = envelope.New(envelope.CodePayoutNotAwaiting,
		"This payout is not awaiting its deposit: its stablecoins arrived already, or its deposit window closed. See POST /v1/bank/payout/status.")
)

// findPayout reads a payout of the caller's: a malformed id is not looked
// up, and another key's payout answers as an unknown one.
func (s *service) findPayout(ctx context.Context, caller partner.Caller, id string) (StoredPayout, []Move, error) {
	if !validPayoutID(id) {
		return StoredPayout{}, nil, errPayoutNotFound
	}
	p, history, err := s.payouts.ByID(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return StoredPayout{}, nil, errPayoutNotFound
	case err != nil:
		return StoredPayout{}, nil, err
	case p.KeyID != caller.KeyID:
		return StoredPayout{}, nil, errPayoutNotFound
	}
	return p, history, nil
}

// Status answers a payout as it stands, brought up to date first: a
// deposit window that closed makes it expired (our clock: the deposit is
// ours to wait for), and a payout at the provider takes the provider's
// word, moving only forward, one arrow at a time. With the provider
// unreachable it answers the status last known.
func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (PayoutStatus, error) {
	p, history, err := s.findPayout(ctx, caller, req.PayoutID)
	if err != nil {
		return PayoutStatus{}, err
	}
	if moved, err := s.catchUp(ctx, p); err != nil {
		return PayoutStatus{}, err
	} else if moved {
		if p, history, err = s.payouts.ByID(ctx, p.ID); err != nil {
			return PayoutStatus{}, err
		}
	}
	return s.status(p, history), nil
}

// catchUp moves p forward to where it stands now; moved says whether it
// did (or another reader did first).
func (s *service) catchUp(ctx context.Context, p StoredPayout) (bool, error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	switch p.Status {
	case lifecycle.PayoutAwaitingDeposit:
		if now.Before(p.DepositExpiresAt) {
			return false, nil
		}
		_, err := s.payouts.Move(ctx, p.ID, Change{From: p.Status, To: lifecycle.PayoutExpired, At: now})
		return true, err
	case lifecycle.PayoutProcessing, lifecycle.PayoutCompleted:
	default:
		return false, nil // final
	}
	if s.provider == nil {
		return false, nil
	}
	pctx, cancel := context.WithTimeout(ctx, ProviderWait)
	defer cancel()
	word, err := s.provider.PayoutByReference(pctx, p.ID)
	if bankprovider.IsType(err, bankprovider.TypeResourceMissing) {
		// The provider does not have it (the sandbox provider restarted,
		// or the hand-over's answer was lost): hand it over again.
		word, err = s.handOver(pctx, p)
	}
	if err != nil {
		slog.WarnContext(ctx, "payout not brought up to date with the bank provider; answered as last known", "payout_id", p.ID, "err", err)
		return false, nil
	}
	moved := false
	for _, c := range forward(p.Status, word, now) {
		if _, err := s.payouts.Move(ctx, p.ID, c); err != nil {
			return moved, err
		}
		moved = true
	}
	return moved, nil
}

// forward is the path of arrows from status to where the provider says the
// payout stands; nothing for a word that is not ahead of it, or not one we
// know.
func forward(status string, word bankprovider.Payout, now time.Time) []Change {
	completedAt := now
	if t, err := time.Parse(time.RFC3339, word.CompletedAt); err == nil {
		completedAt = t.UTC()
	}
	completed := Change{From: lifecycle.PayoutProcessing, To: lifecycle.PayoutCompleted, At: now, CompletedAt: &completedAt}
	switch {
	case word.Status == lifecycle.PayoutCompleted && status == lifecycle.PayoutProcessing:
		return []Change{completed}
	case word.Status == lifecycle.PayoutFailed && status == lifecycle.PayoutProcessing && slices.Contains(lifecycle.PayoutFailureReasons, word.FailureReason):
		return []Change{{From: status, To: lifecycle.PayoutFailed, At: now, FailureReason: word.FailureReason}}
	case word.Status == lifecycle.PayoutReturned && slices.Contains(lifecycle.PayoutReturnReasons, word.ReturnReason):
		back := Change{From: lifecycle.PayoutCompleted, To: lifecycle.PayoutReturned, At: now, ReturnReason: word.ReturnReason}
		switch status {
		case lifecycle.PayoutProcessing:
			return []Change{completed, back}
		case lifecycle.PayoutCompleted:
			return []Change{back}
		}
	}
	return nil
}

// handOver gives the provider a payout whose stablecoins arrived; the
// provider answers a retry with the payout it has.
func (s *service) handOver(ctx context.Context, p StoredPayout) (bankprovider.Payout, error) {
	amount := p.FiatAmount
	if amount == "" {
		amount = p.CryptoAmount
	}
	in := bankprovider.NewPayout{Reference: p.ID, Rail: p.Rail, Currency: p.FiatCurrency, Country: p.Country,
		Amount: amount, Beneficiary: p.Beneficiary}
	if s.env == environment.Sandbox && p.SandboxOutcome != "" {
		in.Sandbox = &bankprovider.SandboxOutcome{Outcome: p.SandboxOutcome, Reason: p.SandboxReason}
	}
	return s.provider.CreatePayout(ctx, in)
}

// SandboxDeposit says a payout's stablecoins arrived now (a testnet
// transaction): the payout is handed to the provider, which plays out the
// chosen outcome, and is processing.
func (s *service) SandboxDeposit(ctx context.Context, caller partner.Caller, req DepositRequest) (PayoutStatus, error) {
	if s.env != environment.Sandbox {
		return PayoutStatus{}, envelope.NotFound()
	}
	outcome, reason, err := checkOutcome(req)
	if err != nil {
		return PayoutStatus{}, err
	}
	p, _, err := s.findPayout(ctx, caller, req.PayoutID)
	if err != nil {
		return PayoutStatus{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if p.Status != lifecycle.PayoutAwaitingDeposit || !now.Before(p.DepositExpiresAt) {
		return PayoutStatus{}, errNotAwaiting
	}
	if s.provider == nil {
		return PayoutStatus{}, errors.New("payout: no bank provider configured")
	}
	p.SandboxOutcome, p.SandboxReason = outcome, reason
	// The provider first (it takes a retry as the same payout), then the
	// move: a payout is never processing without the provider having it.
	if _, err := s.handOver(ctx, p); err != nil {
		return PayoutStatus{}, bankprovider.ToAPI(err)
	}
	moved, err := s.payouts.Move(ctx, p.ID, Change{From: lifecycle.PayoutAwaitingDeposit, To: lifecycle.PayoutProcessing, At: now,
		DepositTxHash: testnetHash(), SandboxOutcome: outcome, SandboxReason: reason})
	if err != nil {
		return PayoutStatus{}, err
	}
	if !moved {
		return PayoutStatus{}, errNotAwaiting // another deposit, a moment earlier
	}
	p, history, err := s.payouts.ByID(ctx, p.ID)
	if err != nil {
		return PayoutStatus{}, err
	}
	return s.status(p, history), nil
}

// checkOutcome reads the sandbox outcome: completed (the default, no
// reason), failed with a failure reason, or returned with a return reason.
func checkOutcome(req DepositRequest) (outcome, reason string, err error) {
	if req.PayoutID == "" {
		return "", "", envelope.InvalidRequest("payoutId is required: the id of a payout from POST /v1/bank/payout.")
	}
	outcome = lifecycle.PayoutCompleted
	if req.Outcome != nil {
		outcome = *req.Outcome
	}
	if req.Reason != nil {
		reason = *req.Reason
	}
	switch outcome {
	case lifecycle.PayoutCompleted:
		if req.Reason != nil {
			return "", "", envelope.InvalidRequest("reason is for a failed or returned outcome; a completed payout has none.")
		}
	case lifecycle.PayoutFailed:
		if !slices.Contains(lifecycle.PayoutFailureReasons, reason) {
			return "", "", envelope.InvalidRequest("reason must be, for a failed payout, one of account_closed, account_not_found, name_mismatch, invalid_account, rail_unavailable, compliance_rejected.")
		}
	case lifecycle.PayoutReturned:
		if !slices.Contains(lifecycle.PayoutReturnReasons, reason) {
			return "", "", envelope.InvalidRequest("reason must be, for a returned payout, one of account_closed, beneficiary_deceased, refused_by_beneficiary.")
		}
	default:
		return "", "", envelope.InvalidRequest("outcome must be completed, failed or returned.")
	}
	return outcome, reason, nil
}

func (s *service) status(p StoredPayout, history []Move) PayoutStatus {
	st := PayoutStatus{Payout: s.answer(p), DepositTxHash: p.DepositTxHash, FailureReason: p.FailureReason, ReturnReason: p.ReturnReason,
		History: make([]HistoryEntry, len(history))}
	for i, m := range history {
		st.History[i] = HistoryEntry{Status: m.Status, At: m.At.UTC().Format(time.RFC3339)}
	}
	if p.CompletedAt != nil {
		st.CompletedAt = p.CompletedAt.UTC().Format(time.RFC3339)
	}
	return st
}

// testnetHash is a sandbox deposit's transaction hash.
func testnetHash() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("0x%s", hex.EncodeToString(b[:]))
}
