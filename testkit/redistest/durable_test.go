package redistest

import (
	"bufio"
	"net"
	"strconv"
	"testing"
)

// A redis-server as we run it (Args: the append-only file fsynced once a
// second) keeps through a kill -9 every write it answered: the file is
// written before the answer, and the fsync only guards against the
// machine's crash. DESIGN §6 lets Redis lose its offers; docs/operating.md
// promises no more than that for a crash of the machine.
func TestAKilledRedisKeepsWhatItAnswered(t *testing.T) {
	t.Parallel()
	s := Start(t)
	const n = 500
	// ask sends each command (RESP arrays of bulk strings) on one
	// connection, reading its answer before the next; the last answer.
	ask := func(cmds ...[]string) string {
		t.Helper()
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		reply := ""
		for _, cmd := range cmds {
			req := "*" + strconv.Itoa(len(cmd)) + "\r\n"
			for _, a := range cmd {
				req += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
			}
			if _, err := c.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			if reply, err = r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		return reply
	}
	sets := make([][]string, n)
	for i := range sets {
		sets[i] = []string{"SET", "k" + strconv.Itoa(i), "v"}
	}
	if got := ask(sets...); got != "+OK\r\n" {
		t.Fatalf("the last SET answered %q", got)
	}
	s.Stop() // SIGKILL, the moment the last write was answered
	s.Restart()
	if got := ask([]string{"DBSIZE"}); got != ":"+strconv.Itoa(n)+"\r\n" {
		t.Errorf("after kill -9: DBSIZE %q, want the %d keys it answered", got, n)
	}
}
