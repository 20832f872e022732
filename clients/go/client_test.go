package partnerapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAnErrorIsReadWhole: a client reads code, message and fields of any
// error status, typed, and the request id to quote.
func TestAnErrorIsReadWhole(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer pk_test" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req-1")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"environment":"sandbox","error":{"code":"invalid_request","message":"The bank refused the request; see error.fields.","fields":{"email":"invalid_format"}}}`))
	}))
	defer srv.Close()
	c, err := NewPartnerClient(srv.URL, "pk_test")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.CreateFiatAccountWithResponse(context.Background(), &CreateFiatAccountParams{}, CreateFiatAccountJSONRequestBody{Email: "ada@example.com", FullName: "Ada Lovelace", Country: "DE", Chain: 84532})
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON400 == nil || resp.JSON400.Error.Code != Error400ErrorCodeInvalidRequest || (*resp.JSON400.Error.Fields)["email"] != "invalid_format" {
		t.Fatalf("JSON400 = %+v", resp.JSON400)
	}
	e := ErrorOf(resp.HTTPResponse, resp.Body)
	if e == nil || e.Status != 400 || e.Code != ErrorEnvelopeErrorCodeInvalidRequest || e.Fields["email"] != "invalid_format" ||
		e.RequestID != "req-1" || e.Environment != Sandbox {
		t.Fatalf("ErrorOf = %+v", e)
	}
	if got := e.Error(); got != "partner API: 400 invalid_request: The bank refused the request; see error.fields. (request req-1)" {
		t.Errorf("Error() = %q", got)
	}
	if ErrorOf(&http.Response{StatusCode: 200}, nil) != nil {
		t.Error("a 200 is an error")
	}
}
