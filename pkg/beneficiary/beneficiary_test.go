package beneficiary

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/partnerpay/api/pkg/envelope"
)

// sample is a beneficiary sent on a rail, and what is known of it.
type sample struct {
	rail, country, body string
	// kind: "valid" passes both the schema and Check; "shape" fails both
	// (the schema can say it); "rule" passes the schema and fails Check (a
	// check digit, an IBAN's country length, the quote's country: what a
	// schema cannot say).
	kind string
	// message is Check's refusal, for the invalid ones.
	message string
}

const addr = `"address":{"line1":"1 Main St","city":"Springfield","postalCode":"62701","country":"US"}`

// Published examples: the IBANs of the ECBS registry's examples, routing
// numbers of the Federal Reserve Bank of Boston and JPMorgan Chase,
// Banxico's example CLABE, Receita Federal's example CPF and CNPJ.
var samples = []sample{
	{"sepa", "DE", `{"name":"Ada Lovelace","iban":"DE89370400440532013000"}`, "valid", ""},
	{"sepa", "DE", `{"name":"Ada Lovelace","iban":"de89 3704 0044 0532 0130 00","bic":"DEUTDEFF"}`, "valid", ""},
	{"sepa_instant", "FR", `{"name":"Smith & Sons","iban":"FR1420041010050500013M02606"}`, "valid", ""},
	{"sepa", "DE", `{"name":"Ada","iban":"FR1420041010050500013M02606"}`, "rule", "beneficiary.iban is an account in FR; this quote pays out to DE."},
	{"sepa", "DE", `{"name":"Ada","iban":"DE89370400440532013001"}`, "rule", "beneficiary.iban has an invalid checksum; check it for a mistyped character."},
	{"sepa", "DE", `{"name":"Ada","iban":"DE89370400440532013000","bic":"NWBKGB2L"}`, "rule", "beneficiary.bic is a bank in GB, not in the IBAN's country DE."},
	// Territories that issue no IBANs of their own take their issuer's:
	// Guadeloupe and Réunion FR, the Åland Islands FI, Jersey GB.
	{"sepa", "GP", `{"name":"Aimé Césaire","iban":"FR1420041010050500013M02606"}`, "valid", ""},
	{"sepa_instant", "RE", `{"name":"Ada","iban":"FR1420041010050500013M02606","bic":"BNPAFRPP"}`, "valid", ""},
	{"sepa", "AX", `{"name":"Ada","iban":"FI2112345600000785"}`, "valid", ""},
	{"sepa", "JE", `{"name":"Ada","iban":"GB29NWBK60161331926819"}`, "valid", ""},
	{"sepa", "GP", `{"name":"Ada","iban":"DE89370400440532013000"}`, "rule", "beneficiary.iban is an account in DE; this quote pays out to GP, whose accounts carry FR IBANs."},
	{"swift", "JE", `{"name":"Ada","bic":"NWBKGB2L","iban":"GB29NWBK60161331926819",` + addr + `}`, "valid", ""},
	{"sepa", "DE", `{"name":"Ada","iban":"DE89370400440532013000","bic":"deutdeff"}`, "shape", "beneficiary.bic must be a BIC (ISO 9362): 8 or 11 upper-case letters and digits, the bank's country in the 5th and 6th."},
	{"sepa", "DE", `{"name":"Ada","iban":"DE89370400440532013000","sortCode":"601613"}`, "shape", `Unknown field "beneficiary.sortCode".`},
	{"sepa", "DE", `{"iban":"DE89370400440532013000"}`, "shape", "beneficiary.name is required: the account holder's name."},
	{"sepa", "DE", `{"name":"Ada\u0007","iban":"DE89370400440532013000"}`, "shape", "beneficiary.name must not hold control characters."},
	{"faster_payments", "GB", `{"name":"Ada","sortCode":"60-16-13","accountNumber":"31926819"}`, "valid", ""},
	{"faster_payments", "GB", `{"name":"Ada","sortCode":"6016","accountNumber":"31926819"}`, "shape", "beneficiary.sortCode must be a UK sort code: 6 digits, as 123456, 12-34-56 or 12 34 56."},
	{"faster_payments", "GB", `{"name":"Ada","sortCode":"601613","accountNumber":"3192681"}`, "shape", "beneficiary.accountNumber must be the account number: 8 digits for a UK account, 4 to 17 digits for a US one."},
	{"faster_payments", "GB", `{"name":"Ada","iban":"GB29NWBK60161331926819"}`, "shape", `Unknown field "beneficiary.iban".`},
	{"ach", "US", `{"name":"Ada","routingNumber":"021000021","accountNumber":"123456789","accountType":"checking"}`, "valid", ""},
	{"ach", "US", `{"name":"Ada","routingNumber":"021000022","accountNumber":"123456789","accountType":"checking"}`, "rule", "beneficiary.routingNumber has an invalid checksum; check it for a mistyped digit."},
	{"ach", "US", `{"name":"Ada","routingNumber":"021000021","accountNumber":"123456789","accountType":"brokerage"}`, "shape", "beneficiary.accountType must be checking or savings."},
	{"ach", "US", `{"name":"Ada","iban":"DE89370400440532013000"}`, "shape", `Unknown field "beneficiary.iban".`},
	{"wire", "US", `{"name":"Ada","routingNumber":"011000015","accountNumber":"0001234567",` + addr + `}`, "valid", ""},
	{"wire", "US", `{"name":"Ada","routingNumber":"011000015","accountNumber":"0001234567"}`, "shape", "beneficiary.address is required: the holder's postal address: line1, line2 (optional), city, region (optional), postalCode, country."},
	{"wire", "US", `{"name":"Ada","routingNumber":"011000015","accountNumber":"0001234567","address":{"line1":"1 Main St","city":"Springfield","postalCode":"62701","country":"XX"}}`, "rule", "beneficiary.address.country must be a known ISO 3166-1 alpha-2 country code."},
	{"spei", "MX", `{"name":"Ada","clabe":"032180000118359719"}`, "valid", ""},
	{"spei", "MX", `{"name":"Ada","clabe":"032180000118359718"}`, "rule", "beneficiary.clabe has an invalid checksum; check it for a mistyped digit."},
	{"spei", "MX", `{"name":"Ada","clabe":"03218000011835971"}`, "shape", "beneficiary.clabe must be a CLABE: 18 digits with a valid check digit."},
	{"pix", "BR", `{"name":"Ana","pixKey":"ana@example.com.br","taxId":"52998224725"}`, "valid", ""},
	{"pix", "BR", `{"name":"Ana","pixKey":"+5511998765432","taxId":"11222333000181"}`, "valid", ""},
	{"pix", "BR", `{"name":"Ana","pixKey":"123e4567-e89b-12d3-a456-426614174000","taxId":"52998224725"}`, "valid", ""},
	{"pix", "BR", `{"name":"Ana","pixKey":"52998224725","taxId":"52998224725"}`, "valid", ""},
	{"pix", "BR", `{"name":"Ana","pixKey":"ana@example.com.br","taxId":"52998224724"}`, "rule", "beneficiary.taxId has an invalid checksum; check it for a mistyped digit."},
	{"pix", "BR", `{"name":"Ana","pixKey":"52998224724","taxId":"52998224725"}`, "rule", "beneficiary.pixKey has an invalid checksum; check it for a mistyped digit."},
	{"pix", "BR", `{"name":"Ana","pixKey":"+4411998765432","taxId":"52998224725"}`, "shape", "beneficiary.pixKey must be a PIX key: a CPF or CNPJ (digits only), an e-mail address, a +55 phone number in E.164, or a random key (a lower-case UUID)."},
	{"swift", "JP", `{"name":"Ada","bic":"MHCBJPJT","accountNumber":"1234567",` + addr + `}`, "valid", ""},
	{"swift", "CH", `{"name":"Ada","bic":"UBSWCHZH80A","iban":"CH9300762011623852957",` + addr + `}`, "valid", ""},
	{"swift", "JP", `{"name":"Ada","bic":"DEUTDEFF","accountNumber":"1234567",` + addr + `}`, "rule", "beneficiary.bic is a bank in DE; this quote pays out to JP."},
	{"swift", "JP", `{"name":"Ada","bic":"MHCBJPJT",` + addr + `}`, "shape", "Send exactly one of beneficiary.iban and beneficiary.accountNumber."},
	{"swift", "CH", `{"name":"Ada","bic":"UBSWCHZH80A","iban":"CH9300762011623852957","accountNumber":"1",` + addr + `}`, "shape", "Send exactly one of beneficiary.iban and beneficiary.accountNumber."},
}

