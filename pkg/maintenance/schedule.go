// Package maintenance reads an AKS cluster's planned maintenance
// configurations (Microsoft.ContainerService/managedClusters/
// maintenanceConfigurations) and says when drift replacements may start.
//
// Invariants:
//   - Window math is pure: a configuration and a time in, the window that
//     holds the time or the next one out (Schedule.Next). No clock, no I/O.
//   - A configuration karpfunc cannot read fully is an error naming the
//     field and what to do; it is never read as "no window" (which would let
//     drift replace nodes at any hour) nor as "always open".
//   - Which configuration governs which drift is one table (Governing): the
//     node-OS configuration governs image and NodePool/AKSNodeClass drift,
//     the auto-upgrade configuration governs Kubernetes version drift, and
//     `default` stands in for either when it is missing.
//   - The ARM list is read at most once per disruption pass, and only when a
//     drifted node needs judging (Gate); a warm instance keeps the answer
//     for Options.TTL.
package maintenance

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
)

// The configuration names AKS accepts (Learn, "Use planned maintenance to
// schedule and control upgrades", section "Schedule configuration types";
// any other name is refused with InvalidParameter: "Only 'default',
// 'aksManagedAutoUpgradeSchedule' and 'aksManagedNodeOSUpgradeSchedule' are
// allowed configNames for maintenance configuration.", Azure/ARO-HCP#3260).
const (
	ConfigDefault     = "default"
	ConfigAutoUpgrade = "aksManagedAutoUpgradeSchedule"
	ConfigNodeOS      = "aksManagedNodeOSUpgradeSchedule"
)

// Names are the configuration names AKS accepts.
func Names() []string { return []string{ConfigDefault, ConfigAutoUpgrade, ConfigNodeOS} }

// Window is a time range [Start, End) in which maintenance may start.
type Window struct{ Start, End time.Time }

// Contains: t is in [Start, End).
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Start) && t.Before(w.End) }

// horizon is how far Next looks for a window: an absoluteMonthly schedule
// on the 31st every 6 months can go a year without a month that has the day.
const horizon = 3 * 366 * 24 * time.Hour

// ConfigError is a configuration karpfunc cannot read: Field names the
// JSON path inside the configuration.
type ConfigError struct {
	Config string
	Field  string
	err    error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("maintenance configuration %s: %s: %v", e.Config, e.Field, e.err)
}

func (e *ConfigError) Unwrap() error { return e.err }

// Schedule is one configuration's windows.
type Schedule struct {
	// Name is the configuration's name.
	Name string
	// days says whether a local date (midnight in zone) starts a window.
	days      func(day time.Time) bool
	zone      *time.Location
	startTime time.Duration // after local midnight
	duration  time.Duration
	blocked   []Window
	// legacy: timeInWeek hour slots (UTC), one window per slot, merged.
	legacy map[time.Weekday][]int
}

// Compile reads one configuration as ARM returns it. The maintenanceWindow
// form is used when present; otherwise the legacy timeInWeek form (only
// `default` may carry it).
func Compile(cfg *armcontainerservice.MaintenanceConfiguration) (*Schedule, error) {
	if cfg == nil || cfg.Name == nil {
		return nil, errors.New("maintenance configuration without a name")
	}
	name := *cfg.Name
	props := cfg.Properties
	switch {
	case props == nil:
		return nil, &ConfigError{name, "properties", errors.New("missing")}
	case props.MaintenanceWindow != nil:
		return compileWindow(name, props.MaintenanceWindow)
	case len(props.TimeInWeek) > 0:
		return compileLegacy(name, props)
	}
	return nil, &ConfigError{name, "properties", errors.New("has neither maintenanceWindow nor timeInWeek: it allows no window, so the drift it governs would never be replaced; add a maintenanceWindow (az aks maintenanceconfiguration update) or delete the configuration")}
}

