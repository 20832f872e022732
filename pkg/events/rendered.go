package events

import (
	"fmt"

	"github.com/partnerpay/api/pkg/feedwire"
)

// Render writes p as the gateway asks for it (pkg/feedwire): each event
// as the partner reads it (feedwire.AppendEventJSON), behind its place
// and time.
func (p Page) Render() ([]byte, error) {
	b := feedwire.AppendHeader(make([]byte, 0, 64+len(p.Events)*1200), p.Through, p.HasMore, len(p.Events))
	var e []byte
	for _, ev := range p.Events {
		var err error
		if e, err = feedwire.AppendEventJSON(e[:0], ev.ID, ev.Type, ev.CreatedAt, ev.Data); err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		b = feedwire.AppendEvent(b, ev.Seq, ev.CreatedAt.UnixMicro(), e)
	}
	return b, nil
}
