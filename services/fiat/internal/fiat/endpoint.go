package fiat

import (
	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Endpoints are the service's operations as go-kit endpoints, each logged
// and measured by the observer under its operation name.
type Endpoints struct {
	CreateAccount        endpoint.Endpoint
	CreateVirtualAccount endpoint.Endpoint
	Status               endpoint.Endpoint
	CreateDeposit        endpoint.Endpoint
	SandboxPayin         endpoint.Endpoint
	SandboxIdentity      endpoint.Endpoint
	ListAccounts         endpoint.Endpoint
	ListVirtualAccounts  endpoint.Endpoint
	ListDeposits         endpoint.Endpoint
}

// MakeEndpoints wraps s.
func MakeEndpoints(s Service, o *kithttp.Observer) Endpoints {
	return Endpoints{
		CreateAccount:        o.Op("create_account", kithttp.Endpoint(s.CreateAccount)),
		CreateVirtualAccount: o.Op("create_virtual_account", kithttp.Endpoint(s.CreateVirtualAccount)),
		Status:               o.Op("status", kithttp.Endpoint(s.Status)),
		CreateDeposit:        o.Op("create_deposit", kithttp.Endpoint(s.CreateDeposit)),
		SandboxPayin:         o.Op("sandbox_payin", kithttp.Endpoint(s.SandboxPayin)),
		SandboxIdentity:      o.Op("sandbox_identity", kithttp.Endpoint(s.SandboxIdentity)),
		// A list's query (a partner's reference, dates) is never logged.
		ListAccounts:        o.Op("list_accounts", kithttp.Endpoint(s.ListAccounts)),
		ListVirtualAccounts: o.Op("list_virtual_accounts", kithttp.Endpoint(s.ListVirtualAccounts)),
		ListDeposits:        o.Op("list_deposits", kithttp.Endpoint(s.ListDeposits)),
	}
}