var (
	startTimeRE = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)
	utcOffsetRE = regexp.MustCompile(`^([+-])([01][0-9]|2[0-3]):([0-5][0-9])$`)
)

// compileWindow reads the maintenanceWindow form. Field rules are the
// API's (armcontainerservice v6.6.0 models.go MaintenanceWindow: durationHours
// 4 to 24, startTime '00:00' to '23:59', utcOffset +/-HH:mm defaulting to
// +00:00, startDate a date; "One and only one of the schedule types should
// be specified").
func compileWindow(name string, mw *armcontainerservice.MaintenanceWindow) (*Schedule, error) {
	fail := func(field string, format string, args ...any) error {
		return &ConfigError{name, "maintenanceWindow." + field, fmt.Errorf(format, args...)}
	}
	s := &Schedule{Name: name, zone: time.UTC}
	if mw.DurationHours == nil || *mw.DurationHours < 4 || *mw.DurationHours > 24 {
		return nil, fail("durationHours", "is %s, not 4 to 24 hours", intText(mw.DurationHours))
	}
	s.duration = time.Duration(*mw.DurationHours) * time.Hour
	m := startTimeRE.FindStringSubmatch(deref(mw.StartTime))
	if m == nil {
		return nil, fail("startTime", "is %q, not a time from 00:00 to 23:59", deref(mw.StartTime))
	}
	s.startTime = atoi(m[1])*time.Hour + atoi(m[2])*time.Minute
	if offset := deref(mw.UTCOffset); offset != "" {
		om := utcOffsetRE.FindStringSubmatch(offset)
		if om == nil {
			return nil, fail("utcOffset", "is %q, not +HH:mm or -HH:mm", offset)
		}
		secs := int((atoi(om[2])*time.Hour + atoi(om[3])*time.Minute).Seconds())
		if om[1] == "-" {
			secs = -secs
		}
		s.zone = time.FixedZone("UTC"+offset, secs)
	}
	// Intervals count from startDate (AKS fills it with the creation date,
	// Learn's property table); a configuration without one counts from
	// 1970-01-01, which only matters for intervals above 1.
	anchor := time.Date(1970, 1, 1, 0, 0, 0, 0, s.zone)
	if mw.StartDate != nil {
		anchor = localDate(*mw.StartDate, s.zone)
	}
	days, err := scheduleDays(name, mw.Schedule, anchor)
	if err != nil {
		return nil, err
	}
	s.days = days
	// notAllowedDates: 'utcOffset' applies; with +02:00, 2022-12-23 to
	// 2023-01-03 blocks 2022-12-22 22:00 to 2023-01-03 22:00 UTC (models.go),
	// that is [start 00:00, end+1 00:00) local: both dates whole.
	for i, span := range mw.NotAllowedDates {
		if span == nil || span.Start == nil || span.End == nil {
			return nil, fail(fmt.Sprintf("notAllowedDates[%d]", i), "needs start and end")
		}
		from, to := localDate(*span.Start, s.zone), localDate(*span.End, s.zone).AddDate(0, 0, 1)
		if !to.After(from) {
			return nil, fail(fmt.Sprintf("notAllowedDates[%d]", i), "end %s is before start %s", span.End.Format(time.DateOnly), span.Start.Format(time.DateOnly))
		}
		s.blocked = append(s.blocked, Window{from, to})
	}
	sortWindows(s.blocked)
	return s, nil
}

