package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// proc is one process of the app's PID namespace, as /proc shows it to the
// pitfalls step (which runs there as the app's user, so it may read the
// app's file descriptors: what `ss -p` reads).
type proc struct {
	PID, PPID int
	Comm      string
	Sockets   map[uint64]bool // inodes of the sockets it holds
}

// procs lists the processes under root (/proc) but this one. A process whose
// file descriptors cannot be read is counted in hidden.
func procs(root string) (ps []proc, hidden int, err error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, 0, err
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		p := proc{PID: pid, Sockets: map[uint64]bool{}}
		stat, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		p.Comm, p.PPID = parseStat(string(stat))
		fds, err := os.ReadDir(filepath.Join(root, e.Name(), "fd"))
		if err != nil {
			hidden++
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(root, e.Name(), "fd", fd.Name()))
			if err != nil {
				continue
			}
			if n, ok := socketInode(link); ok {
				p.Sockets[n] = true
			}
		}
		ps = append(ps, p)
	}
	return ps, hidden, nil
}

// parseStat reads the command name and the parent's PID from /proc/<pid>/stat
// ("7 (gunicorn: worker) S 1 ..."): the name may hold spaces and parentheses.
func parseStat(s string) (comm string, ppid int) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0
	}
	comm = s[open+1 : end]
	f := strings.Fields(s[end+1:])
	if len(f) >= 2 {
		ppid, _ = strconv.Atoi(f[1])
	}
	return comm, ppid
}

// socketInode reads a descriptor's link target, "socket:[12345]".
func socketInode(link string) (uint64, bool) {
	v, ok := strings.CutPrefix(link, "socket:[")
	if !ok || !strings.HasSuffix(v, "]") {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64)
	return n, err == nil
}

func (p proc) String() string { return fmt.Sprintf("%d %s", p.PID, p.Comm) }
