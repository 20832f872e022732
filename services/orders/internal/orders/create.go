package orders

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// CreateRequest is the body of POST /v1/orders.
type CreateRequest struct {
	Direction      string  `json:"direction"`
	CryptoCurrency string  `json:"cryptoCurrency"`
	Chain          int64   `json:"chain"`
	FiatCurrency   string  `json:"fiatCurrency"`
	Country        string  `json:"country"`
	CryptoAmount   *string `json:"cryptoAmount,omitempty"`
	FiatAmount     *string `json:"fiatAmount,omitempty"`
	WalletAddress  string  `json:"walletAddress"`
	Reference      *string `json:"reference,omitempty"`
}

// Order is a created order, less environment.
type Order struct {
	Mock           bool     `json:"mock"`
	OrderID        string   `json:"orderId"`
	Direction      string   `json:"direction"`
	Status         string   `json:"status"`
	CryptoCurrency string   `json:"cryptoCurrency"`
	Chain          int64    `json:"chain"`
	FiatCurrency   string   `json:"fiatCurrency"`
	Country        string   `json:"country"`
	CryptoAmount   string   `json:"cryptoAmount"`
	FiatAmount     string   `json:"fiatAmount"`
	Fee            string   `json:"fee"`
	WalletAddress  string   `json:"walletAddress"`
	DepositAddress string   `json:"depositAddress,omitempty"`
	PaymentMethods []string `json:"paymentMethods"`
	ExpiresAt      string   `json:"expiresAt"`
	Reference      string   `json:"reference,omitempty"`
}

// Create opens an order after the contract's checks, in order (DESIGN §7):
// shape and formats → chain and token in the catalogue → the key's chain
// (the source side for a sell, the destination for a buy) and token → a
// card corridor for the country and currency → the corridor's per-order
// limits → the key's maxExecutionUsd. Nothing is stored before they pass.
func (s *service) Create(ctx context.Context, caller partner.Caller, req CreateRequest) (Order, error) {
	o, corridor, err := s.validate(caller, req)
	if err != nil {
		return Order{}, err
	}
	now := s.now().UTC()
	o.ID, o.Owner, o.CreatedAt, o.ExpiresAt = idempotency.NewID(ctx, orderPrefix), caller.KeyID, now, now.Add(OrderTTL)
	o.Status = StatusAwaitingPayment
	if o.Direction == catalog.DirectionSell {
		o.Status = StatusAwaitingDeposit
	}
	answer := s.order(o, corridor)
	// The order is opened at the card provider first, keyed by its id: a
	// retry after a crash (the same id, idempotency.NewID) finds the same
	// provider order rather than opening a second.
	po, err := s.provider.CreateCardOrder(ctx, bankprovider.NewCardOrder{
		Reference: o.ID, Direction: o.Direction, CryptoCurrency: o.CryptoCurrency, Chain: o.Chain, WalletAddress: o.WalletAddress,
		FiatCurrency: o.FiatCurrency, Country: o.Country, CryptoAmount: o.CryptoAmount, FiatAmount: o.FiatAmount,
		PaymentMethods: answer.PaymentMethods, ExpiresAt: answer.ExpiresAt,
	}, o.ID)
	if err != nil {
		return Order{}, bankprovider.ToAPI(err)
	}
	if !providerRef(po.ID) {
		return Order{}, fmt.Errorf("card provider: order id of an unexpected shape")
	}
	o.ProviderID = po.ID
	if o.Direction == catalog.DirectionSell {
		if o.DepositAddress, err = format.EVMAddress("deposit_address", po.DepositAddress); err != nil {
			return Order{}, fmt.Errorf("card provider: deposit address of an unexpected shape")
		}
		answer.DepositAddress = o.DepositAddress
	}
	if err := s.store.Create(ctx, o, answer); err != nil {
		return Order{}, fmt.Errorf("save order: %w", err)
	}
	return answer, nil
}

func (s *service) order(r Record, c *catalog.CardCorridor) Order {
	methods := []string{}
	if r.Direction == catalog.DirectionBuy {
		methods = append(methods, c.Methods...)
	} else {
		methods = append(methods, catalog.MethodCard) // a sell credits a card
	}
	return Order{
		Mock: true, OrderID: r.ID, Direction: r.Direction, Status: r.Status,
		CryptoCurrency: r.CryptoCurrency, Chain: r.Chain, FiatCurrency: r.FiatCurrency, Country: r.Country,
		CryptoAmount: MockMoney, FiatAmount: MockMoney, Fee: MockMoney,
		WalletAddress: r.WalletAddress, DepositAddress: r.DepositAddress, PaymentMethods: methods,
		ExpiresAt: r.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"), Reference: r.Reference,
	}
}

