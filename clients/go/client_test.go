package partnerapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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

// A follower waits, never stops: a 429 is asked again after its
// Retry-After and a 500 after a backoff, with the same cursor, and the
// next page comes; a 400 ends it.
func TestAFollowerWaitsOutA429AndA500(t *testing.T) {
	t.Parallel()
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.URL.Query().Get("startingAfter"))
		w.Header().Set("Content-Type", "application/json")
		switch len(calls) {
		case 1:
			_, _ = w.Write([]byte(`{"environment":"sandbox","data":[{"id":"evt_00000000000000000000000000000001","type":"payout.processing","createdAt":"2026-11-29T12:00:00Z","data":{"object":{}}}],"hasMore":false,"nextCursor":"c1"}`))
		case 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"environment":"sandbox","error":{"code":"rate_limited","message":"Too many requests"}}`))
		case 3:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"environment":"sandbox","error":{"code":"internal","message":"Internal error"}}`))
		case 4:
			_, _ = w.Write([]byte(`{"environment":"sandbox","data":[{"id":"evt_00000000000000000000000000000002","type":"payout.completed","createdAt":"2026-11-29T12:00:01Z","data":{"object":{}}}],"hasMore":false,"nextCursor":"c2"}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"environment":"sandbox","error":{"code":"invalid_request","message":"startingAfter is not a cursor of this feed"}}`))
		}
	}))
	defer srv.Close()
	c, err := NewPartnerClient(srv.URL, "pk_test")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var end error
	for page, err := range c.FollowEvents(context.Background(), nil, 10*time.Millisecond) {
		if err != nil {
			end = err
			break
		}
		for _, e := range page.Data {
			got = append(got, e.Id)
		}
	}
	if len(got) != 2 || got[1] != "evt_00000000000000000000000000000002" {
		t.Errorf("events %v, want both pages' (the 429 and the 500 waited out)", got)
	}
	if want := []string{"", "c1", "c1", "c1", "c2"}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("cursors asked %q, want %q: the cursor kept through the 429 and the 500", calls, want)
	}
	if e, ok := end.(*APIError); !ok || e.Status != 400 {
		t.Errorf("the follower ended with %v, want the 400", end)
	}
}
