package payout

import (
	"bytes"
	"context"
	"math/big"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/services/payout/internal/mover"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/record"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/chaintest"
	"github.com/partnerpay/api/testkit/pgtest"
	"github.com/partnerpay/api/testkit/redistest"
)

// statusFixture is the service and its worker with a fake provider whose
// word a test sets, on a clock the test moves.
type statusFixture struct {
	t        testing.TB
	svc      Service
	clock    *clock
	provider *fakeProvider
	db       *database.DB
	worker   *mover.Worker
	chain    *onChain
	reg      *prometheus.Registry
}

func newStatusFixture(t testing.TB, db *database.DB) statusFixture {
	t.Helper()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	c := &clock{t: time.Now().UTC()}
	p := newFakeProvider()
	reg := prometheus.NewPedanticRegistry()
	payouts := store.NewStore(db, environment.Sandbox)
	on := newOnChain(t, payouts, c.now, reg)
	svc, w := withMover(Config{Env: environment.Sandbox, TTL: time.Hour, Book: quote.NewBook(rdb, []byte("test-secret-0123456789"), c.now),
		Now: c.now, Secret: []byte("test-secret-0123456789"), Faucet: on.faucet}, payouts, p, reg)
	return statusFixture{t: t, svc: svc, clock: c, provider: p, db: db, worker: w, chain: on, reg: reg}
}

// withMover is the service of cfg on payouts, with its mover on provider
// p and its deposit addresses from testKeys, as the payout binary makes
// them.
func withMover(cfg Config, payouts *store.Store, p mover.Provider, reg prometheus.Registerer) (Service, *mover.Worker) {
	w := mover.New(mover.Parts{Env: cfg.Env, Store: payouts, Provider: p, Now: cfg.Now, Registry: reg})
	cfg.Payouts, cfg.Payee, cfg.Mover = payouts, p, w
	return NewService(keyed(cfg)), w
}

