package bank

import "net/http"

// The card provider's hosted card page (for browsers); its API is in
// NewHandler's table.

// The hosted card page (the frame is layout's). A mistake is shown with
// the form empty again: what was typed is never written back into a page.
var cardTemplate = hostedPage(`
{{define "title"}}{{if .Challenge}}Confirm it's you{{else if eq .Direction "sell"}}Get paid to your card{{else}}Pay by card{{end}}{{end}}
{{define "brand"}}Sandbox Provider{{end}}
{{define "style"}}
body{max-width:30rem}
.error{background:#fde8e8;border:1px solid #e08a8a;padding:.5rem .75rem;border-radius:6px}
label{display:block;margin-top:1rem;font-weight:600}
input{font:inherit;width:100%;box-sizing:border-box;padding:.5rem;border:1px solid #8a93a6;border-radius:6px}
.row{display:flex;gap:1rem}.row>div{flex:1}
button.apple-pay{background:#000;border-color:#000;color:#fff;width:100%;margin-top:1.5rem}
{{end}}
{{define "note"}}Sandbox Provider — test mode. No card is charged and no money moves. Use a test card: 4242 4242 4242 4242, any future expiry, any CVC.{{end}}
{{define "content"}}
{{if .Challenge}}
<h1>Confirm it's you</h1>
<p>Your bank asks you to confirm this payment of {{.Amount}} (3-D Secure, simulated).</p>
{{if .FormError}}<p class="error" role="alert">{{.FormError}}</p>{{end}}
<form method="post" action="/card/{{.SessionID}}/3ds">
<div class="actions">
<button type="submit" name="decision" value="approve" id="approve-3ds" class="primary">Approve</button>
<button type="submit" name="decision" value="fail" id="fail-3ds">Fail authentication</button>
</div>
</form>
{{else}}
{{if eq .Direction "sell"}}
<h1>Get paid to your card</h1>
<p>You are selling {{.Amount}}. Enter the card to credit.</p>
{{else}}
<h1>Pay by card</h1>
<p>You are paying {{.Amount}} for {{.CryptoLine}}.</p>
{{end}}
{{if .FormError}}<p class="error" role="alert" id="form-error">{{.FormError}}</p>{{end}}
{{if .ApplePay}}
<form method="post" action="/card/{{.SessionID}}">
<input type="hidden" name="method" value="apple_pay">
<input type="hidden" name="wallet_token" value="{{.WalletToken}}">
<button type="submit" id="apple-pay" class="apple-pay" >Pay with Apple Pay</button>
</form>
<p>Or pay by card:</p>
{{end}}
<form method="post" action="/card/{{.SessionID}}" autocomplete="on">
<input type="hidden" name="method" value="card">
<label for="card-number">Card number</label>
<input id="card-number" name="number" inputmode="numeric" autocomplete="cc-number" maxlength="23" required>
<div class="row">
<div><label for="card-expiry">Expiry (MM/YY)</label>
<input id="card-expiry" name="expiry" autocomplete="cc-exp" maxlength="7" placeholder="MM/YY" required></div>
<div><label for="card-cvc">Security code</label>
<input id="card-cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" maxlength="4" required></div>
</div>
<div class="actions">
<button type="submit" id="pay" class="primary">{{if eq .Direction "sell"}}Get paid{{else}}Pay {{.Amount}}{{end}}</button>
</div>
</form>
{{end}}
{{end}}`)

func (h *handler) renderCard(w http.ResponseWriter, p CardPage) {
	writeHTML(w, p.Status, cardTemplate, p)
}

func (h *handler) cardPage(w http.ResponseWriter, r *http.Request) {
	h.renderCard(w, h.bank.CardPageFor(r.PathValue("id")))
}

// pay takes the card form or the Apple Pay button. It logs the attempt's
// session, method and outcome: never what was typed.
func (h *handler) pay(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	p := h.bank.PayByCard(r.PathValue("id"), CardEntry{
		Method: r.PostFormValue("method"), Number: r.PostFormValue("number"), Expiry: r.PostFormValue("expiry"),
		CVC: r.PostFormValue("cvc"), Token: r.PostFormValue("wallet_token"),
	})
	h.cardAnswer(w, r, p)
}

func (h *handler) authenticate(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<10)
	decision := r.PostFormValue("decision")
	if decision != "approve" && decision != "fail" {
		p := h.bank.CardPageFor(r.PathValue("id"))
		if p.Problem == "" {
			p.Challenge, p.FormError, p.Status = true, "Choose Approve or Fail authentication.", 400
		}
		h.renderCard(w, p)
		return
	}
	h.cardAnswer(w, r, h.bank.Authenticate(r.PathValue("id"), decision == "approve"))
}

func (h *handler) cardAnswer(w http.ResponseWriter, r *http.Request, p CardPage) {
	if p.redirect == "" {
		h.renderCard(w, p)
		return
	}
	h.log.Info("card payment attempted", "card_session_id", p.SessionID, "method", p.paymentMethod)
	http.Redirect(w, r, p.redirect, http.StatusSeeOther)
}
