package bankprovider

import (
	"errors"

	"github.com/partnerpay/api/pkg/envelope"
)

// apiFields names the provider's fields as the partner API does.
var apiFields = map[string]string{
	"email":                  "email",
	"full_name":              "fullName",
	"country":                "country",
	"wallet_address":         "walletAddress",
	"chain":                  "chain",
	"currency":               "currency",
	"amount":                 "amount",
	"virtual_account_id":     "virtualAccountId",
	"deposit_instruction_id": "depositId",
	"reference":              "reference",
	"result":                 "result",
}

// ErrStateLost is the partner's answer when the sandbox bank was restarted
// and lost a record: said plainly, rather than half-answered.
var ErrStateLost = envelope.New(envelope.CodeSandboxReset,
	"The sandbox bank was restarted and has lost this record (it keeps its state in memory); create it again.")

// ToAPI maps a provider error to the partner's: a refusal naming fields, a
// sandbox reset, or err itself (unexpected: internal on the wire, logged in
// full by the error encoder).
func ToAPI(err error) error {
	if e, ok := Refusal(err); ok {
		return e
	}
	if IsType(err, TypeStateLost) {
		return ErrStateLost
	}
	return err
}

// Refusal maps a provider refusal that names fields to the partner's 400
// invalid_request with error.fields: field names and constraint labels only.
// The values the provider echoes are dropped here, so they can reach neither
// the wire nor a log. ok is false for anything else, which the caller treats
// as internal (and logs).
func Refusal(err error) (e *envelope.Error, ok bool) {
	var pe *Error
	if !errors.As(err, &pe) || pe.Body.Error.Type != TypeInvalidRequest || len(pe.Body.Error.Details) == 0 {
		return nil, false
	}
	fields := make(map[string]string, len(pe.Body.Error.Details))
	for _, d := range pe.Body.Error.Details {
		name, known := apiFields[d.Field]
		if !known {
			name = "provider." + label(d.Field)
		}
		fields[name] = label(d.Constraint)
	}
	e = envelope.New(envelope.CodeInvalidRequest, "The bank refused the request; see error.fields.")
	e.Fields = fields
	return e, true
}

// label keeps a constraint label to [a-z0-9_], at most 64 characters, so a
// provider cannot smuggle a value through it.
func label(s string) string {
	if len(s) == 0 || len(s) > 64 {
		return "invalid"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return "invalid"
		}
	}
	return s
}
