package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// unixSocket is the Unix listener plus what is needed to clean up exactly
// the file we created.
type unixSocket struct {
	net.Listener
	path string
	info os.FileInfo // identity of the socket file we created
	// removedStale: a socket left by a process that is gone was removed first.
	removedStale bool
}

// listenUnix prepares path (refusing live sockets and non-socket files,
// removing stale sockets), listens on it and applies mode and gid.
func listenUnix(path string, mode os.FileMode, gid int) (*unixSocket, error) {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("APP_UNIX_SOCKET %s: parent directory %s: %w", path, dir, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("APP_UNIX_SOCKET %s: parent %s is not a directory", path, dir)
	}

	removedStale, err := clearStaleSocket(path)
	if err != nil {
		return nil, err
	}

	// The umask makes the socket start life as 0600 so there is no window in
	// which it is more open than configured. umask is process-wide; this runs
	// during single-threaded startup before any other file is created.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("APP_UNIX_SOCKET %s: listen: %w", path, err)
	}
	// Close must not unlink the path: by then a newer instance may have put
	// its own socket there. remove() deletes it only if it is still ours.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	s := &unixSocket{Listener: l, path: path, removedStale: removedStale}
	s.info, err = os.Lstat(path)
	fail := func(err error) (*unixSocket, error) {
		_ = l.Close()
		_ = s.remove()
		return nil, err
	}
	if err != nil {
		return fail(fmt.Errorf("APP_UNIX_SOCKET %s: %w", path, err))
	}

	// Explicit chmod: the umask only narrows, it cannot grant group access.
	if err := os.Chmod(path, mode); err != nil {
		return fail(fmt.Errorf("APP_SOCKET_MODE %04o: chmod %s: %w", mode, path, err))
	}
	if gid >= 0 {
		if err := os.Lchown(path, -1, gid); err != nil {
			return fail(fmt.Errorf("APP_SOCKET_GID %d: chown %s: %w (the process must be a member of that group)", gid, path, err))
		}
	}
	// chmod and chown change the inode, not its identity: s.info still
	// names the file we created.
	return s, nil
}

// clearStaleSocket removes a socket left by a crashed process, but refuses to
// touch a socket something still answers on or a file that is not a socket.
// It reports whether it removed one.
func clearStaleSocket(path string) (bool, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("APP_UNIX_SOCKET %s: %w", path, err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return false, fmt.Errorf("APP_UNIX_SOCKET %s: exists and is %s, not a socket; refusing to remove it", path, fileKind(st.Mode()))
	}
	c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
	if err == nil {
		_ = c.Close()
		return false, fmt.Errorf("APP_UNIX_SOCKET %s: another process is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		// Timeouts (full backlog) or permission errors: it may be alive,
		// so do not delete it.
		return false, fmt.Errorf("APP_UNIX_SOCKET %s: existing socket could not be probed, refusing to replace it: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("APP_UNIX_SOCKET %s: removing stale socket: %w", path, err)
	}
	return true, nil
}

// fileKind names a file type for an error message (Mode.Type() of a regular
// file prints as "----------").
func fileKind(m os.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&os.ModeDir != 0:
		return "a directory"
	case t&os.ModeSymlink != 0:
		return "a symbolic link"
	case t&os.ModeNamedPipe != 0:
		return "a named pipe"
	case t&os.ModeDevice != 0:
		return "a device"
	default:
		return "a special file (" + t.String() + ")"
	}
}

// remove deletes the socket file if it is still the one we created (the
// listener does not unlink on Close): a newer instance's socket at the same
// path must not be deleted. It is idempotent.
func (s *unixSocket) remove() error {
	st, err := os.Lstat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.info != nil && !os.SameFile(st, s.info) {
		return nil
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
