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

// growPipe asks for a pipe buffer of size bytes (F_SETPIPE_SZ, up to
// fs.pipe-max-size, 1 MiB by default) and returns what was granted.
func growPipe(f syscall.Conn, size int) (int, error) {
	const fSetPipeSz = 1031 // F_SETPIPE_SZ, Linux 2.6.35
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		n, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, uintptr(size))
	}); err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
