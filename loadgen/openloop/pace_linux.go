package main

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// clock waits until a due time to within tens of microseconds. Go's own
// timers wake up to a millisecond late on Linux (the runtime's poller waits
// in whole milliseconds), which at 1,000 req/s would send most requests
// late; a timerfd (a high-resolution kernel timer) read through the same
// poller wakes on time without holding a thread.
type clock struct {
	fd   int
	file *os.File
	buf  [8]byte
	// The monotonic clock's reading at a wall-clock instant, to turn due
	// times (time.Time) into the timerfd's absolute CLOCK_MONOTONIC times.
	base     time.Time
	baseMono int64

	ctx  context.Context // the one watched, and how to stop watching it
	stop func() bool
}

func newClock() (*clock, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	c := &clock{fd: fd, file: os.NewFile(uintptr(fd), "timerfd")}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		c.file.Close()
		return nil, err
	}
	c.base, c.baseMono = time.Now(), ts.Nano()
	return c, nil
}

// until returns at t, or false when ctx ends first.
func (c *clock) until(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	c.watch(ctx)
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(c.baseMono + int64(t.Sub(c.base)))}
	if err := unix.TimerfdSettime(c.fd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		return sleepUntil(ctx, t)
	}
	_, err := c.file.Read(c.buf[:])
	if ctx.Err() != nil {
		return false
	}
	return err == nil || sleepUntil(ctx, t)
}

// watch: ctx's end wakes a wait on the timer (set up once per ctx, not per
// wait: the pacer waits up to once a request).
func (c *clock) watch(ctx context.Context) {
	if c.ctx == ctx {
		return
	}
	if c.stop != nil {
		c.stop()
		c.file.SetReadDeadline(time.Time{})
	}
	c.ctx = ctx
	c.stop = context.AfterFunc(ctx, func() { c.file.SetReadDeadline(time.Now()) })
}

func (c *clock) close() {
	if c.stop != nil {
		c.stop()
	}
	c.file.Close()
}
