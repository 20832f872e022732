package payout

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/chain"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/chaintest"
)

// testKeys is the tests' deposit wallet (a fixed seed): the service is
// given its public side, and a test derives a payout's private key from
// it.
var testKeys = func() *chaintest.DepositKeys {
	k, err := chaintest.NewDepositKeys([]byte("partnerapi payout tests: a seed of 32+ bytes"))
	if err != nil {
		panic(err)
	}
	return k
}()

// sweepKeys are testKeys' private side, as the signer holds it.
var sweepKeys = func() *chain.SweepKeys {
	a, err := chain.NewAddresses(testKeys.XPub())
	if err != nil {
		panic(err)
	}
	k, err := chain.NewSweepKeys(testKeys.XPrv(), a)
	if err != nil {
		panic(err)
	}
	return k
}()

// keyed is cfg with deposit addresses from testKeys, at indexes from its
// store's sequence.
func keyed(cfg Config) Config {
	a, err := chain.NewAddresses(testKeys.XPub())
	if err != nil {
		panic(err)
	}
	if payouts, ok := cfg.Payouts.(*store.Store); ok {
		cfg.Addresses, cfg.Indexes = a, chain.NewIndexes(payouts.NextIndexes, store.IndexBlock)
	}
	return cfg
}

// onChain is a local testnet (Base Sepolia's id), mined only when the test
// says (Commit), with its node as the service reads it (one
// confirmation), the sandbox's faucet on it, and a watcher that records
// its deposits in payouts and wakes nothing (the tests run the rounds),
// and a signer that sends the refunds from the testnet's treasury wallet
// (a transaction not mined in a minute of the test's clock is replaced).
type onChain struct {
	chain   *chaintest.Chain
	node    *chain.Node
	faucet  *chain.Faucet
	watcher *chain.Watcher
	signer  *chain.Signer
}

func newOnChain(t testing.TB, payouts *store.Store, now func() time.Time, reg prometheus.Registerer) *onChain {
	t.Helper()
	ch, err := chaintest.Start(chaintest.Options{ChainID: 84532, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	node, err := chain.NewNode(environment.Sandbox, 84532, ch.Client(), 1)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[int64]*chain.Node{84532: node}
	faucet, err := chain.NewFaucet(chaintest.Faucet.KeyHex(), nodes)
	if err != nil {
		t.Fatal(err)
	}
	log := discard()
	w := chain.NewWatcher(node, payouts, now, nil, chain.NewMetrics(reg), worker.NewRows("payout", log, reg), log, reg)
	s, err := chain.NewSigner(node, chaintest.Treasury.KeyHex(), payouts, now, chain.SignerOptions{ReplaceAfter: time.Minute, Sweep: sweepKeys},
		chain.NewSignerMetrics(reg), log, reg)
	if err != nil {
		t.Fatal(err)
	}
	return &onChain{chain: ch, node: node, faucet: faucet, watcher: w, signer: s}
}

// seen mines what waits and has the watcher record every confirmed
// transfer.
func (o *onChain) seen(t testing.TB) {
	t.Helper()
	o.chain.Commit()
	for range 10 {
		n, err := o.watcher.Round(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the watcher still had blocks to read after 10 rounds")
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// deposit is a deposit through the faucet as a partner sees it: the
// transfer sent, mined and recorded by the watcher, its hand-over made,
// and the payout as it then stands.
func (f statusFixture) deposit(ctx context.Context, caller partner.Caller, req DepositRequest) (PayoutStatus, error) {
	d, err := f.svc.SandboxDeposit(ctx, caller, req)
	if err != nil {
		return PayoutStatus{}, err
	}
	if d.TxHash == "" {
		return PayoutStatus{}, errors.New("the faucet answered no txHash")
	}
	f.chain.seen(f.t)
	if _, err := f.worker.HandOverRound(ctx); err != nil {
		return PayoutStatus{}, err
	}
	return f.svc.Status(ctx, caller, StatusRequest{PayoutID: req.PayoutID})
}
