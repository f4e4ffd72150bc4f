package maintenance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
)

func date(s string) *time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return &d
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func windowConfig(name string, mw armcontainerservice.MaintenanceWindow) *armcontainerservice.MaintenanceConfiguration {
	return &armcontainerservice.MaintenanceConfiguration{Name: to.Ptr(name),
		Properties: &armcontainerservice.MaintenanceConfigurationProperties{MaintenanceWindow: &mw}}
}

func weekly(every int32, day armcontainerservice.WeekDay) *armcontainerservice.Schedule {
	return &armcontainerservice.Schedule{Weekly: &armcontainerservice.WeeklySchedule{IntervalWeeks: to.Ptr(every), DayOfWeek: to.Ptr(day)}}
}

func TestScheduleNext(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *armcontainerservice.MaintenanceConfiguration
		now  string
		// want is "start/end" in UTC RFC 3339, or "" for no window.
		want string
		open bool
	}{
		{name: "daily every 3 days from the start date (the API's example)", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](3)}},
			DurationHours: to.Ptr[int32](4), UTCOffset: to.Ptr("-07:00"), StartDate: date("2023-01-01"), StartTime: to.Ptr("09:30")}),
			// 2023-01-01, -04, -07: 09:30-07:00 is 16:30Z.
			now: "2023-01-05T00:00:00Z", want: "2023-01-07T16:30:00Z/2023-01-07T20:30:00Z"},
		{name: "inside a daily window", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}},
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-12-01"), StartTime: to.Ptr("22:00")}),
			now: "2026-12-04T01:59:00Z", want: "2026-12-03T22:00:00Z/2026-12-04T02:00:00Z", open: true},
		{name: "the window's end is outside it", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}},
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-12-01"), StartTime: to.Ptr("22:00")}),
			now: "2026-12-04T02:00:00Z", want: "2026-12-04T22:00:00Z/2026-12-05T02:00:00Z"},
		{name: "every 2 weeks on Sunday counts from the first Sunday on or after the start date (Azure/AKS#5720)",
			// 2026-04-14 is a Tuesday: Sundays 04-19, 05-03, 05-17.
			cfg: windowConfig(ConfigAutoUpgrade, armcontainerservice.MaintenanceWindow{Schedule: weekly(2, armcontainerservice.WeekDaySunday),
				DurationHours: to.Ptr[int32](8), StartDate: date("2026-04-14"), StartTime: to.Ptr("01:00")}),
			now: "2026-04-20T00:00:00Z", want: "2026-05-03T01:00:00Z/2026-05-03T09:00:00Z"},
		{name: "before the start date nothing opens", cfg: windowConfig(ConfigAutoUpgrade, armcontainerservice.MaintenanceWindow{Schedule: weekly(1, armcontainerservice.WeekDayMonday),
			DurationHours: to.Ptr[int32](4), StartDate: date("2027-01-01"), StartTime: to.Ptr("03:00")}),
			now: "2026-12-04T00:00:00Z", want: "2027-01-04T03:00:00Z/2027-01-04T07:00:00Z"},
		{name: "the offset moves the window to the previous UTC day (the API's utcOffset example)", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{Schedule: weekly(1, armcontainerservice.WeekDayMonday),
			DurationHours: to.Ptr[int32](4), UTCOffset: to.Ptr("+02:00"), StartDate: date("2026-11-01"), StartTime: to.Ptr("01:00")}),
			// Monday 2026-12-07 01:00+02:00 is Sunday 23:00Z.
			now: "2026-12-04T00:00:00Z", want: "2026-12-06T23:00:00Z/2026-12-07T03:00:00Z"},
		{name: "absoluteMonthly on the 31st skips months without it", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{AbsoluteMonthly: &armcontainerservice.AbsoluteMonthlySchedule{IntervalMonths: to.Ptr[int32](1), DayOfMonth: to.Ptr[int32](31)}},
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-01-01"), StartTime: to.Ptr("00:00")}),
			now: "2026-04-01T00:00:00Z", want: "2026-05-31T00:00:00Z/2026-05-31T04:00:00Z"},
		{name: "every 3 months on the 1st from the start date's month (the Learn example)", cfg: windowConfig(ConfigAutoUpgrade, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{AbsoluteMonthly: &armcontainerservice.AbsoluteMonthlySchedule{IntervalMonths: to.Ptr[int32](3), DayOfMonth: to.Ptr[int32](1)}},
			DurationHours: to.Ptr[int32](4), UTCOffset: to.Ptr("-08:00"), StartDate: date("2023-01-20"), StartTime: to.Ptr("09:00")}),
			// The 1st of January is before the start date: February, May, August, November.
			now: "2026-06-01T00:00:00Z", want: "2026-08-01T17:00:00Z/2026-08-01T21:00:00Z"},
		{name: "relativeMonthly on the last Friday every 2 months", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule: &armcontainerservice.Schedule{RelativeMonthly: &armcontainerservice.RelativeMonthlySchedule{IntervalMonths: to.Ptr[int32](2),
				DayOfWeek: to.Ptr(armcontainerservice.WeekDayFriday), WeekIndex: to.Ptr(armcontainerservice.TypeLast)}},
			DurationHours: to.Ptr[int32](6), StartDate: date("2026-10-01"), StartTime: to.Ptr("20:00")}),
			// October's last Friday is the 30th; then December's, the 25th.
			now: "2026-10-31T03:00:00Z", want: "2026-12-25T20:00:00Z/2026-12-26T02:00:00Z"},
		{name: "relativeMonthly on the first Monday", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule: &armcontainerservice.Schedule{RelativeMonthly: &armcontainerservice.RelativeMonthlySchedule{IntervalMonths: to.Ptr[int32](1),
				DayOfWeek: to.Ptr(armcontainerservice.WeekDayMonday), WeekIndex: to.Ptr(armcontainerservice.TypeFirst)}},
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-12-02"), StartTime: to.Ptr("02:00")}),
			// December's first Monday (the 7th) is after the start date.
			now: "2026-12-04T00:00:00Z", want: "2026-12-07T02:00:00Z/2026-12-07T06:00:00Z"},
		{name: "notAllowedDates removes whole local days", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}},
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-12-01"), StartTime: to.Ptr("10:00"),
			NotAllowedDates: []*armcontainerservice.DateSpan{{Start: date("2026-12-23"), End: date("2027-01-03")}}}),
			now: "2026-12-22T15:00:00Z", want: "2027-01-04T10:00:00Z/2027-01-04T14:00:00Z"},
		{name: "a window that runs into a not-allowed day ends where it starts", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}},
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-12-01"), StartTime: to.Ptr("22:00"),
			NotAllowedDates: []*armcontainerservice.DateSpan{{Start: date("2026-12-23"), End: date("2026-12-23")}}}),
			now: "2026-12-22T23:00:00Z", want: "2026-12-22T22:00:00Z/2026-12-23T00:00:00Z", open: true},
		{name: "legacy timeInWeek slots merge across midnight", cfg: &armcontainerservice.MaintenanceConfiguration{Name: to.Ptr(ConfigDefault),
			Properties: &armcontainerservice.MaintenanceConfigurationProperties{TimeInWeek: []*armcontainerservice.TimeInWeek{
				{Day: to.Ptr(armcontainerservice.WeekDaySaturday), HourSlots: []*int32{to.Ptr[int32](23), to.Ptr[int32](22)}},
				{Day: to.Ptr(armcontainerservice.WeekDaySunday), HourSlots: []*int32{to.Ptr[int32](0), to.Ptr[int32](1)}}}}},
			// Saturday 2026-12-05 22:00Z to Sunday 02:00Z.
			now: "2026-12-04T00:00:00Z", want: "2026-12-05T22:00:00Z/2026-12-06T02:00:00Z"},
		{name: "legacy notAllowedTime cuts a slot", cfg: &armcontainerservice.MaintenanceConfiguration{Name: to.Ptr(ConfigDefault),
			Properties: &armcontainerservice.MaintenanceConfigurationProperties{
				TimeInWeek:     []*armcontainerservice.TimeInWeek{{Day: to.Ptr(armcontainerservice.WeekDaySaturday), HourSlots: []*int32{to.Ptr[int32](1), to.Ptr[int32](2)}}},
				NotAllowedTime: []*armcontainerservice.TimeSpan{{Start: to.Ptr(at("2026-12-05T00:00:00Z")), End: to.Ptr(at("2026-12-05T02:30:00Z"))}}}},
			now: "2026-12-04T00:00:00Z", want: "2026-12-05T02:30:00Z/2026-12-05T03:00:00Z"},
		{name: "the weekly default window", cfg: windowConfig(ConfigDefault, armcontainerservice.MaintenanceWindow{Schedule: weekly(1, armcontainerservice.WeekDayTuesday),
			DurationHours: to.Ptr[int32](4), UTCOffset: to.Ptr("+00:00"), StartTime: to.Ptr("01:00")}),
			now: "2026-12-04T00:00:00Z", want: "2026-12-08T01:00:00Z/2026-12-08T05:00:00Z"},
		{name: "a day that never comes: no window", cfg: windowConfig(ConfigNodeOS, armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}},
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-12-01"), StartTime: to.Ptr("10:00"),
			NotAllowedDates: []*armcontainerservice.DateSpan{{Start: date("2026-12-01"), End: date("2036-12-01")}}}),
			now: "2026-12-04T00:00:00Z", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			w, open, found := s.Next(at(tc.now))
			got := ""
			if found {
				got = w.Start.UTC().Format(time.RFC3339) + "/" + w.End.UTC().Format(time.RFC3339)
			}
			if got != tc.want || open != tc.open {
				t.Errorf("Next(%s) = %q (open %t), want %q (open %t)", tc.now, got, open, tc.want, tc.open)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	valid := func() armcontainerservice.MaintenanceWindow {
		return armcontainerservice.MaintenanceWindow{Schedule: weekly(1, armcontainerservice.WeekDayMonday),
			DurationHours: to.Ptr[int32](4), StartTime: to.Ptr("01:00")}
	}
	for _, tc := range []struct {
		name   string
		config string
		mutate func(*armcontainerservice.MaintenanceWindow)
		field  string
	}{
		{"duration under 4 hours", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) { mw.DurationHours = to.Ptr[int32](3) }, "maintenanceWindow.durationHours"},
		{"no duration", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) { mw.DurationHours = nil }, "maintenanceWindow.durationHours"},
		{"a start time past 23:59", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) { mw.StartTime = to.Ptr("24:00") }, "maintenanceWindow.startTime"},
		{"an offset without a sign", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) { mw.UTCOffset = to.Ptr("05:30") }, "maintenanceWindow.utcOffset"},
		{"two schedule kinds", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) {
			mw.Schedule.Daily = &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}
		}, "maintenanceWindow.schedule"},
		{"no schedule", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) { mw.Schedule = nil }, "maintenanceWindow.schedule"},
		{"a zero interval", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) { mw.Schedule.Weekly.IntervalWeeks = to.Ptr[int32](0) }, "maintenanceWindow.schedule.weekly.intervalWeeks"},
		{"an unknown day", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) {
			mw.Schedule.Weekly.DayOfWeek = to.Ptr(armcontainerservice.WeekDay("Funday"))
		}, "maintenanceWindow.schedule.weekly.dayOfWeek"},
		{"default every 2 weeks (AKS ignores it)", ConfigDefault, func(mw *armcontainerservice.MaintenanceWindow) { mw.Schedule.Weekly.IntervalWeeks = to.Ptr[int32](2) }, "maintenanceWindow.schedule"},
		{"default daily", ConfigDefault, func(mw *armcontainerservice.MaintenanceWindow) {
			mw.Schedule = &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}}
		}, "maintenanceWindow.schedule"},
		{"a not-allowed span that ends before it starts", ConfigNodeOS, func(mw *armcontainerservice.MaintenanceWindow) {
			mw.NotAllowedDates = []*armcontainerservice.DateSpan{{Start: date("2026-12-10"), End: date("2026-12-01")}}
		}, "maintenanceWindow.notAllowedDates[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mw := valid()
			tc.mutate(&mw)
			_, err := Compile(windowConfig(tc.config, mw))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || ce.Config != tc.config {
				t.Fatalf("Compile: %v, want a ConfigError of %s at %s", err, tc.config, tc.field)
			}
			if !strings.Contains(err.Error(), tc.config) {
				t.Errorf("%q does not name the configuration", err)
			}
		})
	}
	if _, err := Compile(&armcontainerservice.MaintenanceConfiguration{Name: to.Ptr(ConfigNodeOS), Properties: &armcontainerservice.MaintenanceConfigurationProperties{}}); err == nil {
		t.Error("a configuration without a window compiled")
	}
}
