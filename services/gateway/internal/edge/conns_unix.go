//go:build unix

package edge

import (
	"net"
	"syscall"
)

// stillOpen reports whether an idle connection is open with nothing to
// read, by peeking without waiting: a service that closed it while it was
// idle has left an end of file (or a reset) to read.
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK // nothing yet: open and quiet
		return true                                                  // never wait
	})
	return err == nil && open
}

// watchReadable lets awaitAnswer wait for pc's answer without a buffer:
// readFirst takes one only when a read does not find the socket empty.
func watchReadable(pc *upConn) {
	sc, ok := pc.conn.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	pc.raw = raw
	pc.readFirst = func(fd uintptr) bool {
		b := firstReads.Get().(*[4 << 10]byte)
		n, err := syscall.Read(int(fd), b[:])
		for err == syscall.EINTR {
			n, err = syscall.Read(int(fd), b[:])
		}
		if err == syscall.EAGAIN || err == syscall.EWOULDBLOCK {
			firstReads.Put(b) // nothing yet: wait for readability without it
			return false
		}
		pc.firstN, pc.firstErr, pc.limit.first = max(n, 0), err, b
		return true
	}
}
