// Package catalog is the product's reference data: the chains and tokens a
// deployment can move, the payout rails and where they reach, the countries
// and currencies the API accepts. Sandbox lists testnets, production mainnets;
// nothing here depends on a request.
package catalog

import (
	"strconv"
	"strings"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
)

// Token is a stablecoin on one chain. Currency is the fiat it is pegged to,
// at par.
type Token struct {
	Symbol   string `json:"symbol"`
	Address  string `json:"address"`
	Decimals int    `json:"decimals"`
	Currency string `json:"currency"`
}

// Chain is an EVM chain the deployment can move tokens on.
type Chain struct {
	ID      int64   `json:"chain"`
	Name    string  `json:"name"`
	Testnet bool    `json:"testnet"`
	Tokens  []Token `json:"tokens"`
}

// Token finds a token by symbol, case-insensitively.
func (c *Chain) Token(symbol string) (Token, bool) {
	for _, t := range c.Tokens {
		if strings.EqualFold(t.Symbol, symbol) {
			return t, true
		}
	}
	return Token{}, false
}

// TokenAt finds a token by its contract address, case-insensitively.
func (c *Chain) TokenAt(address string) (Token, bool) {
	for _, t := range c.Tokens {
		if strings.EqualFold(t.Address, address) {
			return t, true
		}
	}
	return Token{}, false
}

// Network names the chain where the on-ramp settles stablecoins.
type Network struct {
	Chain int64  `json:"chain"`
	Name  string `json:"name"`
}

// Chains is the catalogue of one environment.
type Chains struct {
	List       []Chain
	Settlement Network
}

// Chain finds a chain by id.
func (c *Chains) Chain(id int64) (*Chain, bool) {
	for i := range c.List {
		if c.List[i].ID == id {
			return &c.List[i], true
		}
	}
	return nil, false
}

// Find is the catalogue check of a chain field that passed format.ChainID:
// the chain, or the invalid_request a partner sees when this deployment does
// not list it.
func (c *Chains) Find(field string, id int64) (*Chain, error) {
	ch, ok := c.Chain(id)
	if !ok {
		return nil, envelope.InvalidRequest(field + " " + strconv.FormatInt(id, 10) + " is not in this deployment's catalogue; see GET /v1/currencies.")
	}
	return ch, nil
}

// TokenAddresses lists every token address of the given chains (each once,
// unknown ones skipped) per chain id: the shape of a key's token grants.
func (c *Chains) TokenAddresses(chains ...int64) map[string][]string {
	out := make(map[string][]string, len(chains))
	for _, id := range chains {
		k := strconv.FormatInt(id, 10)
		ch, ok := c.Chain(id)
		if _, done := out[k]; done || !ok {
			continue
		}
		for _, t := range ch.Tokens {
			out[k] = append(out[k], t.Address)
		}
	}
	return out
}

// Sandbox chains are testnets; their token contracts are the issuers' test
// deployments (Circle's faucet tokens).
var sandboxChains = Chains{
	List: []Chain{
		{ID: 84532, Name: "Base Sepolia", Testnet: true, Tokens: []Token{
			{Symbol: "USDC", Address: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", Decimals: 6, Currency: "USD"},
			{Symbol: "EURC", Address: "0x808456652fdb597867f38412077A9182bf77359F", Decimals: 6, Currency: "EUR"},
		}},
		{ID: 11155111, Name: "Ethereum Sepolia", Testnet: true, Tokens: []Token{
			{Symbol: "USDC", Address: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", Decimals: 6, Currency: "USD"},
			{Symbol: "EURC", Address: "0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4", Decimals: 6, Currency: "EUR"},
		}},
	},
	Settlement: Network{Chain: 84532, Name: "Base Sepolia"},
}

// Production chains carry the issuers' native contracts only (no bridged
// tokens): Circle's USDC and EURC, Tether's USDT where Tether publishes one.
var productionChains = Chains{
	List: []Chain{
		{ID: 1, Name: "Ethereum", Tokens: []Token{
			{Symbol: "USDC", Address: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", Decimals: 6, Currency: "USD"},
			{Symbol: "EURC", Address: "0x1aBaEA1f7C830bD89Acc67eC4af516284b1bC33c", Decimals: 6, Currency: "EUR"},
			{Symbol: "USDT", Address: "0xdAC17F958D2ee523a2206206994597C13D831ec7", Decimals: 6, Currency: "USD"},
		}},
		{ID: 8453, Name: "Base", Tokens: []Token{
			{Symbol: "USDC", Address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", Decimals: 6, Currency: "USD"},
			{Symbol: "EURC", Address: "0x60a3E35Cc302bFA44Cb288Bc5a4F316Fdb1adb42", Decimals: 6, Currency: "EUR"},
		}},
		{ID: 137, Name: "Polygon", Tokens: []Token{
			{Symbol: "USDC", Address: "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359", Decimals: 6, Currency: "USD"},
			{Symbol: "USDT", Address: "0xc2132D05D31c914a87C6611C10748AEb04B58e8F", Decimals: 6, Currency: "USD"},
		}},
		{ID: 42161, Name: "Arbitrum One", Tokens: []Token{
			{Symbol: "USDC", Address: "0xaf88d065e77c8cC2239327C5EDb3A432268e5831", Decimals: 6, Currency: "USD"},
			{Symbol: "USDT", Address: "0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9", Decimals: 6, Currency: "USD"},
		}},
		{ID: 10, Name: "OP Mainnet", Tokens: []Token{
			{Symbol: "USDC", Address: "0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85", Decimals: 6, Currency: "USD"},
			{Symbol: "USDT", Address: "0x94b008aA00579c1307B0EF2c499aD98a8ce58e58", Decimals: 6, Currency: "USD"},
		}},
	},
	Settlement: Network{Chain: 8453, Name: "Base"},
}

// ChainsFor is the catalogue of an environment. Callers must not modify it.
func ChainsFor(env environment.Name) *Chains {
	if env == environment.Production {
		return &productionChains
	}
	return &sandboxChains
}
