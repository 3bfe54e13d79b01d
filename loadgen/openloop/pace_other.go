//go:build !linux

package main

import (
	"context"
	"time"
)

// clock waits with Go's timers where there is no timerfd (the lab runs on
// Linux; this lets the generator build and run elsewhere, less punctually).
type clock struct{}

func newClock() (*clock, error) { return &clock{}, nil }

func (c *clock) until(ctx context.Context, t time.Time) bool { return sleepUntil(ctx, t) }

func (c *clock) close() {}