// The schema GET /v1/limits publishes for each rail and the checks Check
// enforces agree: a JSON Schema validator (not ours) reading the served
// schema takes every valid sample and every sample only a check digit or a
// country refuses, and refuses every sample of the wrong shape; Check takes
// the valid ones only, with a message naming the field.
func TestTheServedSchemaAndTheEnforcedRulesAgree(t *testing.T) {
	t.Parallel()
	compiled := map[string]*jsonschema.Schema{}
	for _, rail := range []string{"sepa", "sepa_instant", "faster_payments", "ach", "wire", "spei", "pix", "swift"} {
		b, err := json.Marshal(SchemaOf(rail))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(rail+".json", doc); err != nil {
			t.Fatal(err)
		}
		if compiled[rail], err = c.Compile(rail + ".json"); err != nil {
			t.Fatalf("%s: the served schema does not compile: %v", rail, err)
		}
	}
	seen := map[string]bool{}
	for _, s := range samples {
		seen[s.rail] = true
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s.body)))
		if err != nil {
			t.Fatalf("%s", s.body)
		}
		schemaErr := compiled[s.rail].Validate(doc)
		if (schemaErr == nil) != (s.kind != "shape") {
			t.Errorf("%s %s (%s): the schema says %v", s.rail, s.body, s.kind, schemaErr)
		}
		got, err := Check(s.rail, s.country, []byte(s.body))
		if s.kind == "valid" {
			if err != nil {
				t.Errorf("%s %s: %v", s.rail, s.body, err)
			} else if got.Name == "" || got.Account == "" || len(got.Fields) == 0 {
				t.Errorf("%s %s: checked as %+v", s.rail, s.body, got)
			}
			continue
		}
		e, ok := envelope.From(err)
		if !ok || e.Code != envelope.CodeInvalidRequest || e.Message != s.message {
			t.Errorf("%s %s: %v, want %q", s.rail, s.body, err, s.message)
		}
	}
	if len(seen) != 8 {
		t.Errorf("samples cover %d of the 8 rail names", len(seen))
	}
}

