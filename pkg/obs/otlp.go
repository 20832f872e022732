package obs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkinstr "go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// otlpExporter sends spans to a collector as OTLP/HTTP with a binary
// protobuf body (opentelemetry-proto's ExportTraceServiceRequest, written
// field by field with protowire).
//
// It is ours rather than otlptracehttp because that exporter links gRPC,
// grpc-gateway and the protobuf registry for a message type it never sends
// over gRPC: 12 MB more binary and about 5 MiB more resident memory in every
// process, tracing on or off. The OTLP tests decode what this writes with
// the official generated types.
//
// It reads the OTLP exporter variables a deployment sets:
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION
// (gzip or none) and _PROTOCOL (http/protobuf only: a grpc or http/json
// setting is refused at boot rather than exported to in the wrong form). A batch the collector refuses for the moment (429, 502,
// 503, 504, or no connection) is sent again, with backoff and Retry-After,
// within the timeout; any other refusal is an error at once.
type otlpExporter struct {
	url      string // the endpoint; in errors only redacted
	headers  http.Header
	timeout  time.Duration
	gzip     bool
	client   *http.Client
	shutdown chan struct{}
	counts   *spanCounts // nil: not counted
}

// spanCounts are the spans this process sent to the collector and those it
// gave up on (the collector unreachable or refusing past the export's
// retries): traces with holes, which an operator should see.
type spanCounts struct{ exported, dropped prometheus.Counter }

func newSpanCounts(reg prometheus.Registerer) *spanCounts {
	c := &spanCounts{
		exported: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "trace", Name: "spans_exported_total",
			Help: "Spans sent to the OTLP collector."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "trace", Name: "spans_dropped_total",
			Help: "Spans given up on: their export failed after its retries (the collector unreachable, refusing or too slow)."}),
	}
	reg.MustRegister(c.exported, c.dropped)
	return c
}

const otlpDefaultTimeout = 10 * time.Second

func newOTLPExporter(getenv func(string) string) (*otlpExporter, error) {
	// A traces-specific variable wins over the general one (the OTLP
	// exporter specification).
	setting := func(name string) string {
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return v
		}
		return getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	if p := setting("PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is spoken, not %q", p)
	}
	e := &otlpExporter{headers: http.Header{}, timeout: otlpDefaultTimeout, shutdown: make(chan struct{})}
	// The traces endpoint is used as it is; the general one is a base to
	// which /v1/traces is added.
	e.url = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if e.url == "" {
		e.url = strings.TrimSuffix(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
	}
	u, err := url.Parse(e.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("OTLP endpoint: want an http:// or https:// URL with a host")
	}
	if v := setting("HEADERS"); v != "" {
		for _, pair := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			val, uerr := url.PathUnescape(strings.TrimSpace(val))
			if !ok || k == "" || uerr != nil {
				// The value may be a credential: name neither.
				return nil, errors.New("OTEL_EXPORTER_OTLP_HEADERS: want key=value pairs, comma-separated, values URL-encoded")
			}
			e.headers.Set(k, val)
		}
	}
	if v := setting("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT: want milliseconds, not %q", v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v := setting("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION: want gzip or none, not %q", v)
	}
	e.client = &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, ForceAttemptHTTP2: true},
		// A collector that redirects is misconfigured; following could send
		// the headers somewhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return e, nil
}

// ExportSpans sends one batch. It is called by the batch span processor, one
// batch at a time.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	err := e.export(ctx, spans)
	if e.counts != nil {
		if err != nil {
			e.counts.dropped.Add(float64(len(spans)))
		} else {
			e.counts.exported.Add(float64(len(spans)))
		}
	}
	return err
}

func (e *otlpExporter) export(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.shutdown:
		return errors.New("OTLP exporter is shut down")
	default:
	}
	body := appendExportRequest(nil, spans)
	if e.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body) // a bytes.Buffer does not fail
		_ = zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		retryAfter, err := e.post(ctx, body)
		if err == nil || retryAfter < 0 {
			return err
		}
		wait = max(wait, retryAfter)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return err // the next try could not finish in time
		}
		select {
		case <-ctx.Done():
			return err
		case <-e.shutdown:
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// post sends body once. retryAfter is how long to wait before trying again,
// or negative when trying again would not help.
func (e *otlpExporter) post(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may hold credentials; say it redacted below
		}
		return 0, fmt.Errorf("traces export to %s: %w", redacted(e.url), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // a partial-success note; the connection is kept
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return 0, nil
	}
	err = fmt.Errorf("traces export to %s: %s", redacted(e.url), resp.Status)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			return time.Duration(min(s, 60)) * time.Second, err
		}
		return 0, err
	}
	return -1, err
}

func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the OTLP endpoint"
	}
	return u.Redacted()
}

