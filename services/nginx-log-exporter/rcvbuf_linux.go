package main

import "syscall"

// socketReadBuffer reports the receive buffer the kernel granted (Linux
// doubles the requested size for bookkeeping and caps it at rmem_max*2).
func socketReadBuffer(conn syscall.Conn) (int, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	}); err != nil {
		return 0, err
	}
	return n, serr
}