// The canonical form is what is stored and compared: codes and numbers as
// the rail writes them, whatever form they were typed in.
func TestCanonicalFormsAndMasks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ rail, country, body, fields, masked string }{
		{"sepa", "DE", `{"name":"Ada","iban":"de89 3704 0044 0532 0130 00"}`, `{"name":"Ada","iban":"DE89370400440532013000"}`, `{"name":"Ada","account":"3000"}`},
		{"faster_payments", "GB", `{"accountNumber":"31926819","sortCode":"60 16 13","name":"Ada"}`, `{"name":"Ada","sortCode":"601613","accountNumber":"31926819"}`, `{"name":"Ada","account":"6819"}`},
		{"spei", "MX", `{"name":"Ada","clabe":"032180000118359719"}`, `{"name":"Ada","clabe":"032180000118359719"}`, `{"name":"Ada","account":"9719"}`},
		{"wire", "US", `{"name":"Ada","routingNumber":"011000015","accountNumber":"0001234567","address":{"line1":"1 Main St","city":"Springfield","postalCode":"62701","country":"us"}}`,
			`{"name":"Ada","routingNumber":"011000015","accountNumber":"0001234567","address":{"line1":"1 Main St","city":"Springfield","postalCode":"62701","country":"US"}}`, `{"name":"Ada","account":"4567"}`},
	} {
		got, err := Check(tt.rail, tt.country, []byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		masked, _ := json.Marshal(got.Masked())
		if string(got.Fields) != tt.fields || string(masked) != tt.masked {
			t.Errorf("%s: fields %s masked %s", tt.body, got.Fields, masked)
		}
	}
}