// scheduleDays is the day rule of a schedule: the first occurrence on or
// after anchor, then every interval. For weekly schedules this is AKS's
// rule as its maintainers describe it (Azure/AKS#5720: "Interval counting
// begins from the next occurrence of the configured day of the week");
// karpfunc applies the same rule to days and months.
func scheduleDays(name string, sch *armcontainerservice.Schedule, anchor time.Time) (func(time.Time) bool, error) {
	fail := failFunc(func(field string, format string, args ...any) error {
		return &ConfigError{name, "maintenanceWindow.schedule" + field, fmt.Errorf(format, args...)}
	})
	if sch == nil {
		return nil, fail("", "missing: set one of daily, weekly, absoluteMonthly, relativeMonthly")
	}
	var set []string
	for kind, present := range map[string]bool{"daily": sch.Daily != nil, "weekly": sch.Weekly != nil,
		"absoluteMonthly": sch.AbsoluteMonthly != nil, "relativeMonthly": sch.RelativeMonthly != nil} {
		if present {
			set = append(set, kind)
		}
	}
	if len(set) != 1 {
		slices.Sort(set)
		return nil, fail("", "sets %v: exactly one of daily, weekly, absoluteMonthly, relativeMonthly", set)
	}
	// `default` takes Weekly only (Learn's schedule type table), and AKS no
	// longer honors a `default` window less often than weekly
	// (Azure/AKS#5050): refused rather than read as something AKS does not do.
	if name == ConfigDefault && (sch.Weekly == nil || deref32(sch.Weekly.IntervalWeeks) != 1) {
		return nil, fail("", "%s: the default configuration takes a weekly schedule with intervalWeeks 1 only (AKS ignores any other); set that, or use %s / %s for other cadences", set[0], ConfigNodeOS, ConfigAutoUpgrade)
	}
	switch {
	case sch.Daily != nil:
		return dailyDays(sch.Daily, anchor, fail)
	case sch.Weekly != nil:
		return weeklyDays(sch.Weekly, anchor, fail)
	case sch.AbsoluteMonthly != nil:
		return absoluteMonthlyDays(sch.AbsoluteMonthly, anchor, fail)
	default:
		return relativeMonthlyDays(sch.RelativeMonthly, anchor, fail)
	}
}

type failFunc func(field string, format string, args ...any) error

func dailyDays(d *armcontainerservice.DailySchedule, anchor time.Time, fail failFunc) (func(time.Time) bool, error) {
	every, err := interval(d.IntervalDays, fail, ".daily.intervalDays")
	if err != nil {
		return nil, err
	}
	return func(day time.Time) bool {
		return !day.Before(anchor) && daysBetween(anchor, day)%every == 0
	}, nil
}

func weeklyDays(w *armcontainerservice.WeeklySchedule, anchor time.Time, fail failFunc) (func(time.Time) bool, error) {
	every, err := interval(w.IntervalWeeks, fail, ".weekly.intervalWeeks")
	if err != nil {
		return nil, err
	}
	dow, err := weekday(w.DayOfWeek, fail, ".weekly.dayOfWeek")
	if err != nil {
		return nil, err
	}
	first := anchor.AddDate(0, 0, (int(dow)-int(anchor.Weekday())+7)%7)
	return func(day time.Time) bool {
		return !day.Before(first) && day.Weekday() == dow && (daysBetween(first, day)/7)%every == 0
	}, nil
}

func absoluteMonthlyDays(am *armcontainerservice.AbsoluteMonthlySchedule, anchor time.Time, fail failFunc) (func(time.Time) bool, error) {
	every, err := interval(am.IntervalMonths, fail, ".absoluteMonthly.intervalMonths")
	if err != nil {
		return nil, err
	}
	dom := deref32(am.DayOfMonth)
	if dom < 1 || dom > 31 {
		return nil, fail(".absoluteMonthly.dayOfMonth", "is %s, not 1 to 31", intText(am.DayOfMonth))
	}
	// A month without the day (the 31st in April) has no window: AKS's
	// docs do not say; skipping is the reading that never starts
	// maintenance on a day the user did not name.
	firstMonth := monthIndex(anchor)
	if int(dom) < anchor.Day() {
		firstMonth++
	}
	return func(day time.Time) bool {
		months := monthIndex(day) - firstMonth
		return !day.Before(anchor) && day.Day() == int(dom) && months >= 0 && months%every == 0
	}, nil
}

