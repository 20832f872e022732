package bank

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"html/template"
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
	api.HandleFunc("POST /v1/customers", h.createCustomer)
	api.HandleFunc("GET /v1/customers/{id}", h.getCustomer)
	api.HandleFunc("POST /v1/customers/{id}/terms_sessions", h.createTermsSession)
	api.HandleFunc("GET /v1/terms_sessions/{id}", h.termsSession)
	api.HandleFunc("POST /v1/customers/{id}/virtual_accounts", h.createVirtualAccount)
	api.HandleFunc("GET /v1/virtual_accounts/{id}/transactions", h.transactions)
	api.HandleFunc("POST /v1/customers/{id}/deposit_instructions", h.createDepositInstruction)
	api.HandleFunc("GET /v1/deposit_instructions/{id}/transactions", h.depositTransactions)
	api.HandleFunc("POST /v1/sandbox/customers/{id}/identity", h.forceIdentity)
	api.HandleFunc("POST /v1/sandbox/deposits", h.deposit)
	api.HandleFunc("POST /v1/card_orders", h.createCardOrder)
	api.HandleFunc("GET /v1/card_orders/{id}", h.cardOrder)
	api.HandleFunc("POST /v1/card_orders/{id}/sessions", h.createCardSession)
	api.HandleFunc("POST /v1/sandbox/card_orders/{id}/deposit", h.cardDeposit)
	api.HandleFunc("POST /v1/payouts", h.createPayout)
	api.HandleFunc("GET /v1/payouts/by_reference/{reference}", h.payoutByReference)
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

// decode reads a JSON body; unknown fields are refused, as strict providers do.
func decode(r *http.Request, dst any) *Failure {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fail(400, "invalid_request_error", "Invalid JSON body: "+err.Error())
	}
	return nil
}

func (h *handler) createCustomer(w http.ResponseWriter, r *http.Request) {
	var in bankprovider.NewCustomer
	if f := decode(r, &in); f != nil {
		h.answer(w, false, nil, f)
		return
	}
	c, created, err := h.bank.CreateCustomer(in, r.Header.Get("Idempotency-Key"))
	if created {
		h.log.Info("customer created", "customer_id", c.ID)
	}
	h.answer(w, created, c, err)
}

func (h *handler) getCustomer(w http.ResponseWriter, r *http.Request) {
	c, err := h.bank.Customer(r.PathValue("id"))
	h.answer(w, false, c, err)
}

func (h *handler) createTermsSession(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ReturnURL string `json:"return_url"`
	}
	if f := decode(r, &in); f != nil {
		h.answer(w, false, nil, f)
		return
	}
	s, err := h.bank.CreateTermsSession(r.PathValue("id"), in.ReturnURL)
	h.answer(w, err == nil, s, err)
}

func (h *handler) termsSession(w http.ResponseWriter, r *http.Request) {
	s, err := h.bank.TermsSession(r.PathValue("id"))
	h.answer(w, false, s, err)
}

func (h *handler) createVirtualAccount(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Currency string `json:"currency"`
	}
	if f := decode(r, &in); f != nil {
		h.answer(w, false, nil, f)
		return
	}
	a, created, err := h.bank.CreateVirtualAccount(r.PathValue("id"), in.Currency)
	h.answer(w, created, a, err)
}

func (h *handler) transactions(w http.ResponseWriter, r *http.Request) {
	txs, err := h.bank.Transactions(r.PathValue("id"))
	h.answer(w, false, map[string]any{"object": "list", "data": txs}, err)
}

func (h *handler) createDepositInstruction(w http.ResponseWriter, r *http.Request) {
	var in bankprovider.NewDepositInstruction
	if f := decode(r, &in); f != nil {
		h.answer(w, false, nil, f)
		return
	}
	d, created, err := h.bank.CreateDepositInstruction(r.PathValue("id"), in, r.Header.Get("Idempotency-Key"))
	h.answer(w, created, d, err)
}

func (h *handler) depositTransactions(w http.ResponseWriter, r *http.Request) {
	txs, err := h.bank.DepositTransactions(r.PathValue("id"))
	h.answer(w, false, map[string]any{"object": "list", "data": txs}, err)
}

func (h *handler) forceIdentity(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Result string `json:"result"`
	}
	if f := decode(r, &in); f != nil {
		h.answer(w, false, nil, f)
		return
	}
	c, err := h.bank.ForceIdentity(r.PathValue("id"), in.Result)
	h.answer(w, false, c, err)
}

func (h *handler) deposit(w http.ResponseWriter, r *http.Request) {
	var in bankprovider.Deposit
	if f := decode(r, &in); f != nil {
		h.answer(w, false, nil, f)
		return
	}
	t, created, err := h.bank.Deposit(in, r.Header.Get("Idempotency-Key"))
	if err != nil {
		h.answer(w, false, nil, err)
		return
	}
	h.answer(w, created, t, nil)
}

// The hosted consent page: plain HTML, no script, usable with a keyboard and
// a screen reader.
var pageTemplate = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Problem}}Link not usable{{else}}Review and accept the terms{{end}} — Sandbox Bank</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;color:#1d2330;max-width:36rem;margin:3rem auto;padding:0 1rem}
.sandbox{background:#fff4ce;border:1px solid #e0c36c;padding:.5rem .75rem;border-radius:6px;font-size:14px}
.actions{display:flex;gap:1rem;margin-top:1.5rem}
button{font:inherit;padding:.6rem 1.4rem;border-radius:6px;border:2px solid #1d2330;background:#fff;cursor:pointer}
button.accept{background:#1f6feb;border-color:#1f6feb;color:#fff}
button:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
</style>
</head>
<body>
<main>
<p class="sandbox" role="note">Sandbox Bank — test mode. No real account is opened and no money moves.</p>
{{if .Problem}}
<h1>This link can't be used</h1>
<p>{{.Problem}}</p>
{{else}}
<h1>Review and accept the terms</h1>
<p>{{.CustomerName}}, to open an account that receives bank transfers and converts them to stablecoins,
Sandbox Bank needs your consent to its terms of service and privacy notice, and to share your
account details with the app that sent you here.</p>
<form method="post" action="/consent/{{.SessionID}}">
<div class="actions">
<button type="submit" name="decision" value="accept" class="accept">Accept</button>
<button type="submit" name="decision" value="decline">Decline</button>
</div>
</form>
{{end}}
</main>
</body>
</html>
`))

func (h *handler) renderPage(w http.ResponseWriter, st PageState) {
	writeHTML(w, st.Status, pageTemplate, st)
}

// writeHTML answers a hosted page: not cached, never framed, no script, no
// referrer. No form-action: browsers apply it to the redirect after the
// submit too, and that goes to the partner's gateway, whose address varies.
func writeHTML(w http.ResponseWriter, status int, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = t.Execute(w, data)
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
