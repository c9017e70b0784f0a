package limit

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Period is how often a budget starts over: at 00:00 UTC each day, each
// Monday (ISO weeks), on the first of each month, or never.
type Period string

const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
	Total Period = "total"
)

// ParsePeriod accepts the config's names; "" means Total.
func ParsePeriod(s string) (Period, error) {
	switch Period(s) {
	case Day, Week, Month, Total:
		return Period(s), nil
	case "":
		return Total, nil
	}
	return "", fmt.Errorf("budget period %q: want day, week, month or total", s)
}

// dateLayout names a period by its first day.
const dateLayout = "2006-01-02"

// Span returns the period containing t: its start as a date
// ("2025-03-01"; "" for Total) and the instant it ends (zero for Total).
func (p Period) Span(t time.Time) (start string, end time.Time) {
	t = t.UTC()
	y, m, d := t.Date()
	var s time.Time
	switch p {
	case Day:
		s = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		end = s.AddDate(0, 0, 1)
	case Week:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		s = time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
		end = s.AddDate(0, 0, 7)
	case Month:
		s = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		end = s.AddDate(0, 1, 0)
	default:
		return "", time.Time{}
	}
	return s.Format(dateLayout), end
}

// Since is the earliest period start that can still be current at t: the
// rows a SpendStore must load. Weeks can start in the previous month.
func Since(t time.Time) string {
	ws, _ := Week.Span(t)
	ms, _ := Month.Span(t)
	return min(ws, ms)
}

// calendar caches the spans of the current UTC day, so the hot path does
// not format dates on every admission.
type calendar struct {
	cur atomic.Pointer[calDay]
}

type calDay struct {
	day   int64 // Unix days
	start [3]string
	end   [3]time.Time
}

func periodIndex(p Period) int {
	switch p {
	case Day:
		return 0
	case Week:
		return 1
	case Month:
		return 2
	}
	return -1
}

func (c *calendar) span(p Period, t time.Time) (string, time.Time) {
	i := periodIndex(p)
	if i < 0 {
		return "", time.Time{}
	}
	day := floorDiv(t.Unix(), 86400)
	cd := c.cur.Load()
	if cd == nil || cd.day != day {
		cd = &calDay{day: day}
		for j, q := range []Period{Day, Week, Month} {
			cd.start[j], cd.end[j] = q.Span(t)
		}
		c.cur.Store(cd)
	}
	return cd.start[i], cd.end[i]
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
