// Package listing is what the lists of DESIGN §8 share: their query
// parameters, checked as hostile input (a bad one is 400 invalid_request
// naming it); the signed, opaque cursor of keyset pagination on
// (created_at, id), newest first, never OFFSET; and the page they answer.
// A cursor is bound to the key and the list it came from: one key's cursor
// never opens another key's records, and an edited one is refused.
package listing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
)

// Limits of a page.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Page is a list's answer, less environment (the gateway stamps it first).
type Page[T any] struct {
	Data       []T    `json:"data"`
	HasMore    bool   `json:"hasMore"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// Cursor is where a page ends: the last record's creation and id.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// Params are a list's query, checked.
type Params struct {
	Limit       int
	After       *Cursor // startingAfter
	Status      string
	Reference   string
	CreatedFrom *time.Time // inclusive
	CreatedTo   *time.Time // exclusive
}

// Lister checks the query of one list and signs its cursors.
type Lister struct {
	// Name is the list's (its route), bound into its cursors.
	Name string
	// Statuses are the values status may take.
	Statuses []string
	// Secret signs the cursors.
	Secret []byte
}

var params = map[string]bool{"limit": true, "startingAfter": true, "status": true, "reference": true, "createdFrom": true, "createdTo": true}

// Parse checks q, the list's query for the key keyID.
func (l Lister) Parse(q url.Values, keyID string) (Params, error) {
	p := Params{Limit: DefaultLimit}
	for name, values := range q {
		if !params[name] {
			return p, envelope.InvalidRequest("Unknown query parameter " + quote(name) + "; a list takes limit, startingAfter, status, reference, createdFrom and createdTo.")
		}
		if len(values) != 1 {
			return p, envelope.InvalidRequest("Query parameter " + name + " is given more than once.")
		}
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxLimit || strings.TrimLeft(v[0], "0123456789") != "" {
			return p, envelope.InvalidRequest("limit must be a whole number from 1 to 100.")
		}
		p.Limit = n
	}
	if v, ok := q["status"]; ok {
		found := false
		for _, s := range l.Statuses {
			found = found || s == v[0]
		}
		if !found {
			return p, envelope.InvalidRequest("status must be one of " + strings.Join(l.Statuses, ", ") + ".")
		}
		p.Status = v[0]
	}
	if v, ok := q["reference"]; ok {
		if !Reference(v[0]) {
			return p, envelope.InvalidRequest("reference must be 1 to 64 printable ASCII characters.")
		}
		p.Reference = v[0]
	}
	for _, b := range []struct {
		name string
		to   **time.Time
	}{{"createdFrom", &p.CreatedFrom}, {"createdTo", &p.CreatedTo}} {
		if v, ok := q[b.name]; ok {
			t, err := time.Parse(time.RFC3339, v[0])
			if err != nil || len(v[0]) > 40 {
				return p, envelope.InvalidRequest(b.name + " must be an RFC 3339 time, such as 2026-11-26T12:00:00Z.")
			}
			t = t.UTC()
			*b.to = &t
		}
	}
	if p.CreatedFrom != nil && p.CreatedTo != nil && !p.CreatedFrom.Before(*p.CreatedTo) {
		return p, envelope.InvalidRequest("createdFrom must be before createdTo.")
	}
	// A cursor goes on the list it came from: this key's, under the same
	// filters (a page of one status does not go on into another's).
	if v, ok := q["startingAfter"]; ok {
		c, ok := l.decode(v[0], keyID, p)
		if !ok {
			return p, envelope.InvalidRequest("startingAfter is not a cursor of this list, for this key and these filters: pass nextCursor from the page before, as it was, with the same status, reference, createdFrom and createdTo.")
		}
		p.After = &c
	}
	return p, nil
}

// filters is p's filters, written one way: what a cursor is bound to.
func (p Params) filters() string {
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return strconv.FormatInt(t.UnixMicro(), 10)
	}
	return p.Status + "\x00" + p.Reference + "\x00" + at(p.CreatedFrom) + "\x00" + at(p.CreatedTo)
}

// Reference reports whether s is a partner reference: 1 to 64 printable
// ASCII characters.
func Reference(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

const macBytes = 16

// Encode is c as an opaque cursor for keyID under p's filters: its
// creation (microseconds), its id and a MAC over both, the list's name,
// the key and the filters.
func (l Lister) Encode(c Cursor, keyID string, p Params) string {
	b := make([]byte, 8, 8+len(c.ID)+macBytes)
	binary.BigEndian.PutUint64(b, uint64(c.CreatedAt.UnixMicro()))
	b = append(b, c.ID...)
	b = append(b, l.mac(b, keyID, p)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (l Lister) decode(s, keyID string, p Params) (Cursor, bool) {
	if len(s) > 256 {
		return Cursor{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 8+1+macBytes {
		return Cursor{}, false
	}
	body, mac := b[:len(b)-macBytes], b[len(b)-macBytes:]
	if !hmac.Equal(mac, l.mac(body, keyID, p)) {
		return Cursor{}, false
	}
	return Cursor{CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(body[:8]))).UTC(), ID: string(body[8:])}, true
}

func (l Lister) mac(body []byte, keyID string, p Params) []byte {
	m := hmac.New(sha256.New, l.Secret)
	m.Write([]byte("list\x00" + l.Name + "\x00" + keyID + "\x00" + p.filters() + "\x00"))
	m.Write(body)
	return m.Sum(nil)[:macBytes]
}

// Where is the SQL condition and arguments of p over a table whose
// columns are key_id, status, reference and created_at, id, its
// placeholders numbered from $1 (the key). Order by created_at DESC, id
// DESC and take Limit+1 rows: the extra one says hasMore.
func (p Params) Where(keyID string) (string, []any) {
	var b strings.Builder
	args := []any{keyID}
	b.WriteString("key_id = $1")
	add := func(cond string, v ...any) {
		for _, x := range v {
			args = append(args, x)
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1)
		}
		b.WriteString(" AND " + cond)
	}
	if p.Status != "" {
		add("status = ?", p.Status)
	}
	if p.Reference != "" {
		add("reference = ?", p.Reference)
	}
	if p.CreatedFrom != nil {
		add("created_at >= ?", *p.CreatedFrom)
	}
	if p.CreatedTo != nil {
		add("created_at < ?", *p.CreatedTo)
	}
	if p.After != nil {
		add("(created_at, id) < (?, ?)", p.After.CreatedAt, p.After.ID)
	}
	return b.String(), args
}

// Finish makes the page of rows read for p (p.Limit+1 at most): each kept
// row as answer makes it, hasMore when the extra one came, and the cursor
// (at) of the last one kept, bound to p's filters.
func Finish[R, T any](l Lister, keyID string, p Params, rows []R, at func(R) Cursor, answer func(R) T) Page[T] {
	limit := p.Limit
	kept := rows[:min(len(rows), limit)]
	page := Page[T]{Data: make([]T, len(kept))}
	for i, r := range kept {
		page.Data[i] = answer(r)
	}
	if len(rows) > limit {
		page.HasMore = true
		page.NextCursor = l.Encode(at(rows[limit-1]), keyID, p)
	}
	return page
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:63] + "…"
	}
	return strconv.Quote(s)
}
