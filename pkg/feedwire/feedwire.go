// Package feedwire is the frame of a service's feed page as the gateway
// asks for it (issue 63): each event already written as the partner reads
// it, behind a line of what the gateway merges on, so that the gateway
// copies events rather than decode and encode them (decoding 100 events of
// about 1 KiB was four fifths of the gateway's CPU for a feed page). It
// holds no more than the frame, so the gateway links nothing of the
// services' storage. The format:
//
//	<through> <hasMore: 0 or 1> <events>\n
//	then, for each event, in place order:
//	<seq> <createdAt: Unix microseconds> <bytes>\n<the event's JSON>\n
//
// pkg/events writes it (Page.Render); the gateway reads it (Parse).
package feedwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// ContentType is the media type of a rendered feed page: what the gateway
// sends as Accept, and a service answers with.
const ContentType = "application/vnd.partnerapi.feed-page.v1"

// Event is one event of a page: its place, its time, and the JSON the
// partner reads.
type Event struct {
	Seq       int64
	CreatedAt int64 // Unix microseconds
	JSON      []byte
}

// Page is a rendered page as the gateway reads it.
type Page struct {
	Events  []Event
	Through int64
	HasMore bool
}

// AppendHeader appends a page's first line.
func AppendHeader(b []byte, through int64, hasMore bool, events int) []byte {
	b = strconv.AppendInt(b, through, 10)
	if hasMore {
		b = append(b, " 1 "...)
	} else {
		b = append(b, " 0 "...)
	}
	b = strconv.AppendInt(b, int64(events), 10)
	return append(b, '\n')
}

// AppendEvent appends an event: its line, then its JSON.
func AppendEvent(b []byte, seq, createdAtMicro int64, json []byte) []byte {
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, createdAtMicro, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(json)), 10)
	b = append(b, '\n')
	b = append(b, json...)
	return append(b, '\n')
}

// AppendEventJSON appends an event as the partner reads it: its id, type,
// time (RFC 3339, in seconds, UTC) and data, compacted. It is the one
// writer of that shape (pkg/events renders with it; the gateway, a JSON
// page of an earlier release).
func AppendEventJSON(b []byte, id, typ string, createdAt time.Time, data []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	buf.WriteString(`{"id":`)
	if err := writeString(buf, id); err != nil {
		return b, err
	}
	buf.WriteString(`,"type":`)
	if err := writeString(buf, typ); err != nil {
		return b, err
	}
	buf.WriteString(`,"createdAt":"`)
	buf.Write(createdAt.UTC().AppendFormat(buf.AvailableBuffer(), time.RFC3339))
	buf.WriteString(`","data":`)
	if err := json.Compact(buf, data); err != nil {
		return b, err
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func writeString(buf *bytes.Buffer, s string) error {
	q, err := json.Marshal(s)
	buf.Write(q)
	return err
}

// ErrOutOfShape is a page that is not one: cut short, or its counts and
// lengths do not add up.
var ErrOutOfShape = errors.New("feedwire: not a rendered feed page")

// Parse reads a rendered page of at most limit events. The events' JSON
// is not decoded: it is what a service of ours wrote; only its frame is
// checked (an object, where the lengths say). A page out of shape is
// refused whole.
func Parse(body []byte, limit int) (Page, error) {
	var p Page
	head, rest, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return p, ErrOutOfShape
	}
	f, ok := fields3(head)
	if !ok || f[0] < 0 || (f[1] != 0 && f[1] != 1) || f[2] < 0 || f[2] > int64(limit) {
		return p, ErrOutOfShape
	}
	p.Through, p.HasMore = f[0], f[1] == 1
	p.Events = make([]Event, 0, f[2])
	for range f[2] {
		var line []byte
		if line, rest, ok = bytes.Cut(rest, []byte{'\n'}); !ok {
			return p, ErrOutOfShape
		}
		e, ok := fields3(line)
		if !ok || e[0] <= 0 || e[2] < 2 || e[2] >= int64(len(rest)) || rest[0] != '{' || rest[e[2]-1] != '}' || rest[e[2]] != '\n' {
			return p, ErrOutOfShape
		}
		p.Events = append(p.Events, Event{Seq: e[0], CreatedAt: e[1], JSON: rest[:e[2]:e[2]]})
		rest = rest[e[2]+1:]
	}
	if len(rest) != 0 {
		return p, ErrOutOfShape
	}
	return p, nil
}

// fields3 reads a line of three decimal integers separated by one space
// (no sign but a leading minus, at most 19 characters each).
func fields3(line []byte) ([3]int64, bool) {
	var out [3]int64
	for i := range out {
		field, rest, found := bytes.Cut(line, []byte{' '})
		if found != (i < 2) || len(field) == 0 || len(field) > 19 || field[0] == '+' {
			return out, false
		}
		n, err := strconv.ParseInt(string(field), 10, 64)
		if err != nil {
			return out, false
		}
		out[i], line = n, rest
	}
	return out, true
}
