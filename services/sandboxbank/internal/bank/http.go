package bank

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/serve"
)

// NewHandler serves the provider API (under /v1, behind the provider key)
// and the hosted consent and card pages (under /consent and /card, for
// browsers).
func NewHandler(b *Bank, key string, log *slog.Logger) http.Handler {
	h := &handler{bank: b, log: log}
	api := http.NewServeMux()
	idem := func(r *http.Request) string { return r.Header.Get("Idempotency-Key") }
	api.HandleFunc("POST /v1/customers", call(h, func(r *http.Request, in bankprovider.NewCustomer) (any, bool, error) {
		c, created, err := b.CreateCustomer(in, idem(r))
		if created {
			h.log.Info("customer created", "customer_id", c.ID)
		}
		return c, created, err
	}))
	api.HandleFunc("GET /v1/customers/{id}", read(h, "id", b.Customer))
	api.HandleFunc("POST /v1/customers/{id}/terms_sessions", call(h, func(r *http.Request, in returning) (any, bool, error) {
		s, err := b.CreateTermsSession(r.PathValue("id"), in.ReturnURL)
		return s, err == nil, err
	}))
	api.HandleFunc("GET /v1/terms_sessions/{id}", read(h, "id", b.TermsSession))
	api.HandleFunc("POST /v1/customers/{id}/virtual_accounts", call(h, func(r *http.Request, in struct {
		Currency string `json:"currency"`
	}) (any, bool, error) {
		return b.CreateVirtualAccount(r.PathValue("id"), in.Currency)
	}))
	api.HandleFunc("GET /v1/virtual_accounts/{id}/transactions", read(h, "id", listOf(b.Transactions)))
	api.HandleFunc("POST /v1/customers/{id}/deposit_instructions", call(h, func(r *http.Request, in bankprovider.NewDepositInstruction) (any, bool, error) {
		return b.CreateDepositInstruction(r.PathValue("id"), in, idem(r))
	}))
	api.HandleFunc("GET /v1/deposit_instructions/{id}/transactions", read(h, "id", listOf(b.DepositTransactions)))
	api.HandleFunc("POST /v1/sandbox/customers/{id}/identity", call(h, func(r *http.Request, in struct {
		Result string `json:"result"`
	}) (any, bool, error) {
		c, err := b.ForceIdentity(r.PathValue("id"), in.Result)
		return c, false, err
	}))
	api.HandleFunc("POST /v1/sandbox/deposits", call(h, func(r *http.Request, in bankprovider.Deposit) (any, bool, error) {
		return b.Deposit(in, idem(r))
	}))
	api.HandleFunc("POST /v1/card_orders", call(h, func(r *http.Request, in bankprovider.NewCardOrder) (any, bool, error) {
		o, created, err := b.CreateCardOrder(in, idem(r))
		if created {
			h.log.Info("card order opened", "card_order_id", o.ID, "direction", o.Direction)
		}
		return o, created, err
	}))
	api.HandleFunc("GET /v1/card_orders/{id}", read(h, "id", b.CardOrder))
	api.HandleFunc("POST /v1/card_orders/{id}/sessions", call(h, func(r *http.Request, in returning) (any, bool, error) {
		s, err := b.CreateCardSession(r.PathValue("id"), in.ReturnURL)
		return s, err == nil, err
	}))
	api.HandleFunc("POST /v1/sandbox/card_orders/{id}/deposit", call(h, func(r *http.Request, _ struct{}) (any, bool, error) {
		o, err := b.SimulateCardDeposit(r.PathValue("id"))
		return o, false, err
	}))
	api.HandleFunc("POST /v1/payouts", call(h, func(r *http.Request, in bankprovider.NewPayout) (any, bool, error) {
		p, created, err := b.CreatePayout(in)
		if created {
			h.log.Info("payout taken over", "payout_id", p.ID, "rail", in.Rail)
		}
		return p, created, err
	}))
	api.HandleFunc("GET /v1/payouts/by_reference/{reference}", read(h, "reference", b.PayoutByReference))
	api.HandleFunc("GET /v1/changes", func(w http.ResponseWriter, r *http.Request) {
		limit := 100
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				n = -1
			}
			limit = n
		}
		changes, more, err := b.Changes(r.URL.Query().Get("after"), limit)
		h.answer(w, false, map[string]any{"object": "list", "data": changes, "has_more": more}, err)
	})
	api.HandleFunc("POST /v1/payee_checks", call(h, func(r *http.Request, in bankprovider.PayeeCheck) (any, bool, error) {
		res, err := b.CheckPayee(in)
		return res, false, err
	}))
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, fail(404, "invalid_request_error", "Unrecognized request URL ("+r.Method+" "+r.URL.Path+").").Body)
	})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", serve.Health)
	mux.HandleFunc("GET /consent/{id}", h.page)
	mux.HandleFunc("POST /consent/{id}", h.decide)
	mux.HandleFunc("GET /card/{id}", h.cardPage)
	mux.HandleFunc("POST /card/{id}", h.pay)
	mux.HandleFunc("POST /card/{id}/3ds", h.authenticate)
	mux.Handle("/v1/", requireKey(key, slow(b.cfg.Latency, api)))
	return mux
}