func (s *service) validate(caller partner.Caller, req CreateRequest) (Record, *catalog.CardCorridor, error) {
	var r Record
	var err error
	if req.Reference != nil {
		if !listing.Reference(*req.Reference) {
			return r, nil, envelope.InvalidRequest("reference, when sent, must be 1 to 64 printable ASCII characters: your own id for the order.")
		}
		r.Reference = *req.Reference
	}
	switch strings.ToLower(req.Direction) {
	case catalog.DirectionBuy, catalog.DirectionSell:
		r.Direction = strings.ToLower(req.Direction)
	case "":
		return r, nil, envelope.InvalidRequest("direction is required: buy (a card pays for stablecoins) or sell (stablecoins are paid out to a card).")
	default:
		return r, nil, envelope.InvalidRequest("direction must be buy or sell.")
	}
	if req.CryptoCurrency == "" {
		return r, nil, envelope.InvalidRequest("cryptoCurrency is required: the symbol of a stablecoin listed by GET /v1/currencies.")
	}
	if err := format.ChainID("chain", req.Chain); err != nil {
		return r, nil, err
	}
	if r.FiatCurrency, err = format.Currency("fiatCurrency", req.FiatCurrency); err != nil {
		return r, nil, err
	}
	if r.Country, err = format.Country("country", req.Country); err != nil {
		return r, nil, err
	}
	var amount *big.Rat
	switch {
	case req.CryptoAmount != nil && req.FiatAmount != nil:
		return r, nil, envelope.InvalidRequest("Send exactly one of cryptoAmount and fiatAmount, not both.")
	case req.CryptoAmount == nil && req.FiatAmount == nil:
		return r, nil, envelope.InvalidRequest("Send exactly one of cryptoAmount and fiatAmount.")
	case req.CryptoAmount != nil:
		if r.CryptoAmount, err = format.Amount("cryptoAmount", *req.CryptoAmount); err != nil {
			return r, nil, err
		}
		amount, _ = new(big.Rat).SetString(r.CryptoAmount)
	default:
		if r.FiatAmount, err = format.Amount("fiatAmount", *req.FiatAmount); err != nil {
			return r, nil, err
		}
		amount, _ = new(big.Rat).SetString(r.FiatAmount)
	}
	if req.WalletAddress == "" {
		what := "where the stablecoins go"
		if r.Direction == catalog.DirectionSell {
			what = "the address the stablecoins come from"
		}
		return r, nil, envelope.InvalidRequest("walletAddress is required: " + what + ".")
	}
	if r.WalletAddress, err = format.EVMAddress("walletAddress", req.WalletAddress); err != nil {
		return r, nil, err
	}

	chain, err := s.chains.Find("chain", req.Chain)
	if err != nil {
		return r, nil, err
	}
	token, ok := chain.Token(req.CryptoCurrency)
	if !ok {
		return r, nil, envelope.InvalidRequest("cryptoCurrency is not a token on chain " + strconv.FormatInt(req.Chain, 10) + "; see GET /v1/currencies.")
	}
	r.Chain, r.CryptoCurrency = chain.ID, token.Symbol

	side := partner.Destination // a buy delivers stablecoins to the wallet
	if r.Direction == catalog.DirectionSell {
		side = partner.Source
	}
	if err := caller.Grants.AllowChain(side, r.Chain); err != nil {
		return r, nil, err
	}
	if err := caller.Grants.AllowToken(side, r.Chain, token.Address); err != nil {
		return r, nil, err
	}

	corridor, err := catalog.FindCardCorridor(r.Direction, r.FiatCurrency, r.Country)
	if err != nil {
		return r, nil, err
	}
	fiat := amount
	if r.CryptoAmount != "" {
		// The stablecoin at par with its currency, converted at the
		// reference rates (GET /v1/rates).
		if fiat, ok = catalog.Convert(amount, token.Currency, r.FiatCurrency); !ok {
			return r, nil, fmt.Errorf("no reference rate from %s to %s", token.Currency, r.FiatCurrency)
		}
	}
	if err := corridor.CheckAmount(fiat); err != nil {
		return r, nil, err
	}
	if err := catalog.CheckCeiling("order", fiat, r.FiatCurrency, caller.Grants.MaxExecutionUSD); err != nil {
		return r, nil, err
	}
	return r, corridor, nil
}
