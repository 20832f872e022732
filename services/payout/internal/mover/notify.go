package mover

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
)

// NotificationPath is where the bank provider's signed notifications
// arrive (through the gateway's public route of the same path).
const NotificationPath = "/provider/notifications"

// maxNotification bounds a notification's body.
const maxNotification = 64 << 10

var (
	errUnsignedNotification = envelope.New(envelope.CodeUnauthorized, "The notification is not signed by the bank provider.")
	errStaleNotification    = envelope.New(envelope.CodeInvalidRequest, "The notification's signature time is more than 5 minutes from ours; it is refused.")
)

// NotificationRoute adds POST /provider/notifications to mux: a
// notification signed by the provider (bankprovider.Verify, under secret)
// wakes the worker's changes queue at once (wake), so a change reaches its
// payout sooner than the next read of the feed; an unsigned one is 401, a
// stale one 400, and neither changes anything. A notification carries no
// change itself: the feed is read, as always, from its place.
func NotificationRoute(mux *http.ServeMux, env environment.Name, secret []byte, wake func(), now func() time.Time, log *slog.Logger) {
	mux.HandleFunc("POST "+NotificationPath, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxNotification))
		if err != nil {
			envelope.Write(w, string(env), envelope.TooLarge())
			return
		}
		switch err := bankprovider.Verify(secret, body, r.Header.Get(bankprovider.SignatureHeader), now()); {
		case errors.Is(err, bankprovider.ErrStale):
			log.Warn("a stale provider notification was refused")
			envelope.Write(w, string(env), errStaleNotification)
			return
		case err != nil:
			log.Warn("an unsigned provider notification was refused")
			envelope.Write(w, string(env), errUnsignedNotification)
			return
		}
		wake()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"environment":"`+string(env)+`","received":true}`)
	})
}

// WakeChanges reads the provider's changes feed at once.
func (w *Worker) WakeChanges() { w.changes.Wake() }

// WakeHandOver runs the hand-over queue at once (a deposit was just
// recorded).
func (w *Worker) WakeHandOver() { w.handOver.Wake() }
