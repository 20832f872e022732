package bankprovider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Notifications (DESIGN §3): the provider may POST a signed notification
// that its changes feed has news, to wake the worker that follows it
// sooner. A notification carries nothing the feed does not: losing one
// loses nothing, and one that is forged, replayed or stale is refused.
//
// The signature is Stripe's shape: the header
// Provider-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">,
// under the notification secret (NotifySecret, derived from the API key
// both sides hold).

// SignatureHeader carries a notification's signature.
const SignatureHeader = "Provider-Signature"

// NotifyTolerance is how far a notification's time may be from ours.
const NotifyTolerance = 5 * time.Minute

// Notification is the body of a notification: the feed has changes after
// the change After.
type Notification struct {
	Type  string `json:"type"` // changes.available
	After string `json:"after"`
}

// NotifySecret is the secret notifications are signed with, derived from
// the provider API key (so no second secret has to be handed out).
func NotifySecret(apiKey string) []byte {
	m := hmac.New(sha256.New, []byte(apiKey))
	m.Write([]byte("partnerapi provider notifications v1"))
	return m.Sum(nil)
}

// Sign is the signature header of body, sent at at.
func Sign(secret, body []byte, at time.Time) string {
	t := strconv.FormatInt(at.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac(secret, t, body))
}

func mac(secret []byte, t string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	ErrUnsigned = errors.New("the notification is not signed, or not by the provider")
	ErrStale    = errors.New("the notification's time is more than 5 minutes from ours")
)

// Verify checks body's signature header at now: ErrUnsigned when it is
// missing, malformed or wrong, ErrStale when its time is off by more than
// NotifyTolerance.
func Verify(secret, body []byte, header string, now time.Time) error {
	var t, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			t = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(t, 10, 64)
	want, herr := hex.DecodeString(sig)
	if err != nil || herr != nil || len(want) != sha256.Size || !hmac.Equal(want, mac(secret, t, body)) {
		return ErrUnsigned
	}
	if d := now.Sub(time.Unix(unix, 0)); d > NotifyTolerance || d < -NotifyTolerance {
		return ErrStale
	}
	return nil
}
