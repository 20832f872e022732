//go:build !unix

package edge

import "net"

// stillOpen cannot peek here; a closed connection shows when it is used,
// and a request that is safe to send again is.
func stillOpen(net.Conn) bool { return true }

// watchReadable: awaitAnswer reads into a buffer as it waits, and
// sendAwait writes before it.
func watchReadable(*upConn) {}
