// Package socketmode is the lab's one rule for the app's Unix socket mode
// (README, "The app and its contract"): read and write for the owner (the
// app) and the group (nginx's), nothing for others. connect(2) needs write
// permission on the socket file, so the group's write bit is what lets nginx
// in and the others' bits are what would let anyone else in. The checker
// applies it to the socket it finds, tests/static to compose's
// APP_SOCKET_MODE; services/app and contract/minimal-app apply the same rule
// in their own code, and all are tested against contract/socket-modes.json.
package socketmode

import (
	"errors"
	"strconv"
)

// Check returns nil if mode (permission bits as octal digits, e.g. 0o660)
// keeps the rule, or an error saying which part it breaks.
func Check(mode uint64) error {
	switch {
	case mode > 0o777:
		return errors.New("sets bits beyond 0777 (setuid, setgid, sticky mean nothing on a socket)")
	case mode&0o007 != 0:
		return errors.New("gives others access; want nothing for others (last digit 0)")
	case mode&0o060 != 0o060:
		return errors.New("nginx's group cannot read and write it; want rw for the group (middle digit 6 or 7)")
	case mode&0o600 != 0o600:
		return errors.New("its owner, the app, cannot read and write it; want rw for the owner (first digit 6 or 7)")
	}
	return nil
}

// Parse reads an octal mode such as "0660" and checks it.
func Parse(s string) (uint64, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, errors.New("want an octal mode such as 0660")
	}
	return m, Check(m)
}
