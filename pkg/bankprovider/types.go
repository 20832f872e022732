// Package bankprovider is the client of the external provider (in sandbox,
// services/sandboxbank) that the fiat, consent and orders services share:
// one provider for bank transfers and for cards (cards.go). Its wire
// types, an HTTP client with timeouts and bounded retries on idempotent
// calls, and the one mapping of its answers to the API's errors.
package bankprovider

import "encoding/json"

// Customer statuses at the provider.
const (
	StatusTermsRequired   = "terms_required"
	StatusIdentityPending = "identity_pending"
	StatusActive          = "active"
	StatusRejected        = "rejected"
)

// Customer is a user onboarded at the provider.
type Customer struct {
	ID            string `json:"id"`
	Email         string `json:"email"`
	FullName      string `json:"full_name"`
	Country       string `json:"country"`
	WalletAddress string `json:"wallet_address"`
	Chain         int64  `json:"chain"`
	Status        string `json:"status"`
	CreatedAt     string `json:"created_at"`
}

// NewCustomer is the body that creates a customer.
type NewCustomer struct {
	Email         string `json:"email"`
	FullName      string `json:"full_name"`
	Country       string `json:"country"`
	WalletAddress string `json:"wallet_address"`
	Chain         int64  `json:"chain"`
}

// Terms session statuses that are the user's decision.
const (
	TermsAccepted = "accepted"
	TermsDeclined = "declined"
)

// TermsSession is one attempt at the hosted consent page.
type TermsSession struct {
	ID         string `json:"id"`
	CustomerID string `json:"customer_id"`
	URL        string `json:"url"`
	ReturnURL  string `json:"return_url"`
	Status     string `json:"status"`
	ExpiresAt  string `json:"expires_at"`
}

// VirtualAccount is a bank account issued to a customer for pay-ins.
type VirtualAccount struct {
	ID              string `json:"id"`
	CustomerID      string `json:"customer_id"`
	Currency        string `json:"currency"`
	IBAN            string `json:"iban"`
	BIC             string `json:"bic"`
	BeneficiaryName string `json:"beneficiary_name"`
	Status          string `json:"status"`
}

// Transaction is a pay-in and its settlement, as the provider reports it.
// Raw keeps the provider's record whole: partners see it for debugging.
type Transaction struct {
	ID                string          `json:"id"`
	Type              string          `json:"type"`
	Status            string          `json:"status"` // received, settled
	Amount            string          `json:"amount"`
	Currency          string          `json:"currency"`
	DeliveredAmount   string          `json:"delivered_amount,omitempty"`
	DeliveredCurrency string          `json:"delivered_currency,omitempty"`
	TxHash            string          `json:"tx_hash,omitempty"`
	Raw               json.RawMessage `json:"-"`
}

// DepositInstruction is a one-off deposit the provider expects: pay amount,
// with reference, to the collection account before ExpiresAt.
type DepositInstruction struct {
	ID              string `json:"id"`
	CustomerID      string `json:"customer_id"`
	Currency        string `json:"currency"`
	Amount          string `json:"amount"`
	Reference       string `json:"reference"`
	IBAN            string `json:"iban"`
	BIC             string `json:"bic"`
	BeneficiaryName string `json:"beneficiary_name"`
	Status          string `json:"status"` // awaiting_funds, funded
	ExpiresAt       string `json:"expires_at"`
}

// NewDepositInstruction is the body that asks for a one-off deposit.
type NewDepositInstruction struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

// Deposit is the body of a simulated pay-in (sandbox only): to a virtual
// account, or to the collection account for a deposit instruction, with the
// reference the user typed.
type Deposit struct {
	VirtualAccountID     string `json:"virtual_account_id,omitempty"`
	DepositInstructionID string `json:"deposit_instruction_id,omitempty"`
	Amount               string `json:"amount"`
	Currency             string `json:"currency"`
	Reference            string `json:"reference,omitempty"`
}

// ErrorBody is the provider's error document.
type ErrorBody struct {
	Error struct {
		Type    string        `json:"type"`
		Message string        `json:"message"`
		Details []FieldDetail `json:"details,omitempty"`
	} `json:"error"`
}

// FieldDetail is one complaint about one field. Value echoes what was sent:
// it must never reach a partner or a log.
type FieldDetail struct {
	Field      string `json:"field"`
	Constraint string `json:"constraint"`
	Value      any    `json:"value,omitempty"`
}

// Error types the provider answers with.
const (
	TypeInvalidRequest    = "invalid_request_error"
	TypeAuthentication    = "authentication_error"
	TypeResourceMissing   = "resource_missing"
	TypeStateLost         = "sandbox_state_lost"
	TypeTermsRequired     = "terms_required"
	TypeCustomerNotActive = "customer_not_active"
	TypeInvalidState      = "invalid_state"
)