// payout executes a new quote of amount for Ada, with a refund address
// when one is given.
func (f statusFixture) payout(t testing.TB, amount string, refundAddress ...string) Payout {
	t.Helper()
	id := quoteFor(t, f.svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp(amount)})
	req := pay(id, "Ada Lovelace", goodIBAN)
	if len(refundAddress) == 1 {
		req.RefundAddress = &refundAddress[0]
	}
	p, err := f.svc.Execute(context.Background(), acme, req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f statusFixture) status(t *testing.T, id string) PayoutStatus {
	t.Helper()
	st, err := f.svc.Status(context.Background(), acme, StatusRequest{PayoutID: id})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// work mines what waits on the chain and runs the watcher's, the
// worker's and the signer's rounds at the fixture's clock until nothing is
// due (a refund signed and broadcast in one round is mined, and
// confirmed, in the next).
func (f statusFixture) work(t *testing.T) {
	t.Helper()
	f.rounds(t, true)
}

// workOffChain is work without the chain: the worker's rounds alone, until
// one finds nothing to do.
func (f statusFixture) workOffChain(t *testing.T) {
	t.Helper()
	f.rounds(t, false)
}

// rounds runs the worker's rounds, and with onChain the chain's (mined,
// watched, signed for), until a round of them all finds nothing to do.
func (f statusFixture) rounds(t *testing.T, onChain bool) {
	t.Helper()
	ctx := context.Background()
	for range 20 {
		if onChain {
			f.chain.seen(t)
		}
		n, err := f.worker.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if onChain {
			m, err := f.chain.signer.Round(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n += m
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the worker or the signer still had work after 20 rounds")
}

// advance moves the clock, and the chain's, on by d.
func (f statusFixture) advance(t testing.TB, d time.Duration) {
	t.Helper()
	f.clock.add(d)
	if err := f.chain.chain.AdjustTime(d); err != nil {
		t.Fatal(err)
	}
}

// later moves the clock on by d and lets the worker work.
func (f statusFixture) later(t *testing.T, d time.Duration) {
	t.Helper()
	f.advance(t, d)
	f.work(t)
}

func statuses(st PayoutStatus) []string {
	var out []string
	for _, h := range st.History {
		out = append(out, h.Status)
	}
	return out
}

func strs(s ...string) []string { return s }

func equal(a, b []string) bool { return reflect.DeepEqual(a, b) }

// refunds is each refund as reason/status/amount/currency[/address].
func refunds(st PayoutStatus) []string {
	var out []string
	for _, r := range st.Refunds {
		s := r.Reason + "/" + r.Status + "/" + r.Amount + "/" + r.CryptoCurrency
		if r.Address != "" {
			s += "/" + r.Address
		}
		out = append(out, s)
	}
	return out
}

// A payout goes from awaiting_deposit through processing to the outcome
// its sandbox deposit chose, as the provider reports it to the worker,
// each status once in its history; a read never asks the provider. A
// failed or returned payout owes its deposit back, and a return carries
// its rail's code.
func TestAPayoutReachesItsOutcome(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	for _, tt := range []struct {
		name, outcome, reason string
		amount                string
		word                  bankprovider.Payout
		want                  []string
		refunds               []string
		returnCode            string
	}{
		{"completed", "", "", "101", bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"},
			strs("awaiting_deposit", "processing", "completed"), nil, ""},
		{"failed", "failed", "name_mismatch", "102", bankprovider.Payout{Status: "failed", FailureReason: "name_mismatch"},
			strs("awaiting_deposit", "processing", "failed"), strs("payout_failed/awaiting_address/1234567.89/USDC"), ""},
		{"returned", "returned", "account_closed", "103", bankprovider.Payout{Status: "returned", ReturnReason: "account_closed", CompletedAt: "2026-11-26T12:00:03Z"},
			strs("awaiting_deposit", "processing", "completed", "returned"), strs("payout_returned/awaiting_address/1234567.89/USDC"), "AC04"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := f.payout(t, tt.amount)
			if st := f.status(t, p.PayoutID); st.Status != "awaiting_deposit" || !equal(statuses(st), strs("awaiting_deposit")) ||
				!reflect.DeepEqual(st.Payout, p) || st.Refunds == nil || len(st.Refunds) != 0 {
				t.Fatalf("a new payout's status: %+v", st)
			}
			req := DepositRequest{PayoutID: p.PayoutID}
			if tt.outcome != "" {
				req.Outcome, req.Reason = &tt.outcome, &tt.reason
			}
			st, err := f.deposit(ctx, acme, req)
			if err != nil || st.Status != "processing" || len(st.DepositTxHash) != 66 || !equal(statuses(st), strs("awaiting_deposit", "processing")) {
				t.Fatalf("the deposit: %+v %v", st, err)
			}
			handed := f.provider.payouts[p.PayoutID]
			if tt.outcome != "" && (handed.Sandbox == nil || handed.Sandbox.Outcome != tt.outcome || handed.Sandbox.Reason != tt.reason) {
				t.Errorf("handed to the provider as %+v", handed)
			}
			if string(handed.Beneficiary) != `{"name":"Ada Lovelace","iban":"DE89370400440532013000"}` || handed.Rail != "sepa_instant" {
				t.Errorf("handed to the provider as %+v", handed)
			}
			f.provider.says(p.PayoutID, tt.word)
			_, asked, _ := f.provider.counts()
			if st := f.status(t, p.PayoutID); st.Status != "processing" {
				t.Errorf("read before the worker's round: %s, want processing: a read never asks the provider", st.Status)
			}
			if _, now, _ := f.provider.counts(); now != asked {
				t.Errorf("a status read asked the provider")
			}
			f.later(t, time.Second)
			st = f.status(t, p.PayoutID)
			if st.Status != tt.word.Status || !equal(statuses(st), tt.want) || st.FailureReason != tt.word.FailureReason || st.ReturnReason != tt.word.ReturnReason ||
				st.ReturnCode != tt.returnCode || (tt.word.CompletedAt != "") != (st.CompletedAt != "") || st.DepositTxHash == "" ||
				!equal(refunds(st), tt.refunds) {
				t.Fatalf("after the provider's word: %+v (refunds %v)", st, refunds(st))
			}
			f.later(t, time.Minute)
			if again := f.status(t, p.PayoutID); !equal(statuses(again), tt.want) || !equal(refunds(again), tt.refunds) {
				t.Errorf("later: %v %v", statuses(again), refunds(again))
			}
		})
	}
}

// No deposit within the window: the worker expires the payout (a read does
// not), and a deposit after that is refunded, the payout staying expired.
func TestAPayoutWithoutItsDepositExpires(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	p := f.payout(t, "33")
	f.clock.add(DepositWindow)
	if st := f.status(t, p.PayoutID); st.Status != "awaiting_deposit" {
		t.Fatalf("read at the window's end, before the worker: %s", st.Status)
	}
	f.work(t)
	st := f.status(t, p.PayoutID)
	if st.Status != "expired" || !equal(statuses(st), strs("awaiting_deposit", "expired")) {
		t.Fatalf("%+v", st)
	}
	late, err := f.deposit(context.Background(), acme, DepositRequest{PayoutID: p.PayoutID})
	if err != nil || late.Status != "expired" || late.DepositTxHash != "" || !equal(refunds(late), strs("deposit_late/awaiting_address/1234567.89/USDC")) {
		t.Errorf("a deposit after expiry: %+v %v", late, err)
	}
}

// A deposit that arrives when the window has closed but before the worker
// has moved the payout is late all the same, on the database's clock.
func TestADepositAfterTheWindowIsLateBeforeTheWorkerRuns(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	p := f.payout(t, "34")
	f.advance(t, DepositWindow)
	st, err := f.deposit(context.Background(), acme, DepositRequest{PayoutID: p.PayoutID})
	if err != nil || st.Status != "expired" || !equal(refunds(st), strs("deposit_late/awaiting_address/1234567.89/USDC")) {
		t.Fatalf("%+v %v", st, err)
	}
	if _, _, made := f.provider.counts(); made != 0 {
		t.Errorf("a late deposit reached the provider")
	}
}

// Deposits that do not match (DESIGN §3): a short one fails the payout
// and is refunded whole; an excess pays the payout and is refunded; a wrong
// token is refunded and the payout keeps waiting. Refunds go to the
// payout's refund address once it has one (pending), and a sandbox refund
// is sent, with a hash, one settle later.
func TestDepositMismatchesAreRefunded(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	addr := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	deposit := func(t *testing.T, p Payout, amount, token string) PayoutStatus {
		t.Helper()
		req := DepositRequest{PayoutID: p.PayoutID}
		if amount != "" {
			req.Amount = &amount
		}
		if token != "" {
			req.CryptoCurrency = &token
		}
		st, err := f.deposit(ctx, acme, req)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	short := f.payout(t, "40", addr)
	if st := deposit(t, short, "100", ""); st.Status != "failed" || st.FailureReason != "deposit_short" || st.DepositTxHash == "" ||
		!equal(statuses(st), strs("awaiting_deposit", "failed")) || !equal(refunds(st), strs("deposit_short/pending/100.00/USDC/"+addr)) {
		t.Errorf("short: %+v %v", st, refunds(st))
	}
	excess := f.payout(t, "41", addr)
	if st := deposit(t, excess, "1234570.00", ""); st.Status != "processing" || !equal(refunds(st), strs("deposit_excess/pending/2.11/USDC/"+addr)) {
		t.Errorf("excess: %+v %v", st, refunds(st))
	}
	// An excess, then a failure: the failure refunds what the payout took,
	// not the excess again.
	excessFailed := f.payout(t, "43", addr)
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: excessFailed.PayoutID, Amount: strp("1234600.00"),
		Outcome: strp("failed"), Reason: strp("account_closed")}); err != nil {
		t.Fatal(err)
	}
	f.provider.says(excessFailed.PayoutID, bankprovider.Payout{Status: "failed", FailureReason: "account_closed"})
	f.later(t, time.Second)
	if st := f.status(t, excessFailed.PayoutID); st.Status != "failed" ||
		!equal(refunds(st), strs("deposit_excess/confirmed/32.11/USDC/"+addr, "payout_failed/confirmed/1234567.89/USDC/"+addr)) {
		t.Errorf("an excess, then a failure: %+v %v", st, refunds(st))
	}
	wrong := f.payout(t, "42")
	if st := deposit(t, wrong, "", "EURC"); st.Status != "awaiting_deposit" || st.DepositTxHash != "" ||
		!equal(refunds(st), strs("deposit_wrong_token/awaiting_address/1234567.89/EURC")) {
		t.Errorf("wrong token: %+v %v", st, refunds(st))
	}
	if st := deposit(t, wrong, "", "USDC"); st.Status != "processing" || len(st.Refunds) != 1 {
		t.Errorf("then the right token: %+v %v", st, refunds(st))
	}
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: wrong.PayoutID, CryptoCurrency: strp("DAI")}); code(err) != "invalid_request" {
		t.Errorf("a token not on the chain: %v", err)
	}

	// The refund address, set once; the refunds awaiting it go to it.
	for _, tt := range []struct {
		address, code string
	}{{"0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "invalid_request"}, {"", "invalid_request"},
		{"0x0000000000000000000000000000000000000000", "invalid_request"}, // the zero address
		{"0x036CbD53842c5426634e7929541eC2318f3dCF7e", "invalid_request"}, // the USDC contract
		{wrong.Deposit.Address, "invalid_request"},                        // its own deposit address
		{short.Deposit.Address, "invalid_request"},                        // another payout's
	} {
		if _, err := f.svc.SetRefundAddress(ctx, acme, RefundAddressRequest{PayoutID: wrong.PayoutID, Address: tt.address}); code(err) != tt.code {
			t.Errorf("refund address %q: %v, want %s", tt.address, err, tt.code)
		}
	}
	st, err := f.svc.SetRefundAddress(ctx, acme, RefundAddressRequest{PayoutID: wrong.PayoutID, Address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"})
	if err != nil || !equal(refunds(st), strs("deposit_wrong_token/pending/1234567.89/EURC/"+addr)) {
		t.Fatalf("the refund address: %+v %v", refunds(st), err)
	}
	if _, err := f.svc.SetRefundAddress(ctx, acme, RefundAddressRequest{PayoutID: wrong.PayoutID, Address: addr}); err != nil {
		t.Errorf("the same address again: %v", err)
	}
	if _, err := f.svc.SetRefundAddress(ctx, acme, RefundAddressRequest{PayoutID: wrong.PayoutID, Address: "0x000000000000000000000000000000000000dEaD"}); code(err) != "refund_address_locked" {
		t.Errorf("another address: %v", err)
	}

	// Every refund leaves on chain from the treasury, once: confirmed with
	// the mined transfer's hash, and the refund address holds exactly what
	// was refunded to it, token by token.
	f.work(t)
	eurcToken, _ := f.chain.node.Chain.Token("EURC")
	eurc := common.HexToAddress(eurcToken.Address)
	owed := map[common.Address]*big.Int{usdc: new(big.Int), eurc: new(big.Int)}
	for _, p := range []Payout{short, excess, excessFailed, wrong} {
		for _, r := range f.status(t, p.PayoutID).Refunds {
			if r.Status != "confirmed" || len(r.TxHash) != 66 || r.SentAt == "" || r.ConfirmedAt == "" || r.Address != addr {
				t.Errorf("%s: a refund once the signer ran: %+v", p.PayoutID, r)
				continue
			}
			token := map[string]common.Address{"USDC": usdc, "EURC": eurc}[r.CryptoCurrency]
			units := usdcUnits(t, r.Amount) // both have 6 decimals
			owed[token].Add(owed[token], units)
			rc, err := f.chain.chain.Client().TransactionReceipt(ctx, common.HexToHash(r.TxHash))
			if err != nil || rc.Status != types.ReceiptStatusSuccessful || len(rc.Logs) != 1 || rc.Logs[0].Address != token ||
				common.BytesToAddress(rc.Logs[0].Topics[1].Bytes()) != chaintest.Treasury.Address ||
				common.BytesToAddress(rc.Logs[0].Topics[2].Bytes()) != common.HexToAddress(addr) || new(big.Int).SetBytes(rc.Logs[0].Data).Cmp(units) != 0 {
				t.Errorf("%s: refund %s's transaction is not its transfer from the treasury: %+v %v", p.PayoutID, r.RefundID, rc, err)
			}
		}
	}
	for token, want := range owed {
		if got := balance(t, f.chain.chain, token, common.HexToAddress(addr)); got.Cmp(want) != 0 {
			t.Errorf("the refund address holds %s of %s, want %s (what was refunded)", got, token, want)
		}
	}
}

// The hand-over is exactly once and never forgotten: a deposit's intent
// is recorded before the provider is called; a provider that is down, or
// whose answer is lost after it took the payout, has it (once) by the
// worker's next round, and no window expires the payout meanwhile; a
// provider that no longer has a payout it confirmed is an incident,
// counted, and the payout is neither sent again nor moved.
func TestTheHandOverIsExactlyOnce(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()

	down := f.payout(t, "50")
	f.provider.set(func(f *fakeProvider) { f.down = true })
	st, err := f.deposit(ctx, acme, DepositRequest{PayoutID: down.PayoutID})
	if err != nil || st.Status != "awaiting_deposit" || st.DepositTxHash != "" {
		t.Fatalf("the deposit with the provider down: %+v %v", st, err)
	}
	f.later(t, DepositWindow+time.Minute)
	if st := f.status(t, down.PayoutID); st.Status != "awaiting_deposit" {
		t.Fatalf("a payout whose hand-over was recorded, past its window: %s, want still awaiting its hand-over", st.Status)
	}
	f.provider.set(func(f *fakeProvider) { f.down = false })
	f.later(t, time.Minute)
	if st := f.status(t, down.PayoutID); st.Status != "processing" || st.DepositTxHash == "" {
		t.Fatalf("once the provider is back: %+v", st)
	}

	lost := f.payout(t, "51")
	f.provider.set(func(f *fakeProvider) { f.loseNext = true })
	if st, err := f.deposit(ctx, acme, DepositRequest{PayoutID: lost.PayoutID}); err != nil || st.Status != "awaiting_deposit" {
		t.Fatalf("the deposit whose hand-over answer was lost: %+v %v", st, err)
	}
	f.later(t, time.Second)
	if st := f.status(t, lost.PayoutID); st.Status != "processing" {
		t.Fatalf("after the worker: %s", st.Status)
	}
	if _, _, made := f.provider.counts(); made != 2 {
		t.Fatalf("the provider took %d payouts, want 2 (each once)", made)
	}

	creates, _, made := f.provider.counts()
	f.provider.forget()
	for range 3 { // past the payouts' first reconciliation, and their second
		f.later(t, time.Minute)
	}
	for _, p := range []Payout{down, lost} {
		if st := f.status(t, p.PayoutID); st.Status != "processing" {
			t.Errorf("a payout the provider forgot: %s, want processing as last known", st.Status)
		}
	}
	if again, _, madeAfter := f.provider.counts(); again != creates || madeAfter != made {
		t.Errorf("the forgotten payouts were sent again: %d creations after %d, %d payouts taken after %d", again, creates, madeAfter, made)
	}
	// Counted once each, however often it is found missing.
	if n := f.metric(t, "partnerapi_payout_provider_missing_total"); n != 2 {
		t.Errorf("partnerapi_payout_provider_missing_total = %v, want the two payouts counted once each", n)
	}
}

// Two replicas' workers at once, with deposits and reads beside them:
// every payout is handed over once and moves forward once each time, its
// history holding each status once.
func TestTwoWorkersMoveAPayoutOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	f := newStatusFixture(t, db)
	_, second := withMover(Config{Env: environment.Sandbox, Now: f.clock.now}, store.NewStore(db, environment.Sandbox), f.provider, prometheus.NewRegistry())
	ctx := context.Background()
	race := func(fns ...func()) {
		var wg sync.WaitGroup
		for _, fn := range fns {
			wg.Go(fn)
		}
		wg.Wait()
	}
	rounds := func() {
		for range 5 {
			if _, err := f.worker.Round(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	rounds2 := func() {
		for range 5 {
			if _, err := second.Round(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	var ps []Payout
	for i := range 10 {
		ps = append(ps, f.payout(t, "6"+strconv.Itoa(i)))
	}
	race(rounds, rounds2, func() {
		for _, p := range ps {
			if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID, Outcome: strp("returned"), Reason: strp("refused_by_beneficiary")}); err != nil {
				t.Error(err)
			}
		}
	})
	for _, p := range ps {
		f.provider.says(p.PayoutID, bankprovider.Payout{Status: "returned", ReturnReason: "refused_by_beneficiary", CompletedAt: "2026-11-26T12:00:03Z"})
	}
	f.clock.add(time.Minute)
	race(rounds, rounds2)
	for _, p := range ps {
		st := f.status(t, p.PayoutID)
		if !equal(statuses(st), strs("awaiting_deposit", "processing", "completed", "returned")) || len(st.Refunds) != 1 {
			t.Fatalf("%s: history %v, refunds %v", p.PayoutID, statuses(st), refunds(st))
		}
	}
	if _, _, made := f.provider.counts(); made != len(ps) {
		t.Errorf("the provider took %d payouts, want %d", made, len(ps))
	}
}

// The database holds the arrows itself: a backward move, a move off a
// final status and a rewrite of what happened are refused in SQL, and
// each history row commits with its move.
func TestTheDatabaseHoldsThePayoutsArrows(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	f := newStatusFixture(t, db)
	ctx := context.Background()
	p := f.payout(t, "66")
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
		t.Fatal(err)
	}
	f.provider.says(p.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"})
	f.later(t, time.Second)
	for _, stmt := range []string{
		`UPDATE payouts SET status = 'processing'`,
		`UPDATE payouts SET status = 'awaiting_deposit', completed_at = NULL`,
		`UPDATE payouts SET status = 'failed', failure_reason = 'name_mismatch', completed_at = NULL`,
		`UPDATE payouts SET deposit_tx_hash = '0x00'`,
		`UPDATE payouts SET handed_over_at = NULL`,
		`UPDATE payouts SET completed_at = deposit_expires_at`,
		`UPDATE payouts SET status = 'returned'`, // without its reason
		`INSERT INTO payout_history (payout_id, status, at) SELECT id, 'completed', status_at FROM payouts`,
		`UPDATE payouts SET history_statuses = '{awaiting_deposit,completed}', history_times = history_times[1:2]`,
		`UPDATE payouts SET history_times[2] = history_times[2] + interval '1 second'`,
	} {
		if _, err := db.Exec(ctx, stmt); err == nil {
			t.Errorf("%s: accepted", stmt)
		}
	}
	if st := f.status(t, p.PayoutID); st.Status != "completed" || !equal(statuses(st), strs("awaiting_deposit", "processing", "completed")) {
		t.Errorf("after the refused writes: %+v", st)
	}
}

// The database's arrows are DESIGN §3's, no more, no fewer: of every move
// between two statuses, it takes exactly those lifecycle.PayoutMoves
// lists (GET /v1/statuses and the service read that table). Each move
// brings what its status needs (a deposit and its hand-over, a completion
// time, a reason), so a refusal is the arrow's.
func TestTheDatabaseTakesExactlyTheArrows(t *testing.T) {
	t.Parallel()
	all := []string{"awaiting_deposit", "processing", "completed", "returned", "expired", "failed"}
	allowed := map[[2]string]bool{}
	for _, m := range lifecycle.PayoutMoves {
		allowed[m] = true
	}
	db := pgtest.Open(t, migrationSets...)
	ctx := context.Background()
	s := store.NewStore(db, environment.Sandbox)
	at := time.Now().UTC().Truncate(time.Second)
	// step is the move to status with what it needs, from a payout that
	// is where it comes from.
	step := func(from, to string) record.Step {
		st := record.Step{To: to, At: at}
		switch {
		case to == "processing":
			st.DepositTxHash, st.HandoverAt, st.HandedOverAt = "0xaa", &at, &at
		case to == "completed":
			st.DepositTxHash, st.HandoverAt, st.HandedOverAt, st.CompletedAt = "0xaa", &at, &at, &at
		case to == "returned":
			st.DepositTxHash, st.HandoverAt, st.HandedOverAt, st.CompletedAt, st.ReturnReason = "0xaa", &at, &at, &at, "account_closed"
		case to == "failed" && from == "awaiting_deposit":
			st.DepositTxHash, st.FailureReason = "0xaa", lifecycle.PayoutDepositShort
		case to == "failed":
			st.DepositTxHash, st.FailureReason = "0xaa", "name_mismatch"
		}
		return st
	}
	paths := map[string][]string{
		"awaiting_deposit": nil,
		"processing":       {"processing"},
		"completed":        {"processing", "completed"},
		"returned":         {"processing", "completed", "returned"},
		"expired":          {"expired"},
		"failed":           {"processing", "failed"},
	}
	n := 0
	for _, from := range all {
		for _, to := range all {
			if from == to {
				continue
			}
			n++
			p := storedPayout("bpo_"+strconv.Itoa(n), "bpq_"+strconv.Itoa(n), "Ada")
			if _, err := s.Execute(ctx, p, answerAny); err != nil {
				t.Fatal(err)
			}
			prev := "awaiting_deposit"
			for _, next := range paths[from] {
				if _, err := s.Update(ctx, p.ID, func(record.Record) (record.Change, error) {
					return record.Change{Steps: []record.Step{step(prev, next)}}, nil
				}); err != nil {
					t.Fatalf("to %s: %v", from, err)
				}
				prev = next
			}
			_, err := s.Update(ctx, p.ID, func(record.Record) (record.Change, error) {
				return record.Change{Steps: []record.Step{step(from, to)}}, nil
			})
			if took := err == nil; took != allowed[[2]string{from, to}] {
				t.Errorf("%s → %s: taken %v (%v), want %v", from, to, took, err, allowed[[2]string{from, to}])
			}
		}
	}
}

// Migration 15 fills the history arrays of the payouts from before from
// their history rows: run again on payouts whose arrays it emptied, it
// gives each the arrays its trigger kept, in the order it moved.
func TestMigration15FillsTheHistoriesOfPayoutsFromBefore(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	f := newStatusFixture(t, db)
	ctx := context.Background()
	f.payout(t, "61") // awaiting its deposit
	f.completedWithDeposit(t, "62")
	expired := f.payout(t, "63")
	if _, err := f.svc.SandboxExpire(ctx, acme, StatusRequest{PayoutID: expired.PayoutID}); err != nil {
		t.Fatal(err)
	}
	histories := func() string {
		t.Helper()
		var out string
		if err := db.QueryRow(ctx, `SELECT string_agg(id || ' ' || history_statuses::text || ' ' || history_times::text, E'\n' ORDER BY id)
			FROM payouts`).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	kept := histories()
	if !strings.Contains(kept, "{awaiting_deposit,processing,completed}") || !strings.Contains(kept, "{awaiting_deposit,expired}") {
		t.Fatalf("the histories the trigger kept:\n%s", kept)
	}
	migration, err := os.ReadFile("../store/migrations/00015_history_in_the_row.sql")
	if err != nil {
		t.Fatal(err)
	}
	from := bytes.Index(migration, []byte("ALTER TABLE payouts DISABLE TRIGGER"))
	to := bytes.Index(migration, []byte("ALTER TABLE payouts ENABLE TRIGGER"))
	if from < 0 || to < from {
		t.Fatal("the migration's fill is not between its trigger's DISABLE and ENABLE")
	}
	fill := strings.Split(strings.TrimSpace(string(migration[from:to])), ";\n")
	// The arrays' own trigger, which refuses a rewrite, came after the fill.
	statements := append([]string{`ALTER TABLE payouts DISABLE TRIGGER payouts_history_kept`, fill[0],
		`UPDATE payouts SET history_statuses = '{}', history_times = '{}'`}, fill[1:]...)
	statements = append(statements, `ALTER TABLE payouts ENABLE TRIGGER payouts_bound`, `ALTER TABLE payouts ENABLE TRIGGER payouts_history_kept`)
	for _, s := range statements {
		if _, err := db.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if got := histories(); got != kept {
		t.Errorf("filled by the migration:\n%s\nkept by the trigger:\n%s", got, kept)
	}
}
