// Package freeport chooses loopback ports for test servers that no other
// process on the machine will choose at the same time.
//
// A port the kernel hands out for "127.0.0.1:0" comes from its ephemeral
// range, the same range every outbound connection's source port comes
// from, and any process may be handed it the moment its listener closes.
// Two test processes at once (make test runs the e2e tests in two) then
// collide now and then: a service fails to start with "address already in
// use". So ports are chosen below the ephemeral range instead, each
// process from a block of its own: the block is held by a lock on a file
// of its own, for as long as the process lives, and taken by the next
// process only once this one has gone. Within the block, ports are handed
// out in turn, each checked free, so one process repeats a port only
// 500 ports later. A Redis Cluster node's bus port (its port plus
// 10000) lands above every block and still below the ephemeral range.
package freeport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const (
	first     = 11000 // the first port of the first block
	blockSize = 500
	blocks    = 20 // so every block and its bus ports end below 31000
	busOffset = 10000
)

var (
	once sync.Once
	mu   sync.Mutex
	base int // the held block's first port; 0: none held, ask the kernel
	next int // the next port of the block to try, from 0
)

// Addrs returns n distinct loopback addresses ("127.0.0.1:port") that were
// free a moment ago and that no other process will be handed while this
// one lives. Where no block can be held (all held, or an ephemeral range
// that starts too low), the kernel chooses, as for "127.0.0.1:0".
func Addrs(n int) ([]string, error) {
	ports, err := Ports(n)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i, p := range ports {
		out[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return out, nil
}

// Ports is Addrs as port numbers.
func Ports(n int) ([]int, error) {
	once.Do(hold)
	mu.Lock()
	defer mu.Unlock()
	out := make([]int, 0, n)
	for range n {
		ln, err := listen()
		if err != nil {
			return nil, err
		}
		// Every listener stays open until all are chosen, so none repeats
		// even where the kernel chooses.
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Block reports the first and last port of the block this process holds,
// or ok false where the kernel chooses.
func Block() (lo, hi int, ok bool) {
	once.Do(hold)
	return base, base + blockSize - 1, held != nil
}

// listen opens a listener on the block's next free port, or on one the
// kernel chooses.
func listen() (net.Listener, error) {
	if base == 0 {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	for range blockSize {
		port := base + next
		next = (next + 1) % blockSize
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("freeport: no port of %d-%d is free", base, base+blockSize-1)
}

// hold takes the first block whose lock file no other process holds,
// starting from one that depends on the process id so that processes
// starting together seldom try the same files in the same order.
func hold() {
	if lo := ephemeralLow(); lo > 0 && lo < first+blocks*blockSize+busOffset {
		return
	}
	dir := os.TempDir()
	start := os.Getpid() % blocks
	for i := range blocks {
		k := (start + i) % blocks
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("partnerpay-ports-%d.lock", k)), os.O_RDONLY|os.O_CREATE, 0o644)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		held = f // kept open, and so locked, until the process exits
		base = first + k*blockSize
		return
	}
}

// held is the lock file of the held block, referenced so that it is never
// collected, which would close it and let the lock go.
var held *os.File

// ephemeralLow is the first port of the kernel's ephemeral range, or 0
// where it cannot be read (not Linux): the range then assumed is the
// IANA one, from 49152.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	lo, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return lo
}