// Validate reports every problem, in the order the checks run, each with
// its field and code; the first is Check's refusal, word for word; a
// valid beneficiary has none, and is what Check makes of it.
func TestValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	type want struct{ field, code string }
	for _, tt := range []struct {
		rail, country, body string
		want                []want
	}{
		{"sepa", "DE", `{"name":"Ada","iban":"DE89370400440532013000"}`, nil},
		{"sepa", "DE", `{"iban":"DE89370400440532013001","bic":"NWBKGB2L"}`,
			[]want{{"beneficiary.name", Required}, {"beneficiary.iban", InvalidChecksum}}},
		{"sepa", "DE", `{"name":"Ada","iban":"FR1420041010050500013M02606","bic":"NWBKGB2L"}`,
			[]want{{"beneficiary.iban", CountryMismatch}, {"beneficiary.bic", CountryMismatch}}},
		{"sepa", "DE", `{"name":"` + strings.Repeat("a", 141) + `","iban":"DE89370400440532013000","sortCode":"601613","colour":"red"}`,
			[]want{{"beneficiary.sortCode", UnknownField}, {"beneficiary.colour", UnknownField}, {"beneficiary.name", TooLong}}},
		{"sepa", "DE", `{"name":7,"iban":"DE89370400440532013000"}`,
			[]want{{"beneficiary.name", InvalidFormat}, {"beneficiary.name", Required}}},
		{"ach", "US", `{"name":"Ada","routingNumber":"021000022","accountNumber":"12","accountType":"brokerage"}`,
			[]want{{"beneficiary.routingNumber", InvalidChecksum}, {"beneficiary.accountNumber", InvalidFormat}, {"beneficiary.accountType", InvalidFormat}}},
		{"wire", "US", `{"name":"Ada","routingNumber":"011000015","accountNumber":"0001234567","address":{"line1":"","city":"Springfield","zip":"1","country":"XX"}}`,
			[]want{{"beneficiary.address.zip", UnknownField}, {"beneficiary.address.line1", Required}, {"beneficiary.address.postalCode", Required},
				{"beneficiary.address.country", InvalidFormat}}},
		{"swift", "GB", `{"name":"Ada","bic":"DEUTDEFF","address":{"line1":"1 Main St","city":"London","postalCode":"N1","country":"GB"}}`,
			[]want{{"beneficiary.bic", CountryMismatch}, {"beneficiary.iban", Required}}},
		{"pix", "BR", `{"name":"Ada","pixKey":"nope","taxId":"12345678900"}`,
			[]want{{"beneficiary.pixKey", InvalidFormat}, {"beneficiary.taxId", InvalidChecksum}}},
		{"spei", "MX", `null`, []want{{"beneficiary", Required}}},
		{"spei", "MX", `[1]`, []want{{"beneficiary", InvalidFormat}}},
	} {
		c, found, err := Validate(tt.rail, tt.country, []byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		var got []want
		for _, p := range found {
			got = append(got, want{p.Field, p.Code})
			if p.Message == "" {
				t.Errorf("%s: %s without a message", tt.body, p.Field)
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %s:\n got %v\nwant %v", tt.rail, tt.body, got, tt.want)
		}
		checked, cerr := Check(tt.rail, tt.country, []byte(tt.body))
		switch {
		case len(found) == 0 && (cerr != nil || !reflect.DeepEqual(checked, c)):
			t.Errorf("%s: Check %+v %v, Validate %+v", tt.body, checked, cerr, c)
		case len(found) > 0 && !strings.Contains(tt.body, `"name":7`) && (cerr == nil || cerr.Error() != envelope.InvalidRequest(found[0].Message).Error()):
			t.Errorf("%s: Check refuses with %v; Validate's first problem is %q", tt.body, cerr, found[0].Message)
		}
	}
}

// AccountOf finds each rail's account identifier in the stored fields,
// and a SWIFT payout's IBAN when it has no account number.
func TestAccountOfReadsTheRailsField(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ rail, fields, want string }{
		{"sepa", `{"name":"Ada","iban":"DE89370400440532013000","bic":"COBADEFFXXX"}`, "DE89370400440532013000"},
		{"spei", `{"name":"Ada","clabe":"032180000118359719"}`, "032180000118359719"},
		{"pix", `{"name":"Ada","pixKey":"ada+pay@example.com","taxId":"11144477735"}`, "ada+pay@example.com"},
		{"ach", `{"name":"Ada","routingNumber":"021000021","accountNumber":"123456789","accountType":"checking"}`, "123456789"},
		{"wire", `{"name":"Ada","address":{"line1":"1 Main St","accountNumber":"x"},"accountNumber":"987654321"}`, "987654321"},
		{"swift", `{"name":"Ada","bic":"COBADEFFXXX","iban":"DE89370400440532013000","address":{"line1":"x"}}`, "DE89370400440532013000"},
		{"swift", `{"iban":"DE89370400440532013000","accountNumber":"12345"}`, "12345"},
		{"sepa", `{"name":"A\u00efda","iban":"DE89\u0033700"}`, "DE893700"},
		{"sepa", `not json`, ""},
		{"sepa", `{"name":"Ada"}`, ""},
	} {
		if got := AccountOf(tt.rail, []byte(tt.fields)); got != tt.want {
			t.Errorf("%s %s: %q, want %q", tt.rail, tt.fields, got, tt.want)
		}
	}
}
