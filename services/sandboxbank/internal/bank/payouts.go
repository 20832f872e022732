package bank

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
)

// The payout side of the sandbox provider (DESIGN §3): it takes a payout
// whose stablecoins arrived, and plays out the outcome the sandbox call
// chose: completed PayoutSettle after it was handed over (the default),
// failed with its reason, or returned with its reason one more
// PayoutSettle after it completed. Its status is worked out when it is
// read, from when it was handed over: nothing runs in the background.

const (
	payoutProcessing = "processing"
	payoutCompleted  = "completed"
	payoutFailed     = "failed"
	payoutReturned   = "returned"
)

var (
	payoutFailureReasons = setOf("account_closed", "account_not_found", "name_mismatch", "invalid_account", "rail_unavailable", "compliance_rejected")
	payoutReturnReasons  = setOf("account_closed", "beneficiary_deceased", "refused_by_beneficiary")
	payoutRails          = setOf("sepa", "sepa_instant", "faster_payments", "ach", "wire", "spei", "pix", "swift")
)

func setOf(values ...string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

type payout struct {
	id, reference   string
	outcome, reason string
	handed          time.Time
}

// CreatePayout takes a payout over; the same reference answers the same
// payout.
func (b *Bank) CreatePayout(in bankprovider.NewPayout) (bankprovider.Payout, bool, error) {
	var details []bankprovider.FieldDetail
	if in.Reference == "" || len(in.Reference) > 64 {
		details = append(details, bankprovider.FieldDetail{Field: "reference", Constraint: "invalid_length", Value: in.Reference})
	}
	if !payoutRails[in.Rail] {
		details = append(details, bankprovider.FieldDetail{Field: "rail", Constraint: "unsupported_rail", Value: in.Rail})
	}
	if len(in.Beneficiary) == 0 || !json.Valid(in.Beneficiary) {
		details = append(details, bankprovider.FieldDetail{Field: "beneficiary", Constraint: "required"})
	}
	outcome := bankprovider.SandboxOutcome{Outcome: payoutCompleted}
	if in.Sandbox != nil {
		outcome = *in.Sandbox
	}
	switch {
	case outcome.Outcome == payoutCompleted && outcome.Reason == "":
	case outcome.Outcome == payoutFailed && payoutFailureReasons[outcome.Reason]:
	case outcome.Outcome == payoutReturned && payoutReturnReasons[outcome.Reason]:
	default:
		details = append(details, bankprovider.FieldDetail{Field: "sandbox", Constraint: "invalid_outcome", Value: outcome.Outcome + "/" + outcome.Reason})
	}
	if len(details) > 0 {
		return bankprovider.Payout{}, false, invalid(details...)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if id, ok := b.payoutRefs[in.Reference]; ok {
		return b.payoutView(b.payouts[id]), false, nil
	}
	p := &payout{id: b.newID("po"), reference: in.Reference, outcome: outcome.Outcome, reason: outcome.Reason, handed: b.now()}
	b.payouts[p.id] = p
	b.payoutRefs[in.Reference] = p.id
	return b.payoutView(p), true, nil
}

// PayoutByReference reads a payout as the provider reports it.
func (b *Bank) PayoutByReference(reference string) (bankprovider.Payout, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, ok := b.payoutRefs[reference]
	if !ok {
		return bankprovider.Payout{}, b.missing("payout", reference)
	}
	return b.payoutView(b.payouts[id]), nil
}

// payoutView is p as it stands now (b.mu held).
func (b *Bank) payoutView(p *payout) bankprovider.Payout {
	v := bankprovider.Payout{ID: p.id, Reference: p.reference, Status: payoutProcessing}
	settled := p.handed.Add(b.cfg.PayoutSettle)
	now := b.now()
	if now.Before(settled) {
		return v
	}
	switch p.outcome {
	case payoutFailed:
		v.Status, v.FailureReason = payoutFailed, p.reason
		return v
	case payoutReturned:
		if !now.Before(settled.Add(b.cfg.PayoutSettle)) {
			v.Status, v.ReturnReason = payoutReturned, p.reason
			v.CompletedAt = settled.UTC().Format(time.RFC3339)
			return v
		}
	}
	v.Status, v.CompletedAt = payoutCompleted, settled.UTC().Format(time.RFC3339)
	return v
}

// payeeRails are the rails whose payee's bank can check a name: SEPA's
// Verification of Payee, the UK's Confirmation of Payee, PIX's key lookup.
var payeeRails = setOf("sepa", "sepa_instant", "faster_payments", "pix")

// CheckPayee plays a payee check by the name's magic words (DESIGN §3): a
// name with "Mismatch" is no_match, with "Close" close_match (the holder's
// name is the name without the word), with "Unavailable" not_possible;
// any other name matches. It records nothing.
func (b *Bank) CheckPayee(in bankprovider.PayeeCheck) (bankprovider.PayeeResult, error) {
	var who struct {
		Name string `json:"name"`
	}
	var details []bankprovider.FieldDetail
	if !payeeRails[in.Rail] {
		details = append(details, bankprovider.FieldDetail{Field: "rail", Constraint: "unsupported_rail", Value: in.Rail})
	}
	if json.Unmarshal(in.Beneficiary, &who) != nil || who.Name == "" {
		details = append(details, bankprovider.FieldDetail{Field: "beneficiary.name", Constraint: "required"})
	}
	if len(details) > 0 {
		return bankprovider.PayeeResult{}, invalid(details...)
	}
	switch {
	case strings.Contains(who.Name, "Mismatch"):
		return bankprovider.PayeeResult{Result: bankprovider.PayeeNoMatch}, nil
	case strings.Contains(who.Name, "Unavailable"):
		return bankprovider.PayeeResult{Result: bankprovider.PayeeNotPossible}, nil
	case strings.Contains(who.Name, "Close"):
		registered := strings.Join(strings.Fields(strings.ReplaceAll(who.Name, "Close", "")), " ")
		return bankprovider.PayeeResult{Result: bankprovider.PayeeCloseMatch, RegisteredName: registered}, nil
	}
	return bankprovider.PayeeResult{Result: bankprovider.PayeeMatch}, nil
}
