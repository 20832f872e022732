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

// PayoutMoves are the moves a payout's status may make, from → to.
var PayoutMoves = [][2]string{
	{PayoutAwaitingDeposit, PayoutProcessing},
	{PayoutAwaitingDeposit, PayoutExpired},
	{PayoutProcessing, PayoutCompleted},
	{PayoutProcessing, PayoutFailed},
	{PayoutCompleted, PayoutReturned},
}

// Why a payout failed (failureReason) or came back (returnReason).
var (
	PayoutFailureReasons = []string{"account_closed", "account_not_found", "name_mismatch", "invalid_account", "rail_unavailable", "compliance_rejected"}
	PayoutReturnReasons  = []string{"account_closed", "beneficiary_deceased", "refused_by_beneficiary"}
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
		{PayoutReturned, "The beneficiary's bank sent the payment back after crediting it; returnReason says why (account_closed, beneficiary_deceased, refused_by_beneficiary).", true},
		{PayoutExpired, "No deposit arrived before deposit.expiresAt; nothing was paid.", true},
		{PayoutFailed, "The rail refused the payment; failureReason says why (account_closed, account_not_found, name_mismatch, invalid_account, rail_unavailable, compliance_rejected).", true},
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
