package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// The kernel's socket diagnostics (netlink sock_diag, what `ss` reads), in
// the network namespace this process runs in: the app's, where contract.py
// runs the pitfalls step. Listening sockets report their accept queue: how
// many connections wait (Queue) and how many may (Backlog, the listen()
// backlog capped at net.core.somaxconn when listen() was called).

const (
	netlinkSockDiag   = 4 // NETLINK_SOCK_DIAG
	sockDiagByFamily  = 20
	tcpEstablished    = 1
	tcpCloseWait      = 8
	tcpListen         = 10
	udiagShowName     = 0x01
	udiagShowRQLen    = 0x10
	unixDiagName      = 0
	unixDiagRQLen     = 4
	unixDiagShutdown  = 6 // sent for every socket: its sk_shutdown
	rcvShutdown       = 1 // in it: the peer closed or shut down its writing side
	inetDiagReqV2Size = 56
	inetDiagMsgSize   = 72
	unixDiagReqSize   = 24
	unixDiagMsgSize   = 16
)

// diagSocket is one socket as sock_diag reports it.
type diagSocket struct {
	Network string // "tcp" or "unix"
	State   int    // tcpListen, tcpEstablished, ...
	Port    int    // tcp: the local port
	Path    string // unix: the bound name (accepted sockets carry the listener's)
	Inode   uint64 // 0 for a connection still in an accept queue (no file yet)
	Queue   uint32 // listening: connections waiting to be accepted
	Backlog uint32 // listening: how many may wait
	// unix: the socket's shutdown bits; rcvShutdown on an accepted socket
	// means the client has gone and the app has not closed its side yet
	// (what CLOSE_WAIT is for TCP: a Unix socket has no such state).
	Shutdown uint8
}

// diagDump asks sock_diag for the sockets of one family in the given states.
func diagDump(req []byte) ([][]byte, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return nil, fmt.Errorf("netlink sock_diag: %w", err)
	}
	defer syscall.Close(fd)
	hdr := make([]byte, syscall.NLMSG_HDRLEN, syscall.NLMSG_HDRLEN+len(req))
	binary.NativeEndian.PutUint32(hdr[0:], uint32(syscall.NLMSG_HDRLEN+len(req)))
	binary.NativeEndian.PutUint16(hdr[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(hdr[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(hdr[8:], 1)
	if err := syscall.Sendto(fd, append(hdr, req...), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("netlink sock_diag: send: %w", err)
	}
	var out [][]byte
	buf := make([]byte, 1<<16)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("netlink sock_diag: receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("netlink sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_DONE:
				return out, nil
			case syscall.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return nil, fmt.Errorf("netlink sock_diag: %w", syscall.Errno(-e))
					}
				}
				return nil, errors.New("netlink sock_diag: error message")
			default:
				out = append(out, append([]byte(nil), m.Data...))
			}
		}
	}
}

// tcpSockets lists this namespace's TCP sockets (IPv4 and IPv6) in states.
func tcpSockets(states ...int) ([]diagSocket, error) {
	var out []diagSocket
	for _, family := range []byte{syscall.AF_INET, syscall.AF_INET6} {
		req := make([]byte, inetDiagReqV2Size)
		req[0], req[1] = family, syscall.IPPROTO_TCP
		binary.NativeEndian.PutUint32(req[4:], stateMask(states))
		msgs, err := diagDump(req)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if len(m) < inetDiagMsgSize {
				continue
			}
			s := diagSocket{Network: "tcp", State: int(m[1]),
				Port:  int(binary.BigEndian.Uint16(m[4:])),
				Queue: binary.NativeEndian.Uint32(m[56:]), Backlog: binary.NativeEndian.Uint32(m[60:]),
				Inode: uint64(binary.NativeEndian.Uint32(m[68:]))}
			if s.State != tcpListen {
				s.Queue, s.Backlog = 0, 0
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// unixSockets lists this namespace's Unix stream sockets in states, with
// their names and, when listening, their accept queues.
func unixSockets(states ...int) ([]diagSocket, error) {
	req := make([]byte, unixDiagReqSize)
	req[0] = syscall.AF_UNIX
	binary.NativeEndian.PutUint32(req[4:], stateMask(states))
	binary.NativeEndian.PutUint32(req[12:], udiagShowName|udiagShowRQLen)
	msgs, err := diagDump(req)
	if err != nil {
		return nil, err
	}
	var out []diagSocket
	for _, m := range msgs {
		if len(m) < unixDiagMsgSize || m[1] != syscall.SOCK_STREAM {
			continue
		}
		s := diagSocket{Network: "unix", State: int(m[2]), Inode: uint64(binary.NativeEndian.Uint32(m[4:]))}
		for a := m[unixDiagMsgSize:]; len(a) >= 4; {
			l, typ := int(binary.NativeEndian.Uint16(a)), binary.NativeEndian.Uint16(a[2:])
			if l < 4 || l > len(a) {
				break
			}
			data := a[4:l]
			switch typ {
			case unixDiagName:
				s.Path = strings.TrimRight(string(data), "\x00")
			case unixDiagShutdown:
				if len(data) >= 1 {
					s.Shutdown = data[0]
				}
			case unixDiagRQLen:
				if len(data) >= 8 && s.State == tcpListen {
					s.Queue, s.Backlog = binary.NativeEndian.Uint32(data), binary.NativeEndian.Uint32(data[4:])
				}
			}
			a = a[min((l+3)&^3, len(a)):]
		}
		out = append(out, s)
	}
	return out, nil
}

func stateMask(states []int) uint32 {
	var m uint32
	for _, s := range states {
		m |= 1 << s
	}
	return m
}

// somaxconn is net.core.somaxconn of this process's network namespace.
func somaxconn() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscan(string(b), &n)
	return n, err
}
