package devstack

import (
	"net"
	"strings"
	"testing"
)

// A second stack on the fixed ports stops at once, naming the port and the
// variable that moves it, before it starts or prints anything; free and
// ":0" addresses pass.
func TestASecondStackNamesThePortInUse(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()
	svcs := map[string]Service{}
	for _, name := range serviceOrder {
		svcs[name] = Service{Name: name, Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0"}
	}
	if err := portsFree(svcs); err != nil {
		t.Fatalf("every address :0: %v", err)
	}
	svcs["fiat"] = Service{Name: "fiat", Addr: freeAddr, AdminAddr: held.Addr().String()}
	err = portsFree(svcs)
	if err == nil || !strings.Contains(err.Error(), held.Addr().String()+" (fiat) is in use") || !strings.Contains(err.Error(), "FIAT_ADMIN_ADDR") {
		t.Fatalf("a held admin port: %v", err)
	}
}
