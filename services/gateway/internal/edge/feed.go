package edge

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/feedwire"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// GET /v1/events (DESIGN §9): one feed over the four services that own
// records. Each service keeps its own feed, placing its events in commit
// order (pkg/events); the gateway's cursor carries each service's place,
// signed, and a page asks every service concerned for a page after its
// place, at once, and merges them by time, each service's in its order.
// The cursor moves past what the page answered and no further: a service
// that did not answer keeps its place (its events come later, none lost),
// and the others keep flowing.

// UpstreamFeed is the events feed: the gateway merges the services' feeds.
const UpstreamFeed = "events"

// feedSources are the services of the feed, in the cursor's order.
var feedSources = []string{UpstreamPayout, UpstreamFiat, UpstreamConsent, UpstreamOrders}

// feedSource is one service's feed: its target and guarded transport.
type feedSource struct {
	name   string
	target *url.URL
	rt     http.RoundTripper
	guard  *guarded // its circuit
}

type feed struct {
	g       *Gateway
	sources []feedSource
	secret  []byte // signs cursors; derived from the internal token
	types   map[string]string
}

func newFeed(g *Gateway, sources []feedSource, internalToken string) *feed {
	m := hmac.New(sha256.New, []byte(internalToken))
	m.Write([]byte("partnerapi events cursor v1"))
	f := &feed{g: g, sources: sources, secret: m.Sum(nil), types: map[string]string{}}
	for _, k := range lifecycle.EventKinds() {
		f.types[k.Prefix+".*"] = k.Service
	}
	for _, t := range lifecycle.EventTypes() {
		f.types[t] = f.types[t[:strings.LastIndexByte(t, '.')]+".*"]
	}
	return f
}

// feedQuery is a page of the feed as the partner asked for it, checked.
type feedQuery struct {
	limit    int
	typ      string // exact, or a kind's prefix with ".*"
	objectID string
	places   []int64 // by feedSources
	only     string  // the one service the filters leave, or ""
}

var feedParams = map[string]bool{"limit": true, "startingAfter": true, "type": true, "objectId": true}

// objectPrefixes are the ids of the records with events, and who owns
// each.
var objectPrefixes = []struct {
	prefix  string
	hex     int
	service string
}{
	{"bpo_", 32, UpstreamPayout}, {"ord_", 24, UpstreamOrders}, {"acc_", 24, UpstreamFiat}, {"va_", 24, UpstreamFiat},
	{"dep_", 24, UpstreamFiat}, {"cs_", 24, UpstreamConsent},
}

func (f *feed) parse(q url.Values, keyID string) (feedQuery, error) {
	p := feedQuery{limit: 20, places: make([]int64, len(feedSources))}
	for name, values := range q {
		if !feedParams[name] {
			return p, envelope.InvalidRequest("Unknown query parameter " + strconv.Quote(cut(name)) + "; the events feed takes limit, startingAfter, type and objectId.")
		}
		if len(values) != 1 {
			return p, envelope.InvalidRequest("Query parameter " + name + " is given more than once.")
		}
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > 100 || strings.TrimLeft(v[0], "0123456789") != "" {
			return p, envelope.InvalidRequest("limit must be a whole number from 1 to 100.")
		}
		p.limit = n
	}
	if v, ok := q["type"]; ok {
		service, known := f.types[v[0]]
		if !known {
			return p, envelope.InvalidRequest("type must be an event type (GET /v1/statuses lists them, as eventTypes), or a kind followed by .*, such as payout.*.")
		}
		p.typ, p.only = v[0], service
	}
	if v, ok := q["objectId"]; ok {
		service := objectService(v[0])
		if service == "" {
			return p, envelope.InvalidRequest("objectId must be the id of a payout, order, account, virtual account, deposit or consent session.")
		}
		if p.only != "" && p.only != service {
			p.only = "-" // no record is both: the page is empty
		} else {
			p.only = service
		}
		p.objectID = v[0]
	}
	if v, ok := q["startingAfter"]; ok {
		places, ok := f.decode(v[0], keyID, p)
		if !ok {
			return p, envelope.InvalidRequest("startingAfter is not a cursor of this feed, for this key and these filters: pass nextCursor from the page before, as it was, with the same type and objectId.")
		}
		p.places = places
	}
	return p, nil
}

