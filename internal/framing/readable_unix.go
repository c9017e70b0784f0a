//go:build unix

package framing

import (
	"io"
	"syscall"
)

// awaitReadable blocks until r has bytes to read, is at its end, or
// fails (its read deadline passes, it is closed), reading none of its
// bytes; where r does not expose its file descriptor it returns at once
// and the read that follows waits instead.
func awaitReadable(r io.Reader) error {
	sc, ok := r.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	// RawConn.Read calls the function until it returns true, waiting for
	// the poller to report the socket readable in between; a peek that
	// would block is the one answer that means "wait".
	return rc.Read(func(fd uintptr) bool {
		var one [1]byte
		_, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
	})
}
