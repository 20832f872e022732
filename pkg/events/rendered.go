package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/partnerpay/api/pkg/feedwire"
)

// Render writes p as the gateway asks for it (pkg/feedwire): each event
// as the partner reads it ({"id","type","createdAt" in RFC 3339 seconds,
// "data"}, compact), behind its place and time.
func (p Page) Render() ([]byte, error) {
	b := feedwire.AppendHeader(make([]byte, 0, 64+len(p.Events)*1200), p.Through, p.HasMore, len(p.Events))
	var e bytes.Buffer
	for _, ev := range p.Events {
		e.Reset()
		if err := renderEvent(&e, ev); err != nil {
			return nil, err
		}
		b = feedwire.AppendEvent(b, ev.Seq, ev.CreatedAt.UnixMicro(), e.Bytes())
	}
	return b, nil
}

// renderEvent writes e as the partner reads it.
func renderEvent(b *bytes.Buffer, e Stored) error {
	id, err := json.Marshal(e.ID)
	if err != nil {
		return err
	}
	typ, err := json.Marshal(e.Type)
	if err != nil {
		return err
	}
	b.WriteString(`{"id":`)
	b.Write(id)
	b.WriteString(`,"type":`)
	b.Write(typ)
	b.WriteString(`,"createdAt":"`)
	b.WriteString(e.CreatedAt.UTC().Format(time.RFC3339))
	b.WriteString(`","data":`)
	if err := json.Compact(b, e.Data); err != nil {
		return fmt.Errorf("event %s: data: %w", e.ID, err)
	}
	b.WriteByte('}')
	return nil
}
