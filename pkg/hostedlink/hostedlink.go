// Package hostedlink is what the consent and card order services share about
// a provider's hosted page: the partner's returnUrl rule, the signed state a
// link carries through the browser back to the gateway's public return
// route, and the short page a person sees there.
//
// The state names one minted attempt and a deadline, under an HMAC only the
// service can make: the browser carries it, and cannot forge or extend it.
// What the user decided is never in it: the service reads that back from
// the provider.
package hostedlink

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/kit/endpoint"
	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// ReturnLife is how long the state in a return address stays good: the
// provider's link lives five minutes, and a user may take a little longer
// to click through.
const ReturnLife = 15 * time.Minute

// MaxReturnURL is the longest returnUrl accepted.
const MaxReturnURL = 2048

// maxState bounds a state before it is decoded.
const maxState = 256

// Return failures, shown to a person in a browser.
var (
	ErrBadState  = envelope.InvalidRequest("This return link is not valid.")
	ErrLateState = envelope.New(envelope.CodeReturnLinkExpired, "This return link has expired. Go back to the app and start again.")
	ErrUsedState = envelope.New(envelope.CodeReturnLinkExpired, "This return link was already used. Go back to the app to continue.")
	ErrOldState  = envelope.New(envelope.CodeReturnLinkExpired, "A newer link was made for this step, so this one no longer counts. Go back to the app to continue.")
)

// ErrReturnURL is the answer to a returnUrl that breaks ValidReturnURL.
var ErrReturnURL = envelope.InvalidRequest("returnUrl must be an https URL of at most 2048 characters, without user info (plain http only to a loopback host, in sandbox).")

// Signer makes and checks states with one secret.
type Signer struct {
	Secret []byte
	Now    func() time.Time
}

// Sign makes the state for attempt, good until ReturnLife from now.
func (s Signer) Sign(attempt string) string {
	payload := attempt + "." + strconv.FormatInt(s.Now().Add(ReturnLife).Unix(), 10)
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(s.mac([]byte(payload)))
}

// ReturnAddress is base (the gateway's public return route) carrying the
// state for attempt.
func (s Signer) ReturnAddress(base, attempt string) string {
	return base + "?state=" + url.QueryEscape(s.Sign(attempt))
}

func (s Signer) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.Secret)
	m.Write(payload)
	return m.Sum(nil)
}

// Verify answers the attempt a state names: ErrBadState if it is not one
// of ours, ErrLateState past its deadline.
func (s Signer) Verify(state string) (attempt string, err error) {
	if len(state) > maxState {
		return "", ErrBadState
	}
	p64, sig64, ok := strings.Cut(state, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(sig64)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(sig, s.mac(payload)) {
		return "", ErrBadState
	}
	attempt, until, ok := strings.Cut(string(payload), ".")
	deadline, err := strconv.ParseInt(until, 10, 64)
	if !ok || err != nil {
		return "", ErrBadState
	}
	if s.Now().Unix() > deadline {
		return "", ErrLateState
	}
	return attempt, nil
}

// ValidReturnURL is DESIGN §4's rule: https, or plain http to a loopback
// host in sandbox; at most 2048 characters; no user info. Anything else
// would make the return an open redirect or a credential leak.
func ValidReturnURL(env environment.Name, raw string) bool {
	if len(raw) > MaxReturnURL {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		return env == environment.Sandbox && loopback(u.Hostname())
	}
	return false
}

func loopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WithQuery is the partner's return URL (checked by ValidReturnURL when the
// link was minted) with the outcome's parameters added.
func WithQuery(returnURL string, params ...string) string {
	u, _ := url.Parse(returnURL)
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

var page = template.Must(template.New("return").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;color:#1d2330;max-width:36rem;margin:3rem auto;padding:0 1rem}</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
</main>
</body>
</html>
`))

// WritePage answers a short page a person reads on the way back: no script,
// not cached, never framed, no referrer.
func WritePage(w http.ResponseWriter, status int, title, message string) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	return page.Execute(w, struct{ Title, Message string }{title, message})
}

// Redirect sends the browser on to the partner's return URL.
func Redirect(w http.ResponseWriter, to string) {
	w.Header().Set("Location", to)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusSeeOther)
}

// ReturnRequest is what the browser brings back from the hosted page: the
// signed state. Whatever else its query says (a "result" a provider may
// add) is the browser's word and is not read.
type ReturnRequest struct{ State string }

// Handler serves a public return route (GET, through the gateway, no key):
// e gets a ReturnRequest; encode writes its answer (a redirect or a page);
// a failure is shown as a page a person can read, with its code in the
// header the gateway reads. Only an unexpected failure is logged.
func Handler(e endpoint.Endpoint, encode httptransport.EncodeResponseFunc, log *slog.Logger) http.Handler {
	return httptransport.NewServer(e,
		func(_ context.Context, r *http.Request) (any, error) {
			return ReturnRequest{State: r.URL.Query().Get("state")}, nil
		},
		encode,
		httptransport.ServerBefore(kithttp.CarryRequestID),
		httptransport.ServerErrorEncoder(func(ctx context.Context, err error, w http.ResponseWriter) {
			e, known := envelope.From(err)
			if !known {
				log.ErrorContext(ctx, "return failed", "err", err, "request_id", obs.RequestID(ctx))
			}
			w.Header().Set(partner.HeaderErrorCode, string(e.Code))
			_ = WritePage(w, e.Status, "We could not finish this step", e.Message)
		}))
}
