package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// browser starts Debian's headless Chromium (.ci/run installs it) for one
// test and records every URL the page asks for.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not on PATH (apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })

	var mu sync.Mutex
	var urls []string
	err = chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), urls...)
	}
}

func TestDocsRenderInChromium(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	ctx, requested := browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.GatewayURL+"/docs"),
		chromedp.WaitVisible(chromedp.CSS("#bankPayoutQuote")),
	); err != nil {
		t.Fatalf("render /docs: %v", err)
	}
	headings, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("section.op h3")].filter(h => h.offsetParent !== null).map(h => h.innerText.replace(/\s+/g, " ").trim())`))
	if err != nil {
		t.Fatal(err)
	}
	// The viewport, not the whole page: Chromium refuses a capture taller
	// than its largest texture ("Page is too large"), and the reference
	// grows with the API.
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if len(shot) == 0 {
		t.Fatal("an empty screenshot of /docs")
	}
	if dir := os.Getenv("DOCS_SCREENSHOT_DIR"); dir != "" {
		_ = os.WriteFile(dir+"/docs.png", shot, 0o644)
	}
	joined := strings.Join(headings, "\n")
	for _, want := range []string{
		"POST /v1/bank/payout/quote bankPayoutQuote",
		"POST /v1/bank/payout bankPayout",
		"GET /v1/config getConfig",
		"GET /v1/currencies listCurrencies",
		"GET /v1/limits getLimits",
		"GET /v1/countries listCountries",
		"GET /v1/statuses listStatuses",
		"GET /v1/payment-methods listPaymentMethods",
		"GET /v1/rates getRates",
		"POST /v1/deposit/quote depositQuote",
		"POST /v1/fiat/deposits createFiatDeposit",
		"POST /v1/orders/link orderLink",
		"GET /health health · no key",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("visible operations lack %q:\n%s", want, joined)
		}
	}
	for _, u := range requested() {
		if !strings.HasPrefix(u, s.GatewayURL) {
			t.Errorf("/docs fetched %s: the page must load nothing from elsewhere", u)
		}
	}
}

func TestConsentInChromium(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))
	sid := acc["consentSessionId"].(string)
	link := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`"}`))["link"].(string)

	ctx, requested := browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("button.accept")),
		chromedp.Click(chromedp.CSS("button.accept")),
		chromedp.WaitVisible(chromedp.CSS("main h1")),
	); err != nil {
		t.Fatalf("consent page: %v", err)
	}
	var where, heading string
	eventually(10*time.Second, func() bool {
		var err error
		if where, err = chromedp.Run(ctx, chromedp.Location()); err != nil {
			t.Fatal(err)
		}
		return strings.HasPrefix(where, s.GatewayURL+"/consent/return?")
	})
	heading, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(where, s.GatewayURL+"/consent/return?") || heading != "All done" {
		t.Fatalf("the browser landed on %s, %q", where, heading)
	}
	if st := decodeOK(t, s.post("/v1/fiat/consent/status", key, `{"consentSessionId":"`+sid+`"}`))["state"]; st != "returned" {
		t.Fatalf("consent status after the browser came back: %v", st)
	}
	for _, u := range requested() {
		if !strings.HasPrefix(u, "http://"+s.Services["sandboxbank"].Addr) && !strings.HasPrefix(u, s.GatewayURL) {
			t.Errorf("the consent pages fetched %s", u)
		}
	}
}
