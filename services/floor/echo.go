package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// MaxMessage bounds a frame: the plan's sizes are far below it, and a bad
// length from a stray client must not allocate gigabytes.
const MaxMessage = 16 << 20

// serve echoes every frame on TCP and, when set, on the Unix socket, until
// ctx ends; then it closes the listeners and waits for open connections.
func serve(ctx context.Context, cfg ServeConfig, stdout io.Writer) error {
	var lns []net.Listener
	tcp, err := net.Listen("tcp", cfg.TCPAddr)
	if err != nil {
		return fmt.Errorf("FLOOR_TCP_ADDR=%q: %w", cfg.TCPAddr, err)
	}
	lns = append(lns, tcp)
	if cfg.UnixSocket != "" {
		_ = os.Remove(cfg.UnixSocket) // a socket left by a killed server
		unix, err := net.Listen("unix", cfg.UnixSocket)
		if err != nil {
			tcp.Close()
			return fmt.Errorf("FLOOR_UNIX_SOCKET=%q: %w", cfg.UnixSocket, err)
		}
		if err := os.Chmod(cfg.UnixSocket, cfg.SocketMode); err != nil {
			tcp.Close()
			unix.Close()
			return fmt.Errorf("FLOOR_UNIX_SOCKET=%q: chmod: %w", cfg.UnixSocket, err)
		}
		lns = append(lns, unix)
	}
	var wg sync.WaitGroup
	var conns sync.Map
	for _, ln := range lns {
		fmt.Fprintf(stdout, "floor: echoing on %s %s\n", ln.Addr().Network(), ln.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return // closed at shutdown
				}
				conns.Store(c, nil)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer conns.Delete(c)
					echo(c)
				}()
			}
		}()
	}
	<-ctx.Done()
	for _, ln := range lns {
		ln.Close()
	}
	conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
	wg.Wait()
	return nil
}

// echo answers each frame with the same frame until the peer closes.
func echo(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4, 4+64<<10)
	for {
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(buf[:4])
		if n > MaxMessage {
			return
		}
		if cap(buf) < 4+int(n) {
			grown := make([]byte, 4+int(n))
			copy(grown, buf[:4])
			buf = grown
		}
		buf = buf[:4+int(n)]
		if _, err := io.ReadFull(c, buf[4:]); err != nil {
			return
		}
		// One write: header and payload leave in one send.
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// exchange sends msg (a frame: length and payload) and reads its echo into reply.
func exchange(c net.Conn, msg, reply []byte) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, reply); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(reply[:4]) != uint32(len(msg)-4) {
		return errors.New("echo of another length")
	}
	return nil
}

// frame returns a frame of size payload bytes.
func frame(size int) []byte {
	b := make([]byte, 4+size)
	binary.BigEndian.PutUint32(b, uint32(size))
	for i := range b[4:] {
		b[4+i] = byte(i)
	}
	return b
}

// healthcheck: one 1-byte exchange on each of the server's listeners.
func healthcheck(ctx context.Context, cfg ServeConfig) error {
	targets := []string{"tcp " + loopbackOf(cfg.TCPAddr)}
	if cfg.UnixSocket != "" {
		targets = append(targets, "unix "+cfg.UnixSocket)
	}
	for _, t := range targets {
		var network, addr string
		fmt.Sscan(t, &network, &addr)
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return err
		}
		msg := frame(1)
		err = exchange(c, msg, make([]byte, len(msg)))
		c.Close()
		if err != nil {
			return fmt.Errorf("%s %s: %w", network, addr, err)
		}
	}
	return nil
}

func loopbackOf(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
