//go:build unix

package edge

import (
	"net"
	"syscall"
)

// stillOpen reports whether an idle connection is open with nothing to
// read (quietSocket), looking without waiting.
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
		open = quietSocket(fd)
		return true // never wait
	})
	return err == nil && open
}

// quietSocket: the socket is open with nothing to read. A service that closed
// the connection while it was idle has left an end of file (or a reset)
// to read; one that sent something unasked has said too much.
func quietSocket(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
}

// writeSocket is sendFirst's write (a test's to cut short).
var writeSocket = syscall.Write

// watchReadable lets awaitAnswer wait for pc's answer without a buffer
// (readFirst takes one only when a read does not find the socket empty),
// and sendAwait send a request in the same wait (sendFirst).
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
	pc.sendFirst = func(fd uintptr) bool {
		if pc.out == nil {
			return pc.readFirst(fd) // sent: readable, or a wakeup from before
		}
		if pc.reused && !quietSocket(fd) {
			pc.stale = true
			return true
		}
		for len(pc.unsent) > 0 {
			n, err := writeSocket(int(fd), pc.unsent)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				pc.sendErr = err
				return true
			}
			pc.unsent = pc.unsent[n:]
		}
		pc.out.release() // written: a request waiting for its answer holds no buffer
		pc.out = nil
		return false // no read now: the answer cannot be here yet
	}
}
