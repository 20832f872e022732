package consent

import (
	"log/slog"

	"github.com/partnerpay/api/pkg/format"
)

// What each operation may log: ids, never a link (it is a bearer
// capability), a state or a return address.

// LogAttrs of a link request: the session id.
func (r LinkRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("consent_session_id", format.LogID(sessionPrefix, r.ConsentSessionID))}
}

// LogAttrs of a status request: the session id.
func (r StatusRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("consent_session_id", format.LogID(sessionPrefix, r.ConsentSessionID))}
}

// LogAttrs of a browser's return: the session and the provider's outcome.
func (r Returned) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("consent_session_id", r.SessionID), slog.String("result", r.Result)}
}
