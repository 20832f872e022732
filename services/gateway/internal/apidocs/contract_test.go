package apidocs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/services/gateway/internal/apidocs"
	"github.com/partnerpay/api/services/gateway/internal/edge"
)

// The spec's tags, in its order.
var specTags = []string{"Configuration", "Crypto deposits", "Orders", "Cards", "Bank transfers", "Virtual accounts", "Reference", "Sandbox only"}

func load(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(apidocs.Source)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return doc
}

func TestDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc := load(t)
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") || doc.Info.Version != "1.0.0" {
		t.Errorf("openapi %s, version %s; want 3.1.x and 1.0.0", doc.OpenAPI, doc.Info.Version)
	}
	var tags []string
	for _, tg := range doc.Tags {
		tags = append(tags, tg.Name)
	}
	if !slices.Equal(tags, specTags) {
		t.Errorf("tags %v, want the spec's %v", tags, specTags)
	}
	if s := doc.Components.SecuritySchemes["bearerAuth"]; s == nil || s.Value.Type != "http" || s.Value.Scheme != "bearer" {
		t.Error("no bearerAuth scheme")
	}
	for _, name := range []string{"ChainId", "IsoCurrency", "IsoCountry", "DecimalMajorUnits", "Environment", "MockFlag", "MockMoney", "ErrorEnvelope"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("shared type %s is missing", name)
		}
	}
	if c := doc.Components.Schemas["ChainId"].Value; *c.Min != 1 || *c.Max != 9007199254740991 {
		t.Errorf("ChainId bounds %v..%v", *c.Min, *c.Max)
	}
}

func TestEveryOperationIsComplete(t *testing.T) {
	t.Parallel()
	doc := load(t)
	ids := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" || ids[op.OperationID] {
				t.Errorf("%s: missing or duplicate operationId %q", where, op.OperationID)
			}
			ids[op.OperationID] = true
			if len(op.Tags) != 1 || !slices.Contains(specTags, op.Tags[0]) {
				t.Errorf("%s: tags %v, want one of the spec's", where, op.Tags)
			}
			if op.Summary == "" {
				t.Errorf("%s: no summary", where)
			}
			for status, r := range op.Responses.Map() {
				if r.Value.Description == nil || *r.Value.Description == "" {
					t.Errorf("%s %s: no description", where, status)
				}
				if !strings.HasPrefix(path, "/v1/") {
					continue // pages and documents for people: not the JSON envelope
				}
				mt := r.Value.Content.Get("application/json")
				if status[0] == '2' {
					if mt != nil && mt.Example == nil && len(mt.Examples) == 0 {
						t.Errorf("%s %s: no example", where, status)
					}
					continue
				}
				if mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/Error"+status {
					t.Errorf("%s %s: an error answer must be the ErrorEnvelope of its status (Error%s)", where, status, status)
				}
				if mt != nil && mt.Example == nil && len(mt.Examples) == 0 {
					t.Errorf("%s %s: no example", where, status)
				}
			}
			if !strings.HasPrefix(path, "/v1/") {
				if op.Security == nil || len(*op.Security) != 0 {
					t.Errorf("%s: a route outside /v1 needs no key; say so with security: []", where)
				}
				continue
			}
			for _, status := range []string{"401", "404", "429", "500"} {
				if op.Responses.Value(status) == nil {
					t.Errorf("%s: every keyed operation documents %s", where, status)
				}
			}
			if method == "POST" {
				for _, status := range []string{"400", "413"} {
					if op.Responses.Value(status) == nil {
						t.Errorf("%s: every operation with a body documents %s", where, status)
					}
				}
			}
		}
	}
}

func TestBankPayoutQuoteHasTheSpecsErrorStatuses(t *testing.T) {
	t.Parallel()
	op := load(t).Paths.Find("/v1/bank/payout/quote").Post
	if op.OperationID != "bankPayoutQuote" || op.Tags[0] != "Bank transfers" {
		t.Fatalf("operation %s under %v", op.OperationID, op.Tags)
	}
	var statuses []string
	for s := range op.Responses.Map() {
		if s[0] != '2' {
			statuses = append(statuses, s)
		}
	}
	sort.Strings(statuses)
	// The spec's, and the cross-cutting ones: not_configured, a slow body,
	// a body too large, and an Idempotency-Key's (DESIGN §2: a quote is a
	// creating POST; every request opens a new quote, DESIGN §3).
	want := []string{"400", "401", "403", "404", "408", "409", "413", "422", "429", "500"}
	if !slices.Equal(statuses, want) {
		t.Errorf("error statuses %v, want %v", statuses, want)
	}
}

