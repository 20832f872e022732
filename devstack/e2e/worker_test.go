package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/testkit/chaintest"
)

// Not parallel: see the package comment (one stack at a time).
//
// The payout finishes on its own, and its stablecoins always have a way
// home (DESIGN §3): a worker moves every payout on the provider's word, reads
// never call the provider, and every deposit that will not be paid out is
// refunded.

// payoutStatus is a payout's status answer, decoded.
type payoutStatus struct {
	PayoutID      string `json:"payoutId"`
	Status        string `json:"status"`
	FailureReason string `json:"failureReason"`
	ReturnReason  string `json:"returnReason"`
	ReturnCode    string `json:"returnCode"`
	DepositTxHash string `json:"depositTxHash"`
	Deposit       struct {
		Address string `json:"address"`
	} `json:"deposit"`
	TxHash  string `json:"txHash"` // the faucet's transfer
	History []struct {
		Status string `json:"status"`
	} `json:"history"`
	Refunds []struct {
		RefundID       string `json:"refundId"`
		Status         string `json:"status"`
		Reason         string `json:"reason"`
		Amount         string `json:"amount"`
		CryptoCurrency string `json:"cryptoCurrency"`
		Address        string `json:"address"`
		TxHash         string `json:"txHash"`
		SentAt         string `json:"sentAt"`
		ConfirmedAt    string `json:"confirmedAt"`
	} `json:"refunds"`
}

func decodeStatus(t testing.TB, r response) payoutStatus {
	t.Helper()
	var st payoutStatus
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &st) != nil {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	return st
}

// newPayout quotes and executes a payout to Ada (with a refund address
// when one is given) and returns its id.
func (s *stack) newPayout(key, amount string, refundAddress string) string {
	s.t.Helper()
	q := s.quoteID(key, eur(amount))
	body := `{"quoteId":"` + q + `","beneficiary":{"name":"Ada Lovelace","iban":"DE89370400440532013000"}`
	if refundAddress != "" {
		body += `,"refundAddress":"` + refundAddress + `"`
	}
	r := s.post(executePath, key, body+"}")
	id := payoutOf(r.Body)
	if r.Status != 200 || id == "" {
		s.t.Fatalf("execute: %d %s", r.Status, r.Body)
	}
	return id
}

