// Package lifecycle declares every status value of every resource the API
// answers with, its meaning and whether it is final. The services set their
// statuses from these constants, and GET /v1/statuses lists this table, so
// the list cannot drift from the code that sets the values.
package lifecycle

// Status is one value of a resource's status field.
type Status struct {
	Value   string `json:"value"`
	Meaning string `json:"meaning"`
	Final   bool   `json:"final"`
}

// Resource is a resource and the statuses it can be in.
type Resource struct {
	Resource string   `json:"resource"`
	Field    string   `json:"field"`
	Statuses []Status `json:"statuses"`
}

// Payout statuses (POST /v1/bank/payout, POST /v1/bank/payout/status). A
// payout moves only along PayoutMoves (the database holds it to them).
const (
	PayoutAwaitingDeposit = "awaiting_deposit"
	PayoutProcessing      = "processing"
	PayoutCompleted       = "completed"
	PayoutReturned        = "returned"
	PayoutExpired         = "expired"
	PayoutFailed          = "failed"
)

// PayoutStatuses are every payout status, in the order of the arrows.
var PayoutStatuses = []string{PayoutAwaitingDeposit, PayoutProcessing, PayoutCompleted, PayoutReturned, PayoutExpired, PayoutFailed}

// PayoutMoves are the moves a payout's status may make, from → to.
var PayoutMoves = [][2]string{
	{PayoutAwaitingDeposit, PayoutProcessing},
	{PayoutAwaitingDeposit, PayoutExpired},
	{PayoutAwaitingDeposit, PayoutFailed}, // a short deposit
	{PayoutProcessing, PayoutCompleted},
	{PayoutProcessing, PayoutFailed},
	{PayoutCompleted, PayoutReturned},
}

// Why a payout failed (failureReason) or came back (returnReason). The
// rail's failures are the provider's word; a short deposit fails a payout
// before it reaches the provider.
var (
	PayoutFailureReasons = []string{"account_closed", "account_not_found", "name_mismatch", "invalid_account", "rail_unavailable", "compliance_rejected"}
	PayoutReturnReasons  = []string{"account_closed", "beneficiary_deceased", "refused_by_beneficiary"}
)

// The reasons of a failure or a return the provider gave in words we do
// not list: the provider's own code is kept beside them (providerCode,
// and returnCode for a return), and a payout never stays where it was for
// want of a meaning (DESIGN §3).
const (
	PayoutProviderRejected = "provider_rejected"
	PayoutReturnedByBank   = "returned_by_bank"
	// PayoutFailureInvalidAccount is the failure of a payout the provider
	// refused outright when it was handed over.
	PayoutFailureInvalidAccount = "invalid_account"
)

// PayoutDepositShort is the failure of a payout whose deposit brought less
// than deposit.amount: it never reaches the provider, and the whole
// deposit is refunded.
const PayoutDepositShort = "deposit_short"

// ReturnCode is the rail's own code for a return reason (returnCode beside
// returnReason): NACHA's R codes on ACH, ISO 20022's return reason codes
// on SEPA and SWIFT; "" on a rail without published codes.
func ReturnCode(rail, reason string) string {
	switch rail {
	case "ach":
		return achReturnCodes[reason]
	case "sepa", "sepa_instant", "swift":
		return isoReturnCodes[reason]
	}
	return ""
}

var (
	achReturnCodes = map[string]string{"account_closed": "R02", "beneficiary_deceased": "R15", "refused_by_beneficiary": "R23"}
	isoReturnCodes = map[string]string{"account_closed": "AC04", "beneficiary_deceased": "MD07", "refused_by_beneficiary": "MS02"}
)

// Refund statuses: a payout that will not pay its beneficiary after its
// stablecoins arrived owes them back (DESIGN §3).
const (
	RefundAwaitingAddress = "awaiting_address"
	RefundPending         = "pending"
	RefundSent            = "sent"
	RefundConfirmed       = "confirmed"
)

// Why a refund is owed.
const (
	RefundPayoutFailed      = "payout_failed"
	RefundPayoutReturned    = "payout_returned"
	RefundDepositLate       = "deposit_late"
	RefundDepositShort      = "deposit_short"
	RefundDepositExcess     = "deposit_excess"
	RefundDepositWrongToken = "deposit_wrong_token"
	RefundDepositUnexpected = "deposit_unexpected"
)

// Funding statuses (POST /v1/fiat/status), of a virtual account or a one-off deposit.
const (
	AwaitingDeposit = "awaiting_deposit"
	Funded          = "funded"
)

// Consent session states (POST /v1/fiat/consent/status).
const (
	ConsentPending  = "pending"
	ConsentReturned = "returned"
)

// Account statuses (POST /v1/fiat/accounts).
const (
	AccountConsentRequired = "consent_required"
	AccountIdentityPending = "identity_pending"
	AccountActive          = "active"
	AccountRejected        = "rejected"
)

// Virtual account statuses (POST /v1/fiat/virtual-accounts).
const (
	VirtualAccountConsentRequired = "consent_required"
	VirtualAccountActive          = "active"
)

// Order statuses (POST /v1/orders, POST /v1/orders/status).
const (
	OrderAwaitingPayment = "awaiting_payment"
	OrderAwaitingDeposit = "awaiting_deposit"
	OrderProcessing      = "processing"
	OrderCompleted       = "completed"
	OrderFailed          = "failed"
	OrderExpired         = "expired"
)

