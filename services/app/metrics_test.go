package main

import (
	"net"
	"testing"
)

// nginx-lo reaches the app from 127.0.0.1, nginx across the bridge from its
// own address: the peer label tells the two TCP paths apart.
func TestFromLoopback(t *testing.T) {
	for addr, want := range map[net.Addr]bool{
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}:  true,
		&net.TCPAddr{IP: net.IPv4(127, 3, 2, 1), Port: 40000}:  true,
		&net.TCPAddr{IP: net.IPv6loopback, Port: 40000}:        true,
		&net.TCPAddr{IP: net.IPv4(172, 18, 0, 3), Port: 40000}: false,
		&net.TCPAddr{IP: net.ParseIP("fd00::3"), Port: 40000}:  false,
		&net.UnixAddr{Name: "@", Net: "unix"}:                  false,
	} {
		if got := fromLoopback(addr); got != want {
			t.Errorf("fromLoopback(%v) = %v, want %v", addr, got, want)
		}
	}
}
