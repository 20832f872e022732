package devstack

import "time"

// Binary is one of the stack's binaries as the local stack runs it.
type Binary struct {
	Name      string
	Addr      string // main address (<NAME>_ADDR), the binary's own default
	AdminAddr string // admin address (/metrics, <NAME>_ADMIN_ADDR)
	// Database: the binary keeps records partners rely on in the system of
	// record (DATABASE_URL), and is not ready without it.
	Database bool
	// Grace is the binary's default SHUTDOWN_GRACE, as its main.go
	// declares it (serve.Binary): above its longest upstream timeout.
	Grace time.Duration
}

// Binaries is the one list of the stack's binaries and their ports, in
// start order (an e2e test holds it to what each binary declares of itself:
// its default address and grace): each after what it calls, the gateway last. make, the
// end-to-end tests, the chart's checks and the dashboard generator read it.
var Binaries = []Binary{
	{Name: "sandboxbank", Addr: "127.0.0.1:8090", AdminAddr: "127.0.0.1:9190", Grace: 10 * time.Second},
	{Name: "payout", Addr: "127.0.0.1:8081", AdminAddr: "127.0.0.1:9181", Database: true, Grace: 15 * time.Second},
	{Name: "consent", Addr: "127.0.0.1:8083", AdminAddr: "127.0.0.1:9183", Database: true, Grace: 30 * time.Second},
	{Name: "fiat", Addr: "127.0.0.1:8082", AdminAddr: "127.0.0.1:9182", Database: true, Grace: 30 * time.Second},
	{Name: "orders", Addr: "127.0.0.1:8084", AdminAddr: "127.0.0.1:9184", Database: true, Grace: 15 * time.Second},
	{Name: "gateway", Addr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9180", Grace: 25 * time.Second},
}

// Names lists the binaries' names in start order.
func Names() []string {
	out := make([]string, len(Binaries))
	for i, b := range Binaries {
		out[i] = b.Name
	}
	return out
}
