// Package scheduler keeps the scheduled tasks agents create through IPC: it
// stores them in SQLite, arms one timer for the next due task, hands due
// tasks to the daemon's queue and records each run.
package scheduler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"
)

// Schedule types and context modes, as the IPC files spell them.
const (
	TypeCron     = "cron"
	TypeInterval = "interval"
	TypeOnce     = "once"

	ContextGroup    = "group"
	ContextIsolated = "isolated"
)

// OnceLayout is the local time format of a "once" schedule.
const OnceLayout = "2006-01-02T15:04:05"

// MinInterval keeps a runaway agent from scheduling itself every millisecond.
const MinInterval = time.Minute

// ErrSchedule marks an invalid schedule; the message says how to write one.
var ErrSchedule = errors.New("invalid schedule")

// cronParser accepts the standard 5 fields (minute hour dom month dow) and
// descriptors such as @daily. go-cron is the maintained fork of robfig/cron.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Validate checks a schedule without computing anything.
func Validate(typ, value string) error {
	_, err := parse(typ, value)
	return err
}

// ValidContextMode reports whether m is group or isolated.
func ValidContextMode(m string) bool { return m == ContextGroup || m == ContextIsolated }

type parsed struct {
	cron     cron.Schedule
	interval time.Duration
	once     [6]int // y m d h min s, resolved in the location later
}

func parse(typ, value string) (parsed, error) {
	var p parsed
	switch typ {
	case TypeCron:
		if strings.HasPrefix(value, "TZ=") || strings.HasPrefix(value, "CRON_TZ=") {
			return p, fmt.Errorf("%w: cron %q: leave out TZ=, schedules run in the configured timezone", ErrSchedule, value)
		}
		s, err := cronParser.Parse(value)
		if err != nil {
			return p, fmt.Errorf("%w: cron %q: %v; use 5 fields \"minute hour day-of-month month day-of-week\", e.g. \"0 9 * * 1-5\"", ErrSchedule, value, err)
		}
		p.cron = s
	case TypeInterval:
		ms, err := strconv.ParseInt(value, 10, 64)
		if err != nil || ms <= 0 {
			return p, fmt.Errorf("%w: interval %q: give a positive number of milliseconds, e.g. \"3600000\" for hourly", ErrSchedule, value)
		}
		if ms > int64(100*365*24*time.Hour/time.Millisecond) {
			return p, fmt.Errorf("%w: interval %q: longer than 100 years", ErrSchedule, value)
		}
		p.interval = time.Duration(ms) * time.Millisecond
		if p.interval < MinInterval {
			return p, fmt.Errorf("%w: interval %q: at least %d ms (one minute)", ErrSchedule, value, MinInterval.Milliseconds())
		}
	case TypeOnce:
		t, err := time.Parse(OnceLayout, value)
		if err != nil {
			return p, fmt.Errorf("%w: once %q: give a local time as YYYY-MM-DDTHH:MM:SS without zone, e.g. \"2026-02-01T15:30:00\"", ErrSchedule, value)
		}
		p.once = [6]int{t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()}
	default:
		return p, fmt.Errorf("%w: schedule_type %q: use cron, interval or once", ErrSchedule, typ)
	}
	return p, nil
}

// First is when a new task first runs, given the time it is created.
// A once time in the past runs at once (at now).
func First(typ, value string, loc *time.Location, now time.Time) (time.Time, error) {
	p, err := parse(typ, value)
	if err != nil {
		return time.Time{}, err
	}
	switch typ {
	case TypeCron:
		return cronNext(p.cron, loc, now, value)
	case TypeInterval:
		return now.Add(p.interval), nil
	default:
		o := p.once
		t := time.Date(o[0], time.Month(o[1]), o[2], o[3], o[4], o[5], 0, loc)
		if t.Before(now) {
			return now, nil
		}
		return t, nil
	}
}

// After is the run that follows a run scheduled at prev, as seen at now.
// Interval runs stay anchored to prev and skip the ones missed while the
// daemon was down; cron runs resume at the next match after now. ok is false
// for a once task, which has no next run.
func After(typ, value string, loc *time.Location, prev, now time.Time) (next time.Time, ok bool, err error) {
	p, err := parse(typ, value)
	if err != nil {
		return time.Time{}, false, err
	}
	switch typ {
	case TypeCron:
		t, err := cronNext(p.cron, loc, now, value)
		return t, err == nil, err
	case TypeInterval:
		next = prev.Add(p.interval)
		if !next.After(now) {
			missed := now.Sub(prev) / p.interval
			next = prev.Add((missed + 1) * p.interval)
		}
		return next, true, nil
	default:
		return time.Time{}, false, nil
	}
}

func cronNext(s cron.Schedule, loc *time.Location, now time.Time, value string) (time.Time, error) {
	// go-cron computes in the location of the time it is given.
	t := s.Next(now.In(loc))
	if t.IsZero() {
		return t, fmt.Errorf("%w: cron %q never matches a date", ErrSchedule, value)
	}
	return t, nil
}