// slow answers after latency, as a provider under load does.
func slow(latency time.Duration, next http.Handler) http.Handler {
	if latency <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(latency):
			next.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

type handler struct {
	bank *Bank
	log  *slog.Logger
}

func requireKey(key string, next http.Handler) http.Handler {
	want := []byte("Bearer " + key)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeJSON(w, 401, fail(401, bankprovider.TypeAuthentication, "Invalid API key provided.").Body)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (h *handler) answer(w http.ResponseWriter, created bool, v any, err error) {
	var f *Failure
	switch {
	case errors.As(err, &f):
		writeJSON(w, f.Status, f.Body)
	case err != nil:
		h.log.Error("sandbox bank failed", "err", err)
		writeJSON(w, 500, fail(500, "api_error", "Something went wrong on the sandbox bank's end.").Body)
	case created:
		writeJSON(w, 201, v)
	default:
		writeJSON(w, 200, v)
	}
}

// call is a provider API call with a JSON body: decoded into In (a bad
// body is refused before run sees it), run, and answered (201 when it
// created something).
func call[In any](h *handler, run func(r *http.Request, in In) (out any, created bool, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in In
		if f := decode(r, &in); f != nil {
			h.answer(w, false, nil, f)
			return
		}
		out, created, err := run(r, in)
		h.answer(w, created, out, err)
	}
}

// read is a provider API read of the record the path's param names.
func read[T any](h *handler, param string, get func(string) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := get(r.PathValue(param))
		h.answer(w, false, v, err)
	}
}

// listOf answers a read's records as the provider's list object.
func listOf[T any](get func(string) ([]T, error)) func(string) (any, error) {
	return func(id string) (any, error) {
		items, err := get(id)
		return map[string]any{"object": "list", "data": items}, err
	}
}

// returning is the body of a call that opens a hosted page.
type returning struct {
	ReturnURL string `json:"return_url"`
}

// decode reads a JSON body; unknown fields are refused, as strict providers do.
func decode(r *http.Request, dst any) *Failure {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fail(400, "invalid_request_error", "Invalid JSON body: "+err.Error())
	}
	return nil
}

// The hosted consent page (the frame is layout's).
var pageTemplate = hostedPage(`
{{define "title"}}Review and accept the terms{{end}}
{{define "brand"}}Sandbox Bank{{end}}
{{define "style"}}{{end}}
{{define "note"}}Sandbox Bank — test mode. No real account is opened and no money moves.{{end}}
{{define "content"}}
<h1>Review and accept the terms</h1>
<p>{{.CustomerName}}, to open an account that receives bank transfers and converts them to stablecoins,
Sandbox Bank needs your consent to its terms of service and privacy notice, and to share your
account details with the app that sent you here.</p>
<form method="post" action="/consent/{{.SessionID}}">
<div class="actions">
<button type="submit" name="decision" value="accept" class="accept primary">Accept</button>
<button type="submit" name="decision" value="decline">Decline</button>
</div>
</form>
{{end}}`)

func (h *handler) renderPage(w http.ResponseWriter, st PageState) {
	writeHTML(w, st.Status, pageTemplate, st)
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	h.renderPage(w, h.bank.Page(r.PathValue("id")))
}

func (h *handler) decide(w http.ResponseWriter, r *http.Request) {
	decision := r.PostFormValue("decision")
	if decision != "accept" && decision != "decline" {
		h.renderPage(w, PageState{Status: 400, Problem: "Choose Accept or Decline."})
		return
	}
	to, st := h.bank.Decide(r.PathValue("id"), decision == "accept")
	if st.Problem != "" {
		h.renderPage(w, st)
		return
	}
	h.log.Info("terms answered", "session_id", st.SessionID, "decision", decision)
	http.Redirect(w, r, to, http.StatusSeeOther)
}
