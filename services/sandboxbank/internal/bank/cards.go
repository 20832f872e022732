package bank

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
)

// The card side of the sandbox provider (DESIGN §7): orders opened by the
// orders service, the hosted card page that takes a test card or the Apple
// Pay button, a 3-D Secure step, settlement on the testnet, and the
// simulated stablecoin deposit of a sell. Card numbers, expiry and CVC are
// checked here and forgotten: nothing keeps or logs them.

// Card order statuses: the API's own (lifecycle), as the provider reports them.
const (
	cardAwaitingPayment = "awaiting_payment"
	cardAwaitingDeposit = "awaiting_deposit"
	cardProcessing      = "processing"
	cardCompleted       = "completed"
	cardFailed          = "failed"
	cardExpired         = "expired"
)

// Failure reasons.
const (
	reasonDeclined       = "card_declined"
	reasonAuthentication = "authentication_failed"
	reasonFunds          = "insufficient_funds"
	reasonExpiredCard    = "expired_card"
)

// Test cards (DESIGN §7; 0069 as Stripe's): the outcome each one has. Any
// other number is refused on the page: a sandbox takes no real card.
const challenge = "3ds"

var testCards = map[string]string{
	"4242424242424242": "",
	"4000000000000002": reasonDeclined,
	"4000000000003220": challenge,
	"4000000000009995": reasonFunds,
	"4000000000000069": reasonExpiredCard,
}

// ApplePayToken is the test wallet token the sandbox Apple Pay button sends.
const ApplePayToken = "tok_applepay_sandbox"

type cardOrder struct {
	bankprovider.CardOrder
	in      bankprovider.NewCardOrder
	expires time.Time
}

type cardSession struct {
	bankprovider.CardSession
	returnURL string
	expires   time.Time
	used      bool   // a payment was attempted with it
	pending   string // the method waiting on its 3-D Secure step
}