func objectService(id string) string {
	for _, o := range objectPrefixes {
		rest, ok := strings.CutPrefix(id, o.prefix)
		if ok && len(rest) == o.hex && strings.Trim(rest, "0123456789abcdef") == "" {
			return o.service
		}
	}
	return ""
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// A cursor is a version byte, each service's place (uvarints) and a MAC
// over them, the key and the filters.
const cursorVersion, cursorMAC = 1, 16

func (f *feed) encode(places []int64, keyID string, q feedQuery) string {
	b := []byte{cursorVersion}
	for _, p := range places {
		b = binary.AppendUvarint(b, uint64(p))
	}
	return base64.RawURLEncoding.EncodeToString(append(b, f.mac(b, keyID, q)...))
}

func (f *feed) decode(s, keyID string, q feedQuery) ([]int64, bool) {
	if len(s) > 256 {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 1+len(feedSources)+cursorMAC || b[0] != cursorVersion {
		return nil, false
	}
	body, mac := b[:len(b)-cursorMAC], b[len(b)-cursorMAC:]
	if !hmac.Equal(mac, f.mac(body, keyID, q)) {
		return nil, false
	}
	places := make([]int64, 0, len(feedSources))
	rest := body[1:]
	for range feedSources {
		v, n := binary.Uvarint(rest)
		if n <= 0 || v > 1<<62 {
			return nil, false
		}
		places, rest = append(places, int64(v)), rest[n:]
	}
	return places, len(rest) == 0
}

func (f *feed) mac(body []byte, keyID string, q feedQuery) []byte {
	m := hmac.New(sha256.New, f.secret)
	m.Write([]byte(keyID + "\x00" + q.typ + "\x00" + q.objectID + "\x00"))
	m.Write(body)
	return m.Sum(nil)[:cursorMAC]
}

// sourcePage is a service's page of its feed, rendered (pkg/events: each
// event's JSON as the partner reads it, behind its place and time).
type sourcePage = feedwire.Page

// fromJSON is a service's JSON page (a service of an earlier release, which
// does not render its pages) as a rendered one.
func fromJSON(body []byte, limit int) (*sourcePage, error) {
	var p struct {
		Events []struct {
			Seq       int64           `json:"seq"`
			ID        string          `json:"id"`
			Type      string          `json:"type"`
			CreatedAt time.Time       `json:"createdAt"`
			Data      json.RawMessage `json:"data"`
		} `json:"events"`
		Through int64 `json:"through"`
		HasMore bool  `json:"hasMore"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("answer out of shape: %w", err)
	}
	if len(p.Events) > limit {
		return nil, errors.New("answer out of shape: more events than asked")
	}
	out := &sourcePage{Through: p.Through, HasMore: p.HasMore, Events: make([]feedwire.Event, len(p.Events))}
	for i, e := range p.Events {
		b, err := feedwire.AppendEventJSON(nil, e.ID, e.Type, e.CreatedAt, e.Data)
		if err != nil {
			return nil, fmt.Errorf("answer out of shape: %w", err)
		}
		out.Events[i] = feedwire.Event{Seq: e.Seq, CreatedAt: e.CreatedAt.UnixMicro(), JSON: b}
	}
	return out, nil
}

// inProgress is a service's 409 idempotency_in_progress: what it read is
// not yet confirmed on a synchronous standby (DESIGN §6), and it said when
// to ask again.
type inProgress struct{ retryAfter int }

func (e inProgress) Error() string {
	return "not yet confirmed on a standby; retry after " + strconv.Itoa(e.retryAfter) + " s"
}

// errFeedInProgress is the page's answer when every service asked could
// only say that: the partner retries after Retry-After, as with a status.
var errFeedInProgress = envelope.New(envelope.CodeIdempotencyInProgress,
	"The events after this cursor are not yet confirmed on a standby database. Retry the same request after Retry-After; nothing is skipped.")

// errCursorExpired is a service's word that the cursor is past its
// retention.
var errCursorExpired = envelope.New(envelope.CodeCursorExpired,
	"This cursor is older than the feed's 30-day retention: events after it were deleted. Start again without startingAfter, and reconcile with the lists.")

// maxSourcePage bounds a service's answer: 100 events of a few KiB each.
const maxSourcePage = 8 << 20

// serve answers GET /v1/events.
func (f *feed) serve(w http.ResponseWriter, r *http.Request, c *call) {
	keyID := c.entry.ID
	q, err := f.parse(r.URL.Query(), keyID)
	if err != nil {
		c.code = f.g.refuse(w, asEnvelope(err))
		return
	}
	pages := make([]*sourcePage, len(f.sources))
	errs := make([]error, len(f.sources))
	bodies := make([]*[]byte, len(f.sources)) // the pages' bytes, which their events point into
	defer func() {
		for _, b := range bodies {
			putPageBuffer(b)
		}
	}()
	var wg sync.WaitGroup
	for i, s := range f.sources {
		if q.only != "" && q.only != s.name {
			continue
		}
		bodies[i] = getPageBuffer()
		wg.Go(func() { pages[i], errs[i] = f.ask(r.Context(), s, q.places[i], q, c, bodies[i]) })
	}
	wg.Wait()
	asked, answered, retryAfter := 0, 0, 0
	for i, err := range errs {
		var wait inProgress
		switch {
		case errors.Is(err, errCursorExpired):
			c.code = f.g.refuse(w, errCursorExpired)
			return
		case errors.As(err, &wait):
			retryAfter = max(retryAfter, wait.retryAfter)
		case err != nil:
			f.g.log.Warn("events feed: a service did not answer; its events come later", "upstream", f.sources[i].name,
				"err", err, "request_id", c.requestID[0], "trace_id", obs.TraceID(r.Context()))
		}
		if q.only == "" || q.only == f.sources[i].name {
			asked++
			if err == nil {
				answered++
			}
		}
	}
	if asked > 0 && answered == 0 {
		switch {
		case r.Context().Err() != nil:
			c.code = codeClientGone
			w.WriteHeader(499)
		case retryAfter > 0:
			// The services are up, and waiting for a standby: the
			// partner hears when to retry, as from a status call.
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			c.code = f.g.refuse(w, errFeedInProgress)
		default:
			c.code = f.g.refuse(w, envelope.Internal())
		}
		return
	}
	f.answer(w, q, keyID, pages, answered < asked)
}

// ask reads service s's page after place into body.
func (f *feed) ask(ctx context.Context, s feedSource, place int64, q feedQuery, c *call, body *[]byte) (*sourcePage, error) {
	u := *s.target
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/events"
	v := url.Values{"after": {strconv.FormatInt(place, 10)}, "limit": {strconv.Itoa(q.limit)}}
	if q.typ != "" {
		v.Set("type", q.typ)
	}
	if q.objectID != "" {
		v.Set("objectId", q.objectID)
	}
	u.RawQuery = v.Encode()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.guard.release(cancel)()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	f.g.outboundHeader(req.Header, c)
	req.Header.Set("Accept", feedwire.ContentType)
	resp, err := s.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	err = readPage(resp, body)
	switch {
	case err != nil:
		return nil, err
	case len(*body) > maxSourcePage:
		return nil, errors.New("answer too large")
	case resp.StatusCode == http.StatusGone:
		return nil, errCursorExpired
	case resp.StatusCode == http.StatusConflict && resp.Header.Get(partner.HeaderErrorCode) == string(envelope.CodeIdempotencyInProgress):
		n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || n < 1 || n > 60 {
			n = 1
		}
		return nil, inProgress{retryAfter: n}
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answered %d", resp.StatusCode)
	}
	if resp.Header.Get("Content-Type") != feedwire.ContentType {
		return fromJSON(*body, q.limit)
	}
	p, err := feedwire.Parse(*body, q.limit)
	if err != nil {
		return nil, fmt.Errorf("answer out of shape: %w", err)
	}
	return &p, nil
}

// readPage reads a service's page into buf, at most maxSourcePage+1
// bytes: in one read of its Content-Length when it says one.
func readPage(resp *http.Response, buf *[]byte) error {
	b := (*buf)[:0]
	if n := resp.ContentLength; n >= 0 && n <= maxSourcePage {
		b = slices.Grow(b, int(n))[:n]
		*buf = b
		_, err := io.ReadFull(resp.Body, b)
		return err
	}
	r := io.LimitReader(resp.Body, maxSourcePage+1)
	for {
		b = slices.Grow(b, 16<<10)
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		*buf = b
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// pageBuffers hold a feed page's bytes: the services' pages as read, and
// the page the gateway answers. A page is about 100 KiB; allocating two a
// page, and clearing and collecting them, was most of what a feed page
// cost the gateway beyond a list page (BenchmarkFeedPage).
var pageBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledPage is the largest buffer kept for another page: a page of
// large events is read into a buffer that is then let go.
const maxPooledPage = 1 << 20

func getPageBuffer() *[]byte { return pageBuffers.Get().(*[]byte) }

func putPageBuffer(b *[]byte) {
	if b == nil || cap(*b) > maxPooledPage {
		return
	}
	*b = (*b)[:0]
	pageBuffers.Put(b)
}

// answer merges the services' pages, oldest first (a service's events in
// its order), up to the limit, and moves each service's place past what
// the page holds of it. unanswered: a service asked did not answer, so
// more may follow (hasMore), whatever the others said.
func (f *feed) answer(w http.ResponseWriter, q feedQuery, keyID string, pages []*sourcePage, unanswered bool) {
	places := append([]int64(nil), q.places...)
	next := make([]int, len(pages)) // how many of each page are taken
	out := getPageBuffer()
	defer putPageBuffer(out)
	size := 256
	for _, p := range pages {
		if p != nil {
			for _, e := range p.Events {
				size += len(e.JSON) + 1
			}
		}
	}
	b := slices.Grow((*out)[:0], size)
	b = append(b, `{"environment":"`...)
	b = append(b, f.g.env...)
	b = append(b, `","data":[`...)
	for n := 0; n < q.limit; n++ {
		pick := -1
		for i, p := range pages {
			if p == nil || next[i] == len(p.Events) {
				continue
			}
			if pick < 0 || p.Events[next[i]].CreatedAt < pages[pick].Events[next[pick]].CreatedAt {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		e := pages[pick].Events[next[pick]]
		next[pick]++
		places[pick] = e.Seq
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, e.JSON...)
	}
	hasMore := unanswered
	for i, p := range pages {
		if p == nil {
			continue
		}
		if next[i] == len(p.Events) {
			places[i] = max(places[i], p.Through) // past what its filters skipped
			hasMore = hasMore || p.HasMore
		} else {
			hasMore = true
		}
	}
	b = append(b, `],"hasMore":`...)
	b = strconv.AppendBool(b, hasMore)
	b = append(b, `,"nextCursor":"`...)
	b = append(b, f.encode(places, keyID, q)...)
	b = append(b, `"}`...)
	*out = b
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func asEnvelope(err error) *envelope.Error {
	if e, ok := envelope.From(err); ok {
		return e
	}
	return envelope.Internal()
}
