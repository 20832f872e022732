package bank

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
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
//
// Each change of a payout is also published in the provider's changes
// feed (GET /v1/changes?after=&limit=), oldest first, each change with its
// own id, as a bank tells its customer what happened: a return weeks
// later is one change, read once, not a payout asked about every hour.
// The changes a payout will make are scheduled when it is taken over and
// enter the feed, in the order they happen, once their time has come.

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

// change is one entry of the changes feed: a payout as it stood once it
// changed.
type change struct {
	ID        string              `json:"id"`
	Object    string              `json:"object"`
	Type      string              `json:"type"`
	CreatedAt string              `json:"created_at"`
	Payout    bankprovider.Payout `json:"payout"`
}

// upcoming is a change a payout will make at at.
type upcoming struct {
	at       time.Time
	payoutID string
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
	b.publish()
	b.publishAt(p, p.handed)
	b.schedule(upcoming{p.handed.Add(b.cfg.PayoutSettle), p.id})
	if p.outcome == payoutReturned {
		b.schedule(upcoming{p.handed.Add(2 * b.cfg.PayoutSettle), p.id})
	}
	return b.payoutView(p), true, nil
}

// schedule adds u to the changes to come, kept in the order they happen
// (b.mu held).
func (b *Bank) schedule(u upcoming) {
	i := sort.Search(len(b.upcoming), func(i int) bool { return b.upcoming[i].at.After(u.at) })
	b.upcoming = slices.Insert(b.upcoming, i, u)
}

// publish enters the changes whose time has come into the feed, in the
// order they happened (b.mu held).
func (b *Bank) publish() {
	now := b.now()
	n := 0
	for n < len(b.upcoming) && !b.upcoming[n].at.After(now) {
		u := b.upcoming[n]
		b.publishAt(b.payouts[u.payoutID], u.at)
		n++
	}
	b.upcoming = b.upcoming[n:]
}

// publishAt enters p as it stood at at into the feed (b.mu held).
func (b *Bank) publishAt(p *payout, at time.Time) {
	b.changes = append(b.changes, change{ID: fmt.Sprintf("chg_%s%016x", b.epoch, len(b.changes)+1), Object: "change",
		Type: "payout.updated", CreatedAt: at.UTC().Format(time.RFC3339Nano), Payout: b.payoutViewAt(p, at)})
}

// Publish enters the changes whose time has come into the feed, and
// answers the id of its last change ("" while it has none): the notifier
// calls it, so the feed moves on when nobody reads it.
func (b *Bank) Publish() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publish()
	if len(b.changes) == 0 {
		return ""
	}
	return b.changes[len(b.changes)-1].ID
}

// MaxChanges is the most changes one page of the feed holds.
const MaxChanges = 500

// Changes is the feed after the change after ("" for its start), oldest
// first, at most limit, and whether more follow. A change of an earlier
// boot is state_lost (410): the follower starts again from the start of
// this one.
func (b *Bank) Changes(after string, limit int) ([]change, bool, error) {
	if limit < 1 || limit > MaxChanges {
		return nil, false, invalid(bankprovider.FieldDetail{Field: "limit", Constraint: "out_of_range", Value: limit})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publish()
	from := 0
	if after != "" {
		seq, err := b.changeSeq(after)
		if err != nil {
			return nil, false, err
		}
		from = seq
	}
	to := min(from+limit, len(b.changes))
	return slices.Clone(b.changes[from:to]), to < len(b.changes), nil
}

// changeSeq is the place of change id in the feed (from 1).
func (b *Bank) changeSeq(id string) (int, error) {
	if !strings.HasPrefix(id, "chg_") || len(id) != len("chg_")+6+16 {
		return 0, invalid(bankprovider.FieldDetail{Field: "after", Constraint: "invalid_format", Value: id})
	}
	epoch, hexSeq := id[4:10], id[10:]
	seq64, err := strconv.ParseInt(hexSeq, 16, 64)
	seq := int(seq64)
	if err != nil {
		return 0, invalid(bankprovider.FieldDetail{Field: "after", Constraint: "invalid_format", Value: id})
	}
	if epoch != b.epoch {
		return 0, b.missing("change", id)
	}
	if seq < 1 || seq > len(b.changes) {
		return 0, invalid(bankprovider.FieldDetail{Field: "after", Constraint: "unknown_change", Value: id})
	}
	return seq, nil
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
func (b *Bank) payoutView(p *payout) bankprovider.Payout { return b.payoutViewAt(p, b.now()) }

// payoutViewAt is p as it stood at now.
func (b *Bank) payoutViewAt(p *payout, now time.Time) bankprovider.Payout {
	v := bankprovider.Payout{ID: p.id, Reference: p.reference, Status: payoutProcessing}
	settled := p.handed.Add(b.cfg.PayoutSettle)
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
