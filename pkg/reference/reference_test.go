package reference

import (
	"context"
	"testing"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
)

func TestConfigWithoutBankHasNoBankCorridors(t *testing.T) {
	svc := NewService(environment.Sandbox)
	c, err := svc.Config(context.Background(), partner.Caller{KeyID: "f", Grants: partner.Grants{Products: []string{"fiat"}}})
	if err != nil || len(c.Corridors.Bank) != 0 || c.Crypto.Chains.Source == nil || c.Crypto.Tokens == nil {
		t.Errorf("config %+v %v", c, err)
	}
	bank, _ := svc.Config(context.Background(), partner.Caller{KeyID: "b", Grants: partner.Grants{Products: []string{"bank"}}})
	if len(bank.Corridors.Bank) == 0 || bank.SettlementNetwork.Chain != 84532 {
		t.Errorf("a bank key's config %+v", bank)
	}
}

func TestEveryListIsNonEmpty(t *testing.T) {
	svc := NewService(environment.Sandbox)
	ctx := context.Background()
	if len(svc.Currencies(ctx).Chains) == 0 || len(svc.Limits(ctx).Rails) == 0 || len(svc.Countries(ctx).Countries) < 200 ||
		len(svc.Rates(ctx).Fiat) == 0 || len(svc.PaymentMethods(ctx).PaymentMethods) != 4 || len(svc.Statuses(ctx).Resources) == 0 {
		t.Error("a reference list is empty")
	}
}
