package main

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// listenRaw listens with an exact backlog, as an app that hard-codes one.
// The caller closes the descriptor (rawFile: its *os.File, which would
// otherwise close it a second time when collected, maybe another test's).
func listenRaw(t *testing.T, family int, sa syscall.Sockaddr, backlog int) int {
	t.Helper()
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		t.Fatal(err)
	}
	return fd
}

func inode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// sock_diag reports the backlog a listener asked for, its queue, and the
// accepted side of a Unix connection under the listener's name.
func TestSockDiagReadsBacklogs(t *testing.T) {
	dir, err := os.MkdirTemp("", "diag")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "a.sock")
	ufd := listenRaw(t, syscall.AF_UNIX, &syscall.SockaddrUnix{Name: path}, 3)
	tfd := listenRaw(t, syscall.AF_INET, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}, 5)
	defer syscall.Close(ufd)
	defer syscall.Close(tfd)
	sa, _ := syscall.Getsockname(tfd)
	port := sa.(*syscall.SockaddrInet4).Port

	// One connection accepted, one left waiting in the queue.
	for range 2 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	afd, _, err := syscall.Accept(ufd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(afd)

	us, err := unixSockets(tcpListen, tcpEstablished)
	if err != nil {
		t.Fatal(err)
	}
	var listener, accepted bool
	for _, s := range us {
		if s.Path == path && s.State == tcpListen {
			listener = true
			if s.Backlog != 3 || s.Queue != 1 || s.Inode != inode(t, ufd) {
				t.Errorf("unix listener: %+v, want backlog 3, queue 1, inode %d", s, inode(t, ufd))
			}
		}
		if s.Path == path && s.State == tcpEstablished && s.Inode == inode(t, afd) {
			accepted = true
		}
	}
	if !listener || !accepted {
		t.Errorf("unix: listener %v, accepted connection under its name %v in %d sockets", listener, accepted, len(us))
	}
	ts, err := tcpSockets(tcpListen)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range ts {
		if s.Port == port {
			found = true
			if s.Backlog != 5 || s.Inode != inode(t, tfd) {
				t.Errorf("tcp listener: %+v, want backlog 5", s)
			}
		}
	}
	if !found {
		t.Errorf("tcp: no listener on port %d among %d", port, len(ts))
	}
	if n, err := somaxconn(); err != nil || n < 1 {
		t.Errorf("somaxconn: %d, %v", n, err)
	}
}