// providerMade is how many payouts the sandbox bank made since it started:
// the payouts of its changes feed (each made once, under its reference).
func providerMade(t *testing.T, s *stack) int {
	t.Helper()
	made, after := map[string]bool{}, ""
	for {
		req, _ := http.NewRequest("GET", "http://"+s.Services["sandboxbank"].Addr+"/v1/changes?limit=100&after="+after, nil)
		req.Header.Set("Authorization", "Bearer "+s.ProviderKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Data []struct {
				ID     string `json:"id"`
				Payout struct {
					Reference string `json:"reference"`
				} `json:"payout"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("the sandbox bank's changes: %d %v", resp.StatusCode, err)
		}
		for _, c := range page.Data {
			made[c.Payout.Reference] = true
			after = c.ID
		}
		if !page.HasMore || len(page.Data) == 0 {
			return len(made)
		}
	}
}

func (s *stack) payoutStatus(key, id string) payoutStatus {
	s.t.Helper()
	return decodeStatus(s.t, s.post("/v1/bank/payout/status", key, `{"payoutId":"`+id+`"}`))
}

// A deposited payout appears under status=completed in the list within
// 5 s of the provider settling it, with no status call made; and every
// status and list answers at once, with the last known status, while the
// provider is frozen (SIGSTOP).
func TestThePayoutMovesOnItsOwn(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank,fiat,card", "--source-chains", "84532", "--destination-chains", "84532",
		"--tokens", "84532:"+baseUSDC, "--rate", "1000", "--max-execution-usd", "1000000")
	id := s.newPayout(key, "75", "")
	dep := decodeStatus(t, s.post("/v1/sandbox/payouts/deposit", key, `{"payoutId":"`+id+`"}`))
	if dep.Status != "awaiting_deposit" || len(dep.TxHash) != 66 {
		t.Fatalf("the faucet's answer: %+v, want the transfer's hash and the payout awaiting it", dep)
	}
	deposited := time.Now()
	// The sandbox provider settles SANDBOX_PAYOUT_SETTLE (3 s) after it
	// took the payout; only the list is read meanwhile.
	var listed time.Time
	if !eventually(20*time.Second, func() bool {
		r := s.get("/v1/bank/payouts?status=completed", key)
		if strings.Contains(r.Body, id) {
			listed = time.Now()
			return true
		}
		return false
	}) {
		t.Fatalf("the payout never appeared under status=completed")
	}
	// The stack's sandbox provider settles 300 ms after it took a payout.
	if late := listed.Sub(deposited.Add(300 * time.Millisecond)); late > 5*time.Second {
		t.Errorf("listed as completed %.2fs after the provider settled it, want within 5 s", late.Seconds())
	}
	t.Logf("deposited, then listed as completed %.2fs later (the provider settles 0.3 s after the deposit), no status call made",
		listed.Sub(deposited).Seconds())

	// Freeze the provider: every read still answers at once.
	waiting := s.newPayout(key, "76", "")
	order := decodeOK(t, s.post("/v1/orders", key, `{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"`+orderWallet+`"}`))["orderId"].(string)
	bank := s.Services["sandboxbank"]
	if err := bank.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer bank.Signal(syscall.SIGCONT)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/bank/payout/status", `{"payoutId":"` + id + `"}`},
		{"POST", "/v1/bank/payout/status", `{"payoutId":"` + waiting + `"}`},
		{"GET", "/v1/bank/payouts", ""},
		{"POST", "/v1/orders/status", `{"orderId":"` + order + `"}`},
		{"GET", "/v1/orders", ""},
		{"GET", "/v1/fiat/accounts", ""},
		{"GET", "/v1/fiat/virtual-accounts", ""},
		{"GET", "/v1/fiat/deposits", ""},
	} {
		start := time.Now()
		got := s.do(r.method, r.path, key, r.body)
		if took := time.Since(start); got.Status != 200 || took > time.Second {
			t.Errorf("%s %s with the provider frozen: %d in %.2fs, want 200 within a second", r.method, r.path, got.Status, took.Seconds())
		}
	}
	if st := s.payoutStatus(key, id); st.Status != "completed" {
		t.Errorf("a completed payout, the provider frozen: %s", st.Status)
	}
}

// Every way a payout's deposit does not pay its beneficiary ends with the
// refund DESIGN §3 describes, sent on the local chain from the treasury
// once an address is known and confirmed there (§10): a failed payout, a
// returned one (with its rail's code), a short deposit, an excess, a late
// one and a wrong token. The refund address then holds exactly what was
// refunded, token by token: each refund landed once.
func TestEveryDepositThatIsNotPaidOutIsRefunded(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000", "--max-execution-usd", "1000000")
	addr := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	type refund struct{ reason, amount, token string }
	cases := []struct {
		name, deposit string
		withAddress   bool
		status        string
		refunds       []refund
	}{
		{"failed", `"outcome":"failed","reason":"name_mismatch"`, true, "failed", []refund{{"payout_failed", "1234567.89", "USDC"}}},
		{"returned", `"outcome":"returned","reason":"account_closed"`, false, "returned", []refund{{"payout_returned", "1234567.89", "USDC"}}},
		{"short", `"amount":"100"`, true, "failed", []refund{{"deposit_short", "100.00", "USDC"}}},
		{"excess", `"amount":"1234600.00"`, true, "completed", []refund{{"deposit_excess", "32.11", "USDC"}}},
		{"late", "", false, "expired", []refund{{"deposit_late", "1234567.89", "USDC"}}},
		{"wrong token", `"cryptoCurrency":"EURC"`, true, "awaiting_deposit", []refund{{"deposit_wrong_token", "1234567.89", "EURC"}}},
	}
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() {
			a := ""
			if c.withAddress {
				a = addr
			}
			id := s.newPayout(key, fmt.Sprintf("8%d", i), a)
			if c.name == "late" {
				if r := s.post("/v1/sandbox/payouts/expire", key, `{"payoutId":"`+id+`"}`); r.Status != 200 || !strings.Contains(r.Body, `"status":"expired"`) {
					t.Errorf("expire: %d %s", r.Status, r.Body)
					return
				}
			}
			body := `{"payoutId":"` + id + `"`
			if c.deposit != "" {
				body += "," + c.deposit
			}
			if r := s.post("/v1/sandbox/payouts/deposit", key, body+"}"); r.Status != 200 {
				t.Errorf("%s: the deposit: %d %s", c.name, r.Status, r.Body)
				return
			}
			var st payoutStatus
			done := func() bool {
				st = decodeStatus(t, s.post("/v1/bank/payout/status", key, `{"payoutId":"`+id+`"}`))
				if st.Status != c.status || len(st.Refunds) != len(c.refunds) {
					return false
				}
				for _, r := range st.Refunds {
					if (c.withAddress && r.Status != "confirmed") || (!c.withAddress && r.Status != "awaiting_address") {
						return false
					}
				}
				return true
			}
			if !eventually(30*time.Second, done) {
				t.Errorf("%s: %+v, want %s with %v", c.name, st, c.status, c.refunds)
				return
			}
			for j, r := range st.Refunds {
				want := c.refunds[j]
				if r.Reason != want.reason || r.Amount != want.amount || r.CryptoCurrency != want.token || !strings.HasPrefix(r.RefundID, "rf_") {
					t.Errorf("%s: refund %+v, want %+v", c.name, r, want)
				}
				if c.withAddress && (r.Address != addr || len(r.TxHash) != 66 || r.SentAt == "" || r.ConfirmedAt == "") {
					t.Errorf("%s: a confirmed refund %+v", c.name, r)
				}
			}
			if c.name == "returned" && (st.ReturnReason != "account_closed" || st.ReturnCode != "AC04") {
				t.Errorf("returned: reason %q code %q, want account_closed AC04", st.ReturnReason, st.ReturnCode)
			}
			if !c.withAddress {
				// The address, set now, once: the refund is sent.
				r := s.post("/v1/bank/payout/refund-address", key, `{"payoutId":"`+id+`","address":"`+addr+`"}`)
				if r.Status != 200 {
					t.Errorf("%s: refund address: %d %s", c.name, r.Status, r.Body)
					return
				}
				if again := s.post("/v1/bank/payout/refund-address", key, `{"payoutId":"`+id+`","address":"0x000000000000000000000000000000000000dEaD"}`); again.Status != 409 ||
					!strings.Contains(again.Body, `"code":"refund_address_locked"`) {
					t.Errorf("%s: another address: %d %s", c.name, again.Status, again.Body)
				}
				if !eventually(30*time.Second, func() bool {
					st = s.payoutStatus(key, id)
					return len(st.Refunds) == 1 && st.Refunds[0].Status == "confirmed" && st.Refunds[0].Address == addr && len(st.Refunds[0].TxHash) == 66
				}) {
					t.Errorf("%s: after the address: %+v", c.name, st.Refunds)
				}
			}
		})
	}
	wg.Wait()
	// What the refund address holds on the chain is what was refunded.
	node, err := ethclient.Dial(s.ChainURLs[84532])
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	for token, want := range map[string]string{baseUSDC: "1234567.89" + "+1234567.89" + "+100.00" + "+32.11" + "+1234567.89", baseEURC: "1234567.89"} {
		if got := tokenBalance(t, node, token, addr); got.Cmp(unitsOf(want)) != 0 {
			t.Errorf("the refund address holds %s units of %s, want %s (%s): every refund once", got, token, unitsOf(want), want)
		}
	}
}

// The payout service is SIGKILLed again and again while payouts are
// deposited, handed over, settled, failed, returned and refunded, and the
// sandbox provider is restarted empty once their hand-overs are confirmed:
// every payout is handed over exactly once (never sent again, even to a
// provider that forgot it) and ends in one final status (or stays as last
// known, for the ones the provider forgot), with each refund it owes once,
// never beside a completed payout (the refund of an excess aside).
func TestKillsLoseAndDoubleNothing(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t, withEnv("SANDBOX_PAYOUT_SETTLE", "1s"))
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "100000", "--max-execution-usd", "1000000000")
	addr := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	outcomes := []string{``, `"outcome":"failed","reason":"account_closed"`, `"outcome":"returned","reason":"refused_by_beneficiary"`, `"amount":"10"`, `"amount":"1234570.00"`}
	var ids []string
	for i := range 30 {
		ids = append(ids, s.newPayout(key, fmt.Sprintf("%d.%02d", 90+i/100, i%100), addr))
	}
	kill := func() { s.killAndRestart("payout") }
	// Deposits, six at a time, with the service killed as soon as the
	// first of each six is answered: the others are between their deposit,
	// their hand-over and their move, and the ones before are settling,
	// failing, coming back and being refunded.
	deposit := func(i int, id string) {
		body := `{"payoutId":"` + id + `"`
		if o := outcomes[i%len(outcomes)]; o != "" {
			body += "," + o
		}
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
			if r := s.do("POST", "/v1/sandbox/payouts/deposit", key, body+"}", "Idempotency-Key", "dep-"+id); r.Status == 200 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("%s: no deposit answered within 60 s", id)
	}
	for g := 0; g < len(ids); g += 6 {
		answered := make(chan struct{}, 6)
		var wg sync.WaitGroup
		for i := g; i < min(g+6, len(ids)); i++ {
			wg.Go(func() { deposit(i, ids[i]); answered <- struct{}{} })
		}
		<-answered
		kill()
		wg.Wait()
	}
	kill() // once more, with hand-overs, settlements and refunds in flight
	final := map[string]bool{"completed": true, "failed": true, "returned": true}
	settled := func() bool {
		for _, id := range ids {
			st := s.payoutStatus(key, id)
			if !final[st.Status] {
				return false
			}
			for _, r := range st.Refunds {
				if r.Status != "confirmed" {
					return false
				}
			}
		}
		return true
	}
	if !eventually(90*time.Second, settled) {
		t.Fatal("not every payout reached its final status, with its refunds confirmed on chain, within 90 s")
	}
	// Each payout was handed over once: the provider made one payout per
	// hand-over (a retry keyed by the payout id is answered the one it
	// has), every short one aside.
	bank := s.Services["sandboxbank"]
	short := 0
	for i := range ids {
		if strings.Contains(outcomes[i%len(outcomes)], `"amount":"10"`) {
			short++
		}
	}
	// (Its changes feed, not its request counts: a creation whose caller
	// was killed mid-call is counted 499 there.)
	if made := providerMade(t, s); made != len(ids)-short {
		t.Errorf("the provider made %v payouts, want %d: one per hand-over", made, len(ids)-short)
	}
	// The provider restarts empty: no payout it confirmed is sent again,
	// nothing polls the completed ones for returns, and its changes feed
	// (the place we kept is of its earlier boot) is followed from its new
	// start: a payout made after the restart completes.
	bank.Stop()
	if err := bank.Start(); err != nil {
		t.Fatal(err)
	}
	if err := bank.WaitHealthy(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	kill()
	after := s.newPayout(key, "99.99", addr)
	deposit(0, after)
	if !eventually(30*time.Second, func() bool { return s.payoutStatus(key, after).Status == "completed" }) {
		t.Error("a payout made after the provider restarted empty did not complete: its changes feed was not followed again")
	}
	ids = append(ids, after)
	if v := providerMade(t, s); v != 1 {
		t.Errorf("the provider, restarted empty, was handed %v payouts, want 1 (the new one): none sent again", v)
	}
	if v, _ := metricValue(s.metrics("sandboxbank"), "partnerapi_http_requests_total", map[string]string{"route": "GET /v1/payouts/by_reference/{reference}"}); v != 0 {
		t.Errorf("final payouts were asked about %v times after the restart: nothing polls them", v)
	}
	for _, id := range ids {
		if st := s.payoutStatus(key, id); !final[st.Status] {
			t.Errorf("%s: %s after the provider forgot it, want its final status as last known", id, st.Status)
		}
	}

	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT p.id, p.status, p.handed_over_at IS NOT NULL, COALESCE(p.failure_reason, ''),
			(SELECT count(*) FROM payout_history h WHERE h.payout_id = p.id),
			(SELECT string_agg(r.reason, ',' ORDER BY r.reason) FROM payout_refunds r WHERE r.payout_id = p.id)
		FROM payouts p WHERE key_id = 'acme'`)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var id, status, failure string
		var handed bool
		var moves int
		var reasons *string
		if err := rows.Scan(&id, &status, &handed, &failure, &moves, &reasons); err != nil {
			t.Fatal(err)
		}
		seen++
		got := ""
		if reasons != nil {
			got = *reasons
		}
		want := map[string]string{"completed": "", "failed": "payout_failed", "returned": "payout_returned"}[status]
		switch {
		case failure == "deposit_short":
			want = "deposit_short"
			if handed {
				t.Errorf("%s: a short deposit was handed over", id)
			}
		case !handed:
			t.Errorf("%s: %s without the provider having it", id, status)
		}
		if strings.Contains(got, "deposit_excess") {
			got = strings.TrimPrefix(strings.TrimSuffix(strings.ReplaceAll(got, "deposit_excess", ""), ","), ",")
		}
		if got != want {
			t.Errorf("%s: %s with refunds %q, want %q (each once)", id, status, got, want)
		}
	}
	if seen != len(ids) {
		t.Errorf("%d payouts in the database, want %d", seen, len(ids))
	}
	// Every refund landed on chain once, through the kills: the refund
	// address holds their sum, and the treasury sent one transfer each.
	var sum string
	var refunds int
	if err := c.QueryRow(ctx, `SELECT COALESCE(sum(amount::numeric), 0)::text, count(*) FROM payout_refunds WHERE status = 'confirmed'`).Scan(&sum, &refunds); err != nil {
		t.Fatal(err)
	}
	node, err := ethclient.Dial(s.ChainURLs[84532])
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if got := tokenBalance(t, node, baseUSDC, addr); got.Cmp(unitsOf(sum)) != 0 {
		t.Errorf("the refund address holds %s USDC units, want %s: the %d refunds, each once", got, unitsOf(sum), refunds)
	}
	logs, err := node.FilterLogs(ctx, ethereum.FilterQuery{Addresses: []common.Address{common.HexToAddress(baseUSDC)},
		Topics: [][]common.Hash{{crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))},
			{common.BytesToHash(chaintest.Treasury.Address.Bytes())}, {common.BytesToHash(common.HexToAddress(addr).Bytes())}}})
	if err != nil || len(logs) != refunds {
		t.Errorf("the treasury sent %d transfers to the refund address (%v), want %d: one per refund", len(logs), err, refunds)
	}
}

// The bank provider's notifications (DESIGN §3) arrive through the
// gateway's public route: a signed one is taken, and an unsigned, forged
// or stale one is refused; none changes anything (a notification carries
// no change: the feed is read from its place).
func TestProviderNotificationsAreSignedAndFresh(t *testing.T) {
	// Not parallel: a stack of its own (package e2e).
	s := startStack(t)
	body := `{"type":"changes.available","after":"chg_000000000000000000000001"}`
	secret, now := bankprovider.NotifySecret(s.ProviderKey), time.Now()
	for _, tt := range []struct {
		name, signature string
		status          int
		want            string
	}{
		{"signed", bankprovider.Sign(secret, []byte(body), now), 200, `{"environment":"sandbox","received":true}`},
		{"unsigned", "", 401, `"code":"unauthorized"`},
		{"forged", bankprovider.Sign([]byte("a guess"), []byte(body), now), 401, `"code":"unauthorized"`},
		{"stale", bankprovider.Sign(secret, []byte(body), now.Add(-10*time.Minute)), 400, `"code":"invalid_request"`},
	} {
		r := s.do("POST", "/provider/notifications", "", body, "Provider-Signature", tt.signature)
		if r.Status != tt.status || !strings.Contains(r.Body, tt.want) || !strings.HasPrefix(r.Body, `{"environment":"sandbox"`) {
			t.Errorf("%s: %d %s, want %d with %s", tt.name, r.Status, r.Body, tt.status, tt.want)
		}
	}
}

// Refunds land on chain exactly once through kills (DESIGN §10): 100
// payouts each owe a refund (a short deposit), and the payout service is
// SIGKILLed again and again while their deposits are seen and their
// refunds are signed, kept, broadcast, mined and confirmed, so that kills
// fall between each of those steps. Every refund ends confirmed, the
// treasury sent exactly one transfer per refund, each at a nonce of its
// own, and the refund address holds exactly their sum. The deposits, final
// once their refunds are confirmed, are swept home: every deposit address
// ends empty, and the treasury holds what it held (100 swept in, 100
// refunded out).
func TestRefundsLandOnceThroughKills(t *testing.T) {
	// Not parallel: a stack of its own, killed again and again (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "100000", "--max-execution-usd", "1000000000")
	addr := "0x000000000000000000000000000000000000C0DE"
	const n = 100
	node, err := ethclient.Dial(s.ChainURLs[84532])
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	treasury := tokenBalance(t, node, baseUSDC, chaintest.Treasury.Address.Hex())
	ids := make([]string, n)
	for i := range n {
		ids[i] = s.newPayout(key, fmt.Sprintf("%d.%02d", 50+i/100, i%100), addr)
	}
	deposit := func(id string) {
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
			r := s.do("POST", "/v1/sandbox/payouts/deposit", key, `{"payoutId":"`+id+`","amount":"1"}`, "Idempotency-Key", "refund-"+id)
			if r.Status == 200 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("%s: no deposit answered within 60 s", id)
	}
	confirmed := func() int {
		k := 0
		for _, id := range ids {
			st := s.payoutStatus(key, id)
			if len(st.Refunds) == 1 && st.Refunds[0].Status == "confirmed" {
				k++
			}
		}
		return k
	}
	// Deposits ten at a time, the service killed as soon as the first of
	// each ten is answered: the refunds before are being signed and sent.
	for g := 0; g < n; g += 10 {
		answered := make(chan struct{}, 10)
		var wg sync.WaitGroup
		for _, id := range ids[g : g+10] {
			wg.Go(func() { deposit(id); answered <- struct{}{} })
		}
		<-answered
		s.killAndRestart("payout")
		wg.Wait()
	}
	// And while the last refunds are in flight.
	for range 4 {
		if confirmed() == n {
			break
		}
		s.killAndRestart("payout")
	}
	if !eventually(120*time.Second, func() bool { return confirmed() == n }) {
		t.Fatalf("%d of %d refunds confirmed within 120 s of the last kill", confirmed(), n)
	}
	ctx := context.Background()
	emptied := func() bool {
		for _, id := range ids {
			if tokenBalance(t, node, baseUSDC, s.payoutStatus(key, id).Deposit.Address).Sign() != 0 {
				return false
			}
		}
		return true
	}
	if !eventually(60*time.Second, emptied) {
		t.Error("not every deposit address was swept empty within 60 s of the last refund")
	}
	if got := tokenBalance(t, node, baseUSDC, chaintest.Treasury.Address.Hex()); got.Cmp(treasury) != 0 {
		t.Errorf("the treasury holds %s USDC units, want %s: what it held, plus 100 swept, minus 100 refunded", got, treasury)
	}
	if got, want := tokenBalance(t, node, baseUSDC, addr), unitsOf("100"); got.Cmp(want) != 0 {
		t.Errorf("the refund address holds %s USDC units, want %s: 100 refunds of 1.00, each once", got, want)
	}
	logs, err := node.FilterLogs(ctx, ethereum.FilterQuery{Addresses: []common.Address{common.HexToAddress(baseUSDC)},
		Topics: [][]common.Hash{{crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))},
			{common.BytesToHash(chaintest.Treasury.Address.Bytes())}, {common.BytesToHash(common.HexToAddress(addr).Bytes())}}})
	if err != nil || len(logs) != n {
		t.Errorf("the treasury sent %d transfers to the refund address (%v), want %d: one per refund", len(logs), err, n)
	}
	c, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var sends, nonces, dropped int
	if err := c.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'dropped'), count(DISTINCT nonce), count(*) FILTER (WHERE state = 'dropped')
		FROM payout_chain_sends WHERE purpose = 'refund'`).Scan(&sends, &nonces, &dropped); err != nil {
		t.Fatal(err)
	}
	if sends != n || nonces != n || dropped != 0 {
		t.Errorf("%d live sends at %d nonces, %d dropped; want %d, %d and none", sends, nonces, dropped, n, n)
	}
}