func relativeMonthlyDays(rm *armcontainerservice.RelativeMonthlySchedule, anchor time.Time, fail failFunc) (func(time.Time) bool, error) {
	every, err := interval(rm.IntervalMonths, fail, ".relativeMonthly.intervalMonths")
	if err != nil {
		return nil, err
	}
	dow, err := weekday(rm.DayOfWeek, fail, ".relativeMonthly.dayOfWeek")
	if err != nil {
		return nil, err
	}
	index := ""
	if rm.WeekIndex != nil {
		index = string(*rm.WeekIndex)
	}
	if !slices.Contains([]string{"First", "Second", "Third", "Fourth", "Last"}, index) {
		return nil, fail(".relativeMonthly.weekIndex", "is %q, not First, Second, Third, Fourth or Last", index)
	}
	is := func(day time.Time) bool { return day.Weekday() == dow && weekIndexIs(day, index) }
	firstMonth := monthIndex(anchor)
	if occurrence := nthWeekday(anchor, is); occurrence.Before(anchor) {
		firstMonth++
	}
	return func(day time.Time) bool {
		months := monthIndex(day) - firstMonth
		return !day.Before(anchor) && is(day) && months >= 0 && months%every == 0
	}, nil
}

// compileLegacy reads the deprecated `default` form: timeInWeek day and
// hour slots, each "a time range beginning at 0m after the hour ending at
// the next hour", 0 being 00:00 UTC (models.go TimeInWeek), and
// notAllowedTime spans (timestamps).
func compileLegacy(name string, props *armcontainerservice.MaintenanceConfigurationProperties) (*Schedule, error) {
	s := &Schedule{Name: name, zone: time.UTC, legacy: map[time.Weekday][]int{}}
	for i, tw := range props.TimeInWeek {
		field := fmt.Sprintf("timeInWeek[%d]", i)
		if tw == nil {
			return nil, &ConfigError{name, field, errors.New("empty")}
		}
		dow, err := weekday(tw.Day, func(f, format string, args ...any) error {
			return &ConfigError{name, field + f, fmt.Errorf(format, args...)}
		}, ".day")
		if err != nil {
			return nil, err
		}
		for j, slot := range tw.HourSlots {
			if slot == nil || *slot < 0 || *slot > 23 {
				return nil, &ConfigError{name, fmt.Sprintf("%s.hourSlots[%d]", field, j), fmt.Errorf("is %s, not an hour 0 to 23", intText(slot))}
			}
			s.legacy[dow] = append(s.legacy[dow], int(*slot))
		}
	}
	for i, span := range props.NotAllowedTime {
		if span == nil || span.Start == nil || span.End == nil || !span.End.After(*span.Start) {
			return nil, &ConfigError{name, fmt.Sprintf("notAllowedTime[%d]", i), errors.New("needs a start before its end")}
		}
		s.blocked = append(s.blocked, Window{*span.Start, *span.End})
	}
	sortWindows(s.blocked)
	return s, nil
}

// Next is the window that holds t (open) or, if none does, the first that
// starts after t. found is false when no window starts within three years
// (every occurrence blocked, or a day that never comes).
func (s *Schedule) Next(t time.Time) (w Window, open, found bool) {
	var cur Window
	for day := localMidnight(t.In(s.zone)).AddDate(0, 0, -1); day.Sub(t) < horizon; day = day.AddDate(0, 0, 1) {
		for _, raw := range s.dayWindows(day) {
			if cur.End.IsZero() || raw.Start.After(cur.End) {
				if w, ok := s.firstAllowed(cur, t); ok {
					return w, w.Contains(t), true
				}
				cur = raw
				continue
			}
			cur.End = later(cur.End, raw.End)
		}
	}
	if w, ok := s.firstAllowed(cur, t); ok {
		return w, w.Contains(t), true
	}
	return Window{}, false, false
}

