package chain

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/partnerpay/api/testkit/chaintest"
)

// Deposits hand out each index once, with the address the seed gives it,
// whoever asks at once and wherever a block ends: the address derived
// ahead is the handed-out index's, never a neighbour's.
func TestDepositsHandOutEachIndexOnceWithItsAddress(t *testing.T) {
	t.Parallel()
	keys, a := testWallet(t)
	// Blocks of 5 from 1, 101, 201, …: as the store's sequence hands them
	// out to several replicas, with gaps between.
	var blocks atomic.Int64
	d := NewDeposits(NewIndexes(func(context.Context) (int64, error) { return blocks.Add(1)*100 - 99, nil }, 5), a)
	var mu sync.Mutex
	got := map[int64]string{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 40 {
				index, address, err := d.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if _, twice := got[index]; twice {
					t.Errorf("index %d handed out twice", index)
				}
				got[index] = address
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 320 {
		t.Fatalf("%d indexes, want 320", len(got))
	}
	for index, address := range got {
		if index%100 < 1 || index%100 > 5 {
			t.Errorf("index %d is in no block", index)
		}
		if want, _ := keys.Address(uint32(index)); address != want.Hex() {
			t.Errorf("index %d: address %s, want %s (the seed's)", index, address, want.Hex())
		}
	}
}

// An address is the one hdkeychain's own public derivation gives, and the
// one the private side's key signs for, at the first and last indexes and
// at indexes drawn across the range (the draw's seed is logged).
func TestAddressesAreBIP32sChildren(t *testing.T) {
	t.Parallel()
	keys, a := testWallet(t)
	xpub, err := hdkeychain.NewKeyFromString(keys.XPub())
	if err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	indexes := []int64{0, 1, 2, MaxIndex - 1, MaxIndex}
	for range 64 {
		indexes = append(indexes, r.Int64N(MaxIndex+1))
	}
	for _, index := range indexes {
		got, err := a.At(index)
		if err != nil {
			t.Fatalf("index %d: %v", index, err)
		}
		child, err := xpub.Derive(uint32(index))
		if err != nil {
			t.Fatal(err)
		}
		pub, err := child.ECPubKey()
		if err != nil {
			t.Fatal(err)
		}
		if want := crypto.PubkeyToAddress(*pub.ToECDSA()).Hex(); got != want {
			t.Errorf("index %d: %s, hdkeychain derives %s", index, got, want)
		}
		if key, _ := keys.Address(uint32(index)); got != key.Hex() {
			t.Errorf("index %d: %s, the private side's key is %s", index, got, key.Hex())
		}
	}
	for _, index := range []int64{-1, MaxIndex + 1} {
		if _, err := a.At(index); err == nil {
			t.Errorf("index %d: an address", index)
		}
	}
}

// A block that cannot be reserved is an error, and the next call reserves
// again.
func TestDepositsWithoutABlockFail(t *testing.T) {
	t.Parallel()
	keys, a := testWallet(t)
	down := true
	d := NewDeposits(NewIndexes(func(context.Context) (int64, error) {
		if down {
			return 0, errors.New("database down")
		}
		return 7, nil
	}, 64), a)
	if _, _, err := d.Next(context.Background()); err == nil {
		t.Fatal("an index without a block")
	}
	down = false
	index, address, err := d.Next(context.Background())
	if want, _ := keys.Address(7); err != nil || index != 7 || address != want.Hex() {
		t.Fatalf("%d %s %v, want 7 %s", index, address, err, want.Hex())
	}
}

// testWallet is the tests' deposit wallet, and the addresses of its
// public side.
func testWallet(t testing.TB) (*chaintest.DepositKeys, *Addresses) {
	t.Helper()
	keys, err := chaintest.NewDepositKeys([]byte("a seed of thirty-two bytes or so, for a test"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAddresses(keys.XPub())
	if err != nil {
		t.Fatal(err)
	}
	return keys, a
}

// BenchmarkAddressesAt is the curve's work an execution does beside its
// commit: one deposit address.
func BenchmarkAddressesAt(b *testing.B) {
	_, a := testWallet(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := a.At(int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}
