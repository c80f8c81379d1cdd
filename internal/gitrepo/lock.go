package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Lock polling: flock cannot wait and watch a context at once, so a busy
// lock is tried again after a pause that grows to lockPollMax.
const (
	lockPollMin = 5 * time.Millisecond
	lockPollMax = 250 * time.Millisecond
)

// lockFile takes an exclusive flock on path (created if missing) and returns
// the function that releases it. It waits for other holders, in this process
// or another, until ctx ends. The lock goes with the process, so a killed
// process never leaves a mirror locked.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	pause := lockPollMin
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		pause = min(2*pause, lockPollMax)
	}
}