// dayWindows are the raw windows that start on the local date day, sorted.
func (s *Schedule) dayWindows(day time.Time) []Window {
	if s.legacy != nil {
		var out []Window
		slots := slices.Clone(s.legacy[day.Weekday()])
		slices.Sort(slots)
		for _, hour := range slots {
			start := day.Add(time.Duration(hour) * time.Hour)
			out = append(out, Window{start, start.Add(time.Hour)})
		}
		return out
	}
	if !s.days(day) {
		return nil
	}
	start := day.Add(s.startTime)
	return []Window{{start, start.Add(s.duration)}}
}

// firstAllowed is the first part of w not blocked that ends after t.
func (s *Schedule) firstAllowed(w Window, t time.Time) (Window, bool) {
	if w.End.IsZero() {
		return Window{}, false
	}
	for _, part := range subtract(w, s.blocked) {
		if part.End.After(t) {
			return part, true
		}
	}
	return Window{}, false
}

// subtract is w without the blocked spans (sorted by start).
func subtract(w Window, blocked []Window) []Window {
	parts := []Window{w}
	for _, b := range blocked {
		var next []Window
		for _, p := range parts {
			if !b.Start.Before(p.End) || !b.End.After(p.Start) {
				next = append(next, p)
				continue
			}
			if b.Start.After(p.Start) {
				next = append(next, Window{p.Start, b.Start})
			}
			if b.End.Before(p.End) {
				next = append(next, Window{b.End, p.End})
			}
		}
		parts = next
	}
	return parts
}

func sortWindows(ws []Window) {
	slices.SortFunc(ws, func(a, b Window) int { return a.Start.Compare(b.Start) })
}

// weekIndexIs: day is in the week of the month index names (First: days
// 1-7, ..., Fourth: 22-28, Last: the last seven days).
func weekIndexIs(day time.Time, index string) bool {
	if index == "Last" {
		return day.AddDate(0, 0, 7).Month() != day.Month()
	}
	n := map[string]int{"First": 1, "Second": 2, "Third": 3, "Fourth": 4}[index]
	return (day.Day()-1)/7+1 == n
}

// nthWeekday is the day of day's month for which is holds.
func nthWeekday(day time.Time, is func(time.Time) bool) time.Time {
	for d := time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, day.Location()); d.Month() == day.Month(); d = d.AddDate(0, 0, 1) {
		if is(d) {
			return d
		}
	}
	return day
}

func weekday(d *armcontainerservice.WeekDay, fail failFunc, field string) (time.Weekday, error) {
	if d != nil {
		for wd := time.Sunday; wd <= time.Saturday; wd++ {
			if strings.EqualFold(wd.String(), string(*d)) {
				return wd, nil
			}
		}
	}
	text := ""
	if d != nil {
		text = string(*d)
	}
	return 0, fail(field, "is %q, not a day of the week (Monday ... Sunday)", text)
}

func interval(v *int32, fail failFunc, field string) (int, error) {
	if v == nil || *v < 1 {
		return 0, fail(field, "is %s, not a positive number", intText(v))
	}
	return int(*v), nil
}

// localDate is the calendar date d carries (the SDK parses dates as UTC
// midnight) at midnight in zone.
func localDate(d time.Time, zone *time.Location) time.Time {
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, zone)
}

func localMidnight(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
}

// daysBetween counts whole days from a to b, both local midnights of one
// fixed zone.
func daysBetween(a, b time.Time) int { return int(b.Sub(a).Round(time.Hour).Hours()) / 24 }

func monthIndex(t time.Time) int { return t.Year()*12 + int(t.Month()) - 1 }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func atoi(s string) time.Duration {
	n, _ := strconv.Atoi(s) // callers pass regexp-checked digits
	return time.Duration(n)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func deref32(v *int32) int32 {
	if v == nil {
		return 0
	}
	return *v
}

func intText(v *int32) string {
	if v == nil {
		return "missing"
	}
	return strconv.Itoa(int(*v))
}