// Shutdown stops retries; the batch span processor has already flushed.
func (e *otlpExporter) Shutdown(context.Context) error {
	select {
	case <-e.shutdown:
	default:
		close(e.shutdown)
	}
	e.client.CloseIdleConnections()
	return nil
}

// The field numbers of opentelemetry-proto v1 (collector/trace/v1,
// trace/v1, common/v1, resource/v1).
const (
	exportResourceSpans protowire.Number = 1 // ExportTraceServiceRequest

	resourceSpansResource  protowire.Number = 1
	resourceSpansScope     protowire.Number = 2
	resourceSpansSchemaURL protowire.Number = 3

	resourceAttributes protowire.Number = 1

	scopeSpansScope     protowire.Number = 1
	scopeSpansSpans     protowire.Number = 2
	scopeSpansSchemaURL protowire.Number = 3

	scopeName       protowire.Number = 1
	scopeVersion    protowire.Number = 2
	scopeAttributes protowire.Number = 3

	spanTraceID       protowire.Number = 1
	spanSpanID        protowire.Number = 2
	spanTraceState    protowire.Number = 3
	spanParentSpanID  protowire.Number = 4
	spanName          protowire.Number = 5
	spanKind          protowire.Number = 6
	spanStart         protowire.Number = 7
	spanEnd           protowire.Number = 8
	spanAttributes    protowire.Number = 9
	spanDroppedAttrs  protowire.Number = 10
	spanEvents        protowire.Number = 11
	spanDroppedEvents protowire.Number = 12
	spanLinks         protowire.Number = 13
	spanDroppedLinks  protowire.Number = 14
	spanStatus        protowire.Number = 15
	spanFlagsField    protowire.Number = 16

	eventTime         protowire.Number = 1
	eventName         protowire.Number = 2
	eventAttributes   protowire.Number = 3
	eventDroppedAttrs protowire.Number = 4

	linkTraceID      protowire.Number = 1
	linkSpanID       protowire.Number = 2
	linkTraceState   protowire.Number = 3
	linkAttributes   protowire.Number = 4
	linkDroppedAttrs protowire.Number = 5
	linkFlags        protowire.Number = 6

	statusMessage protowire.Number = 2
	statusCode    protowire.Number = 3

	keyValueKey   protowire.Number = 1
	keyValueValue protowire.Number = 2

	anyString  protowire.Number = 1 // AnyValue's oneof
	anyBool    protowire.Number = 2
	anyInt     protowire.Number = 3
	anyDouble  protowire.Number = 4
	anyArray   protowire.Number = 5
	anyKVList  protowire.Number = 6
	anyBytes   protowire.Number = 7
	listValues protowire.Number = 1 // ArrayValue.values and KeyValueList.values
)

// Span flags and status codes (trace/v1).
const (
	flagHasIsRemote uint32 = 0x100
	flagIsRemote    uint32 = 0x200

	statusUnset = 0
	statusOK    = 1
	statusError = 2
)

