package chaintest

import (
	"crypto/ecdsa"
	"fmt"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// DepositPath is where deposit addresses hang in a BIP-32 tree: the
// external chain of the first Ethereum account (BIP-44, m/44'/60'/0'/0);
// a payout's address is its child at the payout's deposit index.
var DepositPath = []uint32{hdkeychain.HardenedKeyStart + 44, hdkeychain.HardenedKeyStart + 60, hdkeychain.HardenedKeyStart + 0, 0}

// DepositKeys is the deposit branch of the tree of seed: its extended
// public key (xpub…, what the payout service is given) and the private
// key of each child (what only a signer holds, and a test that moves a
// deposit's funds).
type DepositKeys struct {
	branch *hdkeychain.ExtendedKey
}

// NewDepositKeys derives the deposit branch of seed (16 to 64 bytes).
func NewDepositKeys(seed []byte) (*DepositKeys, error) {
	k, err := hdkeychain.NewMaster(seed, &chaincfg.MainNetParams)
	if err != nil {
		return nil, err
	}
	for _, i := range DepositPath {
		if k, err = k.Derive(i); err != nil {
			return nil, err
		}
	}
	return &DepositKeys{branch: k}, nil
}

// XPub is the branch's extended public key.
func (d *DepositKeys) XPub() string {
	pub, err := d.branch.Neuter()
	if err != nil {
		panic(err) // a private key always has a public one
	}
	return pub.String()
}

// XPrv is the branch's extended private key (what only a signer holds).
func (d *DepositKeys) XPrv() string { return d.branch.String() }

// Key is the private key of the address at index.
func (d *DepositKeys) Key(index uint32) (*ecdsa.PrivateKey, error) {
	child, err := d.branch.Derive(index)
	if err != nil {
		return nil, err
	}
	priv, err := child.ECPrivKey()
	if err != nil {
		return nil, err
	}
	return crypto.ToECDSA(priv.Serialize())
}

// Address is the address at index.
func (d *DepositKeys) Address(index uint32) (common.Address, error) {
	k, err := d.Key(index)
	if err != nil {
		return common.Address{}, fmt.Errorf("deposit key %d: %w", index, err)
	}
	return crypto.PubkeyToAddress(k.PublicKey), nil
}
