package kithttp

import (
	"bytes"
	"context"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/obs"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAnAbandonedRequestIsNotAnError: when the caller (the gateway) gives up,
// the service writes nothing and logs no "internal error" (before, a
// recovering upstream filled the logs with broken pipes and "superfluous
// WriteHeader" lines for requests nobody waited for).
func TestAnAbandonedRequestIsNotAnError(t *testing.T) {
	t.Parallel()
	var logs, serverLog syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	done := make(chan struct{})
	h := Server(func(ctx context.Context, _ any) (any, error) {
		defer close(done)
		<-ctx.Done()
		return nil, errors.New("store: " + ctx.Err().Error())
	}, func(context.Context, *http.Request) (any, error) { return struct{}{}, nil }, logger)
	served := make(chan struct{}) // the handler, encoder included, has returned
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(served)
		h.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(&serverLog, "", 0)
	srv.Start()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request was answered, though its caller gave up")
	}
	<-done
	<-served
	if got := logs.String(); strings.Contains(got, "internal error") || !strings.Contains(got, "request abandoned by the caller") {
		t.Errorf("log: %s", got)
	}
	if got := serverLog.String(); got != "" {
		t.Errorf("the HTTP server complained: %s", got)
	}
}

// failingWriter is a connection that broke after the header.
type failingWriter struct {
	header  http.Header
	headers int
}

func (f *failingWriter) Header() http.Header       { return f.header }
func (f *failingWriter) WriteHeader(int)           { f.headers++ }
func (f *failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestAFailedWriteIsNotAnsweredTwice: a write that fails after the header
// is not turned into a second (error) answer.
func TestAFailedWriteIsNotAnsweredTwice(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := Server(func(context.Context, any) (any, error) { return map[string]string{"ok": "yes"}, nil },
		func(context.Context, *http.Request) (any, error) { return struct{}{}, nil },
		slog.New(slog.NewJSONHandler(&logs, nil)))
	w := &failingWriter{header: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.headers != 1 || logs.String() != "" {
		t.Errorf("WriteHeader called %d times, log %q; want once and nothing", w.headers, logs.String())
	}
}

type statusRequest struct{ id string }

func (r statusRequest) LogAttrs() []slog.Attr { return []slog.Attr{slog.String("payout_id", r.id)} }

type statusAnswer struct{ id, status string }

func (a statusAnswer) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("payout_id", a.id), slog.String("status", a.status)}
}

// TestAnOperationLogsEachKeyOnce: an answer that names what its request
// named (a status's payout id) is logged once; a JSON line with a key
// twice is read differently by each log pipeline.
func TestAnOperationLogsEachKeyOnce(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	o := NewObserver(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "duration_us" {
			return slog.Attr{}
		}
		return a
	}})), obs.NewOperations(prometheus.NewRegistry(), "test"))
	e := o.Op("payout_status", func(context.Context, any) (any, error) {
		return statusAnswer{"bpo_1", "completed"}, nil
	})
	if _, err := e(context.Background(), statusRequest{"bpo_1"}); err != nil {
		t.Fatal(err)
	}
	want := `{"level":"INFO","msg":"payout_status","payout_id":"bpo_1","status":"completed","code":"","request_id":"","trace_id":""}` + "\n"
	if got := logs.String(); got != want {
		t.Errorf("log line:\n got %s\nwant %s", got, want)
	}
}
