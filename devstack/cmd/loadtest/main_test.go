package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestProcField(t *testing.T) {
	io := "rchar: 120\nwchar: 4\nsyscr: 17\nsyscw: 3\n"
	for name, want := range map[string]int64{"syscr:": 17, "syscw:": 3, "read_bytes:": 0} {
		if got := procField(io, name); got != want {
			t.Errorf("procField(%q) = %d, want %d", name, got, want)
		}
	}
	status := "Name:\tgateway\nvoluntary_ctxt_switches:\t40\nnonvoluntary_ctxt_switches:\t2\n"
	if got := procField(status, "voluntary_ctxt_switches:"); got != 40 {
		t.Errorf("voluntary switches = %d, want 40 (not the nonvoluntary line)", got)
	}
}

// kernelWork counts this process's own system calls: three reads of a file
// and two writes show as at least that many.
func TestKernelWorkCountsSystemCalls(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("this kernel keeps no per-process I/O counts (/proc/self/io)")
	}
	f, err := os.CreateTemp(t.TempDir(), "work")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := kernelWork(os.Getpid())
	for range 2 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	b := make([]byte, 1)
	for range 3 {
		_, _ = f.ReadAt(b, 0)
	}
	after := kernelWork(os.Getpid())
	if after.reads-before.reads < 3 || after.writes-before.writes < 2 {
		t.Errorf("reads %d → %d, writes %d → %d: want at least +3 and +2", before.reads, after.reads, before.writes, after.writes)
	}
	if after.switches < before.switches {
		t.Errorf("context switches went down: %d → %d", before.switches, after.switches)
	}
	if w := kernelWork(0); w != (work{}) {
		t.Errorf("kernelWork(0) = %+v, want zero", w)
	}
}

// The report gives the gateway's throughput and CPU per request against
// each other proxy measured in the same run, as medians of the rounds, and
// what its limiting adds in Redis over the bare proxy.
func TestReportGivesTheGatewaysRatios(t *testing.T) {
	targets := []*target{
		{name: "bare", label: "bare", pid: 1},
		{name: "caddy", label: "caddy", pid: 2},
		{name: "gateway", label: "gateway", pid: 3},
	}
	rounds := func(rps, cpu float64) []sample {
		// Three rounds: the middle one is the median.
		return []sample{{rps: rps / 2, proxyCPU: cpu * 3}, {rps: rps, proxyCPU: cpu}, {rps: rps * 2, proxyCPU: cpu / 3}}
	}
	results := map[string][]sample{
		"bare|quote|32": rounds(4000, 200), "bare|list|32": rounds(8000, 150),
		"caddy|quote|32": rounds(4400, 210), "caddy|list|32": rounds(7000, 160),
		"gateway|quote|32": rounds(6000, 110), "gateway|list|32": rounds(10000, 90),
	}
	// Redis on the list GET: what the gateway adds over the bare proxy.
	for key, redis := range map[string]struct{ cpu, calls float64 }{"bare|list|32": {0.3, 0}, "gateway|list|32": {1.1, 0.006}} {
		for i := range results[key] {
			results[key][i].redisCPU, results[key][i].redisCalls = redis.cpu, redis.calls
		}
	}
	var out strings.Builder
	report(&out, targets, []int{32}, results, 3, time.Second)
	for _, want := range []string{
		"\ngateway / bare: quote 1.50×, list 1.25×; CPU per request quote 0.55×, list 0.60×\n",
		"\ngateway / caddy: quote 1.36×, list 1.43×; CPU per request quote 0.52×, list 0.56×\n",
		"\nlimiting in Redis (gateway − bare, list GET): 0.8 µs CPU and 0.006 commands per request\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// A reference proxy the loadtest started ends when the loadtest does, even
// when it is killed outright: the test runs a stand-in loadtest (this test
// binary, helperEnv set) that starts a child listening on a port, kills it
// with SIGKILL, and waits for the port to close.
func TestAChildEndsWithTheLoadtest(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "loadtest":
		var h harness
		child := exec.Command(os.Args[0], "-test.run=^TestAChildEndsWithTheLoadtest$")
		child.Env = append(os.Environ(), helperEnv+"=child")
		if err := h.startChild(child, os.Getenv("LOADTEST_TEST_ADDR")); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("listening")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "child":
		ln, err := net.Listen("tcp", os.Getenv("LOADTEST_TEST_ADDR"))
		if err != nil {
			os.Exit(1)
		}
		// Should the test fail, the child still goes in a minute.
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute))
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			c.Close()
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	lt := exec.Command(os.Args[0], "-test.run=^TestAChildEndsWithTheLoadtest$")
	lt.Env = append(os.Environ(), helperEnv+"=loadtest", "LOADTEST_TEST_ADDR="+addr)
	out, err := lt.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := lt.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "listening\n" {
		_ = lt.Process.Kill()
		t.Fatalf("stand-in loadtest said %q", line)
	}
	_ = lt.Process.Kill() // SIGKILL: no deferred clean-up runs
	_ = lt.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // the child is gone
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the child still listens on %s 5 s after the loadtest was killed", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const helperEnv = "LOADTEST_TEST_HELPER"