// appendExportRequest writes an ExportTraceServiceRequest: spans grouped by
// resource, then by instrumentation scope, in the order first seen.
func appendExportRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		scope sdkinstr.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type resourceGroup struct {
		first  sdktrace.ReadOnlySpan // for its resource
		scopes []*group
	}
	var resources []*resourceGroup
	byResource := map[attribute.Distinct]*resourceGroup{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		key := s.Resource().Equivalent()
		rg := byResource[key]
		if rg == nil {
			rg = &resourceGroup{first: s}
			byResource[key] = rg
			resources = append(resources, rg)
		}
		scope := s.InstrumentationScope()
		var g *group
		for _, c := range rg.scopes {
			if c.scope == scope {
				g = c
				break
			}
		}
		if g == nil {
			g = &group{scope: scope}
			rg.scopes = append(rg.scopes, g)
		}
		g.spans = append(g.spans, s)
	}
	for _, rg := range resources {
		b = appendMessage(b, exportResourceSpans, func(b []byte) []byte {
			res := rg.first.Resource()
			b = appendMessage(b, resourceSpansResource, func(b []byte) []byte {
				return appendAttributes(b, resourceAttributes, res.Attributes())
			})
			for _, g := range rg.scopes {
				b = appendMessage(b, resourceSpansScope, func(b []byte) []byte {
					if g.scope != (sdkinstr.Scope{}) {
						b = appendMessage(b, scopeSpansScope, func(b []byte) []byte {
							b = appendString(b, scopeName, g.scope.Name)
							b = appendString(b, scopeVersion, g.scope.Version)
							return appendAttributes(b, scopeAttributes, g.scope.Attributes.ToSlice())
						})
					}
					for _, s := range g.spans {
						b = appendMessage(b, scopeSpansSpans, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendString(b, scopeSpansSchemaURL, g.scope.SchemaURL)
				})
			}
			return appendString(b, resourceSpansSchemaURL, res.SchemaURL())
		})
	}
	return b
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, tid[:])
	b = appendBytes(b, spanSpanID, sid[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, spanParentSpanID, psid[:])
	}
	b = appendString(b, spanName, s.Name())
	b = appendVarint(b, spanKind, uint64(otlpKind(s.SpanKind())))
	b = appendFixed64(b, spanStart, unixNano(s.StartTime()))
	b = appendFixed64(b, spanEnd, unixNano(s.EndTime()))
	b = appendAttributes(b, spanAttributes, s.Attributes())
	b = appendVarint(b, spanDroppedAttrs, uint64(clamp32(s.DroppedAttributes())))
	for _, ev := range s.Events() {
		b = appendMessage(b, spanEvents, func(b []byte) []byte {
			b = appendFixed64(b, eventTime, unixNano(ev.Time))
			b = appendString(b, eventName, ev.Name)
			b = appendAttributes(b, eventAttributes, ev.Attributes)
			return appendVarint(b, eventDroppedAttrs, uint64(clamp32(ev.DroppedAttributeCount)))
		})
	}
	b = appendVarint(b, spanDroppedEvents, uint64(clamp32(s.DroppedEvents())))
	for _, l := range s.Links() {
		b = appendMessage(b, spanLinks, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytes(b, linkTraceID, ltid[:])
			b = appendBytes(b, linkSpanID, lsid[:])
			b = appendString(b, linkTraceState, l.SpanContext.TraceState().String())
			b = appendAttributes(b, linkAttributes, l.Attributes)
			b = appendVarint(b, linkDroppedAttrs, uint64(clamp32(l.DroppedAttributeCount)))
			return appendFixed32(b, linkFlags, w3cFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarint(b, spanDroppedLinks, uint64(clamp32(s.DroppedLinks())))
	st := s.Status()
	b = appendMessage(b, spanStatus, func(b []byte) []byte {
		code := statusUnset
		switch st.Code {
		case codes.Ok:
			code = statusOK
		case codes.Error:
			code = statusError
		}
		b = appendString(b, statusMessage, st.Description)
		return appendVarint(b, statusCode, uint64(code))
	})
	return appendFixed32(b, spanFlagsField, w3cFlags(sc.TraceFlags(), parent))
}

// w3cFlags: the W3C trace flags, and whether the parent (or the linked
// span) is remote, which is always known here.
func w3cFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// otlpKind: trace.SpanKind and OTLP's enum number the kinds alike.
func otlpKind(k trace.SpanKind) trace.SpanKind {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return trace.SpanKindUnspecified
	}
	return k
}

func appendAttributes(b []byte, n protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendMessage(b, n, func(b []byte) []byte { return appendKeyValue(b, string(kv.Key), kv.Value) })
	}
	return b
}

func appendKeyValue(b []byte, key string, v attribute.Value) []byte {
	b = appendString(b, keyValueKey, key)
	return appendMessage(b, keyValueValue, func(b []byte) []byte { return appendAnyValue(b, v) })
}

// appendAnyValue writes v's one field of AnyValue; an EMPTY value is an
// AnyValue with none.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return protowire.AppendVarint(protowire.AppendTag(b, anyBool, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, anyInt, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, anyDouble, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), v.AsString())
	case attribute.BYTESLICE:
		return protowire.AppendBytes(protowire.AppendTag(b, anyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.MAP:
		return appendMessage(b, anyKVList, func(b []byte) []byte { return appendAttributes(b, listValues, v.AsMap()) })
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(e attribute.Value) attribute.Value { return e })
	}
	return b
}

// appendArray writes xs as AnyValue's array_value, each element as value
// makes it.
func appendArray[T any](b []byte, xs []T, value func(T) attribute.Value) []byte {
	return appendMessage(b, anyArray, func(b []byte) []byte {
		for _, x := range xs {
			b = appendMessage(b, listValues, func(b []byte) []byte { return appendAnyValue(b, value(x)) })
		}
		return b
	})
}

// appendMessage writes field n as a length-delimited message whose fields
// fill appends; an empty message is still written (a present, empty
// status or resource).
func appendMessage(b []byte, n protowire.Number, fill func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	start := len(b)
	b = fill(b)
	size := len(b) - start
	prefix := protowire.SizeVarint(uint64(size))
	b = append(b, make([]byte, prefix)...)
	copy(b[start+prefix:], b[start:start+size])
	protowire.AppendVarint(b[start:start], uint64(size))
	return b
}

// Scalars at their default (0, "") are left out, as proto3 does.
func appendString(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, n, protowire.BytesType), s)
}

func appendBytes(b []byte, n protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, n, protowire.BytesType), v)
}

func appendVarint(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, n, protowire.VarintType), v)
}

func appendFixed64(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, n, protowire.Fixed64Type), v)
}

func appendFixed32(b []byte, n protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, n, protowire.Fixed32Type), v)
}

func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }

func clamp32(v int) uint32 { return uint32(min(max(v, 0), math.MaxUint32)) }
