package fiat

import (
	"log/slog"

	"github.com/partnerpay/api/pkg/format"
)

// What each operation may log: key and record ids and statuses. Never an
// email, a name, a wallet, an IBAN or an amount: personal data stays out of
// logs.

// LogAttrs of an account: its id and status.
func (a Account) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("account_id", a.AccountID), slog.String("status", a.Status)}
}

// LogAttrs of a virtual account request: the account id.
func (r VirtualAccountRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("account_id", format.LogID(accountPrefix, r.AccountID))}
}

// LogAttrs of a virtual account: its id and status.
func (v VirtualAccount) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("virtual_account_id", v.VirtualAccountID), slog.String("status", v.Status)}
}

// LogAttrs of a status request: the virtual account or deposit id.
func (r StatusRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("virtual_account_id", format.LogID(virtualAccountPrefix, r.VirtualAccountID)), slog.String("deposit_id", format.LogID(depositPrefix, r.DepositID))}
}

// LogAttrs of a funding status: the status.
func (f FundingStatus) LogAttrs() []slog.Attr { return []slog.Attr{slog.String("status", f.Status)} }

// LogAttrs of a pay-in request: where it goes.
func (r PayinRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("virtual_account_id", format.LogID(virtualAccountPrefix, r.VirtualAccountID)), slog.String("deposit_id", format.LogID(depositPrefix, r.DepositID))}
}

// LogAttrs of a deposit request: the account id, never the amount.
func (r DepositRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("account_id", format.LogID(accountPrefix, r.AccountID))}
}

// LogAttrs of a deposit: its id.
func (d Deposit) LogAttrs() []slog.Attr { return []slog.Attr{slog.String("deposit_id", d.DepositID)} }

// LogAttrs of a pay-in: the provider's transaction id.
func (p Payin) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("transaction_id", p.TransactionID)}
}

// LogAttrs of an identity request: the account id.
func (r IdentityRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("account_id", format.LogID(accountPrefix, r.AccountID))}
}
