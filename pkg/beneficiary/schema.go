package beneficiary

// Schema is a JSON Schema (draft 2020-12) object, as GET /v1/limits
// publishes each rail's beneficiary and the OpenAPI document names it. It
// says every shape Check takes; the check digits, a country's IBAN length
// and which countries exist are Check's alone (the descriptions say so).
type Schema struct {
	Title                string             `json:"title,omitempty"`
	Description          string             `json:"description,omitempty"`
	Type                 string             `json:"type"`
	Required             []string           `json:"required,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	AdditionalProperties *bool              `json:"additionalProperties,omitempty"`
	OneOf                []*Schema          `json:"oneOf,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	MinLength            int                `json:"minLength,omitempty"`
	MaxLength            int                `json:"maxLength,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
}

var closed = new(bool) // additionalProperties: false

func str(desc string, minLen, maxLen int, pattern string) *Schema {
	return &Schema{Type: "string", Description: desc, MinLength: minLen, MaxLength: maxLen, Pattern: pattern}
}

func object(title string, required []string, props map[string]*Schema) *Schema {
	return &Schema{Title: title, Type: "object", Required: required, Properties: props, AdditionalProperties: closed}
}

// The patterns are the checks' own (beneficiary.go, pkg/bankaccount).
var (
	nameSchema = func() *Schema {
		return str(describe["beneficiary.name"], 1, maxName, nameChars.String())
	}
	ibanSchema = func() *Schema {
		return str(describe["beneficiary.iban"]+"; its country's length and check digits are checked, and its country must be the quote's", 0, 0, ibanShape.String())
	}
	bicSchema = func(extra string) *Schema {
		return str(describe["beneficiary.bic"]+extra, 0, 0, `^[A-Z]{6}[A-Z0-9]{2}([A-Z0-9]{3})?$`)
	}
	routingSchema = func() *Schema {
		return str(describe["beneficiary.routingNumber"]+" (weights 3, 7, 1)", 0, 0, `^[0-9]{9}$`)
	}
	usAccountSchema = func() *Schema {
		return str("the account number: 4 to 17 digits", 0, 0, `^[0-9]{4,17}$`)
	}
	addressSchema = func() *Schema {
		return object("Address", []string{"line1", "city", "postalCode", "country"}, map[string]*Schema{
			"line1":      str(describe["beneficiary.address.line1"], 1, 140, nameChars.String()),
			"line2":      str(describe["beneficiary.address.line2@schema"], 1, 140, nameChars.String()),
			"city":       str(describe["beneficiary.address.city"], 1, 70, nameChars.String()),
			"region":     str(describe["beneficiary.address.region@schema"], 1, 70, nameChars.String()),
			"postalCode": str(describe["beneficiary.address.postalCode"], 0, 0, postalCode.String()),
			"country":    str(describe["beneficiary.address.country"]+" (an assigned code)", 0, 0, alpha2.String()),
		})
	}
)

// schemas are the rails' beneficiaries, by rail.
var schemas = map[string]*Schema{
	"sepa": object("SepaBeneficiary", []string{"name", "iban"}, map[string]*Schema{
		"name": nameSchema(), "iban": ibanSchema(), "bic": bicSchema("; optional; its country must be the IBAN's"),
	}),
	"faster_payments": object("FasterPaymentsBeneficiary", []string{"name", "sortCode", "accountNumber"}, map[string]*Schema{
		"name":          nameSchema(),
		"sortCode":      str(describe["beneficiary.sortCode"]+"; answered as 6 digits", 0, 0, `^[0-9]{2}[- ]?[0-9]{2}[- ]?[0-9]{2}$`),
		"accountNumber": str("the account number: 8 digits", 0, 0, `^[0-9]{8}$`),
	}),
	"ach": object("AchBeneficiary", []string{"name", "routingNumber", "accountNumber", "accountType"}, map[string]*Schema{
		"name": nameSchema(), "routingNumber": routingSchema(), "accountNumber": usAccountSchema(),
		"accountType": {Type: "string", Description: "the kind of account", Enum: []string{"checking", "savings"}},
	}),
	"wire": object("WireBeneficiary", []string{"name", "routingNumber", "accountNumber", "address"}, map[string]*Schema{
		"name": nameSchema(), "routingNumber": routingSchema(), "accountNumber": usAccountSchema(), "address": addressSchema(),
	}),
	"spei": object("SpeiBeneficiary", []string{"name", "clabe"}, map[string]*Schema{
		"name": nameSchema(), "clabe": str(describe["beneficiary.clabe"]+" (weights 3, 7, 1, mod 10)", 0, 0, `^[0-9]{18}$`),
	}),
	"pix": object("PixBeneficiary", []string{"name", "pixKey", "taxId"}, map[string]*Schema{
		"name": nameSchema(),
		"pixKey": str(describe["beneficiary.pixKey"]+"; a CPF or CNPJ key's check digits are checked", 1, 77,
			`^([0-9]{11}|[0-9]{14}|\+55[1-9][0-9]{9,10}|[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`),
		"taxId": str(describe["beneficiary.taxId"], 0, 0, `^([0-9]{11}|[0-9]{14})$`),
	}),
	"swift": {
		Title: "SwiftBeneficiary", Type: "object", Required: []string{"name", "bic", "address"}, AdditionalProperties: closed,
		Properties: map[string]*Schema{
			"name": nameSchema(), "bic": bicSchema("; its country must be the quote's"), "iban": ibanSchema(),
			"accountNumber": str(describe["beneficiary.accountNumber@swift"], 0, 0, swiftAccount.String()),
			"address":       addressSchema(),
		},
		OneOf: []*Schema{{Type: "object", Required: []string{"iban"}}, {Type: "object", Required: []string{"accountNumber"}}},
	},
}

func init() { schemas["sepa_instant"] = schemas["sepa"] }

// SchemaOf is the JSON Schema of rail's beneficiary; nil for no rail.
// Callers must not modify it.
func SchemaOf(rail string) *Schema { return schemas[rail] }

// AccountField names, per rail, the field whose last four characters an
// answer shows.
func AccountField(rail string) string {
	switch rail {
	case "spei":
		return "clabe"
	case "pix":
		return "pixKey"
	case "sepa", "sepa_instant":
		return "iban"
	}
	return "accountNumber" // swift: iban or accountNumber
}
