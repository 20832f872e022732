package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/feedwire"
	"github.com/partnerpay/api/pkg/obs"
)

// benchPayout is a payout as the services answer it (about 900 bytes).
func benchPayout(i int) string {
	return fmt.Sprintf(`{"mock":true,"payoutId":"bpo_%032x","quoteId":"bpq_84532_%032x","status":"processing","rail":"sepa_instant",`+
		`"estimatedSettlement":"PT10S","deposit":{"address":"0x9c477458a23625434dD09E0a7a5DaBB316Ab4826","chain":84532,`+
		`"cryptoCurrency":"USDC","amount":"1234567.89","expiresAt":"2026-11-29T12:30:00Z","txHash":"0x%064x"},`+
		`"beneficiary":{"name":"Ada Lovelace","account":"DE89 •••• •••• •••• •••• 3000"},"reference":"inv-%d",`+
		`"cryptoAmount":"1234567.89","fiatAmount":"1127000.00","fiatCurrency":"EUR","country":"DE",`+
		`"createdAt":"2026-11-29T12:00:00Z","history":[{"status":"awaiting_deposit","at":"2026-11-29T12:00:00Z"},`+
		`{"status":"processing","at":"2026-11-29T12:00:03Z"}],"refunds":[]}`, i, i, i, i)
}

// BenchmarkFeedPage is a page of 100 events (GET /v1/events?limit=100)
// beside a page of 100 payouts (GET /v1/bank/payouts?limit=100), each
// through the gateway wired for production (as BenchmarkProductionPath),
// in front of services that answer at once with bodies built beforehand:
// the payout service 100 events of about 1 KiB (or 100 payouts), the other
// three an empty page. The services run in a process of their own (this
// test binary again, serveFeedBenchUpstreams), so cpu-ns/op is the
// gateway's own CPU per page, as an operator's gateway process spends it;
// issue 63's goal is a feed page at no more than 1.3 times a list page.
//
//	cd services/gateway && go test -run '^$' -bench FeedPage -benchtime 2000x -count 3 ./internal/edge/
func BenchmarkFeedPage(b *testing.B) {
	urls, plain := startFeedBenchUpstreams(b)
	kit, err := obs.NewKit(context.Background(), "gateway", "sandbox", obs.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer kit.Shutdown(context.Background())
	h := productionGatewayTo(b, kit, urls, testTransport(b))
	for _, tc := range []struct {
		name, path, first string
		plain             bool
	}{
		{"list", "/v1/bank/payouts?limit=100", `{"environment":"sandbox","data":[{"mock":true`, false},
		{"feed", "/v1/events?limit=100", `{"environment":"sandbox","data":[{"id":"evt_`, false},
		{"feed-json", "/v1/events?limit=100", `{"environment":"sandbox","data":[{"id":"evt_`, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			plain(b, tc.plain)
			r := httptest.NewRequest("GET", tc.path, nil)
			r.Header.Set("Authorization", "Bearer "+testKey)
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 || !strings.HasPrefix(w.Body.String(), tc.first) {
					b.Fatalf("%s: %d %.300s", tc.name, w.Code, w.Body)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// feedBenchChild is the variable under which this test binary, started by
// startFeedBenchUpstreams, serves the services instead of testing.
const feedBenchChild = "EDGE_FEED_BENCH_UPSTREAMS"

// startFeedBenchUpstreams runs serveFeedBenchUpstreams in a child process
// and returns the four services' URLs, and a call that makes the services
// answer feed pages as JSON only (as before issue 63) or rendered again.
func startFeedBenchUpstreams(b *testing.B) (map[string]string, func(*testing.B, bool)) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), feedBenchChild+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the child exits when its stdin closes
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the services' process: %v", err)
	}
	var urls map[string]string
	if err := json.Unmarshal([]byte(line), &urls); err != nil {
		b.Fatalf("the services' process said %q: %v", line, err)
	}
	plain := func(b *testing.B, on bool) {
		resp, err := http.Post(urls[UpstreamPayout]+"/bench/plain?on="+strconv.FormatBool(on), "text/plain", nil)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatalf("/bench/plain: %d", resp.StatusCode)
		}
	}
	return urls, plain
}

// serveFeedBenchUpstreams serves BenchmarkFeedPage's services, prints
// their URLs as one line of JSON, and returns when stdin closes.
func serveFeedBenchUpstreams() {
	// The payout service's pages, as pkg/events writes them: rendered
	// (feedwire), and JSON.
	var list, plain strings.Builder
	rendered := feedwire.AppendHeader(nil, 100, true, 100)
	list.WriteString(`{"data":[`)
	plain.WriteString(`{"events":[`)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range 100 {
		if i > 0 {
			list.WriteByte(',')
			plain.WriteByte(',')
		}
		created := at.Add(time.Duration(i) * time.Millisecond)
		event := fmt.Sprintf(`{"id":"evt_%032x","type":"payout.processing","createdAt":%q,"data":{"object":%s}}`, i+1,
			created.Format(time.RFC3339), benchPayout(i))
		rendered = feedwire.AppendEvent(rendered, int64(i+1), created.UnixMicro(), []byte(event))
		fmt.Fprintf(&plain, `{"seq":%d,"id":"evt_%032x","type":"payout.processing","createdAt":%q,"data":{"object":%s}}`, i+1, i+1,
			created.Format(time.RFC3339Nano), benchPayout(i))
		list.WriteString(benchPayout(i))
	}
	list.WriteString(`],"hasMore":true,"nextCursor":"` + strings.Repeat("c", 120) + `"}`)
	plain.WriteString(`],"through":100,"hasMore":true}`)
	// A feed page as a service answers it: rendered when the gateway asks
	// so, JSON otherwise (BenchmarkFeedPage/feed-json: a gateway that
	// decodes every event, as before issue 63).
	var plainOnly atomic.Bool
	answerFeed := func(rendered []byte, plain string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Accept") == feedwire.ContentType && !plainOnly.Load() {
				w.Header().Set("Content-Type", feedwire.ContentType)
				_, _ = w.Write(rendered)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, plain)
		}
	}
	payouts := http.NewServeMux()
	payouts.HandleFunc("/v1/events", answerFeed(rendered, plain.String()))
	payouts.HandleFunc("/v1/bank/payouts", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Environment", "sandbox")
		_, _ = io.WriteString(w, list.String())
	})
	payouts.HandleFunc("POST /bench/plain", func(w http.ResponseWriter, r *http.Request) {
		plainOnly.Store(r.URL.Query().Get("on") == "true")
		w.WriteHeader(http.StatusNoContent)
	})
	empty := answerFeed(feedwire.AppendHeader(nil, 0, false, 0), `{"events":[],"through":0,"hasMore":false}`)
	urls := map[string]string{}
	for name, h := range map[string]http.Handler{UpstreamPayout: asService(payouts.ServeHTTP), UpstreamFiat: asService(empty),
		UpstreamConsent: asService(empty), UpstreamOrders: asService(empty)} {
		s := httptest.NewServer(h)
		defer s.Close()
		urls[name] = s.URL
	}
	line, _ := json.Marshal(urls)
	os.Stdout.Write(append(line, '\n'))
	_, _ = io.Copy(io.Discard, os.Stdin)
}
