package usage

import "time"

// Period is one span a budget limits: the local day or the local month.
type Period struct {
	Name  string    // "daily" or "monthly", as the config key
	Key   string    // "2026-11-26" or "2026-11": which day or month
	Start time.Time // when it began
	End   time.Time // when it turns
	Limit float64   // USD
}

// Periods are the spans now falls in, in loc, that have a limit.
func Periods(now time.Time, loc *time.Location, daily, monthly *float64) []Period {
	now = now.In(loc)
	var out []Period
	if daily != nil {
		start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
		out = append(out, Period{Name: "daily", Key: start.Format("2006-01-02"), Start: start, End: start.AddDate(0, 0, 1), Limit: *daily})
	}
	if monthly != nil {
		start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
		out = append(out, Period{Name: "monthly", Key: start.Format("2006-01"), Start: start, End: start.AddDate(0, 1, 0), Limit: *monthly})
	}
	return out
}

// Level is how spent stands against a limit.
type Level int

const (
	Under Level = iota
	Warn        // WarnAt of the limit or more: the main chat is warned once
	Over        // the limit reached: no more requests until the period turns
)

// WarnAt is the share of a limit at which the main chat is warned.
const WarnAt = 0.8

// LevelOf says where spent stands against limit.
func LevelOf(spent, limit float64) Level {
	switch {
	case spent >= limit:
		return Over
	case spent >= WarnAt*limit:
		return Warn
	}
	return Under
}

// Today is the start of now's day in loc, for `usage` and status.
func Today(now time.Time, loc *time.Location) time.Time {
	now = now.In(loc)
	return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
}

// ThisMonth is the start of now's month in loc.
func ThisMonth(now time.Time, loc *time.Location) time.Time {
	now = now.In(loc)
	return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
}