// TestDocumentListsExactlyTheServedRoutes: no endpoint the gateway serves is
// missing from the document, and the document has no ghost.
func TestDocumentListsExactlyTheServedRoutes(t *testing.T) {
	t.Parallel()
	served := []string{"GET /health"}
	served = append(served, apidocs.Routes...)
	served = append(served, edge.PublicRoutes...)
	for _, r := range edge.Routes {
		served = append(served, r.Method+" "+r.Path)
	}
	var documented []string
	for path, item := range load(t).Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if !slices.Equal(served, documented) {
		t.Errorf("served %v\ndocumented %v", served, documented)
	}
}

// The error codes the document names agree with the one table in
// pkg/envelope: each ErrorNNN schema lists only codes answered with NNN,
// and every code of the table appears in the document.
func TestErrorCodesMatchTheTable(t *testing.T) {
	t.Parallel()
	doc := load(t)
	listed := map[envelope.Code]bool{}
	for name, ref := range doc.Components.Schemas {
		status, ok := strings.CutPrefix(name, "Error")
		if !ok || len(status) != 3 {
			continue
		}
		for _, code := range codeEnum(ref.Value) {
			c := envelope.Code(code)
			listed[c] = true
			want := c.Status()
			if c == envelope.CodeInvalidRequest && status == "413" {
				want = envelope.TooLarge().Status
			}
			if strconv.Itoa(want) != status {
				t.Errorf("%s lists %s, which pkg/envelope answers with %d", name, code, want)
			}
		}
	}
	for _, c := range envelope.Codes() {
		if !listed[c] && !strings.Contains(string(apidocs.Source), string(c)) {
			t.Errorf("code %s (%d) of pkg/envelope is not in the document", c, c.Status())
		}
	}
}

// codeEnum finds the enum of error.code in an error schema, wherever allOf
// or properties put it.
func codeEnum(s *openapi3.Schema) []string {
	if s == nil {
		return nil
	}
	var out []string
	if e := s.Properties["error"]; e != nil && e.Value != nil {
		if c := e.Value.Properties["code"]; c != nil && c.Value != nil {
			for _, v := range c.Value.Enum {
				out = append(out, v.(string))
			}
		}
	}
	for _, sub := range s.AllOf {
		if sub.Ref == "" { // the narrowing, not the shared envelope it narrows
			out = append(out, codeEnum(sub.Value)...)
		}
	}
	return out
}

// TestErrorSchemasAreWholeObjects: a generated client reads every error's
// code, message and fields: each ErrorNNN is a plain object of the
// envelope's shape (no allOf narrowing, which generators turn into an
// untyped code and lose message and fields).
func TestErrorSchemasAreWholeObjects(t *testing.T) {
	t.Parallel()
	doc := load(t)
	n := 0
	for name, ref := range doc.Components.Schemas {
		if status, ok := strings.CutPrefix(name, "Error"); !ok || len(status) != 3 {
			continue
		}
		n++
		s := ref.Value
		if len(s.AllOf)+len(s.OneOf)+len(s.AnyOf) != 0 || !s.Type.Is("object") {
			t.Errorf("%s: not a plain object", name)
			continue
		}
		e := s.Properties["error"]
		if e == nil || e.Value == nil || !slices.Equal(e.Value.Required, []string{"code", "message"}) {
			t.Errorf("%s: error does not require code and message", name)
			continue
		}
		for _, field := range []string{"code", "message", "fields"} {
			if e.Value.Properties[field] == nil {
				t.Errorf("%s: error.%s is not declared", name, field)
			}
		}
		if len(codeEnum(s)) == 0 {
			t.Errorf("%s: error.code has no enum", name)
		}
	}
	if n < 11 {
		t.Errorf("%d ErrorNNN schemas, want one per error status (11)", n)
	}
}

// TestEveryOneOfAnswerHasADiscriminator: an answer that takes one of
// several shapes says which by its status, so a generated client can
// switch on it.
func TestEveryOneOfAnswerHasADiscriminator(t *testing.T) {
	t.Parallel()
	doc := load(t)
	for _, name := range []string{"VirtualAccount", "FiatStatus"} {
		s := doc.Components.Schemas[name].Value
		if s.Discriminator == nil || s.Discriminator.PropertyName != "status" {
			t.Errorf("%s: no discriminator on status", name)
			continue
		}
		if len(s.OneOf) != len(s.Discriminator.Mapping) {
			t.Errorf("%s: %d members, %d mapped", name, len(s.OneOf), len(s.Discriminator.Mapping))
		}
		for value, ref := range s.Discriminator.Mapping {
			member := doc.Components.Schemas[strings.TrimPrefix(ref.Ref, "#/components/schemas/")]
			if member == nil {
				t.Errorf("%s: %s maps to %s, which does not exist", name, value, ref.Ref)
				continue
			}
			st := member.Value.Properties["status"]
			if st == nil || len(st.Value.Enum) != 1 || st.Value.Enum[0] != value {
				t.Errorf("%s: %s maps to %s, whose status is not exactly %q", name, value, ref.Ref, value)
			}
		}
	}
}