// CreateCardOrder opens an order; the same Idempotency-Key answers the same
// order.
func (b *Bank) CreateCardOrder(in bankprovider.NewCardOrder, idempotencyKey string) (bankprovider.CardOrder, bool, error) {
	var details []bankprovider.FieldDetail
	if in.Reference == "" || len(in.Reference) > 64 {
		details = append(details, bankprovider.FieldDetail{Field: "reference", Constraint: "invalid_length", Value: in.Reference})
	}
	if in.Direction != "buy" && in.Direction != "sell" {
		details = append(details, bankprovider.FieldDetail{Field: "direction", Constraint: "invalid_value", Value: in.Direction})
	}
	if !walletRe.MatchString(in.WalletAddress) {
		details = append(details, bankprovider.FieldDetail{Field: "wallet_address", Constraint: "invalid_format", Value: in.WalletAddress})
	}
	if !settlementChains[in.Chain] {
		details = append(details, bankprovider.FieldDetail{Field: "chain", Constraint: "unsupported_chain", Value: in.Chain})
	}
	if (in.CryptoAmount == "") == (in.FiatAmount == "") {
		details = append(details, bankprovider.FieldDetail{Field: "fiat_amount", Constraint: "exactly_one_amount"})
	}
	for _, m := range in.PaymentMethods {
		if m != "card" && m != "apple_pay" {
			details = append(details, bankprovider.FieldDetail{Field: "payment_methods", Constraint: "invalid_value", Value: m})
		}
	}
	expires, err := time.Parse(time.RFC3339, in.ExpiresAt)
	if err != nil {
		details = append(details, bankprovider.FieldDetail{Field: "expires_at", Constraint: "invalid_format", Value: in.ExpiresAt})
	}
	if len(details) > 0 {
		return bankprovider.CardOrder{}, false, invalid(details...)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if id, ok := b.idem["card_order:"+idempotencyKey]; ok && idempotencyKey != "" {
		return b.cardOrders[id].CardOrder, false, nil
	}
	o := &cardOrder{in: in, expires: expires}
	o.CardOrder = bankprovider.CardOrder{ID: b.newID("co"), Reference: in.Reference, Direction: in.Direction,
		Status: cardAwaitingPayment, ExpiresAt: expires.UTC().Format(time.RFC3339)}
	if in.Direction == "sell" {
		o.Status = cardAwaitingDeposit
		o.DepositAddress = "0x" + randomHex(20)
	}
	b.cardOrders[o.ID] = o
	if idempotencyKey != "" {
		b.idem["card_order:"+idempotencyKey] = o.ID
	}
	return o.CardOrder, true, nil
}

func randomHex(n int) string {
	r := make([]byte, n)
	_, _ = rand.Read(r)
	return hex.EncodeToString(r)
}

// cardOrder finds an order and brings an unpaid one past its expiry to
// expired. The caller holds b.mu.
func (b *Bank) cardOrder(id string) (*cardOrder, error) {
	o, ok := b.cardOrders[id]
	if !ok {
		return nil, b.missing("card order", id)
	}
	if (o.Status == cardAwaitingPayment || o.Status == cardAwaitingDeposit) && !b.now().Before(o.expires) {
		o.Status = cardExpired
	}
	return o, nil
}

// CardOrder reads an order as the provider reports it.
func (b *Bank) CardOrder(id string) (bankprovider.CardOrder, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, err := b.cardOrder(id)
	if err != nil {
		return bankprovider.CardOrder{}, err
	}
	return o.CardOrder, nil
}

// CreateCardSession mints a hosted card page link for the order; every
// earlier link of the order that is still open dies now.
func (b *Bank) CreateCardSession(orderID, returnURL string) (bankprovider.CardSession, error) {
	u, err := url.Parse(returnURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bankprovider.CardSession{}, invalid(bankprovider.FieldDetail{Field: "return_url", Constraint: "invalid_url", Value: returnURL})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, err := b.cardOrder(orderID)
	if err != nil {
		return bankprovider.CardSession{}, err
	}
	for _, old := range b.cardSessions {
		if old.CardOrderID == o.ID && old.Status == "open" {
			old.Status = "superseded"
		}
	}
	now := b.now()
	s := &cardSession{returnURL: returnURL, expires: now.Add(b.cfg.LinkTTL)}
	s.CardSession = bankprovider.CardSession{ID: b.newID("cps"), CardOrderID: o.ID, Status: "open", ExpiresAt: s.expires.Format(time.RFC3339)}
	s.URL = strings.TrimSuffix(b.cfg.PublicURL, "/") + "/card/" + s.ID
	b.cardSessions[s.ID] = s
	return s.CardSession, nil
}

// SimulateCardDeposit is the user's stablecoin deposit for a sell: the
// order is processing at once and completed (the card credited) after the
// settlement delay. A second call answers the order as it is.
func (b *Bank) SimulateCardDeposit(orderID string) (bankprovider.CardOrder, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, err := b.cardOrder(orderID)
	if err != nil {
		return bankprovider.CardOrder{}, err
	}
	switch {
	case o.Direction != "sell":
		return bankprovider.CardOrder{}, fail(409, bankprovider.TypeInvalidState, "Only a sell order takes a stablecoin deposit.")
	case o.Status == cardAwaitingDeposit:
		o.Status, o.TxHash = cardProcessing, "0x"+randomHex(32)
		if o.PaymentMethod == "" {
			// The user has not named the card to credit on the page: the
			// sandbox credits its test card.
			o.PaymentMethod = "card"
		}
		b.later(func() {
			if o.Status == cardProcessing {
				o.Status = cardCompleted
			}
		})
	case o.Status == cardExpired || o.Status == cardFailed:
		return bankprovider.CardOrder{}, fail(409, bankprovider.TypeInvalidState, "The order is "+o.Status+": it no longer takes a deposit.")
	}
	return o.CardOrder, nil
}

// later runs f under b.mu after the settlement delay.
func (b *Bank) later(f func()) {
	time.AfterFunc(b.cfg.SettlementDelay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		f()
	})
}

// CardPage is what the hosted card page shows for a link.
type CardPage struct {
	SessionID     string
	Direction     string
	Amount        string // as the order was opened: "100 EUR" or "50 USDC"
	CryptoLine    string
	ApplePay      bool
	Challenge     bool // the 3-D Secure step is waiting
	FormError     string
	Problem       string // why the link cannot be used; empty when it can
	Status        int
	redirect      string
	paymentMethod string
}

// WalletToken is what the page's Apple Pay button sends.
func (CardPage) WalletToken() string { return ApplePayToken }

// usableCard checks a link. The caller holds b.mu.
func (b *Bank) usableCard(sessionID string) (*cardSession, *cardOrder, CardPage) {
	p := CardPage{SessionID: sessionID, Status: 200}
	s, ok := b.cardSessions[sessionID]
	if !ok {
		if f := b.missing("card session", sessionID); f.Status == 410 {
			p.Problem, p.Status = "The sandbox provider was restarted since this link was made, and has forgotten it. Go back to the app and ask for a new link.", 410
		} else {
			p.Problem, p.Status = "This payment link is not valid. Go back to the app and ask for a new link.", 404
		}
		return nil, nil, p
	}
	o, _ := b.cardOrder(s.CardOrderID)
	switch {
	case s.used:
		p.Problem, p.Status = "This link was already used. Go back to the app to see how your order stands.", 410
	case s.Status == "superseded":
		p.Problem, p.Status = "A newer link was made for this order, so this one no longer works. Go back to the app and use the new one.", 410
	case !b.now().Before(s.expires):
		p.Problem, p.Status = "This link has expired: payment links last five minutes. Go back to the app and ask for a new link.", 410
	case o.Status == cardExpired:
		p.Problem, p.Status = "This order has expired. Go back to the app and start a new one.", 410
	case o.Status != cardAwaitingPayment && o.Status != cardAwaitingDeposit, o.Direction == "sell" && o.PaymentMethod != "":
		p.Problem, p.Status = "This order needs nothing more from you. Go back to the app to see how it stands.", 409
	}
	if p.Problem != "" {
		return nil, nil, p
	}
	p.Direction, p.Challenge = o.Direction, s.pending != ""
	if o.in.FiatAmount != "" {
		p.Amount = o.in.FiatAmount + " " + o.in.FiatCurrency
	} else {
		p.Amount = o.in.CryptoAmount + " " + o.in.CryptoCurrency + " (in " + o.in.FiatCurrency + ")"
	}
	p.CryptoLine = o.in.CryptoCurrency + " to " + o.in.WalletAddress
	for _, m := range o.in.PaymentMethods {
		p.ApplePay = p.ApplePay || (m == "apple_pay" && o.Direction == "buy")
	}
	return s, o, p
}

// CardPageFor checks a hosted card page link.
func (b *Bank) CardPageFor(sessionID string) CardPage {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _, p := b.usableCard(sessionID)
	return p
}

// CardEntry is what the page's form sent: a card, or the Apple Pay token.
type CardEntry struct {
	Method  string // card or apple_pay
	Number  string
	Expiry  string // MM/YY
	CVC     string
	Token   string
	Approve bool // the 3-D Secure step's answer
}

// PayByCard takes the page's form: it checks the card (or token), answers
// with the page again (a mistake to correct, or the 3-D Secure step), or
// settles the attempt and answers where to send the browser (p.redirect).
// The card number is checked and dropped: nothing keeps it.
func (b *Bank) PayByCard(sessionID string, e CardEntry) CardPage {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, o, p := b.usableCard(sessionID)
	if p.Problem != "" || s.pending != "" {
		if p.Problem == "" {
			p.FormError, p.Status = "Finish the 3-D Secure step first.", 409
		}
		return p
	}
	var outcome string
	switch e.Method {
	case "apple_pay":
		if !p.ApplePay || e.Token != ApplePayToken {
			p.FormError, p.Status = "Apple Pay is not available for this order.", 422
			return p
		}
	case "card":
		var problem string
		if outcome, problem = b.checkCard(e); problem != "" {
			p.FormError, p.Status = problem, 422
			return p
		}
	default:
		p.FormError, p.Status = "Choose how to pay.", 422
		return p
	}
	if outcome == challenge {
		s.pending = e.Method
		p.Challenge = true
		return p
	}
	return b.settleAttempt(s, o, p, e.Method, outcome)
}

// Authenticate is the 3-D Secure step's answer.
func (b *Bank) Authenticate(sessionID string, approve bool) CardPage {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, o, p := b.usableCard(sessionID)
	if p.Problem != "" {
		return p
	}
	if s.pending == "" {
		p.FormError, p.Status = "There is no 3-D Secure step waiting for this payment.", 409
		return p
	}
	reason := ""
	if !approve {
		reason = reasonAuthentication
	}
	return b.settleAttempt(s, o, p, s.pending, reason)
}

// settleAttempt uses the link up and records the attempt's outcome (reason
// empty: approved). An approved buy is processing and settles on the
// testnet after the settlement delay; a sell has its card to credit.
func (b *Bank) settleAttempt(s *cardSession, o *cardOrder, p CardPage, method, reason string) CardPage {
	s.used, s.pending, s.Status = true, "", "used"
	o.PaymentMethod = method
	switch {
	case reason != "":
		o.Status, o.FailureReason = cardFailed, reason
	case o.Direction == "buy":
		o.Status = cardProcessing
		b.later(func() {
			if o.Status == cardProcessing {
				o.Status, o.TxHash = cardCompleted, "0x"+randomHex(32)
			}
		})
	}
	p.redirect, p.paymentMethod = s.returnURL, method
	return p
}

// checkCard checks what was typed: a well-formed number (Luhn), a future
// expiry, a CVC; then that it is a test card. It answers the card's
// outcome, or what to correct.
func (b *Bank) checkCard(e CardEntry) (outcome, problem string) {
	number := strings.NewReplacer(" ", "", "-", "").Replace(e.Number)
	if len(number) < 12 || len(number) > 19 || !digits(number) || !luhn(number) {
		return "", "Check the card number."
	}
	month, year, ok := parseExpiry(e.Expiry)
	if !ok {
		return "", "Enter the expiry as MM/YY."
	}
	now := b.now()
	if year < now.Year() || (year == now.Year() && month < int(now.Month())) {
		return "", "This card has expired: check the expiry date."
	}
	if n := len(e.CVC); n < 3 || n > 4 || !digits(e.CVC) {
		return "", "Enter the 3 or 4 digit security code."
	}
	outcome, ok = testCards[number]
	if !ok {
		return "", "This is the sandbox: no real card is charged. Use a test card, such as 4242 4242 4242 4242."
	}
	return outcome, ""
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func luhn(number string) bool {
	sum := 0
	for i := 0; i < len(number); i++ {
		d := int(number[len(number)-1-i] - '0')
		if i%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// parseExpiry reads MM/YY (or MM/YYYY).
func parseExpiry(s string) (month, year int, ok bool) {
	mm, yy, found := strings.Cut(strings.ReplaceAll(s, " ", ""), "/")
	if !found || len(mm) < 1 || len(mm) > 2 || (len(yy) != 2 && len(yy) != 4) || !digits(mm) || !digits(yy) {
		return 0, 0, false
	}
	for _, c := range mm {
		month = month*10 + int(c-'0')
	}
	for _, c := range yy {
		year = year*10 + int(c-'0')
	}
	if len(yy) == 2 {
		year += 2000
	}
	return month, year, month >= 1 && month <= 12
}
