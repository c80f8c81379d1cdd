package web

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// How the pages of every area write values: times (the headings say UTC),
// durations, counts, commits, and what is missing.

// clock is a time as the pages show it (the headings say UTC).
func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }

// untilText is how far t is from now, in words.
func untilText(t, now time.Time) string {
	d := t.Sub(now)
	if d < 0 {
		return "overdue by " + shortDuration(-d)
	}
	return "in " + shortDuration(d)
}

// shortDuration writes d to the minute, or to the second when under one.
func shortDuration(d time.Duration) string {
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())) + "s"
	}
	d = d.Round(time.Minute)
	days, hours, mins := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	var parts []string
	if days > 0 {
		parts = append(parts, strconv.Itoa(days)+"d")
	}
	if hours > 0 {
		parts = append(parts, strconv.Itoa(hours)+"h")
	}
	if mins > 0 && days == 0 {
		parts = append(parts, strconv.Itoa(mins)+"m")
	}
	if len(parts) == 0 {
		return "0m"
	}
	return strings.Join(parts, " ")
}

// iso is a time as <time datetime> and the API want it.
func iso(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// clockPtr is an optional time as the pages show it and as <time> wants it.
func clockPtr(t *time.Time) (string, string) {
	if t == nil {
		return "", ""
	}
	return clock(*t), iso(*t)
}

// orNone is s, or none when s is empty.
func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// shortSHA is a commit as people quote it.
func shortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// plural writes n with the singular or plural noun: "1 user", "3 users".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// longDuration writes a retention period in days, or months when long.
func longDuration(d time.Duration) string {
	days := int(math.Round(d.Hours() / 24))
	switch {
	case days >= 60:
		return fmt.Sprintf("about %d months", int(math.Round(float64(days)/30.4)))
	case days == 1:
		return "1 day"
	case days > 1:
		return fmt.Sprintf("%d days", days)
	}
	return shortDuration(d)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// truncate cuts s to at most n characters, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// thresholds says how many votes decide, in words.
func thresholds(minApprovals, minRejections, voters int) string {
	return fmt.Sprintf("%d of %d approve to apply · %s", minApprovals, voters, rejectionsStop(minRejections))
}

func rejectionsStop(n int) string {
	if n == 1 {
		return "1 rejection stops it"
	}
	return fmt.Sprintf("%d rejections stop it", n)
}

// argvText writes an argument vector as a person would type it: arguments
// with spaces or quotes are single-quoted.
func argvText(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// shortenLeft keeps the end of s within n characters.
func shortenLeft(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 2 {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}
