package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A service's feed page as the gateway asks for it (Accept: RenderedType):
// each event already written as the partner reads it, behind a line of
// what the gateway merges on, so that the gateway copies events rather
// than decode and encode them (issue 63: decoding 100 events of about
// 1 KiB was four fifths of the gateway's CPU for a feed page). The format:
//
//	<through> <hasMore: 0 or 1> <events>\n
//	then, for each event, in place order:
//	<seq> <createdAt: Unix microseconds> <bytes>\n<the event's JSON>\n
//
// The event's JSON is {"id","type","createdAt" (RFC 3339, seconds),"data"},
// compact. A service answers JSON (Page) to any other request, so a
// gateway and services of different releases still understand each other.

// RenderedType is the media type of a rendered feed page.
const RenderedType = "application/vnd.partnerapi.feed-page.v1"

// Rendered is one event of a rendered page: its place, its time, and the
// JSON the partner reads.
type Rendered struct {
	Seq       int64
	CreatedAt int64 // Unix microseconds
	JSON      []byte
}

// RenderedPage is a rendered page as the gateway reads it.
type RenderedPage struct {
	Events  []Rendered
	Through int64
	HasMore bool
}

// Render writes p in the rendered format.
func (p Page) Render() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(64 + len(p.Events)*1200)
	b.WriteString(strconv.FormatInt(p.Through, 10))
	b.WriteString(map[bool]string{true: " 1 ", false: " 0 "}[p.HasMore])
	b.WriteString(strconv.Itoa(len(p.Events)))
	b.WriteByte('\n')
	var e bytes.Buffer
	for _, ev := range p.Events {
		e.Reset()
		if err := renderEvent(&e, ev); err != nil {
			return nil, err
		}
		b.WriteString(strconv.FormatInt(ev.Seq, 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(ev.CreatedAt.UnixMicro(), 10))
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(e.Len()))
		b.WriteByte('\n')
		b.Write(e.Bytes())
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
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

// ErrRendered is a rendered page that is not one: cut short, or its
// counts and lengths do not add up.
var ErrRendered = errors.New("events: not a rendered feed page")

// ParseRendered reads a rendered page of at most limit events. The
// events' JSON is not decoded: it is what a service of ours wrote
// (Render); only its frame is checked (an object, where the lengths say).
func ParseRendered(body []byte, limit int) (RenderedPage, error) {
	var p RenderedPage
	head, rest, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return p, ErrRendered
	}
	f, ok := fields3(head)
	if !ok || f[0] < 0 || (f[1] != 0 && f[1] != 1) || f[2] < 0 || f[2] > int64(limit) {
		return p, ErrRendered
	}
	p.Through, p.HasMore = f[0], f[1] == 1
	p.Events = make([]Rendered, 0, f[2])
	for range f[2] {
		var line []byte
		if line, rest, ok = bytes.Cut(rest, []byte{'\n'}); !ok {
			return p, ErrRendered
		}
		e, ok := fields3(line)
		if !ok || e[0] <= 0 || e[2] < 2 || e[2] >= int64(len(rest)) || rest[0] != '{' || rest[e[2]-1] != '}' || rest[e[2]] != '\n' {
			return p, ErrRendered
		}
		p.Events = append(p.Events, Rendered{Seq: e[0], CreatedAt: e[1], JSON: rest[:e[2]:e[2]]})
		rest = rest[e[2]+1:]
	}
	if len(rest) != 0 {
		return p, ErrRendered
	}
	return p, nil
}

// fields3 reads a line of three decimal integers separated by one space.
func fields3(line []byte) ([3]int64, bool) {
	var out [3]int64
	for i := range out {
		end := bytes.IndexByte(line, ' ')
		if i == 2 {
			end = len(line)
		}
		if end <= 0 || end > 19 {
			return out, false
		}
		n, neg := int64(0), line[0] == '-'
		digits := line[:end]
		if neg {
			digits = digits[1:]
		}
		if len(digits) == 0 {
			return out, false
		}
		for _, c := range digits {
			if c < '0' || c > '9' {
				return out, false
			}
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		out[i] = n
		if i < 2 {
			line = line[end+1:]
		}
	}
	return out, true
}
