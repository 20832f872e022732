package serve

import (
	"time"

	"github.com/partnerpay/api/pkg/environment"
)

// Binary describes a service binary: its name (its variables are
// <NAME>_ADDR and <NAME>_ADMIN_ADDR) and default addresses.
type Binary struct {
	Name      string
	Addr      string // default main address
	AdminAddr string // default admin address (/metrics)
	// Internal: the service answers only the gateway (INTERNAL_TOKEN required).
	Internal bool
	// Environment, when set, is fixed rather than derived (the sandbox bank
	// is a sandbox by definition).
	Environment environment.Name
	// Database: the binary keeps records partners rely on in the system of
	// record (DATABASE_URL, PostgreSQL), and is not ready without it.
	Database bool
	// Grace is how long a stopping binary waits for requests in flight
	// (SHUTDOWN_GRACE overrides it): above its longest upstream timeout.
	Grace time.Duration
}

// Binaries is the one list of the stack's binaries, in start order: each
// after what it calls, the gateway last. make, devstack, the end-to-end
// tests and the dashboard generator all read it.
var Binaries = []Binary{
	// Nothing upstream: its answers are immediate.
	{Name: "sandboxbank", Addr: "127.0.0.1:8090", AdminAddr: "127.0.0.1:9190", Environment: environment.Sandbox, Grace: 10 * time.Second},
	// Redis (0.5 s timeouts) and PostgreSQL; a started payout runs to its
	// end within 10 s, caller or no caller.
	{Name: "payout", Addr: "127.0.0.1:8081", AdminAddr: "127.0.0.1:9181", Internal: true, Database: true, Grace: 15 * time.Second},
	// The bank provider (within the gateway's 20 s route timeout); a
	// started creating request runs to its end within 25 s.
	{Name: "consent", Addr: "127.0.0.1:8083", AdminAddr: "127.0.0.1:9183", Internal: true, Database: true, Grace: 30 * time.Second},
	{Name: "fiat", Addr: "127.0.0.1:8082", AdminAddr: "127.0.0.1:9182", Internal: true, Database: true, Grace: 30 * time.Second},
	// PostgreSQL; a started order runs to its end within 10 s.
	{Name: "orders", Addr: "127.0.0.1:8084", AdminAddr: "127.0.0.1:9184", Internal: true, Database: true, Grace: 15 * time.Second},
	// Its longest route timeout is 20 s.
	{Name: "gateway", Addr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9180", Internal: true, Grace: 25 * time.Second},
}

// Names lists the binaries' names in start order.
func Names() []string {
	out := make([]string, len(Binaries))
	for i, b := range Binaries {
		out[i] = b.Name
	}
	return out
}

// Lookup finds a binary by name.
func Lookup(name string) (Binary, bool) {
	for _, b := range Binaries {
		if b.Name == name {
			return b, true
		}
	}
	return Binary{}, false
}
