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

// Payout statuses (POST /v1/bank/payout).
const PayoutPending = "pending"

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
		{PayoutPending, "The payout was accepted and is on its way over its rail; while the payout provider is a mock, payouts stay pending.", false},
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
