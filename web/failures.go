package web

import (
	"sync"
	"time"
)

// failureLimit counts an address's failures per minute and refuses it once
// it has had max of them in the current minute. Per process and in memory:
// it is a brake on one address hammering one process, not an audit.
type failureLimit struct {
	max int
	now func() time.Time

	mu     sync.Mutex
	minute time.Time
	counts map[string]int
}

func newFailureLimit(max int) *failureLimit {
	return &failureLimit{max: max, now: time.Now, counts: map[string]int{}}
}

// allowed reports whether addr may try again this minute.
func (l *failureLimit) allowed(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	return l.counts[addr] < l.max
}

// failed counts a failure of addr.
func (l *failureLimit) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	l.counts[addr]++
}

// roll starts a new minute: the counts of the last one are forgotten, so
// the map never holds more than one minute's addresses.
func (l *failureLimit) roll() {
	if m := l.now().Truncate(time.Minute); !m.Equal(l.minute) {
		l.minute, l.counts = m, map[string]int{}
	}
}