// TestLinksChainRealOperations: each link names an operation of the
// document and reads fields its answer has.
func TestLinksChainRealOperations(t *testing.T) {
	t.Parallel()
	doc := load(t)
	ops := map[string]*openapi3.Operation{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			ops[op.OperationID] = op
		}
	}
	has := func(s *openapi3.Schema, field string) bool {
		if s.Properties[field] != nil {
			return true
		}
		for _, m := range s.OneOf {
			if m.Value.Properties[field] != nil {
				return true
			}
		}
		return false
	}
	n := 0
	for _, op := range ops {
		ok := op.Responses.Value("200")
		if ok == nil || ok.Value == nil {
			continue
		}
		for name, l := range ok.Value.Links {
			n++
			target := ops[l.Value.OperationID]
			if target == nil {
				t.Errorf("%s → %s: no operation %q", op.OperationID, name, l.Value.OperationID)
				continue
			}
			body, _ := l.Value.RequestBody.(map[string]any)
			schema := target.RequestBody.Value.Content.Get("application/json").Schema.Value
			for field, v := range body {
				if schema.Properties[field] == nil {
					t.Errorf("%s → %s: %s takes no %q", op.OperationID, name, l.Value.OperationID, field)
				}
				if expr, ok := v.(string); ok && strings.HasPrefix(expr, "$response.body#/") {
					from := strings.TrimPrefix(expr, "$response.body#/")
					if !has(ok200(op).Content.Get("application/json").Schema.Value, from) {
						t.Errorf("%s → %s: the answer has no %q", op.OperationID, name, from)
					}
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("%d links, want the payout and on-ramp flows chained", n)
	}
}

func ok200(op *openapi3.Operation) *openapi3.Response { return op.Responses.Value("200").Value }

// TestOneSchemaPerRailIsTheServedOne: the document's beneficiary schema of
// each rail (SepaBeneficiary … SwiftBeneficiary) is, field for field, the
// JSON Schema GET /v1/limits serves for it (pkg/beneficiary), so a client
// generated from the document and one reading the limits see one contract.
func TestOneSchemaPerRailIsTheServedOne(t *testing.T) {
	t.Parallel()
	doc := load(t)
	for rail, name := range map[string]string{"sepa": "SepaBeneficiary", "sepa_instant": "SepaBeneficiary", "faster_payments": "FasterPaymentsBeneficiary",
		"ach": "AchBeneficiary", "wire": "WireBeneficiary", "spei": "SpeiBeneficiary", "pix": "PixBeneficiary", "swift": "SwiftBeneficiary"} {
		served := *beneficiary.SchemaOf(rail)
		served.Title = ""
		want, _ := json.Marshal(served)
		var a, b any
		if err := json.Unmarshal(want, &a); err != nil {
			t.Fatal(err)
		}
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Fatalf("no schema %s in the document", name)
		}
		documented, _ := json.Marshal(ref.Value)
		// The wire and SWIFT beneficiaries name the document's Address.
		address, _ := json.Marshal(doc.Components.Schemas["Address"].Value)
		documented = bytes.ReplaceAll(documented, []byte(`{"$ref":"#/components/schemas/Address"}`), address)
		if err := json.Unmarshal(documented, &b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s in the document is not the schema GET /v1/limits serves for %s:\n document %s\n served   %s", name, rail, documented, want)
		}
	}
	for _, r := range catalog.Rails() {
		if beneficiary.SchemaOf(r.Name) == nil {
			t.Errorf("rail %s has no beneficiary schema", r.Name)
		}
	}
}

// The document's event types are the ones the services write: the table
// of pkg/lifecycle, which GET /v1/statuses lists too.
func TestEventTypesAreTheServicesOwn(t *testing.T) {
	t.Parallel()
	doc := load(t)
	var listed []string
	for _, v := range doc.Components.Schemas["EventType"].Value.Enum {
		listed = append(listed, v.(string))
	}
	if want := lifecycle.EventTypes(); !slices.Equal(listed, want) {
		t.Errorf("EventType lists %v\nthe services write %v", listed, want)
	}
}