// All is the table GET /v1/statuses answers. Callers must not modify it.
func All() []Resource { return all }

var all = []Resource{
	{"payout", "status", []Status{
		{PayoutAwaitingDeposit, "Waiting for the stablecoins: send deposit.amount of deposit.token on deposit.chain to deposit.address before deposit.expiresAt.", false},
		{PayoutProcessing, "The stablecoins arrived (depositTxHash); the fiat is on its way over the rail.", false},
		{PayoutCompleted, "The beneficiary's bank was credited (completedAt). Final, but for a return.", false},
		{PayoutReturned, "The beneficiary's bank sent the payment back after crediting it; returnReason says why (account_closed, beneficiary_deceased, refused_by_beneficiary; returned_by_bank for a reason the bank gave that we do not list, its own code in providerCode), returnCode the rail's code where it has them (ACH R02, R03, R04, R15…; SEPA and SWIFT AC01, AC04, MD07…; an open set). The deposit is refunded (refunds).", true},
		{PayoutExpired, "No deposit arrived before deposit.expiresAt; nothing was paid. A deposit that arrives later is refunded (refunds).", true},
		{PayoutFailed, "The payment will not be made; failureReason says why: the deposit was short (deposit_short), or the rail refused the payment (account_closed, account_not_found, name_mismatch, invalid_account, rail_unavailable, compliance_rejected; provider_rejected for a reason the bank gave that we do not list, its own code in providerCode). The deposit is refunded (refunds).", true},
	}},
	{"payoutRefund", "status", []Status{
		{RefundAwaitingAddress, "A refund is owed, but the payout has no refund address yet: set one with POST /v1/bank/payout/refund-address.", false},
		{RefundPending, "The refund is being signed and sent to its address.", false},
		{RefundSent, "A node took the refund's transaction (txHash, sentAt); it waits to be mined with the chain's confirmations. If it is not mined in time it is replaced at the same nonce with a higher fee, and txHash is the replacement's.", false},
		{RefundConfirmed, "The chain mined the refund's transfer with its confirmations (txHash, confirmedAt): the stablecoins are at the refund address.", true},
	}},
	{"funding", "status", []Status{
		{AwaitingDeposit, "No deposit has settled yet: the user's bank transfer has not arrived, or is being converted.", false},
		{Funded, "A deposit settled: stablecoins were delivered to the wallet (deliveredAmount, depositedAmount and txHash are set).", true},
	}},
	{"consentSession", "state", []Status{
		{ConsentPending, "The user has not come back from the hosted consent page yet.", false},
		{ConsentReturned, "The user came back from the hosted consent page; the bank recorded a decision.", true},
	}},
	{"account", "status", []Status{
		{AccountConsentRequired, "The user must accept the bank's terms on the hosted consent page (consentSessionId).", false},
		{AccountIdentityPending, "The bank is checking the user's identity.", false},
		{AccountActive, "The user can receive bank transfers: ask for a virtual account or a one-off deposit.", true},
		{AccountRejected, "The bank's identity check refused the user.", true},
	}},
	{"virtualAccount", "status", []Status{
		{VirtualAccountConsentRequired, "The bank still needs the user's consent (consentSessionId) before it issues the account.", false},
		{VirtualAccountActive, "The account is issued: bankDetails is where the user sends transfers.", true},
	}},
	{"deposit", "status", []Status{
		{AwaitingDeposit, "Waiting for a transfer of exactly amount, with reference, before expiresAt.", false},
		{Funded, "The transfer arrived and settled: stablecoins were delivered to the wallet.", true},
	}},
	{"order", "status", []Status{
		{OrderAwaitingPayment, "A buy order waits for the user to pay on the hosted card page, until expiresAt.", false},
		{OrderAwaitingDeposit, "A sell order waits for the user's stablecoins at depositAddress, until expiresAt.", false},
		{OrderProcessing, "The payment was authorised (buy), or the stablecoins arrived (sell).", false},
		{OrderCompleted, "Done: the stablecoins were delivered (buy, txHash), or the card was credited (sell).", true},
		{OrderFailed, "The payment or payout failed; failureReason says why (card_declined, authentication_failed, insufficient_funds, expired_card).", true},
		{OrderExpired, "The order was not paid (or its deposit did not arrive) before expiresAt.", true},
	}},
}

// EventKind is a kind of record the events feed follows (DESIGN §9): its
// events are <Prefix>.<status>, one per status of Resource (a resource of
// All), written by Service.
type EventKind struct {
	Prefix   string
	Resource string
	Service  string
}

// EventKinds are the kinds of the events feed. Callers must not modify it.
func EventKinds() []EventKind { return eventKinds }

var eventKinds = []EventKind{
	{"payout", "payout", "payout"},
	{"payout.refund", "payoutRefund", "payout"},
	{"order", "order", "orders"},
	{"fiat_account", "account", "fiat"},
	{"virtual_account", "virtualAccount", "fiat"},
	{"virtual_account.funding", "funding", "fiat"},
	{"fiat_deposit", "deposit", "fiat"},
	{"consent", "consentSession", "consent"},
}

// EventTypes is every event type, kind by kind, status by status.
func EventTypes() []string {
	var out []string
	for _, k := range eventKinds {
		for _, r := range all {
			if r.Resource != k.Resource {
				continue
			}
			for _, s := range r.Statuses {
				out = append(out, k.Prefix+"."+s.Value)
			}
		}
	}
	return out
}
